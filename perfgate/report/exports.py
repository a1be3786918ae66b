"""``perfgate export``: runs and verdicts in the formats other tools read.

- ``csv``: a result document becomes one row per workload (its headline numbers), a verdict
  one row per compared metric (the effect, its interval, the test, the verdict) — for a
  spreadsheet or a notebook. A cell that a spreadsheet would run as a formula (text starting
  with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return: a branch name or commit subject is
  whatever its author wrote) is written with a leading ``'`` (OWASP's CSV-injection rule).
- ``bmf``: the Bencher Metric Format (``bencher run --adapter json --file …``): one benchmark
  per ``workload@preset``, with Bencher's built-in ``latency`` (the median step, nanoseconds)
  and ``throughput`` (samples/s) measures and perfgate's own (``tokens-per-second``,
  ``tflops``, ``mfu``, ``peak-memory-bytes``), each with the lowest and highest repeat.
- ``github-action-benchmark`` and ``github-action-benchmark-bigger``: the custom formats of
  benchmark-action/github-action-benchmark (``tool: customSmallerIsBetter`` and
  ``customBiggerIsBetter``; the tool takes one direction a file): step time, first step and
  peak memory; throughput, tokens/s and TFLOP/s.

Only measured workloads are exported (a failed or skipped one has no numbers; CSV keeps its row
with the status). The trackers get values, not verdicts: perfgate's verdict is the gate, a
tracker's own threshold is the user's second opinion.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from perfgate.documents.result import RunResult, WorkloadResult
from perfgate.documents.verdict import CompareVerdict
from perfgate.errors import UsageError
from perfgate.workloads.knobs import STANDARD_KNOBS

ExportFormat = Literal["csv", "bmf", "github-action-benchmark", "github-action-benchmark-bigger"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = (
    "csv",
    "bmf",
    "github-action-benchmark",
    "github-action-benchmark-bigger",
)

RUN_COLUMNS = (
    "run_id",
    "started_at",
    "commit",
    "branch",
    "subject",
    "trigger",
    "suite",
    "device",
    "canary_slowdown",
    "workload",
    "preset",
    "knobs",
    "definition_hash",
    "status",
    "ok_repeats",
    "median_step_s",
    "fastest_repeat_step_s",
    "slowest_repeat_step_s",
    "between_repeat_cv",
    "samples_per_s",
    "tokens_per_s",
    "tflops",
    "mfu",
    "peak_memory_bytes",
    "first_step_s",
    "final_loss",
)
VERDICT_COLUMNS = (
    "head_run_id",
    "head_commit",
    "overall",
    "method",
    "workload",
    "workload_status",
    "metric",
    "direction",
    "baseline_median",
    "head_median",
    "ratio",
    "ci_low",
    "ci_high",
    "p_value",
    "p_adjusted",
    "threshold",
    "min_detectable",
    "baseline_repeats",
    "head_repeats",
    "verdict",
    "derived_from",
)


def parse_format(text: str) -> ExportFormat:
    """``text`` as an export format, or a usage error naming the ones there are."""
    for fmt in EXPORT_FORMATS:
        if text == fmt:
            return fmt
    raise UsageError(f"unknown export format {text!r}", f"use one of: {', '.join(EXPORT_FORMATS)}")


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def export_documents(
    results: Sequence[RunResult], verdicts: Sequence[CompareVerdict], fmt: ExportFormat
) -> str:
    """The text of ``fmt`` for these documents; a usage error for a mix a format cannot hold."""
    if not results and not verdicts:
        raise UsageError("nothing to export", "pass result or verdict documents")
    if results and verdicts:
        raise UsageError(
            "export result documents and verdict documents separately",
            "run perfgate export once for the runs and once for the verdicts",
        )
    if verdicts:
        if fmt != "csv":
            raise UsageError(
                f"{fmt} holds measured values, not verdicts",
                "export verdicts with --format csv, or pass the result documents",
            )
        return verdicts_csv(verdicts)
    if fmt == "csv":
        return runs_csv(results)
    if fmt == "bmf":
        return _json(bencher_metrics(results))
    bigger = fmt == "github-action-benchmark-bigger"
    return _json(action_benchmark_entries(results, bigger_is_better=bigger))


def runs_csv(results: Sequence[RunResult]) -> str:
    """One row per workload of each run, in the order given."""
    rows = []
    for run in results:
        for workload in run.workloads:
            summary = workload.summary
            medians = summary.repeat_medians_s if summary else []
            rows.append(
                {
                    "run_id": run.run_id,
                    "started_at": run.started_at,
                    "commit": run.source.commit,
                    "branch": run.source.branch,
                    "subject": run.source.subject,
                    "trigger": run.source.trigger,
                    "suite": run.suite,
                    "device": run.device,
                    "canary_slowdown": run.settings.inject_slowdown,
                    "workload": workload.name,
                    "preset": workload.preset,
                    "knobs": json.dumps(workload.knobs, sort_keys=True),
                    "definition_hash": workload.definition_hash,
                    "status": workload.status,
                    "ok_repeats": summary.ok_repeats if summary else 0,
                    "median_step_s": summary.median_step_s if summary else None,
                    "fastest_repeat_step_s": min(medians) if medians else None,
                    "slowest_repeat_step_s": max(medians) if medians else None,
                    "between_repeat_cv": summary.between_repeat_cv if summary else None,
                    "samples_per_s": summary.samples_per_s if summary else None,
                    "tokens_per_s": summary.tokens_per_s if summary else None,
                    "tflops": summary.tflops if summary else None,
                    "mfu": summary.mfu if summary else None,
                    "peak_memory_bytes": summary.peak_memory_bytes if summary else None,
                    "first_step_s": summary.first_step_s if summary else None,
                    "final_loss": summary.final_loss if summary else None,
                }
            )
    return _csv(RUN_COLUMNS, rows)


def verdicts_csv(verdicts: Sequence[CompareVerdict]) -> str:
    """One row per compared metric; a workload without comparisons (no baseline, missing)
    keeps one row with its status, so that nothing judged silently drops out."""
    rows: list[dict[str, Any]] = []
    for verdict in verdicts:
        head = {
            "head_run_id": verdict.head_run_id,
            "head_commit": verdict.head_commit,
            "overall": verdict.overall,
            "method": verdict.method,
        }
        for workload in verdict.workloads:
            where = {**head, "workload": workload.name, "workload_status": workload.status}
            if not workload.comparisons:
                rows.append(where)
            for c in workload.comparisons:
                rows.append(
                    {
                        **where,
                        "metric": c.metric,
                        "direction": c.direction,
                        "baseline_median": c.baseline_median,
                        "head_median": c.head_median,
                        "ratio": c.ratio,
                        "ci_low": c.ci_low,
                        "ci_high": c.ci_high,
                        "p_value": c.p_value,
                        "p_adjusted": c.p_adjusted,
                        "threshold": c.threshold,
                        "min_detectable": c.min_detectable,
                        "baseline_repeats": c.baseline_repeats,
                        "head_repeats": c.head_repeats,
                        "verdict": c.verdict,
                        "derived_from": c.derived_from,
                    }
                )
    return _csv(VERDICT_COLUMNS, rows)


@dataclass(frozen=True, kw_only=True)
class Tracked:
    """One value a tracker follows for one workload, in its base unit (seconds, bytes, per
    second), with the fastest and slowest repeat's value where the run has them."""

    slug: str
    """The measure's name in the Bencher Metric Format (``latency`` and ``throughput`` are
    Bencher's built-in ones)."""
    label: str
    unit: Literal["s", "bytes", "samples/s", "tokens/s", "TFLOP/s", "fraction of peak"]
    bigger_is_better: bool
    value: float
    low: float | None = None
    high: float | None = None


