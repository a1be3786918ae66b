"""The HTML report's content: result, verdict and advice documents turned into what a page shows.

The page renders what it is given and decides nothing: what bounds each workload is diagnosed
by the caller (``perfgate.diagnose.session.diagnose_runs``) and passed in.

Everything here is data for ``templates/report.html.j2``: formatted strings for people and the
exact numbers (``data-*`` attributes) for machines and tests, so that what the page says can be
checked against the verdict document it came from. Strings from users, git and error messages are
passed through as plain text (the template autoescapes them); the only markup made here is the
inline SVG of ``perfgate.report.charts`` and Pygments' highlighting of fix snippets, both of
which escape their own text.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from perfgate.documents.advice import (
    Advice,
    AdviceReport,
    Verification,
    WorkloadAdvice,
    found_text,
    in_measured_order,
    standing,
)
from perfgate.documents.bisect import BisectReport
from perfgate.documents.diagnosis import Diagnosis
from perfgate.documents.history import WorkloadHistory
from perfgate.documents.result import RunResult, WorkloadResult
from perfgate.documents.verdict import (
    Attribution,
    CompareVerdict,
    MetricComparison,
    WorkloadVerdict,
)
from perfgate.errors import last_line
from perfgate.metrics import WORK_COUNTERS
from perfgate.report import charts
from perfgate.report.anchors import anchor
from perfgate.report.bisect_text import SHORT, probe_effect
from perfgate.report.chart_batch import ChartBatch
from perfgate.report.formatting import (
    WORK_LABELS,
    change_interval,
    format_bytes,
    format_flops,
    format_seconds,
    format_value,
    mover_cells,
    signed_percent,
    work_change_parts,
)
from perfgate.report.run_summary import CEILING_HINT, distributed_facts

VERDICT_WORDS = {
    "pass": "pass",
    "regression": "regression",
    "improvement": "improvement",
    "inconclusive": "inconclusive",
}
METRIC_LABELS = {
    "step_time_s": "step time",
    "samples_per_s": "samples/s",
    "tokens_per_s": "tokens/s",
    "tflops": "TFLOP/s",
    "mfu": "MFU",
    "peak_memory_bytes": "peak memory",
}
HISTORY_METRICS = ("step_time_s", "tokens_per_s", "samples_per_s")
"""Drawn over history: the step time and the workload's headline rate (the first it has)."""


@dataclass(frozen=True, kw_only=True)
class Banner:
    """The verdict at the top of the page, and why in one sentence."""

    kind: str
    """pass, regression, improvement, inconclusive, failed, or run (no comparison given)."""
    headline: str
    sentence: str
    exit_code: int | None = None


@dataclass(frozen=True, kw_only=True)
class ComparisonRow:
    """One metric of one workload as the verdict judged it."""

    metric: str
    label: str
    anchor: str
    baseline: str
    head: str
    change: str
    interval: str
    threshold: str
    min_detectable: str
    verdict: str
    p_adjusted: str
    reasons: str
    raw: Mapping[str, float | None]
    """The verdict document's numbers, written into ``data-*`` attributes unformatted."""


@dataclass(frozen=True, kw_only=True)
class AdviceView:
    """One piece of ranked advice with its evidence, fix and proof."""

    anchor: str
    rank: int
    rule_id: str
    title: str
    tier: str
    saving: str
    status: str
    measured: str
    evidence: list[tuple[str, str]]
    fix: str
    snippet: Markup
    references: list[str]
    notes: list[str]
    found: str | None
    """The code pattern the advice is for and where it ran."""
    basis: str | None
    """What the estimated saving rests on."""


