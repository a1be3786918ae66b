"""perfgate's measurements as Prometheus series: names, labels, and the values of one run.

One place defines every series perfgate exposes (the export, the Pushgateway push, the alert
rules and the dashboard all read :data:`RUN_SERIES` and :data:`LABELS`), so a renamed metric
cannot leave a rule or a panel pointing at nothing (``tests/test_monitoring.py`` checks the
rules and the dashboard against these names).

**Cardinality.** Every label is bounded by the fleet, not by time: ``suite`` and ``workload``
by the configuration, ``preset`` by each workload's presets, ``branch`` by the branches a
team measures (main and release branches; a pull request's branch is never pushed, see
:func:`is_pushed_branch`), ``environment`` by the distinct runner set-ups (the first 12
characters of the fingerprint key: hardware, driver, torch), ``gpu`` by GPU models. No commit,
run id, date or PR number is a label: those grow without end and belong in the SQL store. A
fleet of 4 suites × 10 workloads × 2 presets × 3 branches × 5 environments has at most 1 200
label sets a series; the state series (verdict, bottleneck) multiply that by their few states.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from perfgate.documents.diagnosis import Bound, Diagnosis
from perfgate.documents.result import RunResult, WorkloadResult
from perfgate.documents.verdict import CompareVerdict, WorkloadVerdict
from perfgate.telemetry.fingerprint import fingerprint_key

LABELS = ("suite", "workload", "preset", "branch", "environment", "gpu")
"""The labels of every run series, in this order."""
ENVIRONMENT_CHARS = 12
"""Characters of the environment fingerprint key used as the ``environment`` label."""

VERDICT_STATES = ("pass", "regression", "improvement", "inconclusive")
BOUNDS: tuple[Bound, ...] = (
    "compute", "memory", "host", "input-pipeline", "storage", "communication", "undetermined",
)  # fmt: skip


@dataclass(frozen=True)
class Series:
    """One gauge perfgate exposes for a run's workload."""

    name: str
    help: str
    unit: str
    """The Grafana unit of its panel (``s``, ``percentunit``, ``watt``, ``hertz``, …)."""


STEP_TIME = Series("perfgate_step_time_seconds", "Median training step time of the run.", "s")
SAMPLES = Series(
    "perfgate_throughput_samples_per_second", "Training samples per second (median step).", "none"
)
TOKENS = Series(
    "perfgate_throughput_tokens_per_second", "Training tokens per second (median step).", "none"
)
FLOPS = Series("perfgate_flops_per_second", "Achieved FLOP/s of the training step.", "none")
MFU = Series(
    "perfgate_mfu_ratio", "Model FLOP utilisation against the vendor peak (0-1).", "percentunit"
)
CEILING = Series(
    "perfgate_ceiling_fraction_ratio",
    "Achieved FLOP/s over this machine's measured matmul ceiling (0-1).",
    "percentunit",
)
GPU_UTIL = Series(
    "perfgate_gpu_utilization_ratio", "Mean NVML GPU utilisation over the timed steps (0-1).",
    "percentunit",
)  # fmt: skip
GPU_CLOCK = Series("perfgate_gpu_sm_clock_hertz", "Mean SM clock over the timed steps.", "hertz")
GPU_POWER = Series("perfgate_gpu_power_watts", "Mean board power over the timed steps.", "watt")
GPU_THROTTLED = Series(
    "perfgate_gpu_throttled_ratio",
    "Share of telemetry samples with a thermal or power throttle reason (0-1).",
    "percentunit",
)
PEAK_MEMORY = Series(
    "perfgate_peak_memory_bytes", "Peak memory of a repeat (device memory on a GPU).", "bytes"
)
RUN_TIME = Series(
    "perfgate_run_finished_timestamp_seconds", "When the run finished (Unix time).", "dateTimeAsIso"
)
CHANGE = Series(
    "perfgate_change_ratio",
    "Head over baseline of a compared metric, worse-is-greater (1.05: 5 % worse).",
    "none",
)
VERDICT = Series(
    "perfgate_verdict",
    "1 for the workload's verdict state against its baseline, 0 for the others.",
    "none",
)
BOTTLENECK = Series(
    "perfgate_bottleneck", "1 for what bounds the training step (perfgate diagnose).", "none"
)

RUN_SERIES: tuple[Series, ...] = (
    STEP_TIME, SAMPLES, TOKENS, FLOPS, MFU, CEILING, GPU_UTIL, GPU_CLOCK, GPU_POWER,
    GPU_THROTTLED, PEAK_MEMORY, RUN_TIME, CHANGE, VERDICT, BOTTLENECK,
)  # fmt: skip
"""Every series of a stored run; :data:`CHANGE`, :data:`VERDICT` and :data:`BOTTLENECK` carry
one extra label (``metric``, ``state``, ``bound``)."""
EXTRA_LABEL = {CHANGE.name: "metric", VERDICT.name: "state", BOTTLENECK.name: "bound"}