def tracked_values(workload: WorkloadResult) -> list[Tracked]:
    """What a tracker follows for one measured workload; nothing for one that failed."""
    summary = workload.summary
    if workload.status != "ok" or summary is None or summary.median_step_s is None:
        return []
    medians = summary.repeat_medians_s or [summary.median_step_s]
    values = [
        _spanned("latency", "step time", "s", False, summary.median_step_s, medians),
    ]
    for slug, label, unit, rate, per_step in (
        ("throughput", "throughput", "samples/s", summary.samples_per_s, workload.samples_per_step),
        (
            "tokens-per-second",
            "tokens/s",
            "tokens/s",
            summary.tokens_per_s,
            workload.tokens_per_step,
        ),
    ):
        if rate and per_step:
            per_repeat = [per_step / m for m in medians if m > 0]
            values.append(_spanned(slug, label, unit, True, rate, per_repeat))
    if summary.tflops:
        values.append(
            Tracked(
                slug="tflops",
                label="TFLOP/s",
                unit="TFLOP/s",
                bigger_is_better=True,
                value=summary.tflops,
            )
        )
    if summary.mfu is not None:
        values.append(
            Tracked(
                slug="mfu",
                label="MFU",
                unit="fraction of peak",
                bigger_is_better=True,
                value=summary.mfu,
            )
        )
    if summary.first_step_s:
        values.append(
            Tracked(
                slug="first-step",
                label="first step",
                unit="s",
                bigger_is_better=False,
                value=summary.first_step_s,
            )
        )
    if summary.peak_memory_bytes:
        values.append(
            Tracked(
                slug="peak-memory-bytes",
                label="peak memory",
                unit="bytes",
                bigger_is_better=False,
                value=float(summary.peak_memory_bytes),
            )
        )
    return values


