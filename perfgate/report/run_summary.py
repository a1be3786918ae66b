"""The run summary: one row per workload, the numbers a reader checks first (a table on a
wide console, a block per workload on a narrow one, :class:`RunSummaryView`)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from perfgate.documents.diagnosis import WorkloadDiagnosis
from perfgate.documents.result import RunResult, WorkloadResult
from perfgate.report.formatting import format_bytes, format_flops, format_seconds
from perfgate.report.terminal import WIDE_COLUMNS, PlainTable, indented

HEADERS = (
    "workload",
    "preset",
    "status",
    "step (median)",
    "cv",
    "throughput",
    "FLOP/s",
    "MFU",
    "of ceiling",
    "peak mem",
    "loss",
)


def summary_table(result: RunResult) -> Table:
    """A rich table of every workload's headline numbers."""
    table = PlainTable(title=_title(result), title_justify="left")
    for header in HEADERS:
        left = header in {"workload", "preset", "status"}
        table.add_column(header, justify="left" if left else "right")
    for workload in result.workloads:
        table.add_row(*workload_row(workload))
    return table


class RunSummaryView:
    """:func:`summary_table` on a wide console; on a narrow one, per workload a line with its
    name and status and the same figures, labelled, wrapped (the CLI prints this)."""

    def __init__(self, result: RunResult) -> None:
        self.result = result

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if options.max_width >= WIDE_COLUMNS:
            yield summary_table(self.result)
            return
        yield Text(_title(self.result), style="bold")
        for workload in self.result.workloads:
            name, preset, status, *figures = workload_row(workload)
            yield Text(f"{name}@{preset}: ") + (Text(status) if isinstance(status, str) else status)
            shown = [
                f"{header} {figure}"
                for header, figure in zip(HEADERS[3:], figures, strict=True)
                if str(figure) not in {"", "—"}
            ]
            if shown:
                yield from indented(Text(" · ".join(shown)), 2, console, options.max_width)


def _title(result: RunResult) -> str:
    return f"perfgate run {result.run_id[:8]} · {result.device}"


def workload_row(workload: WorkloadResult) -> list[str | Text]:
    """Formatted cells for one workload; failures show their error's first line."""
    summary = workload.summary
    status = Text(workload.status, style="" if workload.status == "ok" else "red")
    if summary is None or summary.median_step_s is None:
        first_line = (workload.error or "").splitlines()[0][:60] if workload.error else ""
        return [workload.name, workload.preset, status, first_line, *[""] * 7]
    throughput = (
        f"{summary.tokens_per_s:,.0f} tok/s"
        if summary.tokens_per_s
        else f"{summary.samples_per_s:,.1f} samples/s"
        if summary.samples_per_s
        else "—"
    )
    return [
        workload.name,
        workload.preset,
        status,
        format_seconds(summary.median_step_s),
        f"{summary.between_repeat_cv:.1%}" if summary.between_repeat_cv is not None else "—",
        throughput,
        format_flops(summary.tflops),
        f"{summary.mfu:.1%}" if summary.mfu is not None else "—",
        f"{summary.ceiling_fraction:.1%}" if summary.ceiling_fraction is not None else "—",
        format_bytes(summary.peak_memory_bytes),
        f"{summary.final_loss:.4f}" if summary.final_loss is not None else "—",
    ]


def mfu_notes(result: RunResult) -> list[str]:
    """Why MFU is missing, once per reason: a bare dash would be a claim without a number;
    then what the "of ceiling" column was measured against (:func:`ceiling_notes`)."""
    reasons = sorted(
        {w.summary.mfu_reason for w in result.workloads if w.summary and w.summary.mfu_reason}
    )
    return [f"MFU not computed: {reason}" for reason in reasons] + ceiling_notes(result)


CEILING_HINT = "run perfgate doctor --peak to measure this machine's ceilings"


