"""The compare verdict as GitHub markdown: the PR comment and the job summary.

The job summary is the file named by ``$GITHUB_STEP_SUMMARY``.

The first screen answers "did this change regress, and by how much": the overall verdict, one
sentence saying why, the exit code, then a compact table of the metrics that changed. Everything
else (every metric with its p-values, per-workload notes, workloads without a baseline,
environment differences) is collapsed in ``<details>`` blocks.

Two guarantees, because the text lands in a PR comment:

- **Escaped.** Workload names, notes, reasons and environment differences come from user config,
  git and error messages. :func:`escape_text` and :func:`escape_cell` make them inert: no raw HTML,
  no link or image syntax, no ``@mention`` or ``#123`` cross-reference, no line break, no cell
  break (a forged row or a forged "perfgate: pass" must not be possible).
- **Bounded.** GitHub refuses comments over 65,536 characters, and a refused comment hides the
  verdict entirely; so the output never exceeds ``max_chars``. Rows are kept in priority order
  (run notes, changed metrics, then the details) and the rest are counted in one "omitted" line.
"""

from __future__ import annotations

import html
import math
import os
import re
import tempfile
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

from perfgate.compare.gate import (
    LOSS_RELATIVE_TOLERANCE,
    CompareVerdict,
    InconclusivePolicy,
    WorkloadVerdict,
)
from perfgate.errors import InfrastructureError, UsageError
from perfgate.report.run_summary import format_bytes, format_seconds
from perfgate.stats.compare import MetricComparison

PR_COMMENT_LIMIT = 65_000
"""Default size bound: under GitHub's 65,536-character comment limit, with a margin."""
CELL_LIMIT = 120
"""Longest user text in a table cell, so one absurd workload name cannot eat the budget."""
TEXT_LIMIT = 500
"""Longest user text in a list item or sentence (notes, reasons, environment differences)."""
NAMES_IN_SENTENCE = 3
"""How many workload/metric names the headline sentence lists before "and N more"."""

_ZWJ = "\u200d"
_BACKSLASHED = re.compile(r"([\\`*_~\[\]])")
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")
_REFERENCE = re.compile(r"#(?=[0-9])")
_ORDERED_MARKER = re.compile(r"^(\d+)([.)])")

_CHANGED_HEADERS = (
    "workload",
    "metric",
    "baseline",
    "head",
    "change (90 % CI)",
    "threshold",
    "detectable",
    "verdict",
)
_ALL_HEADERS = (
    "workload",
    "metric",
    "baseline",
    "head",
    "change (90 % CI)",
    "threshold",
    "detectable",
    "p",
    "p (BH)",
    "verdict",
    "why",
)
_METHODS = {
    "baseline": "baseline (head repeats judged against the baseline's repeats)",
    "interleaved": "interleaved A/B (base and head measured alternately in this job)",
}
_SEVERITY = {"regression": 1, "inconclusive": 2, "improvement": 3}


def escape_text(text: str, *, limit: int = TEXT_LIMIT) -> str:
    """Untrusted text made inert for one line of GitHub markdown outside a table.

    Whitespace runs (newlines included) become one space and control/bidi characters are
    dropped, so the text cannot start a new block or reorder what is displayed; it is clipped to
    ``limit`` characters *before* escaping, so an escape is never cut in half. ``\\ ` * _ ~ [ ]``
    are backslash-escaped (no emphasis that could forge our own bold verdict, no code span, no
    link or image); ``& < >`` become entities (no HTML); a zero-width joiner after ``@`` and
    before a ``#``'s digits stops mentions and issue cross-references from notifying anyone; a
    leading block marker (``#``, ``+``, ``-``, ``=``, ``1.``) is escaped so a list item cannot
    become a heading or a nested list. Bare URLs stay autolinked by GitHub, showing themselves.
    """
    cleaned = "".join(
        ch
        for ch in " ".join(str(text).split())
        if unicodedata.category(ch) != "Cc" and ch not in _BIDI_CONTROLS
    )
    if len(cleaned) > limit:
        cleaned = cleaned[: max(limit - 1, 0)] + "…"
    escaped = html.escape(_BACKSLASHED.sub(r"\\\1", cleaned), quote=False)
    escaped = _REFERENCE.sub("#" + _ZWJ, _MENTION.sub("@" + _ZWJ, escaped))
    if escaped[:1] in {"#", "+", "-", "="}:
        escaped = "\\" + escaped
    return _ORDERED_MARKER.sub(r"\1\\\2", escaped, count=1)