def _spanned(
    slug: str, label: str, unit: Any, bigger_is_better: bool, value: float, per_repeat: list[float]
) -> Tracked:
    """A value with its repeats' range (widened to hold the value: a distributed run's rate
    is the slowest rank's, which need not lie among the per-repeat figures)."""
    low = min([*per_repeat, value])
    high = max([*per_repeat, value])
    return Tracked(
        slug=slug,
        label=label,
        unit=unit,
        bigger_is_better=bigger_is_better,
        value=value,
        low=low,
        high=high,
    )


def benchmark_name(workload: WorkloadResult) -> str:
    """``workload@preset``, and the knobs set away from their defaults (``gpt@smoke
    [precision=bf16]``): another knob setting is another series, in a tracker as in perfgate."""
    changed = [
        f"{name}={value}"
        for name, value in sorted(workload.knobs.items())
        if name not in STANDARD_KNOBS or STANDARD_KNOBS[name].default != value
    ]
    name = f"{workload.name}@{workload.preset}"
    return f"{name} [{','.join(changed)}]" if changed else name


def _named(results: Sequence[RunResult]) -> Iterable[tuple[str, WorkloadResult]]:
    """Measured workloads by benchmark name; one name twice (two runs of the same workload)
    is refused: a tracker's report holds one value a benchmark."""
    seen: set[str] = set()
    for run in results:
        for workload in run.workloads:
            if not tracked_values(workload):
                continue
            name = benchmark_name(workload)
            if name in seen:
                raise UsageError(
                    f"{name} is measured in more than one of these documents",
                    "export one run at a time (shards of one run are fine: perfgate merge "
                    "them, or pass each once)",
                )
            seen.add(name)
            yield name, workload


_BMF_SCALE = {"s": 1e9}
"""Bencher's latency measure is in nanoseconds; perfgate's step times are seconds."""


def bencher_metrics(results: Sequence[RunResult]) -> dict[str, dict[str, dict[str, float]]]:
    """The Bencher Metric Format: benchmark → measure → value, lower_value, upper_value."""
    report: dict[str, dict[str, dict[str, float]]] = {}
    for name, workload in _named(results):
        measures = {}
        for tracked in tracked_values(workload):
            scale = _BMF_SCALE.get(tracked.unit, 1.0)
            metric = {"value": tracked.value * scale}
            if tracked.low is not None and tracked.high is not None:
                metric["lower_value"] = tracked.low * scale
                metric["upper_value"] = tracked.high * scale
            measures[tracked.slug] = metric
        report[name] = measures
    return report


_ACTION_UNITS = {"s": ("ms", 1e3), "bytes": ("MiB", 1 / 2**20)}
"""Units github-action-benchmark's chart shows better than seconds and bytes."""


def action_benchmark_entries(
    results: Sequence[RunResult], *, bigger_is_better: bool
) -> list[dict[str, str | float]]:
    """github-action-benchmark's custom format (one direction a file): name, unit, value, the
    repeats' range as ``± half the spread``, and the run in ``extra``."""
    commits = {id(w): run for run in results for w in run.workloads}
    entries: list[dict[str, str | float]] = []
    for name, workload in _named(results):
        run = commits[id(workload)]
        for tracked in tracked_values(workload):
            if tracked.bigger_is_better != bigger_is_better:
                continue
            unit, scale = _ACTION_UNITS.get(tracked.unit, (tracked.unit, 1.0))
            entry: dict[str, str | float] = {
                "name": f"{name} {tracked.label}",
                "unit": unit,
                "value": _rounded(tracked.value * scale),
            }
            if tracked.low is not None and tracked.high is not None:
                entry["range"] = f"± {_rounded((tracked.high - tracked.low) * scale / 2)}"
            ok = workload.summary.ok_repeats if workload.summary else 0
            entry["extra"] = (
                f"{ok} repeats; run {run.run_id}"
                + (f"; commit {run.source.commit}" if run.source.commit else "")
                + f"; {run.device}"
            )
            entries.append(entry)
    return entries


def _rounded(value: float) -> float:
    """Six significant digits: more than any measurement here resolves, and a stable file."""
    return float(f"{value:.6g}")


def _json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _csv(columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({column: _cell(row.get(column)) for column in columns})
    return buffer.getvalue()


def _cell(value: object) -> str:
    """A CSV cell: empty for none, ``inf`` for an unbounded figure, full precision for a float,
    and text a spreadsheet would run as a formula quoted with a leading ``'``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, int):
        return str(value)
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_STARTS) else text
