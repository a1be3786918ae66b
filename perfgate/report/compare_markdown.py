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
  (run notes, changed metrics, advice, then the details) and the rest are counted in one
  "omitted" line.

The layout lives in the Jinja2 template ``templates/pr_comment.md.j2``; this module keeps the
policy: it escapes every value before the template sees it (the template is rendered without
autoescaping and never receives an unescaped user string), builds the rows, and enforces the
bound by rendering a prefix of the rows.

Optionally the comment lists the top pieces of advice of a ``perfgate advise --json`` document
(:func:`top_advice`, read through ``perfgate.documents.advice.ADVICE``), each linking to its
section of the HTML report when the report is online.
"""

from __future__ import annotations

import html
import math
import os
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, partial
from itertools import accumulate
from pathlib import Path
from typing import TypeAlias
from urllib.parse import quote, urlsplit

import jinja2

from perfgate.documents.advice import (
    AdviceReport,
    Standing,
    Verification,
    found_text,
    measured_order,
    standing,
)
from perfgate.documents.verdict import (
    CompareVerdict,
    InconclusivePolicy,
    MetricComparison,
    WorkloadVerdict,
)
from perfgate.errors import ExitCode, InfrastructureError, PerfgateError, UsageError
from perfgate.files import write_text_atomic
from perfgate.report.anchors import anchor
from perfgate.report.formatting import (
    format_value,
    mover_cells,
    own_interval,
    own_percent,
    work_change_parts,
)
from perfgate.report.templating import environment
from perfgate.thresholds import LOSS_RELATIVE_TOLERANCE

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

TEMPLATE = "pr_comment.md.j2"
ERROR_TEMPLATE = "pr_error.md.j2"
"""The layout, in perfgate's ``templates/`` folder."""
ADVICE_LIMIT = 3
"""How many pieces of advice the comment shows by default (:func:`top_advice`)."""

_URL_SAFE = "/:?#=&%+,;@!$~.-_"
_BLOCKS = (
    "notes",
    "changed",
    "work",
    "moved",
    "advice",
    "environment",
    "no_baseline",
    "all_metrics",
    "workload_notes",
)
"""The template's row blocks in priority order: truncation keeps a prefix of this sequence."""
_METHODS = {
    "baseline": "baseline (head repeats judged against the baseline's repeats)",
    "interleaved": (
        "sequential interleaved A/B (base and head measured alternately in this job until the "
        "interval decided)"
    ),
}
_SEVERITY = {"regression": 1, "inconclusive": 2, "improvement": 3}


_LOCAL_PATH = re.compile(r"(?<![\w.:/~-])(?:/[^\s/'\"`()<>\[\]|,;]+){3,}")
"""An absolute path of three or more components that is not part of a URL (``https://…``)."""


def without_local_paths(text: str) -> str:
    """``text`` with every absolute path cut to its last two components
    (``/home/runner/work/p/p/out/head.json`` → ``…/out/head.json``): a comment is read on GitHub,
    where the runner's folders mean nothing and only tell a stranger its layout."""
    return _LOCAL_PATH.sub(lambda m: "…/" + "/".join(m.group(0).rsplit("/", 2)[1:]), text)