def is_pushed_branch(branch: str | None, pr_number: int | None) -> bool:
    """Whether a run's series may be pushed: a run of a named branch that is not a pull
    request's (each PR branch would be a new label value forever)."""
    return branch is not None and pr_number is None


def run_labels(result: RunResult, workload: WorkloadResult) -> dict[str, str]:
    """The label values of one workload of a run (empty strings where a value is unknown)."""
    gpu = (result.environment.get("gpu") or {}).get("model") if workload.device == "cuda" else None
    return {
        "suite": result.suite or "",
        "workload": workload.name,
        "preset": workload.preset,
        "branch": result.source.branch or "",
        "environment": fingerprint_key(result.environment)[:ENVIRONMENT_CHARS],
        "gpu": str(gpu) if gpu else "cpu",
    }


def run_registry(
    results: Sequence[RunResult],
    verdict: CompareVerdict | None = None,
    diagnoses: Mapping[str, Diagnosis] | None = None,
    workloads: Sequence[str] | None = None,
) -> CollectorRegistry:
    """A registry holding the series of ``results`` (only ``workloads`` when given; a later
    result's value replaces an earlier one's with the same labels), with the verdict state and
    change ratios from ``verdict`` and the bound from ``diagnoses``."""
    registry = CollectorRegistry(auto_describe=True)
    gauges = {
        s.name: Gauge(
            s.name,
            s.help,
            [*LABELS, *([EXTRA_LABEL[s.name]] if s.name in EXTRA_LABEL else [])],
            registry=registry,
        )
        for s in RUN_SERIES
    }
    verdicts = {w.name: w for w in verdict.workloads} if verdict is not None else {}
    measured = [
        (result, workload)
        for result in results
        for workload in result.workloads
        if workload.status == "ok" and (workloads is None or workload.name in workloads)
    ]
    for result, workload in measured:
        labels = run_labels(result, workload)
        for name, value in _values(result, workload).items():
            gauges[name].labels(**labels).set(value)
        if workload.name in verdicts:
            _verdict_series(gauges, labels, verdicts[workload.name])
        found = (diagnoses or {}).get(workload.name)
        if found is not None:
            for bound in BOUNDS:
                gauges[BOTTLENECK.name].labels(**labels, bound=bound).set(found.bound == bound)
    return registry


def _values(result: RunResult, workload: WorkloadResult) -> dict[str, float]:
    summary = workload.summary
    values: dict[str, float | None] = {}
    if summary is not None:
        values = {
            STEP_TIME.name: summary.median_step_s,
            SAMPLES.name: summary.samples_per_s,
            TOKENS.name: summary.tokens_per_s,
            FLOPS.name: summary.tflops * 1e12 if summary.tflops is not None else None,
            MFU.name: summary.mfu,
            CEILING.name: summary.ceiling_fraction,
            PEAK_MEMORY.name: summary.peak_memory_bytes,
        }
    gpu = _gpu_means(workload)
    util, clock = gpu.get("util_percent"), gpu.get("sm_clock_mhz")
    values[GPU_UTIL.name] = util / 100.0 if util is not None else None
    values[GPU_CLOCK.name] = clock * 1e6 if clock is not None else None
    values[GPU_POWER.name] = gpu.get("power_w")
    values[GPU_THROTTLED.name] = gpu.get("throttled_fraction")
    values[RUN_TIME.name] = _timestamp(result.finished_at)
    return {name: float(v) for name, v in values.items() if v is not None}


def _gpu_means(workload: WorkloadResult) -> dict[str, float]:
    """Means over the repeats of the parent sampler's GPU columns (NVML), where sampled."""
    columns: dict[str, list[float]] = {}
    for repeat in workload.repeats:
        gpu: Mapping[str, Any] = (repeat.telemetry_summary or {}).get("gpu") or {}
        for column in ("util_percent", "sm_clock_mhz", "power_w"):
            mean = (gpu.get(column) or {}).get("mean")
            if isinstance(mean, (int, float)):
                columns.setdefault(column, []).append(float(mean))
        throttled = gpu.get("throttled_fraction")
        if isinstance(throttled, (int, float)):
            columns.setdefault("throttled_fraction", []).append(float(throttled))
    return {column: sum(v) / len(v) for column, v in columns.items()}


def _verdict_series(
    gauges: Mapping[str, Gauge], labels: Mapping[str, str], verdict: WorkloadVerdict
) -> None:
    primary = [c for c in verdict.comparisons if c.derived_from is None]
    for comparison in primary:
        gauges[CHANGE.name].labels(**labels, metric=comparison.metric).set(comparison.ratio)
    states = {c.verdict for c in primary}
    state = (
        "regression" if "regression" in states
        else "inconclusive" if "inconclusive" in states or not primary
        else "improvement" if "improvement" in states
        else "pass"
    )  # fmt: skip
    for name in VERDICT_STATES:
        gauges[VERDICT.name].labels(**labels, state=name).set(name == state)


def _timestamp(iso: str) -> float | None:
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return None