@dataclass(frozen=True, kw_only=True)
class WorkloadSection:
    """Everything the page shows about one workload."""

    name: str
    anchor: str
    status: str
    verdict: str
    error: str | None
    facts: list[tuple[str, str]]
    headline: Mapping[str, str] = field(default_factory=dict)
    """Short cells for the summary table: step time, throughput and MFU."""
    comparisons: list[ComparisonRow] = field(default_factory=list)
    baseline_origin: str | None = None
    notes: list[str] = field(default_factory=list)
    distribution: Markup | None = None
    distribution_caption: str = ""
    history: list[tuple[str, Markup]] = field(default_factory=list)
    history_note: str = ""
    telemetry: Markup | None = None
    telemetry_note: str = ""
    advice: list[AdviceView] = field(default_factory=list)
    advice_note: str = ""
    work: list[tuple[str, str]] = field(default_factory=list)
    """The step's exact work counters (label, value), the busiest operators last."""
    work_changes: list[tuple[str, str, str, str]] = field(default_factory=list)
    """Counters that differ from the baseline: (label, base, head, change)."""
    moved: list[tuple[str, str, str]] = field(default_factory=list)
    """Attributed ops and kernels: (name and how it moved, time per step, calls per step)."""
    moved_note: str = ""


@dataclass(frozen=True, kw_only=True)
class BisectSection:
    """A bisection as the page shows it (``perfgate report --bisect``)."""

    headline: str
    """``a1b2c3d4e5f6..0f9e8d7c6b5a · 7 commits · culprit found``."""
    culprit: str | None = None
    """The culprit's short id and subject, when one was found."""
    effect: str | None = None
    """The culprit against its parent: change, interval, rounds."""
    narrowed: str | None = None
    """Where a narrowed bisection placed the change."""
    work_changes: list[tuple[str, str, str, str]] = field(default_factory=list)
    moved: list[tuple[str, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    probes: list[tuple[str, str, str, str]] = field(default_factory=list)
    """Every probe: (base, head, state, effect)."""
    cost: str = ""


@dataclass(frozen=True, kw_only=True)
class Page:
    """The whole report."""

    title: str
    generated_at: str
    perfgate_version: str
    banner: Banner
    workloads: list[WorkloadSection]
    run_facts: list[tuple[str, str]]
    environment: list[tuple[str, str]]
    environment_differences: list[str]
    verdict_notes: list[str]
    inputs: list[str]
    charts: ChartBatch = field(default_factory=ChartBatch)
    """The charts the page's placeholders stand for, drawn when the page is rendered."""
    bisect: BisectSection | None = None


def build_page(
    results: Sequence[RunResult],
    *,
    verdict: CompareVerdict | None = None,
    advice: AdviceReport | None = None,
    diagnoses: Mapping[str, Diagnosis] | None = None,
    histories: Mapping[str, WorkloadHistory] | None = None,
    history_note: str = "",
    generated_at: str,
    inputs: Sequence[str] = (),
    title: str | None = None,
    bisect: BisectReport | None = None,
) -> Page:
    """The page for head ``results`` (several documents: shards of one run), with an optional
    compare ``verdict`` document, ``advice``, what bounds each workload (``diagnoses``, by
    name), stored ``histories`` and a ``bisect`` of the commits that made it slower."""
    head = results[0]
    verdicts = {w.name: w for w in verdict.workloads} if verdict is not None else {}
    advised = {w.name: w for w in advice.workloads} if advice is not None else {}
    workloads = [w for result in results for w in result.workloads]
    batch = ChartBatch()
    sections = [
        _workload_section(
            workload,
            verdicts.get(workload.name),
            advised.get(workload.name),
            (diagnoses or {}).get(workload.name),
            (histories or {}).get(workload.name),
            history_note,
            run_id=_run_of(results, workload),
            advice_given=advice is not None,
            batch=batch,
        )
        for workload in workloads
    ]
    return Page(
        title=title or _title(head),
        generated_at=generated_at,
        perfgate_version=head.perfgate_version,
        banner=_banner(workloads, verdict),
        workloads=sections,
        run_facts=_run_facts(results),
        environment=_flattened(head.environment),
        environment_differences=list(verdict.environment_differences) if verdict else [],
        verdict_notes=list(verdict.notes) if verdict else [],
        inputs=list(inputs),
        charts=batch,
        bisect=bisect_section(bisect) if bisect is not None else None,
    )


def bisect_section(report: BisectReport) -> BisectSection:
    """The bisection's section: the conclusion, the culprit's effect and work, its movers,
    then every probe."""
    found = report.conclusion == "found" and report.first_bad is not None
    culprit = None
    if found and report.first_bad is not None:
        culprit = " ".join(filter(None, [report.first_bad[:SHORT], report.culprit_subject]))
    narrowed = None
    if report.conclusion == "narrowed" and report.first_bad and report.last_good:
        narrowed = (
            f"The change is after {report.last_good[:SHORT]}, at or before "
            f"{report.first_bad[:SHORT]}."
        )
    seconds = sum(p.seconds for p in report.probes)
    return BisectSection(
        headline=(
            f"{report.good[:SHORT]}..{report.bad[:SHORT]} · {len(report.commits) - 1} commits · "
            f"{report.conclusion.replace('_', ' ')}"
        ),
        culprit=culprit,
        effect=probe_effect(report.effect) if found and report.effect is not None else None,
        narrowed=narrowed,
        work_changes=[work_change_parts(c.counter, c.base, c.head) for c in report.work_changes],
        moved=[mover_cells(m) for m in report.attribution.movers] if report.attribution else [],
        notes=list(report.notes),
        probes=[(p.base[:SHORT], p.head[:SHORT], p.state, probe_effect(p)) for p in report.probes],
        cost=f"{len(report.probes)} probes, {report.rounds} A/B rounds, {seconds:.0f} s",
    )


# --- the banner ------------------------------------------------------------------------------


def _banner(workloads: list[WorkloadResult], verdict: CompareVerdict | None) -> Banner:
    failed = [w for w in workloads if w.status != "ok"]
    if verdict is None:
        if failed:
            return Banner(
                kind="failed",
                headline=f"{len(failed)} of {len(workloads)} workloads failed",
                sentence=_failure_sentence(failed),
            )
        return Banner(
            kind="run",
            headline="run report",
            sentence=f"{len(workloads)} workloads measured; no comparison was given "
            "(perfgate compare --html, or perfgate report --verdict).",
        )
    overall = verdict.overall
    rows = [(w.name, c) for w in verdict.workloads for c in w.comparisons]
    sentence = _verdict_sentence(overall, rows, verdict)
    if failed:
        sentence += f" {_failure_sentence(failed)}"
    return Banner(
        kind=overall if overall in VERDICT_WORDS else "inconclusive",
        headline=VERDICT_WORDS.get(overall, overall),
        sentence=sentence,
        exit_code=int(verdict.exit_code()),
    )


def _verdict_sentence(
    overall: str, rows: list[tuple[str, MetricComparison]], verdict: CompareVerdict
) -> str:
    def worst(kind: str) -> list[tuple[str, MetricComparison]]:
        hits = [(n, c) for n, c in rows if c.verdict == kind]
        return sorted(hits, key=lambda nc: -abs(math.log(nc[1].ratio)))

    if overall in ("regression", "improvement"):
        hits = worst(overall)
        if hits:
            # One metric of the worst workload: its step time when that moved (the rates move
            # with it), else its largest change; the rest counted per workload.
            name = hits[0][0]
            mine = [c for n, c in hits if n == name]
            c = next((c for c in mine if c.metric == "step_time_s"), mine[0])
            others = len({n for n, _ in hits} - {name})
            more = f"; {others} more workload{'s' if others > 1 else ''} too" if others else ""
            return (
                f"{name}: {_label(c.metric)} {_direction_words(c.ratio)} "
                f"(90 % interval {change_interval(c.ci_low, c.ci_high)}), "
                f"beyond its ±{c.threshold:.0%} threshold{more}."
            )
    if overall == "inconclusive":
        hits = worst("inconclusive")
        if hits:
            names = ", ".join(f"{n} {_label(c.metric)}" for n, c in hits[:3])
            more = f" and {len(hits) - 3} more" if len(hits) > 3 else ""
            return (
                f"{len(hits)} metric{'s' if len(hits) > 1 else ''} could not be decided: "
                f"{names}{more}; see each one's smallest detectable change."
            )
        missing = [w.name for w in verdict.workloads if w.status != "compared"]
        if missing:
            return f"Not compared: {', '.join(missing[:5])}."
    workloads = {n for n, _ in rows}
    return (
        f"All {len(rows)} metrics of {len(workloads)} workloads are within their thresholds."
        if rows
        else "Nothing was compared."
    )


def _failure_sentence(failed: list[WorkloadResult]) -> str:
    first = failed[0]
    more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
    return f"{first.name} {first.status}: {last_line(first.error)}{more}."


# --- one workload ----------------------------------------------------------------------------


def _workload_section(
    workload: WorkloadResult,
    verdict: WorkloadVerdict | None,
    advice: WorkloadAdvice | None,
    diagnosis: Diagnosis | None,
    history: WorkloadHistory | None,
    history_note: str,
    *,
    run_id: str,
    advice_given: bool,
    batch: ChartBatch,
) -> WorkloadSection:
    compared = verdict.comparisons if verdict is not None else []
    attribution = verdict.attribution if verdict is not None else None
    comparisons = [_comparison_row(workload.name, c) for c in compared]
    worst = _workload_verdict(workload, verdict)
    distribution, caption = _distribution(workload, compared, batch)
    histories, note = _histories(workload, history, compared, run_id, history_note, batch)
    telemetry, telemetry_note = _telemetry(workload, batch)
    advice_views, advice_note = _advice(workload.name, advice, advice_given)
    return WorkloadSection(
        name=workload.name,
        anchor=anchor("workload", workload.name),
        status=workload.status,
        verdict=worst,
        error=workload.error,
        facts=[*_workload_facts(workload), *_diagnosis_facts(diagnosis)],
        headline=_headline(workload),
        comparisons=comparisons,
        baseline_origin=verdict.baseline_origin if verdict is not None else None,
        notes=list(verdict.notes) if verdict is not None else [],
        distribution=distribution,
        distribution_caption=caption,
        history=histories,
        history_note=note,
        telemetry=telemetry,
        telemetry_note=telemetry_note,
        advice=advice_views,
        advice_note=advice_note,
        work=_work_counts(workload),
        work_changes=[
            work_change_parts(c.counter, c.base, c.head)
            for c in (verdict.work_changes if verdict is not None else [])
        ],
        moved=[mover_cells(m) for m in attribution.movers] if attribution is not None else [],
        moved_note=_moved_note(attribution),
    )


def _moved_note(attribution: Attribution | None) -> str:
    if attribution is None:
        return ""
    more = f"; {attribution.omitted} smaller movers not listed" if attribution.omitted else ""
    return (
        f"Profiled in {attribution.windows} windows a side, alternated; profiled step "
        f"{attribution.base_step_ms:.2f} ms → {attribution.head_step_ms:.2f} ms. Time per step "
        f"with the range over every pair of windows{more}."
    )


BUSIEST_OPERATORS = 8
"""How many operators the report lists under a workload's work counters."""


def _work_counts(workload: WorkloadResult) -> list[tuple[str, str]]:
    work = workload.work
    if work is None:
        return []
    counts = [
        (WORK_LABELS[name], format_bytes(value) if name.endswith("_bytes") else str(value))
        for name in WORK_COUNTERS
        if (value := getattr(work, name)) or name in ("operators", "allocations", "host_syncs")
    ]
    busiest = sorted(work.by_operator.items(), key=lambda item: (-item[1], item[0]))
    return counts + [(name, f"{count}×") for name, count in busiest[:BUSIEST_OPERATORS]]


def _workload_verdict(workload: WorkloadResult, verdict: WorkloadVerdict | None) -> str:
    if workload.status != "ok":
        return workload.status
    if verdict is None:
        return "not compared"
    if verdict.status != "compared":
        return verdict.status.replace("_", " ")
    kinds = {c.verdict for c in verdict.comparisons}
    for kind in ("regression", "inconclusive", "improvement"):
        if kind in kinds:
            return kind
    return "pass"


def _workload_facts(workload: WorkloadResult) -> list[tuple[str, str]]:
    facts = [
        ("preset", workload.preset),
        ("device", workload.device),
        ("compute dtype", workload.compute_dtype or "—"),
        ("knobs", ", ".join(f"{k}={v}" for k, v in sorted(workload.knobs.items())) or "—"),
    ]
    s = workload.summary
    if s is None or s.median_step_s is None:
        return facts
    facts += [
        ("step time (median)", format_seconds(s.median_step_s)),
        ("between-repeat CV", f"{s.between_repeat_cv:.1%}" if s.between_repeat_cv else "—"),
        ("repeats", str(s.ok_repeats)),
    ]
    if s.tokens_per_s:
        facts.append(("tokens/s", f"{s.tokens_per_s:,.0f}"))
    if s.samples_per_s:
        facts.append(("samples/s", f"{s.samples_per_s:,.1f}"))
    facts.append(("FLOP/s", format_flops(s.tflops)))
    facts.append(("MFU", f"{s.mfu:.1%}" if s.mfu is not None else f"— ({s.mfu_reason})"))
    if s.ceiling_fraction is not None and s.ceiling_tflops is not None:
        facts.append(
            (
                "measured ceiling",
                f"{s.ceiling_fraction:.1%} of the measured ceiling ("
                f"{format_flops(s.ceiling_tflops)}FLOP/s, doctor --peak on "
                f"{(s.ceiling_measured_at or '?')[:10]})",
            )
        )
    elif s.tflops is not None and s.ceiling_tflops is None:
        facts.append(("measured ceiling", f"— ({CEILING_HINT})"))
    facts.append(("peak memory", format_bytes(s.peak_memory_bytes)))
    if s.dataloader_wait_share is not None:
        facts.append(("DataLoader wait", f"{s.dataloader_wait_share:.1%} of the step"))
    if s.final_loss is not None:
        facts.append(("final loss", f"{s.final_loss:.4f}"))
    return facts + distributed_facts(workload)


def _diagnosis_facts(found: Diagnosis | None) -> list[tuple[str, str]]:
    """What bounds the workload, from its timed run and, when advised, its profiled window."""
    if found is None:
        return []
    return [("bound by", f"{found.label} ({found.confidence} confidence): {found.reason}")]


def _headline(workload: WorkloadResult) -> dict[str, str]:
    s = workload.summary
    if s is None or s.median_step_s is None:
        return {"step": "—", "throughput": "—", "mfu": "—"}
    if s.tokens_per_s:
        throughput = f"{s.tokens_per_s:,.0f} tokens/s"
    elif s.samples_per_s:
        throughput = f"{s.samples_per_s:,.1f} samples/s"
    else:
        throughput = "—"
    return {
        "step": format_seconds(s.median_step_s),
        "throughput": throughput,
        "mfu": f"{s.mfu:.1%}" if s.mfu is not None else "—",
    }


def _comparison_row(workload: str, c: MetricComparison) -> ComparisonRow:
    metric = c.metric
    # The document writes a change that could never be detected (infinity) as null.
    detectable = c.min_detectable if math.isfinite(c.min_detectable) else None
    return ComparisonRow(
        metric=metric,
        label=_label(metric),
        anchor=anchor("metric", workload, metric),
        baseline=format_value(metric, c.baseline_median),
        head=format_value(metric, c.head_median),
        change=signed_percent(c.ratio),
        interval=change_interval(c.ci_low, c.ci_high),
        threshold=f"±{c.threshold:.0%}",
        min_detectable=f"{detectable:.1%}" if detectable is not None else "never (∞)",
        verdict=c.verdict.replace("_", " "),
        p_adjusted=f"{c.p_adjusted:.3g}" if c.p_adjusted is not None else "—",
        reasons="; ".join(c.reasons),
        raw={
            "baseline": c.baseline_median,
            "head": c.head_median,
            "ratio": c.ratio,
            "ci-low": _finite(c.ci_low),
            "ci-high": _finite(c.ci_high),
            "threshold": c.threshold,
            "min-detectable": detectable,
        },
    )


def _finite(value: float) -> float | None:
    """An interval's end as the document writes it: an unbounded end (infinity) as null."""
    return value if math.isfinite(value) else None


def _distribution(
    workload: WorkloadResult, compared: Sequence[MetricComparison], batch: ChartBatch
) -> tuple[Markup | None, str]:
    step = next((c for c in compared if c.metric == "step_time_s"), None)
    element = anchor("dist", workload.name)
    if step is not None and (step.baseline_values or step.head_values):
        sides = [
            ("baseline", [v * 1e3 for v in step.baseline_values]),
            ("head", [v * 1e3 for v in step.head_values]),
        ]
        caption = (
            f"Step time of each repeat (the median of its steady steps): "
            f"{len(sides[0][1])} baseline and {len(sides[1][1])} head repeats, as judged."
        )
    elif workload.summary is not None and workload.summary.repeat_medians_s:
        sides = [("head", [v * 1e3 for v in workload.summary.repeat_medians_s])]
        caption = "Step time of each repeat (no baseline to compare with)."
    else:
        return None, "No repeat finished."
    return batch.add("distribution", sides, xlabel="step time (ms)", element_id=element), caption


def _histories(
    workload: WorkloadResult,
    history: WorkloadHistory | None,
    compared: Sequence[MetricComparison],
    run_id: str,
    note: str,
    batch: ChartBatch,
) -> tuple[list[tuple[str, Markup]], str]:
    if history is None or not history.runs:
        return [], note or "No stored history for this workload on this branch."
    bands = {
        c.metric: (c.baseline_median * (1 - c.threshold), c.baseline_median * (1 + c.threshold))
        for c in compared
    }
    present = {m for run in history.runs for m, v in run.medians.items() if v is not None}
    rate = next((m for m in HISTORY_METRICS[1:] if m in present), None)
    charts_out = []
    for metric in ("step_time_s", rate):
        if metric is None or metric not in present:
            continue
        scale = 1e3 if metric == "step_time_s" else 1.0
        unit = " (ms)" if metric == "step_time_s" else ""
        points = [
            charts.SeriesPoint(
                value=run.medians[metric] * scale,  # type: ignore[operator]
                label=_point_label(run.commit, run.started_at, metric, run.medians[metric]),
                in_baseline=run.in_baseline,
                # Steps are found on step time; a rate steps with it.
                change_point=bool(run.change_point_metrics),
                is_head=run.run_id == run_id,
            )
            for run in history.runs
            if run.medians.get(metric) is not None
        ]
        band = bands.get(metric)
        svg = batch.add(
            "history",
            points,
            ylabel=f"{_label(metric)}{unit}",
            element_id=anchor("history", workload.name, metric),
            baseline_band=(band[0] * scale, band[1] * scale) if band else None,
        )
        charts_out.append((_label(metric), svg))
    in_window = sum(run.in_baseline for run in history.runs)
    reason = f" The live baseline: {history.baseline_reason}." if history.baseline_reason else ""
    runs = f"{len(history.runs)} stored run{'s' if len(history.runs) > 1 else ''}"
    summary = (
        f"Last {runs} on this branch, oldest first; {in_window} in the live baseline window "
        f"(filled), change points dashed.{reason}"
    )
    return charts_out, summary


def _point_label(commit: str | None, started_at: str, metric: str, value: float | None) -> str:
    shown = format_value(metric, value) if value is not None else "—"
    return f"{(commit or 'no commit')[:10]} · {started_at[:16].replace('T', ' ')} · {shown}"


def _telemetry(workload: WorkloadResult, batch: ChartBatch) -> tuple[Markup | None, str]:
    repeat = next(
        (r for r in workload.repeats if r.telemetry and r.telemetry.get("t")),
        None,
    )
    if repeat is None or repeat.telemetry is None:
        return None, "No telemetry samples were recorded."
    telemetry = repeat.telemetry
    times = telemetry["t"]
    start = times[0]
    t_s = [t - start for t in times]
    series: list[charts.TelemetrySeries] = []
    gpu = telemetry.get("gpu") or {}
    host = telemetry.get("host") or {}
    # A GPU run shows the GPU's story (what the reader asks first: was it busy, clocked
    # and fed); a CPU run shows the host's, with the DataLoader workers when there are any.
    # Every panel is a matplotlib axes, the report's main rendering cost.
    panels = _GPU_PANELS if gpu.get("util_percent") else _HOST_PANELS
    for group, key, name, unit, scale in panels:
        values = (gpu if group == "gpu" else host).get(key)
        if not values or all(v is None for v in values):
            continue
        if key == "children_cpu_percent" and not any(values):
            continue  # no DataLoader workers: an all-zero panel says nothing
        series.append(
            charts.TelemetrySeries(
                name=name,
                unit=unit,
                values=[v * scale if v is not None else None for v in values],
            )
        )
    shaded = list(_throttled_spans(t_s, gpu.get("throttled") or []))
    measured = None
    if "measure_start" in repeat.phases and "measure_end" in repeat.phases:
        measured = (repeat.phases["measure_start"] - start, repeat.phases["measure_end"] - start)
    svg = batch.add(
        "telemetry",
        t_s,
        series,
        element_id=anchor("telemetry", workload.name),
        shaded=shaded,
        measured=measured,
    )
    note = (
        f"Repeat {repeat.index}: {len(t_s)} samples every {telemetry.get('interval_s', 0):g} s"
        + (f"; throttled during {len(shaded)} period(s), shaded" if shaded else "")
        + "."
    )
    return svg, note


_GPU_PANELS = (
    ("gpu", "util_percent", "GPU utilisation", "%", 1.0),
    ("gpu", "sm_clock_mhz", "SM clock", "MHz", 1.0),
    ("gpu", "power_w", "power", "W", 1.0),
    ("gpu", "mem_used_bytes", "GPU memory", "GiB", 2.0**-30),
    ("host", "children_cpu_percent", "DataLoader workers' CPU", "%", 1.0),
)
_HOST_PANELS = (
    ("host", "process_cpu_percent", "process CPU", "%", 1.0),
    ("host", "children_cpu_percent", "DataLoader workers' CPU", "%", 1.0),
    ("host", "system_cpu_percent", "system CPU", "%", 1.0),
    ("host", "process_rss_bytes", "process memory", "MiB", 2.0**-20),
)


def _throttled_spans(t_s: list[float], throttled: list[Any]) -> Iterable[tuple[float, float]]:
    start: float | None = None
    for index, flag in enumerate(throttled[: len(t_s)]):
        if flag and start is None:
            start = t_s[index]
        if not flag and start is not None:
            yield (start, t_s[index])
            start = None
    if start is not None:
        yield (start, t_s[min(len(t_s), len(throttled)) - 1])


def _advice(
    workload: str, advised: WorkloadAdvice | None, advice_given: bool
) -> tuple[list[AdviceView], str]:
    if advised is None:
        if advice_given:
            return [], "This workload was not profiled."
        return [], "No advice given (perfgate advise --json, or perfgate run --profile)."
    if advised.status != "ok":
        return [], f"Profiling {advised.status}: {last_line(advised.error)}"
    proofs = {v.rule_id: v for v in advised.verifications}
    views = [
        _advice_view(workload, rank, item, proofs.get(item.rule_id))
        for rank, item in enumerate(in_measured_order(advised.advice, proofs), start=1)
    ]
    return views, "" if views else "No rule fired: nothing to advise."


def _advice_view(workload: str, rank: int, item: Advice, proof: Verification | None) -> AdviceView:
    measured = "—"
    if proof is not None and proof.speedup is not None and proof.speedup_ci:
        low, high = proof.speedup_ci
        parity = {True: "same loss", False: "loss changed", None: "no loss"}[proof.loss_parity]
        measured = f"{proof.speedup:.2f}× ({low:.2f}–{high:.2f}), {parity}"
    elif proof is not None:
        measured = proof.reason
    return AdviceView(
        anchor=anchor("advice", workload, item.rule_id),
        rank=rank,
        rule_id=item.rule_id,
        title=item.title,
        tier=item.tier,
        saving=f"{item.saving:.1%}",
        status=standing(item, proof),
        measured=measured,
        evidence=[(k, _evidence_value(v)) for k, v in item.evidence.items()],
        fix=item.fix.strip(),
        snippet=_highlighted(item.snippet.strip()),
        references=list(item.references),
        notes=list(item.notes),
        found=found_text(item),
        basis=item.estimate_basis,
    )


def _highlighted(code: str) -> Markup:
    """Python highlighted by Pygments (installed with rich) with inline styles: no stylesheet
    to ship, and Pygments escapes the code itself."""
    if not code:
        return Markup("")
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    return Markup(highlight(code, PythonLexer(), HtmlFormatter(noclasses=True, nobackground=True)))


# --- the run and its environment --------------------------------------------------------------


def _run_facts(results: Sequence[RunResult]) -> list[tuple[str, str]]:
    head = results[0]
    source = head.source
    facts = [
        ("run", ", ".join(r.run_id for r in results)),
        ("suite", head.suite or "—"),
        ("device", head.device),
        ("branch", source.branch or "—"),
        ("commit", (source.commit or "—") + (" (dirty)" if source.dirty else "")),
        ("subject", source.subject or "—"),
        ("started", head.started_at),
        ("repeats × steps", f"{head.settings.repeats} × {head.settings.steps}"),
    ]
    if source.pr_number is not None:
        facts.append(("pull request", f"#{source.pr_number}"))
    if head.settings.inject_slowdown:
        facts.append(("canary", f"slowed down by {head.settings.inject_slowdown:.0%}"))
    return facts


def _flattened(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested fingerprint fields as sorted ``a.b: value`` rows."""
    if isinstance(value, Mapping):
        rows: list[tuple[str, str]] = []
        for key in sorted(value):
            rows += _flattened(value[key], f"{prefix}.{key}" if prefix else str(key))
        return rows
    if isinstance(value, list):
        return [(prefix, ", ".join(str(v) for v in value) or "—")]
    return [(prefix, "—" if value is None else str(value))]


def _title(head: RunResult) -> str:
    where = head.source.branch or head.device
    return f"perfgate report · {head.suite or 'workloads'} · {where}"


def _run_of(results: Sequence[RunResult], workload: WorkloadResult) -> str:
    return next(r.run_id for r in results if any(w is workload for w in r.workloads))


# --- formatting --------------------------------------------------------------------------------


def _direction_words(ratio: float) -> str:
    change = abs(ratio - 1)
    return f"{change:.1%} {'worse' if ratio > 1 else 'better'}"


def _label(metric: str) -> str:
    return METRIC_LABELS.get(metric, metric)


def _evidence_value(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)
