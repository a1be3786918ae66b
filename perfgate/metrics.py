"""The gated metrics: their direction, default practical threshold, and per-repeat values.

One definition serves the store (metric summaries), baselines and compare, so "throughput" means
the same number everywhere. Values are per repeat — the statistical unit — and rates are derived
from each repeat's own median steady step.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from perfgate.documents.result import FlopCount, RepeatResult, WorkCounters, WorkloadResult


@dataclass(frozen=True)
class MetricSpec:
    """How one metric is judged."""

    name: str
    direction: Literal["lower", "higher"]
    """Which way is better."""
    threshold: float
    """Default practical threshold as a relative change (configurable per workload)."""
    absolute_tolerance: float = 0.0
    """Changes smaller than this (in the metric's unit) are never a regression: memory peaks are
    near-deterministic, and a few allocator pages are not a finding."""


METRICS: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        MetricSpec("step_time_s", "lower", 0.05),
        MetricSpec("samples_per_s", "higher", 0.05),
        MetricSpec("tokens_per_s", "higher", 0.05),
        MetricSpec("tflops", "higher", 0.05),
        MetricSpec("mfu", "higher", 0.05),
        MetricSpec("peak_memory_bytes", "lower", 0.02, absolute_tolerance=16 * 2**20),
    )
}


def metric_values(workload: WorkloadResult) -> dict[str, list[float]]:
    """Per metric, one value per ok repeat (metrics with no value are left out)."""
    ok = [r for r in workload.repeats if r.status == "ok" and r.step_times_s[r.steady_start :]]
    step_s = [steady_median(r) for r in ok]
    flops = flops_per_step(workload.flops)
    peak_tflops = workload.summary.peak_tflops if workload.summary else None
    tflops = _rates(step_s, flops / 1e12 if flops else None)
    metrics = {
        "step_time_s": step_s,
        "samples_per_s": _rates(step_s, workload.samples_per_step),
        "tokens_per_s": _rates(step_s, workload.tokens_per_step),
        "tflops": tflops,
        "mfu": [t / peak_tflops for t in tflops] if peak_tflops else [],
        "peak_memory_bytes": [float(v) for v in peak_memory_values(ok, workload.device)],
    }
    return {name: values for name, values in metrics.items() if values}


CONDITION_PREFIX = "condition."
"""Per-repeat measurement conditions travel with the metrics (stored per run, summarised into
baselines and snapshots) under this prefix; they are evidence about the machine, never
judged as performance (see ``perfgate.compare.conditions``)."""
CONDITIONS = (
    "runqueue_wait_share",
    "other_cpu_cores",
    "cpu_pressure_share",
    "steal_share",
    "cpu_mhz",
    "gpu_other_processes",
    "gpu_sm_mhz",
)
"""The fields of ``perfgate.documents.result.RepeatConditions`` that are kept per repeat."""


def condition_values(workload: WorkloadResult) -> dict[str, list[float]]:
    """Per condition (``condition.NAME``), one value per ok repeat that recorded it."""
    ok = [r for r in workload.repeats if r.status == "ok" and r.conditions is not None]
    values: dict[str, list[float]] = {}
    for name in CONDITIONS:
        column = [getattr(r.conditions, name) for r in ok]
        numbers = [float(v) for v in column if v is not None]
        if numbers:
            values[CONDITION_PREFIX + name] = numbers
    return values


WORK_PREFIX = "work."
"""A step's exact work counters travel with the metrics too (one value per run, stored,
pooled into baselines and snapshots) under this prefix; they are judged exactly, without
statistics (``perfgate.compare.work``), never as timings."""
WORK_COUNTERS = (
    "operators",
    "allocations",
    "allocated_bytes",
    "host_syncs",
    "host_to_device_bytes",
    "device_to_host_bytes",
    "collectives",
    "collective_bytes",
)


def work_values(workload: WorkloadResult) -> dict[str, list[float]]:
    """Per work counter (``work.NAME``), the run's one count; empty when none was counted."""
    if workload.work is None:
        return {}
    return {WORK_PREFIX + name: [float(getattr(workload.work, name))] for name in WORK_COUNTERS}


def work_from_series(series: dict[str, list[float]]) -> WorkCounters | None:
    """The work counters a baseline's pooled ``work.NAME`` series agree on; None when a counter
    is missing (runs from before perfgate counted work) or its runs disagree (a baseline
    spanning a change of the work: no single count describes it). Per-operator counts are kept
    in result documents only, so a stored baseline has none."""
    counts: dict[str, int] = {}
    for name in WORK_COUNTERS:
        values = series.get(name)
        if not values or any(value != values[0] for value in values) or values[0] < 0:
            return None
        counts[name] = int(values[0])
    return WorkCounters(
        operators=counts["operators"],
        allocations=counts["allocations"],
        allocated_bytes=counts["allocated_bytes"],
        host_syncs=counts["host_syncs"],
        host_to_device_bytes=counts["host_to_device_bytes"],
        device_to_host_bytes=counts["device_to_host_bytes"],
        collectives=counts["collectives"],
        collective_bytes=counts["collective_bytes"],
    )


def flops_per_step(flops: FlopCount | None) -> float | None:
    """The FLOP figure TFLOP/s is computed from (counted preferred, else analytic)."""
    if flops is None or flops.used is None:
        return None
    value = flops.counted_per_step if flops.used == "counted" else flops.analytic_per_step
    return float(value) if value else None


def _rates(step_s: Sequence[float], per_step: float | None) -> list[float]:
    if not per_step or any(s <= 0 for s in step_s):
        return []
    return [per_step / s for s in step_s]


def steady_median(repeat: RepeatResult) -> float:
    """Median of the steady measured steps of one repeat: the repeat's step time."""
    return statistics.median(repeat.step_times_s[repeat.steady_start :])


def peak_memory_values(repeats: Sequence[RepeatResult], device: str) -> list[int]:
    """Each repeat's peak: CUDA allocated bytes on a GPU, process RSS on the CPU."""
    key = "cuda_allocated_bytes" if device == "cuda" else "rss_bytes"
    return [v for v in (r.peak_memory.get(key) for r in repeats) if v is not None]