def escape_cell(text: str, *, limit: int = CELL_LIMIT) -> str:
    """Untrusted text made inert inside a GitHub table cell: :func:`escape_text`, clipped to a
    cell's length, with ``|`` escaped so the text can neither end its cell nor add a column."""
    return escape_text(text, limit=limit).replace("|", "\\|")


def verdict_markdown(
    verdict: CompareVerdict,
    *,
    inconclusive_policy: InconclusivePolicy = "exit4",
    report_link: str | None = None,
    max_chars: int = PR_COMMENT_LIMIT,
) -> str:
    """The verdict as markdown of at most ``max_chars`` characters (see the module docstring).

    When everything does not fit, rows are dropped from the end in priority order — run notes
    and changed metrics survive longest — and one line says how many were left out. Below a few
    hundred characters only the (clipped) headline remains.
    """
    if max_chars < 1:
        raise UsageError(f"max_chars {max_chars} is not positive", "pass at least 1")
    header = _header(verdict, inconclusive_policy)
    footer = _report_line(report_link) if report_link else ""
    notes = _Section(rows=[f"- {escape_text(note)}\n" for note in verdict.notes])
    changed = _changed_section(verdict)
    details = _detail_sections(verdict)
    return _fit(header, [notes, changed, *details], footer=footer, max_chars=max_chars)


