"""Headline numbers of a workload from its repeats: pure arithmetic, no I/O.

The unit is the repeat: each repeat contributes the median of its steady steps, and the workload's
step time is the median of those. Steps within one process are autocorrelated; treating them as
independent samples is the classic source of false alarms, so they never are.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from perfgate.distributed.summary import distributed_summary
from perfgate.documents.result import FlopCount, RepeatResult, WorkloadSummary
from perfgate.metrics import flops_per_step as per_step_flops
from perfgate.metrics import peak_memory_values, steady_median
from perfgate.telemetry.peaks import PeakLookup, lookup_peak, mfu

if TYPE_CHECKING:
    from perfgate.ceilings.store import StoredCeilings


def dataloader_wait_share(repeat: RepeatResult) -> float | None:
    """Fraction of steady step time spent waiting for the next batch."""
    steps = repeat.step_times_s[repeat.steady_start :]
    waits = repeat.dataloader_wait_s[repeat.steady_start :]
    total = sum(steps)
    return min(1.0, sum(waits) / total) if total > 0 and len(waits) == len(steps) else None


def summarize_workload(
    repeats: Sequence[RepeatResult],
    *,
    samples_per_step: int | None,
    tokens_per_step: int | None,
    flops: FlopCount | None,
    compute_dtype: str | None,
    device: str,
    gpu_name: str | None,
    ceilings: StoredCeilings | None = None,
) -> WorkloadSummary:
    """Summary over the ok repeats; all-null numbers (with reasons) when none succeeded.

    ``ceilings`` are this environment's measured ceilings (``perfgate doctor --peak``), when
    stored: the summary then holds the fraction of the measured matmul ceiling as well as MFU.
    """
    ok = [r for r in repeats if r.status == "ok" and r.step_times_s]
    if not ok:
        return WorkloadSummary(ok_repeats=0, mfu_reason="no successful repeat")
    medians = [steady_median(r) for r in ok]
    step_s = statistics.median(medians)
    flops_per_step = per_step_flops(flops)
    tflops = flops_per_step / step_s / 1e12 if flops_per_step and step_s > 0 else None
    peak = _peak(device, gpu_name, compute_dtype or "fp32")
    mfu_value, mfu_reason = (
        mfu(tflops, peak) if tflops is not None else (None, "no FLOP count for this workload")
    )
    shares = [s for s in (dataloader_wait_share(r) for r in ok) if s is not None]
    firsts = [r.first_step_s for r in ok if r.first_step_s is not None]
    distributed = distributed_summary(ok)
    return WorkloadSummary(
        ok_repeats=len(ok),
        median_step_s=step_s,
        repeat_medians_s=medians,
        between_repeat_cv=_cv(medians),
        samples_per_s=samples_per_step / step_s if samples_per_step and step_s > 0 else None,
        tokens_per_s=tokens_per_step / step_s if tokens_per_step and step_s > 0 else None,
        tflops=tflops,
        mfu=mfu_value,
        mfu_reason=mfu_reason,
        peak_tflops=peak.tflops,
        peak_memory_bytes=max(peak_memory_values(ok, device), default=None),
        first_step_s=statistics.median(firsts) if firsts else None,
        dataloader_wait_share=statistics.median(shares) if shares else None,
        final_loss=ok[0].losses[-1] if ok[0].losses else None,
        **distributed,
        **ceiling_figures(tflops, ceilings, compute_dtype, device, distributed),
    )


def ceiling_figures(
    tflops: float | None,
    ceilings: StoredCeilings | None,
    compute_dtype: str | None,
    device: str,
    distributed: dict[str, Any],
) -> dict[str, Any]:
    """``ceiling_tflops``, ``ceiling_fraction`` and ``ceiling_measured_at`` (empty without a
    stored ceiling for the dtype).

    The fraction is left out for a distributed CPU run: its TFLOP/s is one rank's, while its
    ranks share the cores the ceiling was measured on, so the ratio would read low by the
    number of ranks. A GPU rank has its GPU to itself, so there the ratio is per GPU, as MFU is.
    """
    ceiling = ceilings.matmul_ceiling(compute_dtype) if ceilings else None
    if ceilings is None or ceiling is None:
        return {}
    shared = device == "cpu" and (distributed.get("world_size") or 1) > 1
    return {
        "ceiling_tflops": ceiling,
        "ceiling_fraction": tflops / ceiling if tflops is not None and not shared else None,
        "ceiling_measured_at": ceilings.measured_at,
    }


def _peak(device: str, gpu_name: str | None, dtype: str) -> PeakLookup:
    """The vendor peak for this run; a GPU run whose model is unknown says so (not "CPU")."""
    if device == "cuda" and not gpu_name:
        return PeakLookup(None, dtype, None, None, "GPU model unknown, so MFU is not defined")
    return lookup_peak(gpu_name if device == "cuda" else None, dtype)


def choose_flops(
    counted: int | None, analytic: float | None, formula: str | None, by_operator: dict[str, int]
) -> FlopCount:
    """Prefer the counted figure (it sees the real ops); fall back to the analytic estimate."""
    used: Literal["counted", "analytic"] | None = (
        "counted" if counted else "analytic" if analytic else None
    )
    return FlopCount(
        counted_per_step=counted,
        analytic_per_step=analytic,
        analytic_formula=formula,
        used=used,
        by_operator=by_operator,
    )


def _cv(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else None