def escape_text(text: str, *, limit: int = TEXT_LIMIT) -> str:
    """Untrusted text made inert for one line of GitHub markdown outside a table.

    Whitespace runs (newlines included) become one space and control/bidi characters are
    dropped, so the text cannot start a new block or reorder what is displayed; it is clipped to
    ``limit`` characters *before* escaping, so an escape is never cut in half. ``\\ ` * _ ~ [ ]``
    are backslash-escaped (no emphasis that could forge our own bold verdict, no code span, no
    link or image); ``& < >`` become entities (no HTML); a zero-width joiner after ``@`` and
    before a ``#``'s digits stops mentions and issue cross-references from notifying anyone; a
    leading block marker (``#``, ``+``, ``-``, ``=``, ``1.``) is escaped so a list item cannot
    become a heading or a nested list. Bare URLs stay autolinked by GitHub, showing themselves;
    local paths are shortened (:func:`without_local_paths`).
    """
    cleaned = without_local_paths(
        "".join(
            ch
            for ch in " ".join(str(text).split())
            if unicodedata.category(ch) != "Cc" and ch not in _BIDI_CONTROLS
        )
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


@dataclass(frozen=True, kw_only=True)
class AdviceLine:
    """One piece of advice as the comment shows it; the text is raw, :func:`verdict_markdown`
    escapes it."""

    workload: str
    title: str
    tier: str
    """``high``, ``medium`` or ``low``."""
    saving: float
    """Estimated saving as a fraction of step time (0.12: 12 %)."""
    status: Standing
    """How the advice stands (:data:`perfgate.documents.advice.Standing`)."""
    measured: str | None = None
    """The verification's speed-up with its interval, e.g. ``1.13× (1.04–1.18)``."""
    anchor: str | None = None
    """Fragment id of the advice in the HTML report (:func:`advice_anchor`)."""
    found: str | None = None
    """The code pattern the advice is for and where it ran (``documents.advice.found_text``)."""


def advice_anchor(workload: str, rule_id: str) -> str:
    """The HTML report's fragment id for one piece of advice (``advice-<workload>-<rule id>``),
    by the report's own rule, so a comment's link lands on the report's section."""
    return anchor("advice", workload, rule_id)


def top_advice(advice: AdviceReport, limit: int = ADVICE_LIMIT) -> list[AdviceLine]:
    """The ``limit`` most valuable pieces of advice of a ``perfgate.advice`` document (read and
    validated by its kind, ``perfgate.documents.advice.ADVICE``).

    All advice of every workload that profiled (status ``ok``) is ranked as each workload's
    advice is (``perfgate.documents.advice.measured_order``): verified advice first by the lower
    bound of its measured speed-up, then what nothing measured by estimated saving, then
    inconclusive, then refuted by measured speed-up; ties by workload name then rule id, so the
    same document always gives the same lines. ``status`` is the advice's
    :func:`~perfgate.documents.advice.standing`; ``measured``, the speed-up with its interval
    when one was measured.
    """
    ranked: list[tuple[tuple[int, float, float, str, str], AdviceLine]] = []
    for workload in advice.workloads:
        if workload.status != "ok":
            continue
        name = workload.name
        checks = {check.rule_id: check for check in workload.verifications}
        for item in workload.advice:
            verification = checks.get(item.rule_id)
            line = AdviceLine(
                workload=name,
                title=item.title,
                tier=item.tier,
                saving=item.saving,
                status=standing(item, verification),
                measured=_measured(verification) if verification is not None else None,
                anchor=advice_anchor(name, item.rule_id),
                found=found_text(item),
            )
            order = measured_order(item, verification)
            ranked.append(((*order, -item.saving, name, item.rule_id), line))
    ranked.sort(key=lambda pair: pair[0])
    return [line for _, line in ranked[: max(limit, 0)]]


def verdict_markdown(
    verdict: CompareVerdict,
    *,
    inconclusive_policy: InconclusivePolicy = "exit4",
    report_link: str | None = None,
    max_chars: int = PR_COMMENT_LIMIT,
    advice: Sequence[AdviceLine] = (),
) -> str:
    """The verdict as markdown of at most ``max_chars`` characters (see the module docstring).

    ``advice`` (e.g. :func:`top_advice`) adds a small table after the changed metrics; with an
    http(s) ``report_link`` each title links to its section of the report. When everything does
    not fit, rows are dropped from the end in priority order — run notes and changed metrics
    survive longest — and one line says how many were left out. Below a few hundred characters
    only the (clipped) headline remains.
    """
    if max_chars < 1:
        raise UsageError(f"max_chars {max_chars} is not positive", "pass at least 1")
    report_url, report_text = _report(report_link)
    rows: dict[str, list[_Row]] = {
        "notes": [escape_text(note) for note in verdict.notes],
        "changed": _changed_rows(verdict),
        "work": _work_rows(verdict),
        "moved": _moved_rows(verdict),
        "advice": [_advice_row(line, report_url) for line in advice],
        **_detail_rows(verdict),
    }
    assert tuple(rows) == _BLOCKS
    return _fit(
        _header(verdict, inconclusive_policy),
        rows,
        report={"report_url": report_url, "report_text": report_text},
        max_chars=max_chars,
    )


def error_markdown(error: PerfgateError) -> str:
    """The comment when nothing could be judged: what went wrong and its fix, escaped, and the
    exit code that says infrastructure or usage, never regression."""
    kind = "Usage error" if error.exit_code == ExitCode.USAGE else "Infrastructure error"
    return (
        environment(html=False)
        .get_template(ERROR_TEMPLATE)
        .render(
            kind=kind,
            problem=escape_text(error.problem),
            fix=escape_text(error.fix) if error.fix else "",
            exit_code=int(error.exit_code),
            exit_name=error.exit_code.name.lower(),
        )
    )


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
    """Write ``markdown`` atomically: a later CI step posting the file as a comment never reads
    half a verdict (:func:`perfgate.documents.result.write_text_atomic`)."""
    write_text_atomic(path, markdown, option="--markdown")


_Row: TypeAlias = "str | Mapping[str, str]"
"""A list item (its escaped text) or a table row (column → escaped cell)."""


def _fit(
    header: Mapping[str, str],
    rows: Mapping[str, Sequence[_Row]],
    *,
    report: Mapping[str, str | None],
    max_chars: int,
) -> str:
    """The template rendered with as many rows as fit in ``max_chars``.

    Rows are kept as a prefix in priority order (``_BLOCKS``), so the first dropped are the last
    details, and once one row is dropped every later row is too: each table stays a prefix of
    itself rather than a sample. The kept count is a binary search over renderings that carry
    the "… N more rows omitted" line (the length grows with each kept row), bounded above by the
    rows whose text alone would overflow. Every text returned was measured, so the bound holds
    even if that growth assumption broke. When not even zero rows fit, the report pointer goes,
    and then all that is left is the headline, clipped.
    """
    total = sum(len(block) for block in rows.values())
    ends = list(accumulate(_weight(row) for block in rows.values() for row in block))
    no_report: dict[str, str | None] = {"report_url": None, "report_text": None}
    if not ends or ends[-1] <= max_chars:
        full = _render(header, rows, total, report)
        if len(full) <= max_chars:
            return full
    ceiling = max(min(bisect_right(ends, max_chars), total - 1), 0)
    for pointer in (report, no_report) if any(report.values()) else (no_report,):
        fitted = _largest_fitting(
            partial(_render, header, rows, report=pointer), ceiling, max_chars
        )
        if fitted is not None:
            return fitted
    return _clip(_render(header, rows, 0, no_report, omitted=False), max_chars)


def _largest_fitting(render: Callable[[int], str], ceiling: int, max_chars: int) -> str | None:
    """``render(k)`` for the largest ``k`` in ``0..ceiling`` that fits; None if none does."""
    best = render(0)
    if len(best) > max_chars:
        return None
    low, high = 0, ceiling
    while low < high:
        middle = (low + high + 1) // 2
        text = render(middle)
        if len(text) <= max_chars:
            low, best = middle, text
        else:
            high = middle - 1
    return best


def _render(
    header: Mapping[str, str],
    rows: Mapping[str, Sequence[_Row]],
    kept: int,
    report: Mapping[str, str | None],
    *,
    omitted: bool = True,
) -> str:
    """The template with the first ``kept`` rows (in block order) and, if ``omitted``, the count
    of the others."""
    blocks = {}
    left = kept
    total = 0
    for name, block in rows.items():
        count = min(left, len(block))
        blocks[name] = _Block(rows=block[:count], total=len(block))
        left -= count
        total += len(block)
    return _template().render(**header, **blocks, **report, omitted=total - kept if omitted else 0)


@dataclass(frozen=True)
class _Block:
    """One block of the template: the rows kept, and how many there are in all."""

    rows: Sequence[_Row]
    total: int


@cache
def _template() -> jinja2.Template:
    return environment(html=False).get_template(TEMPLATE)


def _weight(row: _Row) -> int:
    """Characters the row's own text adds to any rendering (a lower bound of its cost)."""
    return len(row) if isinstance(row, str) else sum(len(cell) for cell in row.values())


def _clip(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def _header(verdict: CompareVerdict, policy: InconclusivePolicy) -> dict[str, str]:
    code = verdict.exit_code(policy)
    return {
        "overall": escape_text(verdict.overall),
        "reason": _reason_sentence(verdict),
        "exit_code": str(int(code)),
        "exit_name": code.name.lower(),
        "policy": escape_text(policy),
        "method": _METHODS.get(verdict.method, escape_text(verdict.method)),
        "head_run": escape_text(verdict.head_run_id, limit=64),
        "head_commit": _commit_text(verdict.head_commit, verdict.head_subject),
        "base_commit": (
            f"; against base {escape_text(verdict.base_commit[:12], limit=12)}"
            if verdict.base_commit
            else ""
        ),
        "neutral": _neutral_line(verdict, policy),
    }


def _neutral_line(verdict: CompareVerdict, policy: InconclusivePolicy) -> str:
    """For an inconclusive verdict: how CI treats it, and what would decide it."""
    if verdict.overall != "inconclusive":
        return ""
    treated = {
        "fail": 'it fails the check (`inconclusive = "fail"`)',
        "pass": 'it passes the check (`inconclusive = "pass"`)',
        "exit4": (
            "neutral: the perfgate action and `scripts/pr-gate.sh` do not block the pull "
            'request on it (`inconclusive = "fail"` in `[tool.perfgate]` would)'
        ),
    }[policy]
    needed = [
        c.rounds_needed
        for w in verdict.workloads
        for c in w.comparisons
        if c.verdict == "inconclusive" and c.derived_from is None and c.rounds_needed
    ]
    decide = (
        f"about {max(needed)} interleaved rounds would decide at the measured noise "
        "(`--rounds`, or `ab_rounds` in `[tool.perfgate]`)"
        if needed
        else "an interleaved A/B (`compare --confirm`, or `--ab`) would measure it without drift"
        if verdict.method != "interleaved"
        else "a quieter runner, or a threshold the measured noise supports (`perfgate calibrate`)"
    )
    return f"Inconclusive is {treated}; {decide}."


def _commit_text(commit: str | None, subject: str | None) -> str:
    """`` at abc1234 "subject"`` (escaped; the subject is whatever the commit's author wrote)."""
    if not commit:
        return ""
    shown = f" at {escape_text(commit[:12], limit=12)}"
    return shown + (f" ({escape_text(subject, limit=120)})" if subject else "")


def _reason_sentence(verdict: CompareVerdict) -> str:
    """One sentence saying why: the worst regression, the inconclusive metrics, or the pass.
    Rates shown beside the step time they come from are not counted again."""
    pairs = [(w, c) for w in verdict.workloads for c in w.comparisons if c.derived_from is None]
    total = len(pairs)
    by_verdict: dict[str, list[tuple[WorkloadVerdict, MetricComparison]]] = {}
    for workload, comparison in pairs:
        by_verdict.setdefault(comparison.verdict, []).append((workload, comparison))
    mismatches = [w for w in verdict.workloads if w.status == "loss_mismatch"]
    missing = [w for w in verdict.workloads if w.status == "missing"]
    changed = [w for w in verdict.workloads if w.status == "definition_changed"]
    if verdict.overall == "regression":
        parts = []
        if missing:
            parts.append(
                f"{_counted(len(missing), 'workload')} of the base's suite "
                f"{'was' if len(missing) == 1 else 'were'} not measured at head "
                f"({_names(w.name for w in missing)}): every gated workload must be judged"
            )
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
        if changed:
            text = (
                f"{_counted(len(changed), 'workload')} changed its definition and needs an "
                f"interleaved A/B against the base ({_names(w.name for w in changed)})"
                + (f"; {text}" if unsure else "")
            )
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
    low, high = own_interval(comparison.ci_low, comparison.ci_high, comparison.direction)
    return (
        f"{escape_text(workload.name, limit=CELL_LIMIT)} {escape_text(comparison.metric)} "
        f"{own_percent(comparison.ratio, comparison.direction)} (90 % CI {low} … {high} %)"
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


_STATUS_ROWS = {
    "loss_mismatch": (
        "final loss",
        f"±{LOSS_RELATIVE_TOLERANCE * 100:.3g} %",
        "loss mismatch",
        "final loss differs",
    ),
    "missing": ("—", "—", "missing at head", "not measured at head"),
}
"""Workload statuses that fail the gate by themselves, as a changed row: (metric, threshold,
verdict, the text when the workload has no note)."""


def _changed_rows(verdict: CompareVerdict) -> list[_Row]:
    """Loss mismatches, regressions (worst first), inconclusive, improvements (best first):
    the order in which rows matter, so truncation drops the least important."""
    rows: list[tuple[tuple[int, float], _Row]] = []
    for workload in verdict.workloads:
        status_row = _STATUS_ROWS.get(workload.status)
        if status_row is not None:
            metric, threshold, label, fallback = status_row
            rows.append(
                (
                    (0, 0.0),
                    {
                        "workload": escape_cell(workload.name),
                        "metric": metric,
                        "baseline": "—",
                        "head": "—",
                        "change": escape_cell(
                            "; ".join(workload.notes) or fallback, limit=TEXT_LIMIT
                        ),
                        "threshold": threshold,
                        "detectable": "—",
                        "verdict": label,
                    },
                )
            )
        for c in workload.comparisons:
            if c.verdict in _SEVERITY:
                # Worst regression and best improvement first; inconclusive keep their order.
                order = {"regression": -c.ratio, "improvement": c.ratio}.get(c.verdict, 0.0)
                rows.append(((_SEVERITY[c.verdict], order), _metric_row(workload, c)))
    rows.sort(key=lambda pair: pair[0])
    return [row for _, row in rows]


def _work_rows(verdict: CompareVerdict) -> list[_Row]:
    """One row per changed work counter: the step's totals, then its operators."""
    rows: list[_Row] = []
    for workload in verdict.workloads:
        for change in workload.work_changes:
            label, base, head, delta = work_change_parts(change.counter, change.base, change.head)
            rows.append(
                {
                    "workload": escape_cell(workload.name),
                    "counter": escape_cell(label),
                    "base": base,
                    "head": head,
                    "change": delta,
                }
            )
    return rows


def _moved_rows(verdict: CompareVerdict) -> list[_Row]:
    """One row per attributed op or kernel, each workload's largest movers first."""
    rows: list[_Row] = []
    for workload in verdict.workloads:
        if workload.attribution is None:
            continue
        for mover in workload.attribution.movers:
            what, time_text, calls = mover_cells(mover)
            rows.append(
                {
                    "workload": escape_cell(workload.name),
                    "what": escape_cell(what),
                    "side": "kernel" if mover.side == "kernel" else "op",
                    "time": time_text,
                    "calls": calls,
                }
            )
    return rows


def _advice_row(line: AdviceLine, report_url: str | None) -> _Row:
    """One advice row, escaped. The title links to ``<report>#<anchor>`` only when the report
    is an http(s) URL (``report_url``, already made safe) and the line has an anchor, which is
    re-sanitised here since an :class:`AdviceLine` may come from anywhere."""
    url = ""
    if report_url and line.anchor:
        url = f"{report_url.split('#', 1)[0]}#{anchor(line.anchor)}"
    return {
        "workload": escape_cell(line.workload),
        "title": escape_cell(line.title),
        "found": escape_cell(line.found) if line.found else "",
        "url": url,
        "tier": escape_cell(line.tier),
        "saving": _saving(line.saving),
        # One cell, escaped as a whole: only its start can look like a block marker.
        "status": escape_cell(f"{line.status}: {line.measured}" if line.measured else line.status),
    }


def _saving(fraction: float) -> str:
    return f"{fraction * 100:.1f} %" if math.isfinite(fraction) else "—"


def _detail_rows(verdict: CompareVerdict) -> dict[str, list[_Row]]:
    """The collapsed blocks' rows, short and telling ones first so the long metric table is cut
    first."""
    workloads = verdict.workloads
    return {
        "environment": [escape_text(line) for line in verdict.environment_differences],
        "no_baseline": [
            escape_text(w.name, limit=CELL_LIMIT) for w in workloads if w.status == "no_baseline"
        ],
        "all_metrics": [
            {
                **_metric_row(w, c),
                "p": f"{c.p_value:.3g}",
                "p_adjusted": f"{c.p_adjusted:.3g}" if c.p_adjusted is not None else "—",
                "why": escape_cell("; ".join(c.reasons), limit=TEXT_LIMIT) if c.reasons else "",
            }
            for w in workloads
            for c in w.comparisons
        ],
        "workload_notes": [
            {
                "workload": escape_text(w.name, limit=CELL_LIMIT),
                "status": w.status.replace("_", " "),
                "note": escape_text(note),
            }
            for w in workloads
            for note in w.notes
        ],
    }


def _metric_row(workload: WorkloadVerdict, c: MetricComparison) -> dict[str, str]:
    return {
        "workload": escape_cell(workload.name),
        "metric": escape_cell(c.metric),
        "baseline": format_value(c.metric, c.baseline_median),
        "head": format_value(c.metric, c.head_median),
        "change": _change(c),
        "threshold": f"±{c.threshold * 100:.3g} %",
        "detectable": "never"
        if math.isinf(c.min_detectable)
        else f"{c.min_detectable * 100:.1f} %",
        "verdict": c.verdict.replace("_", " "),
    }


def _change(c: MetricComparison) -> str:
    """The metric's own change (a rate's is its own: throughput -20 %, not the step's +25 %)."""
    low, high = own_interval(c.ci_low, c.ci_high, c.direction)
    return f"{own_percent(c.ratio, c.direction)} ({low} … {high})"


def _report(link: str | None) -> tuple[str | None, str | None]:
    """The report pointer as ``(url, text)``: a URL only for http(s) links, percent-encoded so
    it cannot close the link early; anything else (a local path, ``javascript:``) is plain
    escaped text. ``(None, None)`` without a link."""
    if not link:
        return None, None
    parts = urlsplit(link.strip())
    if parts.scheme in {"http", "https"} and parts.netloc:
        return quote(link.strip(), safe=_URL_SAFE), None
    return None, escape_text(link)


def _measured(check: Verification) -> str | None:
    """``1.13× (1.04–1.18)`` from a verification with a speed-up and its interval, else None."""
    if check.speedup is None or check.speedup_ci is None:
        return None
    numbers = (check.speedup, *check.speedup_ci)
    if not all(math.isfinite(n) for n in numbers):
        return None  # as written: JSON has no infinity, the document says null
    return "{:.2f}× ({:.2f}–{:.2f})".format(*numbers)