def append_step_summary(markdown: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """Append ``markdown`` to ``$GITHUB_STEP_SUMMARY`` when that variable is set.

    Appends (never truncates) because earlier steps of the job may have written to the same
    file. Returns the file's path, or ``None`` outside GitHub Actions (variable unset or empty).
    """
    env = os.environ if environ is None else environ
    target = env.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    try:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(markdown + "\n")
    except OSError as exc:
        raise InfrastructureError(
            f"cannot append the job summary to GITHUB_STEP_SUMMARY={path}: {exc.strerror or exc}",
            "point GITHUB_STEP_SUMMARY at a writable file, or unset it",
        ) from None
    return path


def write_markdown(path: Path, markdown: str) -> None:
    """Write ``markdown`` via a temporary file in the same folder, fsync, then rename.

    A later CI step posting the file as a comment never reads half a verdict: it sees either the
    old file or the new one. (:func:`perfgate.result.write_json_atomic` does the same for JSON.)
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise UsageError(
            f"cannot write {path}: {exc.strerror or exc}", "choose a writable --markdown path"
        ) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(markdown)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


@dataclass
class _Section:
    """A block of droppable rows; ``opening``/``closing`` are written only around kept rows."""

    rows: list[str]
    opening: str = ""
    closing: str = ""


def _fit(header: str, sections: list[_Section], *, footer: str, max_chars: int) -> str:
    """The header, then the sections' rows in order while they fit, then the footer.

    Sections come in priority order, so the first rows dropped are the last details. Room for
    the "omitted" line is reserved up front (sized as if every row were omitted), so the bound
    holds whatever is dropped; once one row does not fit, every later row is dropped too, which
    keeps each table a prefix of itself rather than a sample. When not even that fits, the
    report link goes, and then all that is left is the headline, clipped.
    """
    total = sum(len(section.rows) for section in sections)
    reserve = len(_omitted_line(total)) if total else 0
    if len(header) + len(footer) + reserve > max_chars:
        footer = ""
    room = max_chars - len(header) - len(footer) - reserve
    if room < 0:
        return _clip(header, max_chars)
    parts = [header]
    kept = 0
    for section in sections:
        count = 0
        for row in section.rows:
            cost = len(row) + (len(section.opening) + len(section.closing) if count == 0 else 0)
            if cost > room:
                break
            room -= cost
            count += 1
        if count:
            parts += [section.opening, *section.rows[:count], section.closing]
        kept += count
        if count < len(section.rows):
            break
    omitted = total - kept
    if omitted:
        parts.append(_omitted_line(omitted))
    parts.append(footer)
    return "".join(parts)


def _omitted_line(count: int) -> str:
    return f"\n… {count} more rows omitted; see the JSON verdict / report\n"


def _clip(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def _header(verdict: CompareVerdict, policy: InconclusivePolicy) -> str:
    code = verdict.exit_code(policy)
    method = _METHODS.get(verdict.method, escape_text(verdict.method))
    return (
        f"## perfgate: {verdict.overall}\n\n"
        f"{_reason_sentence(verdict)}\n\n"
        f"- exit code **{int(code)}** ({code.name.lower()}; `--inconclusive {policy}`)\n"
        f"- method: {method}; head run {escape_text(verdict.head_run_id, limit=64)}\n"
    )


def _reason_sentence(verdict: CompareVerdict) -> str:
    """One sentence saying why: the worst regression, the inconclusive metrics, or the pass."""
    pairs = [(w, c) for w in verdict.workloads for c in w.comparisons]
    total = len(pairs)
    by_verdict: dict[str, list[tuple[WorkloadVerdict, MetricComparison]]] = {}
    for workload, comparison in pairs:
        by_verdict.setdefault(comparison.verdict, []).append((workload, comparison))
    mismatches = [w for w in verdict.workloads if w.status == "loss_mismatch"]
    if verdict.overall == "regression":
        parts = []
        regressions = sorted(by_verdict.get("regression", []), key=lambda p: -p[1].ratio)
        if regressions:
            worst = " (the worst)" if len(regressions) > 1 else ""
            parts.append(
                f"{len(regressions)} of {total} metrics regressed beyond their threshold: "
                f"{_described(*regressions[0])}{worst}"
            )
        if mismatches:
            parts.append(
                f"the final loss differs from the baseline's by more than "
                f"{LOSS_RELATIVE_TOLERANCE * 100:.3g} % in {_counted(len(mismatches), 'workload')} "
                f"({_names(w.name for w in mismatches)}), so the change altered the maths"
            )
        return _sentence("; ".join(parts) or "the gate reported a regression")
    if verdict.overall == "inconclusive":
        unsure = by_verdict.get("inconclusive", [])
        names = _names(f"{w.name} {c.metric}" for w, c in unsure)
        text = f"{len(unsure)} of {total} metrics are inconclusive ({names})"
        reasons = [r for _, c in unsure for r in c.reasons]
        if reasons:
            text += f"; first reason: {escape_text(reasons[0])}"
        return _sentence(text)
    improved = sorted(by_verdict.get("improvement", []), key=lambda p: p[1].ratio)
    text = f"no metric changed beyond its threshold ({total} metrics compared)"
    if improved:
        text = (
            f"no metric regressed; {len(improved)} of {total} metrics improved beyond their "
            f"threshold: {_described(*improved[0])}" + (" (the best)" if len(improved) > 1 else "")
        )
    return _sentence(text)


def _described(workload: WorkloadVerdict, comparison: MetricComparison) -> str:
    low, high = comparison.ci_low, comparison.ci_high
    return (
        f"{escape_text(workload.name, limit=CELL_LIMIT)} {escape_text(comparison.metric)} "
        f"{_percent(comparison.ratio)} (90 % CI {_signed(low)} … {_signed(high)} %)"
    )


def _names(names: Iterable[str]) -> str:
    listed = list(names)
    shown = ", ".join(escape_text(n, limit=CELL_LIMIT) for n in listed[:NAMES_IN_SENTENCE])
    rest = len(listed) - NAMES_IN_SENTENCE
    return f"{shown} and {rest} more" if rest > 0 else shown


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def _changed_section(verdict: CompareVerdict) -> _Section:
    """Loss mismatches, regressions (worst first), inconclusive, improvements (best first):
    the order in which rows matter, so truncation drops the least important."""
    rows: list[tuple[tuple[int, float], str]] = []
    for workload in verdict.workloads:
        if workload.status == "loss_mismatch":
            why = "; ".join(workload.notes) or "final loss differs"
            cells = [
                escape_cell(workload.name),
                "final loss",
                "—",
                "—",
                escape_cell(why, limit=TEXT_LIMIT),
                f"±{LOSS_RELATIVE_TOLERANCE * 100:.3g} %",
                "—",
                "**loss mismatch**",
            ]
            rows.append(((0, 0.0), _row(cells)))
        for c in workload.comparisons:
            if c.verdict in _SEVERITY:
                # Worst regression and best improvement first; inconclusive keep their order.
                order = {"regression": -c.ratio, "improvement": c.ratio}.get(c.verdict, 0.0)
                rows.append(
                    ((_SEVERITY[c.verdict], order), _row(_metric_cells(workload, c, bold=True)))
                )
    rows.sort(key=lambda pair: pair[0])
    return _Section(
        rows=[row for _, row in rows],
        opening="\n" + _row(_CHANGED_HEADERS) + _rule(len(_CHANGED_HEADERS)),
        closing=(
            "\nChange: + is worse (slower, less throughput, more memory). "
            "Detectable: the smallest worsening this comparison could flag.\n"
        ),
    )


def _detail_sections(verdict: CompareVerdict) -> list[_Section]:
    """Collapsed blocks, short and telling ones first so the long metric table is cut first."""
    workloads = verdict.workloads
    missing = [w for w in workloads if w.status == "no_baseline"]
    all_rows = [
        _row([*_metric_cells(w, c, bold=False)[:7], *_p_cells(c), _why(c)])
        for w in workloads
        for c in w.comparisons
    ]
    note_rows = [
        f"- {escape_text(w.name, limit=CELL_LIMIT)} ({w.status.replace('_', ' ')}): "
        f"{escape_text(note)}\n"
        for w in workloads
        for note in w.notes
    ]
    return [
        _details(
            f"Environment differences ({len(verdict.environment_differences)})",
            [f"- {escape_text(line)}\n" for line in verdict.environment_differences],
        ),
        _details(
            f"Workloads without a baseline ({len(missing)})",
            [f"- {escape_text(w.name, limit=CELL_LIMIT)}\n" for w in missing],
        ),
        _details(
            f"All {len(all_rows)} metrics, with p-values and reasons",
            all_rows,
            table=_ALL_HEADERS,
        ),
        _details(f"Workload notes ({len(note_rows)})", note_rows),
    ]


def _details(summary: str, rows: list[str], table: tuple[str, ...] = ()) -> _Section:
    head = _row(table) + _rule(len(table)) if table else ""
    return _Section(
        rows=rows,
        opening=f"\n<details><summary>{html.escape(summary)}</summary>\n\n{head}",
        closing="\n</details>\n",
    )


def _metric_cells(workload: WorkloadVerdict, c: MetricComparison, *, bold: bool) -> list[str]:
    label = c.verdict.replace("_", " ")
    return [
        escape_cell(workload.name),
        escape_cell(c.metric),
        _value(c.metric, c.baseline_median),
        _value(c.metric, c.head_median),
        f"{_percent(c.ratio)} ({_signed(c.ci_low)} … {_signed(c.ci_high)})",
        f"±{c.threshold * 100:.3g} %",
        "never" if math.isinf(c.min_detectable) else f"{c.min_detectable * 100:.1f} %",
        f"**{label}**" if bold and c.verdict == "regression" else label,
    ]


def _p_cells(c: MetricComparison) -> list[str]:
    adjusted = f"{c.p_adjusted:.3g}" if c.p_adjusted is not None else "—"
    return [f"{c.p_value:.3g}", adjusted, c.verdict.replace("_", " ")]


def _why(c: MetricComparison) -> str:
    return escape_cell("; ".join(c.reasons), limit=TEXT_LIMIT) if c.reasons else ""


def _value(metric: str, value: float) -> str:
    """A median in the metric's unit, as the terminal table's readers know it."""
    if metric == "step_time_s":
        return format_seconds(value)
    if metric == "peak_memory_bytes":
        return format_bytes(round(value))
    if metric == "mfu":
        return f"{value:.1%}"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _percent(ratio: float) -> str:
    return f"{_signed(ratio)} %"


def _signed(ratio: float) -> str:
    """A worse-is-greater ratio as a signed percentage: 1.081 → +8.1."""
    return f"{(ratio - 1) * 100:+.1f}"


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |\n"


def _rule(columns: int) -> str:
    return "|" + "---|" * columns + "\n"


def _report_line(link: str) -> str:
    """A link only for http(s) URLs, percent-encoded so it cannot close the link early;
    anything else (a local path, ``javascript:``) is shown as plain escaped text."""
    parts = urlsplit(link.strip())
    if parts.scheme in {"http", "https"} and parts.netloc:
        safe_url = quote(link.strip(), safe="/:?#=&%+,;@!$~.-_")
        return f"\n[Full report]({safe_url})\n"
    return f"\nFull report: {escape_text(link)}\n"