def ceiling_notes(result: RunResult) -> list[str]:
    """The measured ceilings the "of ceiling" column divides by, once per figure, or, when the
    run found none stored for its environment, the hint that measures them."""
    summaries = [w.summary for w in result.workloads if w.summary and w.summary.tflops]
    if not summaries:
        return []
    figures = sorted(
        {
            (s.ceiling_tflops, (s.ceiling_measured_at or "")[:10])
            for s in summaries
            if s.ceiling_tflops is not None
        }
    )
    if not figures:
        return [
            f"of ceiling not computed: no measured ceilings for this environment — {CEILING_HINT}"
        ]
    return [
        f"of ceiling: achieved FLOP/s ÷ the measured matmul ceiling of "
        f"{format_flops(tflops)}FLOP/s (perfgate doctor --peak on {date})"
        for tflops, date in figures
    ]


def distributed_facts(workload: WorkloadResult) -> list[tuple[str, str]]:
    """Label/value pairs for a distributed workload (none for a single-process one).

    The table's step time is the slowest rank's; these say how far the other ranks were from it
    and where the step went, so a reader sees why before opening a trace.
    """
    summary = workload.summary
    if summary is None or summary.world_size is None:
        return []
    backend = workload.setup_info.get("distributed", {}).get("backend")
    facts = [("ranks", f"{summary.world_size}" + (f" ({backend})" if backend else ""))]
    medians = rank_medians(workload)
    if medians:
        listed = " · ".join(f"rank {r} {format_seconds(m)}" for r, m in enumerate(medians))
        spread = f" (spread {summary.rank_spread:.1%})" if summary.rank_spread is not None else ""
        facts.append(("rank step times", f"{listed}{spread}; the slowest is judged"))
    if summary.communication_share is not None:
        exposed = summary.communication_exposed_share or 0.0
        overlap = summary.communication_overlap
        hidden = f", {overlap:.0%} of it overlapped" if overlap is not None else ""
        facts.append(
            (
                "communication",
                f"{summary.communication_share:.1%} of the step, {exposed:.1%} exposed{hidden}",
            )
        )
    if summary.rank_imbalance is not None:
        facts.append(("compute imbalance", f"{summary.rank_imbalance:.1%}"))
    return facts


def rank_medians(workload: WorkloadResult) -> list[float]:
    """Each rank's step time: the median over ok repeats of that rank's steady median."""
    per_rank: dict[int, list[float]] = {}
    for repeat in workload.repeats:
        for rank in repeat.ranks or []:
            per_rank.setdefault(rank.rank, []).append(rank.median_step_s)
    return [statistics.median(per_rank[rank]) for rank in sorted(per_rank)]


def distributed_lines(result: RunResult) -> list[str]:
    """One line per distributed workload for the terminal: its :func:`distributed_facts`."""
    lines = []
    for workload in result.workloads:
        facts = distributed_facts(workload)
        if facts:
            lines.append(f"{workload.name}: " + "; ".join(f"{k} {v}" for k, v in facts))
    return lines


def diagnosis_lines(diagnoses: Iterable[WorkloadDiagnosis]) -> list[str]:
    """What bounds each workload that ran (``perfgate.diagnose.session.diagnose_result`` of a
    run: from the timed run alone; ``perfgate diagnose`` adds a profiled window, the GPU
    timeline and kernel mix)."""
    return [
        f"{item.name}: {item.diagnosis.label} ({item.diagnosis.confidence}): "
        f"{item.diagnosis.reason}"
        for item in diagnoses
        if item.diagnosis is not None
    ]


def failure_lines(result: RunResult) -> list[str]:
    """One line per failed workload: its status and the line of its error that says most.

    For an exception that is the last line (``Type: message``); for a crash or timeout, the first.
    """
    lines = []
    for workload in result.workloads:
        if workload.status == "ok":
            continue
        text = (workload.error or "").strip().splitlines() or [""]
        detail = text[-1] if workload.status == "error" else text[0]
        lines.append(f"{workload.name}: {workload.status} — {detail}")
    return lines
