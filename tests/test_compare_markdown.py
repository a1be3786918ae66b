"""The PR-comment / job-summary markdown: content, escaping of hostile text, the size bound."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from perfgate.cli import app
from perfgate.compare import comment, outputs
from perfgate.documents.advice import ADVICE, AdviceReport
from perfgate.documents.verdict import (
    CompareVerdict,
    InconclusivePolicy,
    MetricComparison,
    Overall,
    Verdict,
    WorkloadStatus,
    WorkloadVerdict,
)
from perfgate.errors import ExitCode, InfrastructureError, UsageError
from perfgate.report import compare_markdown, templating
from perfgate.report.compare_markdown import (
    CELL_LIMIT,
    TEMPLATE,
    AdviceLine,
    advice_anchor,
    append_step_summary,
    escape_cell,
    escape_text,
    top_advice,
    verdict_markdown,
    write_markdown,
)
from perfgate.stats.compare import compare_metric, correct

CHANGED_HEADER = (
    "| workload | metric | baseline | head | change (90 % CI) | threshold | detectable | verdict |"
)
ALL_HEADER = (
    "| workload | metric | baseline | head | change (90 % CI) | threshold | detectable "
    "| p | p (BH) | verdict | why |"
)
ADVICE_HEADER = "| workload | advice | tier | saving | status (measured speed-up, 90 % CI) |"
HOSTILE = "<script>alert(1)</script> | @org/team [click](http://evil) ![x](http://evil/img) `x`\n#1"
HOSTILE_ADVICE = (
    "<script>alert(1)</script>",
    "[x](javascript:alert(1))",
    "@everyone",
    "| forged | row |",
)
DATA = Path(__file__).parent / "data"


def metric(
    name: str = "step_time_s",
    *,
    ratio: float = 1.0,
    ci: tuple[float, float] = (0.98, 1.02),
    verdict: Verdict = "no_change",
    reasons: tuple[str, ...] = (),
    min_detectable: float = 0.072,
    baseline: float = 0.1,
) -> MetricComparison:
    """A comparison with chosen numbers (lower-is-better, so head = baseline × ratio)."""
    return MetricComparison(
        metric=name,
        direction="lower",
        baseline_median=baseline,
        head_median=baseline * ratio,
        ratio=ratio,
        ci_low=ci[0],
        ci_high=ci[1],
        p_value=0.0022,
        threshold=0.05,
        min_detectable=min_detectable,
        baseline_repeats=6,
        head_repeats=6,
        verdict=verdict,
        reasons=reasons,
        p_adjusted=0.0043,
    )


def workload(
    name: str,
    *comparisons: MetricComparison,
    status: WorkloadStatus = "compared",
    notes: tuple[str, ...] = (),
) -> WorkloadVerdict:
    return WorkloadVerdict(
        name=name,
        status=status,
        baseline_origin="base.json",
        comparisons=list(comparisons),
        notes=list(notes),
    )


def verdict_of(
    *workloads: WorkloadVerdict,
    overall: Overall,
    environment: tuple[str, ...] = (),
    method: Literal["baseline", "interleaved"] = "baseline",
    notes: tuple[str, ...] = (),
) -> CompareVerdict:
    return CompareVerdict(
        overall=overall,
        head_run_id="00000000-0000-0000-0000-000000000002",
        workloads=list(workloads),
        environment_differences=list(environment),
        method=method,
        notes=list(notes),
    )


def tables(markdown: str) -> dict[str, list[list[str]]]:
    """Each table's body rows, split on unescaped pipes, keyed by its header line."""
    found: dict[str, list[list[str]]] = {}
    lines = markdown.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            body = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                body.append([cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]])
            found[line] = body
    return found


def details(markdown: str) -> dict[str, str]:
    """Collapsed blocks: summary text → content."""
    pattern = r"<details><summary>(.*?)</summary>(.*?)</details>"
    return dict(re.findall(pattern, markdown, flags=re.DOTALL))


def first_screen(markdown: str) -> str:
    return markdown.split("<details>")[0]


def pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}"


def twelve_metrics() -> CompareVerdict:
    """Two workloads × 6 metrics: 2 regressions, 1 inconclusive, 1 improvement, 8 unchanged."""
    gpt = workload(
        "gpt",
        metric("step_time_s", ratio=1.081, ci=(1.060, 1.103), verdict="regression"),
        metric("samples_per_s", ratio=1.12, ci=(1.09, 1.15), verdict="regression"),
        metric("tokens_per_s"),
        metric("tflops"),
        metric("mfu", ratio=1.03, ci=(0.97, 1.09), verdict="inconclusive", reasons=("r1", "r2")),
        metric("peak_memory_bytes", baseline=3 * 2**30),
        notes=("the workload definition differs from the baseline's",),
    )
    mlp = workload(
        "mlp",
        metric("step_time_s", ratio=0.8, ci=(0.75, 0.85), verdict="improvement"),
        *(metric(m) for m in ("samples_per_s", "tokens_per_s", "tflops", "mfu")),
        metric("peak_memory_bytes"),
    )
    return verdict_of(
        gpt,
        mlp,
        workload("bert-new", status="no_baseline"),
        overall="regression",
        environment=("torch: 2.11.0 → 2.13.0",),
    )


# --- escaping ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
        ("[click](http://evil)", r"\[click\](http://evil)"),
        ("![x](http://evil/img)", r"!\[x\](http://evil/img)"),
        ("cc @org/team and @alice", "cc @\u200dorg/team and @\u200dalice"),
        ("fixes #123", "fixes #\u200d123"),
        ("run `rm -rf /`", r"run \`rm -rf /\`"),
        ("line1\nline2\r\n\t  line3", "line1 line2 line3"),
        ("**perfgate: pass** _x_ ~~y~~", r"\*\*perfgate: pass\*\* \_x\_ \~\~y\~\~"),
        ("# heading", r"\# heading"),
        ("- nested", r"\- nested"),
        ("12. ordered", r"12\. ordered"),
        ("a &amp; b", "a &amp;amp; b"),
        ("back\\slash", "back\\\\slash"),
        ("\x1b[31mred\x00\u202eevil", r"\[31mredevil"),
        ("a|b", "a|b"),
    ],
)
def test_escape_text_neutralises_hostile_strings(text: str, expected: str) -> None:
    assert escape_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a|b", r"a\|b"),
        ("x | y\n| forged | row |", r"x \| y \| forged \| row \|"),
        ("<b>|</b>", r"&lt;b&gt;\|&lt;/b&gt;"),
    ],
)
def test_escape_cell_also_escapes_pipes(text: str, expected: str) -> None:
    assert escape_cell(text) == expected


def test_clipping_happens_before_escaping() -> None:
    """A clipped cell never ends in half an entity or a dangling backslash."""
    assert escape_cell("w" * 500) == "w" * (CELL_LIMIT - 1) + "…"
    assert escape_cell("<" * 500) == "&lt;" * (CELL_LIMIT - 1) + "…"
    assert escape_text("|" * 10, limit=4) == "|||…"
    assert escape_cell("|" * 10, limit=4) == r"\|\|\|…"


def assert_inert(markdown: str, columns: dict[str, int]) -> None:
    """No HTML but our own details/summary, no forged heading, mention, link or table cell.

    The only links are ours: the report pointer and advice titles, which open a table cell
    (an escaped cell never starts with an unescaped ``[``)."""
    assert "<" not in re.sub(r"</?(details|summary)>", "", markdown)
    assert re.search(r"@[A-Za-z0-9]", markdown) is None
    ours = markdown.replace("[Full report](", "").replace("| [", "| ")
    assert re.search(r"(?<!\\)\[", ours) is None
    headings = [line for line in markdown.splitlines() if line.startswith("#")]
    assert headings == [markdown.splitlines()[0]]
    for header, rows in tables(markdown).items():
        for row in rows:
            assert len(row) == columns[header], (header, row)


def test_hostile_workload_names_and_notes_cannot_inject_anything() -> None:
    verdict = verdict_of(
        workload(
            HOSTILE,
            metric("step_time_s", ratio=1.2, ci=(1.1, 1.3), verdict="regression"),
            metric("mfu", verdict="inconclusive", reasons=(HOSTILE,)),
            notes=(HOSTILE,),
        ),
        workload(HOSTILE + "2", status="no_baseline"),
        overall="regression",
        environment=(HOSTILE,),
        notes=(HOSTILE,),
    )
    markdown = verdict_markdown(verdict, report_link="https://ci.example/run/1")
    assert_inert(markdown, {CHANGED_HEADER: 8, ALL_HEADER: 11})
    assert "alert(1)" in markdown  # the text is shown, only made inert
    changed = tables(markdown)[CHANGED_HEADER]
    assert [row[1] for row in changed] == [r"step\_time\_s", "mfu"]
    assert changed[0][0] == escape_cell(HOSTILE)


@settings(max_examples=60, deadline=None)
@given(name=st.text(max_size=40), note=st.text(max_size=80))
def test_any_text_stays_inert(name: str, note: str) -> None:
    verdict = verdict_of(
        workload(
            name,
            metric("step_time_s", ratio=1.2, ci=(1.1, 1.3), verdict="regression"),
            metric("mfu", verdict="inconclusive", reasons=(note,)),
            notes=(note,),
        ),
        overall="regression",
        environment=(note,),
        notes=(note,),
    )
    assert_inert(verdict_markdown(verdict), {CHANGED_HEADER: 8, ALL_HEADER: 11})


# --- content ------------------------------------------------------------------------------------


def test_numbers_match_a_real_comparison() -> None:
    base = [0.099, 0.1, 0.1, 0.1, 0.1, 0.101]
    head = [v * 1.08 for v in base]
    step = compare_metric("step_time_s", base, head, direction="lower", threshold=0.05, seed=1)
    rates = [64 / v for v in base], [64 / v for v in head]
    rate = compare_metric("samples_per_s", *rates, direction="higher", threshold=0.05, seed=1)
    step, rate = correct([step, rate])
    assert step.verdict == rate.verdict == "regression"
    verdict = verdict_of(workload("gpt", step, rate), overall="regression")
    markdown = verdict_markdown(verdict)
    rows = {row[1]: row for row in tables(markdown)[CHANGED_HEADER]}
    assert set(rows) == {r"step\_time\_s", r"samples\_per\_s"}
    row = rows[r"step\_time\_s"]
    assert row[2:4] == ["100.00 ms", "108.00 ms"]
    assert row[4] == f"+8.0 % ({pct(step.ci_low)} … {pct(step.ci_high)})"
    assert row[5] == "±5 %"
    assert row[6] == f"{step.min_detectable * 100:.1f} %"
    assert row[7] == "**regression**"
    assert rows[r"samples\_per\_s"][2:4] == ["640", "592.6"]
    worst = max((step, rate), key=lambda c: c.ratio)
    assert (
        f"2 of 2 metrics regressed beyond their threshold: gpt {escape_text(worst.metric)} "
        f"{pct(worst.ratio)} % (90 % CI {pct(worst.ci_low)} … {pct(worst.ci_high)} %)"
    ) in markdown
    full = tables(markdown)[ALL_HEADER]
    assert [(r[7], r[8]) for r in full] == [
        (f"{c.p_value:.3g}", f"{c.p_adjusted:.3g}") for c in (step, rate)
    ]


def test_changed_table_first_everything_else_collapsed() -> None:
    markdown = verdict_markdown(twelve_metrics())
    screen = first_screen(markdown)
    assert screen.startswith("## perfgate: regression\n")
    assert (
        "2 of 12 metrics regressed beyond their threshold: gpt samples\\_per\\_s +12.0 % "
        "(90 % CI +9.0 … +15.0 %) (the worst)."
    ) in screen
    assert "- exit code **1** (regression; `--inconclusive exit4`)" in screen
    changed = tables(screen)[CHANGED_HEADER]
    assert [(r[0], r[1], r[7]) for r in changed] == [
        ("gpt", r"samples\_per\_s", "**regression**"),
        ("gpt", r"step\_time\_s", "**regression**"),
        ("gpt", "mfu", "inconclusive"),
        ("mlp", r"step\_time\_s", "improvement"),
    ]
    assert changed[1][4] == "+8.1 % (+6.0 … +10.3)"
    assert changed[2][6] == "7.2 %" and changed[3][4] == "-20.0 % (-25.0 … -15.0)"
    assert "no change" not in screen and "bert-new" not in screen and "torch" not in screen

    blocks = details(markdown)
    assert list(blocks) == [
        "Environment differences (1)",
        "Workloads without a baseline (1)",
        "All 12 metrics, with p-values and reasons",
        "Workload notes (1)",
    ]
    assert "- torch: 2.11.0 → 2.13.0" in blocks["Environment differences (1)"]
    assert "- bert-new" in blocks["Workloads without a baseline (1)"]
    full = tables(blocks["All 12 metrics, with p-values and reasons"])[ALL_HEADER]
    assert len(full) == 12
    assert sum(r[9] == "no change" for r in full) == 8
    assert full[4][10] == "r1; r2"
    assert full[5][2] == "3.0 GiB"
    assert (
        "- gpt (compared): the workload definition differs from the baseline's"
        in blocks["Workload notes (1)"]
    )
    assert "omitted" not in markdown


def test_loss_mismatch_is_a_changed_row_and_the_reason() -> None:
    note = "final loss 2.5 differs from the baseline's 2"
    verdict = verdict_of(
        workload("mlp", metric("step_time_s"), status="loss_mismatch", notes=(note,)),
        overall="regression",
    )
    markdown = verdict_markdown(verdict)
    assert (
        "The final loss differs from the baseline's by more than 1 % in 1 workload (mlp)"
        in markdown
    )
    assert tables(markdown)[CHANGED_HEADER] == [
        ["mlp", "final loss", "—", "—", escape_cell(note), "±1 %", "—", "**loss mismatch**"]
    ]


@pytest.mark.parametrize(("policy", "code"), [("exit4", 4), ("pass", 0), ("fail", 1)])
def test_inconclusive_headline_and_exit_code_follow_the_policy(
    policy: InconclusivePolicy, code: int
) -> None:
    reason = "interval 0.970–1.090 straddles the ±5% threshold"
    verdict = verdict_of(
        workload(
            "mlp",
            metric("step_time_s"),
            metric("mfu", ratio=1.03, ci=(0.97, 1.09), verdict="inconclusive", reasons=(reason,)),
        ),
        overall="inconclusive",
    )
    assert verdict.exit_code(policy) == code
    markdown = verdict_markdown(verdict, inconclusive_policy=policy)
    assert markdown.startswith("## perfgate: inconclusive\n")
    assert f"1 of 2 metrics are inconclusive (mlp mfu); first reason: {reason}." in markdown
    assert f"- exit code **{code}** (" in markdown and f"`--inconclusive {policy}`" in markdown


def test_inconclusive_sentence_lists_three_names_then_counts() -> None:
    unsure = [metric(m, verdict="inconclusive", reasons=(f"why {m}",)) for m in "abcde"]
    markdown = verdict_markdown(verdict_of(workload("w", *unsure), overall="inconclusive"))
    assert "5 of 5 metrics are inconclusive (w a, w b, w c and 2 more); first reason: why a." in (
        markdown
    )


def test_pass_says_nothing_changed_and_has_no_changed_table() -> None:
    verdict = verdict_of(workload("mlp", metric("step_time_s"), metric("mfu")), overall="pass")
    markdown = verdict_markdown(verdict, inconclusive_policy="fail")
    assert "No metric changed beyond its threshold (2 metrics compared)." in markdown
    assert "- exit code **0** (ok; `--inconclusive fail`)" in markdown
    assert CHANGED_HEADER not in markdown
    assert len(tables(markdown)[ALL_HEADER]) == 2


def test_pass_with_improvements_names_the_best() -> None:
    verdict = verdict_of(
        workload(
            "mlp",
            metric("step_time_s", ratio=0.9, ci=(0.88, 0.92), verdict="improvement"),
            metric("mfu", ratio=0.7, ci=(0.6, 0.8), verdict="improvement"),
        ),
        overall="pass",
    )
    assert (
        "No metric regressed; 2 of 2 metrics improved beyond their threshold: "
        "mlp mfu -30.0 % (90 % CI -40.0 … -20.0 %) (the best)."
    ) in verdict_markdown(verdict)


def test_method_notes_and_never_detectable() -> None:
    verdict = verdict_of(
        workload("mlp", metric("step_time_s", verdict="inconclusive", min_detectable=math.inf)),
        overall="inconclusive",
        method="interleaved",
        notes=("the alert was confirmed by an interleaved re-run", "calibrate with more repeats"),
    )
    markdown = verdict_markdown(verdict)
    screen = markdown.split("| workload")[0]
    assert "- method: sequential interleaved A/B (base and head measured alternately" in screen
    assert "- the alert was confirmed by an interleaved re-run\n" in screen
    assert "- calibrate with more repeats\n" in screen
    assert tables(markdown)[CHANGED_HEADER][0][6] == "never"


def test_report_link_only_for_http_urls() -> None:
    verdict = verdict_of(workload("mlp", metric("step_time_s")), overall="pass")
    plain = verdict_markdown(verdict, report_link="https://ci.example/runs/1?x=2#report")
    assert plain.endswith("\n[Full report](https://ci.example/runs/1?x=2#report)\n")
    tricky = verdict_markdown(verdict, report_link="https://ci.example/a b)[x](http://evil")
    assert "[Full report](https://ci.example/a%20b%29%5Bx%5D%28http://evil)" in tricky
    script = verdict_markdown(verdict, report_link="javascript:alert(1)")
    assert "](javascript" not in script and "Full report: javascript:alert(1)" in script
    assert "Full report" not in verdict_markdown(verdict)


# --- size bound ---------------------------------------------------------------------------------


def huge_verdict(workloads: int, note_chars: int = 2000) -> CompareVerdict:
    """``workloads`` × 6 metrics with long hostile notes; the regressions are in the last one."""
    note = ("<b>|</b> @team [x](y) " * note_chars)[:note_chars]
    names = ("step_time_s", "samples_per_s", "tokens_per_s", "tflops", "mfu", "peak_memory_bytes")
    items = [
        workload(f"workload-{i:05d}", *(metric(m) for m in names), notes=(note, note))
        for i in range(workloads - 1)
    ]
    slow = [
        metric(m, ratio=1.1 + i / 100, ci=(1.08, 1.2), verdict="regression")
        for i, m in enumerate(names)
    ]
    items.append(workload("the-slow-one", *slow))
    return verdict_of(
        *items,
        overall="regression",
        environment=tuple(f"{note} {i}" for i in range(50)),
        notes=("confirmed",),
    )


def rendered_rows(markdown: str) -> int:
    """Table body rows plus list items, less the two header bullets (exit code, method)."""
    body = sum(len(rows) for rows in tables(markdown).values())
    items = sum(line.startswith("- ") for line in markdown.splitlines())
    return body + items - 2


@pytest.mark.slow
def test_huge_verdict_stays_under_the_comment_limit() -> None:
    verdict = huge_verdict(2000)
    markdown = verdict_markdown(verdict)
    assert len(markdown) <= 65_000
    changed = tables(first_screen(markdown))[CHANGED_HEADER]
    assert [r[0] for r in changed] == ["the-slow-one"] * 6
    assert [r[1] for r in changed][:2] == [r"peak\_memory\_bytes", "mfu"]  # worst first
    total = 1 + 6 + 50 + 2000 * 6 + 2 * 1999
    omitted = int(
        re.findall(r"… (\d+) more rows omitted; see the JSON verdict / report", markdown)[0]
    )
    assert omitted == total - rendered_rows(markdown) and omitted > 10_000
    assert markdown.count("<details>") == markdown.count("</details>")


@pytest.mark.parametrize("max_chars", [1, 2, 40, 300, 700, 1_000, 1_500, 4_000, 20_000])
def test_bound_holds_for_tiny_budgets(max_chars: int) -> None:
    verdict = huge_verdict(30)
    full = verdict_markdown(verdict, report_link="https://x.test/r", max_chars=10**9)
    markdown = verdict_markdown(verdict, report_link="https://x.test/r", max_chars=max_chars)
    assert len(markdown) <= max_chars < len(full)
    if markdown.endswith("…"):  # not even the header fitted: it is clipped
        assert full.startswith(markdown[:-1])
    else:
        assert markdown.startswith(full[: full.index("\n- method")])
    assert markdown.count("<details>") == markdown.count("</details>")


@settings(max_examples=40, deadline=None)
@given(max_chars=st.integers(min_value=1, max_value=30_000))
def test_bound_holds_for_any_budget(max_chars: int) -> None:
    markdown = verdict_markdown(huge_verdict(25, note_chars=300), max_chars=max_chars)
    assert len(markdown) <= max_chars
    if "rows omitted" in markdown:
        omitted = int(re.findall(r"… (\d+) more rows omitted", markdown)[0])
        assert omitted == 1 + 6 + 50 + 25 * 6 + 2 * 24 - rendered_rows(markdown)


def test_changed_rows_survive_before_details() -> None:
    verdict = huge_verdict(40)
    full = verdict_markdown(verdict, max_chars=10**9)
    changed_end = full.index("<details>")
    markdown = verdict_markdown(verdict, max_chars=changed_end + 200)
    assert markdown.startswith(full[:changed_end])
    assert len(tables(markdown)[CHANGED_HEADER]) == 6
    assert "more rows omitted" in markdown

    table_start = full.index(CHANGED_HEADER)
    cut = verdict_markdown(verdict, max_chars=table_start + 600)
    kept = tables(cut)[CHANGED_HEADER]
    assert 0 < len(kept) < 6
    assert kept == tables(full)[CHANGED_HEADER][: len(kept)]  # the worst rows are kept
    assert "<details>" not in cut
    assert f"… {6 - len(kept) + 50 + 40 * 6 + 2 * 39} more rows omitted" in cut


def test_rows_after_the_first_dropped_one_are_dropped_too() -> None:
    """A short later block must not jump a long changed row: the output stays a prefix."""
    long_note = "final loss " + "9" * 440
    verdict = verdict_of(
        workload("w", metric("step_time_s"), status="loss_mismatch", notes=(long_note,)),
        workload("x", status="no_baseline"),
        overall="regression",
    )
    full = verdict_markdown(verdict, max_chars=10**9)
    markdown = verdict_markdown(verdict, max_chars=full.index(CHANGED_HEADER) + 250)
    assert CHANGED_HEADER not in markdown and "<details>" not in markdown
    assert "… 4 more rows omitted" in markdown  # changed row, metric row, note, no-baseline


def test_max_chars_must_be_positive() -> None:
    with pytest.raises(UsageError, match="max_chars"):
        verdict_markdown(twelve_metrics(), max_chars=0)


# --- advice -------------------------------------------------------------------------------------


def advice_item(
    rule_id: str, saving: Any, status: str = "unverified", **extra: Any
) -> dict[str, Any]:
    """One entry of a workload's ``advice`` list, as ``perfgate advise --json`` writes it."""
    tier = "low"
    if isinstance(saving, float) and saving >= 0.03:
        tier = "high" if saving >= 0.05 else "medium"
    return {
        "rule_id": rule_id,
        "title": extra.pop("title", f"do {rule_id}"),
        "category": "x",
        "confidence": "high",
        "saving": saving,
        "tier": tier,
        "status": status,
        "evidence": {},
        "fix": "",
        "snippet": "",
        "references": [],
        "verify_knobs": {},
        **extra,
    }


def verification(rule_id: str, outcome: str, speedup: Any = None, ci: Any = None) -> dict[str, Any]:
    return {
        "rule_id": rule_id,
        "workload": "w",
        "knobs": {},
        "outcome": outcome,
        "reason": "measured",
        "speedup": speedup,
        "speedup_ci": ci,
    }


def advice_doc(*workloads: Any) -> dict[str, Any]:
    return {
        "schema": "perfgate.advice",
        "schema_version": 1,
        "device": "cuda",
        "workloads": list(workloads),
    }


def advised(
    name: str, *advice: dict[str, Any], checks: tuple[Any, ...] = (), status: str = "ok"
) -> dict[str, Any]:
    return {
        "name": name,
        "preset": "full",
        "knobs": {},
        "status": status,
        "advice": list(advice),
        "verifications": list(checks),
    }


def read(document: dict[str, Any]) -> AdviceReport:
    """The document as the comment's reader reads it (``ADVICE``: checked and typed)."""
    return ADVICE.read(json.loads(json.dumps(document)), "advice.json")


def ranking_doc() -> dict[str, Any]:
    return advice_doc(
        advised(
            "gpt",
            advice_item("refuted-big", 0.9, status="refuted"),
            advice_item("zeta", 0.10),
            advice_item("alpha", 0.10),
            advice_item("small", 0.01),
            checks=(
                verification("refuted-big", "refuted", 0.99, [0.97, 1.02]),
                verification("zeta", "verified", 1.1312, [1.0449, 1.1777]),
                verification("alpha", "inconclusive"),
            ),
        ),
        advised("bert", advice_item("zeta", 0.10), advice_item("mid", 0.2)),
        advised("broken", advice_item("huge", 5.0), status="failed"),
    )


def test_top_advice_ranks_measured_first_refuted_last_ties_by_workload_then_rule() -> None:
    lines = top_advice(read(ranking_doc()), limit=10)
    assert [(line.workload, line.anchor) for line in lines] == [
        ("gpt", "advice-gpt-zeta"),  # verified: a measurement outranks every estimate
        ("bert", "advice-bert-mid"),  # then what nothing measured, by estimated saving
        ("bert", "advice-bert-zeta"),
        ("gpt", "advice-gpt-small"),
        ("gpt", "advice-gpt-alpha"),  # inconclusive: measured, and no gain shown
        ("gpt", "advice-gpt-refuted-big"),  # refuted: last despite the largest saving
    ]  # the failed workload's advice is not advice
    by_anchor = {line.anchor: line for line in lines}
    zeta = by_anchor["advice-gpt-zeta"]
    assert (zeta.status, zeta.measured) == ("verified", "1.13× (1.04–1.18)")
    assert (zeta.title, zeta.tier, zeta.saving) == ("do zeta", "high", 0.10)
    assert by_anchor["advice-gpt-alpha"].status == "inconclusive"  # measured, not settled
    assert by_anchor["advice-gpt-alpha"].measured is None  # no speed-up: nothing to quote
    assert by_anchor["advice-gpt-refuted-big"].measured == "0.99× (0.97–1.02)"
    assert by_anchor["advice-bert-mid"] == AdviceLine(
        workload="bert",
        title="do mid",
        tier="high",
        saving=0.2,
        status="unverified",
        anchor="advice-bert-mid",
    )
    assert top_advice(read(ranking_doc())) == lines[:3]
    assert top_advice(read(ranking_doc()), limit=0) == []


def test_top_advice_does_not_depend_on_document_order() -> None:
    document = ranking_doc()
    shuffled = advice_doc(*reversed(document["workloads"]))
    for workload in shuffled["workloads"]:
        workload["advice"].reverse()
        workload["verifications"].reverse()
    assert top_advice(read(shuffled), limit=10) == top_advice(read(document), limit=10)


def test_top_advice_of_a_real_advice_document() -> None:
    document = json.loads((DATA / "h200" / "advice-inefficient.json").read_text())
    lines = top_advice(read(document))
    assert [line.anchor for line in lines] == [
        "advice-gpt-optimizer-not-fused",
        "advice-gpt-bf16-autocast-missing",  # tied with tf32-disabled: rule id decides
        "advice-gpt-tf32-disabled",
    ]
    assert lines[0].title == "The optimizer step is not fused"
    markdown = verdict_markdown(twelve_metrics(), advice=lines)
    rows = tables(markdown)[ADVICE_HEADER]
    assert rows[0] == ["gpt", "The optimizer step is not fused", "high", "42.3 %", "unverified"]


@pytest.mark.parametrize(
    ("document", "needle"),
    [
        ({"schema": "perfgate.verdict", "workloads": []}, "schema: 'perfgate.verdict'"),
        ([], "schema: 'list'"),
        (advice_doc() | {"workloads": {}}, "at workloads: {} is not of type 'array'"),
        (advice_doc("gpt"), "at workloads/0: 'gpt' is not of type 'object'"),
        (
            advice_doc(advised("gpt", advice_item("a", "big"))),
            "at workloads/0/advice/0/saving: 'big' is not of type 'number'",
        ),
        (
            advice_doc(advised("gpt", advice_item("a", math.nan))),
            "workloads/0/advice/0/saving is nan, not a finite number",
        ),
        (
            advice_doc(advised("gpt", advice_item("a", 0.1, title=None))),
            "at workloads/0/advice/0/title: None is not of type 'string'",
        ),
        (
            advice_doc(advised("gpt") | {"advice": "x"}),
            "at workloads/0/advice: 'x' is not of type 'array'",
        ),
        (
            advice_doc(advised("gpt", checks=(3,))),
            "at workloads/0/verifications/0: 3 is not of type 'object'",
        ),
        (advice_doc(advised("gpt") | {"name": 7}), "at workloads/0/name: 7 is not of type"),
    ],
)
def test_a_malformed_advice_document_is_a_usage_error(
    document: Any, needle: str, tmp_path: Path
) -> None:
    """Every way an advice file can be wrong is one line naming the file, the place and the fix
    (the comment job reads it through ``ADVICE``, never by hand)."""
    path = tmp_path / "advice.json"
    path.write_text(json.dumps(document, allow_nan=True))
    with pytest.raises(UsageError, match=re.escape(needle)) as caught:
        comment.advice_lines(path)
    assert str(path) in caught.value.problem and "\n" not in caught.value.problem
    assert caught.value.fix == ADVICE.fix
    assert caught.value.fix.startswith("pass a file written by perfgate advise --json")


def test_advice_of_a_newer_major_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "advice.json"
    path.write_text(json.dumps(advice_doc() | {"schema_version": 2}))
    with pytest.raises(UsageError, match="written by a newer perfgate") as caught:
        comment.advice_lines(path)
    assert caught.value.fix == "upgrade perfgate to read it"


def test_advice_anchor_is_a_safe_fragment_id() -> None:
    assert advice_anchor("gpt", "manual-attention") == "advice-gpt-manual-attention"
    assert advice_anchor("my model/v2", "a.b") == "advice-my_model_v2-a_b"
    assert advice_anchor('"><script>', "x y") == "advice-_script_-x_y"
    from perfgate.report.anchors import anchor  # the report's own rule: links must land

    for workload, rule in [("gpt", "manual-attention"), ("my model/v2", "a.b"), ("é", "#1")]:
        assert advice_anchor(workload, rule) == anchor("advice", workload, rule)


def advice_line(
    workload: str = "gpt", title: str = "Fuse the optimizer", **extra: Any
) -> AdviceLine:
    fields: dict[str, Any] = {
        "tier": "high",
        "saving": 0.1219,
        "status": "verified",
        "measured": "1.13× (1.04–1.18)",
        "anchor": advice_anchor(workload, "manual-attention"),
        **extra,
    }
    return AdviceLine(workload=workload, title=title, **fields)


def test_advice_section_follows_the_changed_metrics() -> None:
    verdict = twelve_metrics()
    lines = [
        advice_line(),
        advice_line(
            "mlp",
            "Use a bigger batch",
            status="unverified",
            measured=None,
            anchor=None,
            tier="medium",
            saving=0.031,
        ),
    ]
    markdown = verdict_markdown(verdict, advice=lines)
    screen = first_screen(markdown)
    assert (
        screen.index(CHANGED_HEADER) < screen.index("**Top advice**") < screen.index(ADVICE_HEADER)
    )
    assert tables(markdown)[ADVICE_HEADER] == [
        ["gpt", "Fuse the optimizer", "high", "12.2 %", "verified: 1.13× (1.04–1.18)"],
        ["mlp", "Use a bigger batch", "medium", "3.1 %", "unverified"],
    ]
    without = verdict_markdown(verdict)
    assert "Top advice" not in without and ADVICE_HEADER not in without
    assert markdown.replace(screen, "") == without.replace(first_screen(without), "")


@pytest.mark.parametrize(
    ("link", "target"),
    [
        (
            "https://ci.example/runs/1/report.html",
            "https://ci.example/runs/1/report.html#advice-gpt-manual-attention",
        ),
        ("http://ci.example/r?x=1#verdict", "http://ci.example/r?x=1#advice-gpt-manual-attention"),
        (
            "https://ci.example/a b)[x](http://evil",
            "https://ci.example/a%20b%29%5Bx%5D%28http://evil#advice-gpt-manual-attention",
        ),
    ],
)
def test_advice_titles_link_into_an_online_report(link: str, target: str) -> None:
    markdown = verdict_markdown(twelve_metrics(), advice=[advice_line()], report_link=link)
    row = tables(markdown)[ADVICE_HEADER][0]
    assert row[1] == f"[Fuse the optimizer]({target})"


@pytest.mark.parametrize(
    "link",
    [
        None,
        "",
        "report/index.html",
        "javascript:alert(1)",
        "file:///tmp/r.html",
        "https:///no-host",
    ],
)
def test_advice_titles_are_plain_text_without_an_online_report(link: str | None) -> None:
    markdown = verdict_markdown(twelve_metrics(), advice=[advice_line()], report_link=link)
    assert tables(markdown)[ADVICE_HEADER][0][1] == "Fuse the optimizer"
    assert "](" not in markdown.replace("[Full report](", "")


def test_a_forged_anchor_cannot_leave_the_link() -> None:
    line = advice_line(anchor="x)](javascript:alert(1)) <b>")
    markdown = verdict_markdown(twelve_metrics(), advice=[line], report_link="https://ci.example/r")
    assert (
        tables(markdown)[ADVICE_HEADER][0][1]
        == "[Fuse the optimizer](https://ci.example/r#x_javascript_alert_1_b_)"
    )


@pytest.mark.parametrize("hostile", HOSTILE_ADVICE)
def test_hostile_advice_text_is_escaped(hostile: str) -> None:
    lines = [
        advice_line(hostile, hostile, tier=hostile, status=hostile, measured=hostile),
        advice_line(f"{hostile} 2", f"x {hostile}"),
    ]
    for link in ("https://ci.example/run/1", "report.html"):
        markdown = verdict_markdown(twelve_metrics(), advice=lines, report_link=link)
        assert_inert(markdown, {CHANGED_HEADER: 8, ALL_HEADER: 11, ADVICE_HEADER: 5})
        rows = tables(markdown)[ADVICE_HEADER]
        assert rows[0][0] == rows[0][2] == escape_cell(hostile)
        assert rows[0][4] == f"{escape_cell(hostile)}: {escape_cell(hostile)}"
        title = rows[0][1]
        if link.startswith("https"):
            assert title == f"[{escape_cell(hostile)}](https://ci.example/run/1#{lines[0].anchor})"
        else:
            assert title == escape_cell(hostile)
        targets = re.findall(r"(?<!\\)\]\(([^)]*)\)", markdown)
        assert all(t.startswith("https://ci.example/run/1") for t in targets), targets


def test_the_hostile_advice_strings_render_as_expected() -> None:
    lines = [advice_line(name, name) for name in HOSTILE_ADVICE]
    markdown = verdict_markdown(twelve_metrics(), advice=lines)
    assert [row[0] for row in tables(markdown)[ADVICE_HEADER]] == [
        "&lt;script&gt;alert(1)&lt;/script&gt;",
        r"\[x\](javascript:alert(1))",
        "@\u200deveryone",
        r"\| forged \| row \|",
    ]
    assert "<script>" not in markdown and not re.search(r"(?<!\\)\]\(javascript", markdown)


def many_advice(count: int, title_chars: int = 200) -> list[AdviceLine]:
    title = ("<b>|</b> @team [x](y) " * title_chars)[:title_chars]
    return [
        advice_line(f"workload-{i:05d}", f"{title} {i}", saving=1 / (i + 2), anchor=f"advice-{i}")
        for i in range(count)
    ]


@pytest.mark.parametrize("max_chars", [1, 2, 40, 300, 700, 1_000, 1_500, 4_000, 20_000, 65_000])
def test_bound_holds_with_many_workloads_and_much_advice(max_chars: int) -> None:
    verdict, advice = huge_verdict(40), many_advice(300)
    link = "https://x.test/r"
    full = verdict_markdown(verdict, advice=advice, report_link=link, max_chars=10**9)
    markdown = verdict_markdown(verdict, advice=advice, report_link=link, max_chars=max_chars)
    assert len(markdown) <= max_chars < len(full)
    if markdown.endswith("…"):
        assert full.startswith(markdown[:-1])
    else:
        assert markdown.startswith(full[: full.index("\n- method")])
    assert markdown.count("<details>") == markdown.count("</details>")
    if "rows omitted" in markdown:
        omitted = int(re.findall(r"… (\d+) more rows omitted", markdown)[0])
        total = 1 + 6 + 300 + 50 + 40 * 6 + 2 * 39
        assert omitted == total - rendered_rows(markdown)


@settings(max_examples=40, deadline=None)
@given(max_chars=st.integers(min_value=1, max_value=40_000), advice=st.integers(0, 60))
def test_bound_holds_with_advice_for_any_budget(max_chars: int, advice: int) -> None:
    markdown = verdict_markdown(
        huge_verdict(25, note_chars=300),
        advice=many_advice(advice, title_chars=150),
        report_link="https://x.test/r",
        max_chars=max_chars,
    )
    assert len(markdown) <= max_chars
    if "rows omitted" in markdown:
        omitted = int(re.findall(r"… (\d+) more rows omitted", markdown)[0])
        assert omitted == 1 + 6 + advice + 50 + 25 * 6 + 2 * 24 - rendered_rows(markdown)


@pytest.mark.slow
def test_huge_verdict_with_much_advice_stays_under_the_comment_limit() -> None:
    markdown = verdict_markdown(huge_verdict(2000), advice=many_advice(2000))
    assert len(markdown) <= 65_000
    assert len(tables(markdown)[CHANGED_HEADER]) == 6
    assert len(tables(markdown)[ADVICE_HEADER]) > 10


def test_advice_survives_before_details_and_after_changed_metrics() -> None:
    verdict, advice = huge_verdict(40), many_advice(3)
    full = verdict_markdown(verdict, advice=advice, max_chars=10**9)
    details_start = full.index("<details>")
    markdown = verdict_markdown(verdict, advice=advice, max_chars=details_start + 200)
    assert markdown.startswith(full[:details_start])
    assert len(tables(markdown)[ADVICE_HEADER]) == 3
    changed_end = full.index("\n**Top advice**")
    cut = verdict_markdown(verdict, advice=advice, max_chars=changed_end + 70)
    assert cut.startswith(full[:changed_end]) and "Top advice" not in cut
    assert "… 371 more rows omitted" in cut  # 3 advice + 50 + 40 × 6 + 2 × 39 details


def test_output_is_byte_identical_across_calls() -> None:
    def render() -> str:
        return verdict_markdown(
            huge_verdict(30),
            advice=top_advice(read(ranking_doc())),
            report_link="https://ci.example/r",
            max_chars=20_000,
        )

    first = render()
    assert render() == first and "Top advice" in first
    unbounded = verdict_markdown(twelve_metrics(), advice=top_advice(read(ranking_doc())))
    assert verdict_markdown(twelve_metrics(), advice=top_advice(read(ranking_doc()))) == unbounded


# --- template -----------------------------------------------------------------------------------


def test_the_layout_is_a_template_in_the_templates_folder() -> None:
    top_level = Path(__file__).parent.parent / "templates" / TEMPLATE
    assert top_level.is_file()
    assert (templating.templates_folder() / TEMPLATE).read_text() == top_level.read_text()
    text = top_level.read_text()
    assert text.startswith("{#") and "never receive an unescaped user string" in text
    layout = text.split("#}", 1)[1]  # no escaping filter: Python escapes, once
    assert not re.search(r"\|\s*(e|escape|safe|forceescape|urlencode)\b", layout)


def test_python_is_the_single_source_of_escaping() -> None:
    """Jinja does not HTML-escape the markdown: each value reads exactly as the escaper made it."""
    template = compare_markdown._template()
    assert template.environment.autoescape is False
    name = "a & b <c> \"q\" 'x'"
    verdict = verdict_of(
        workload(name, metric("step_time_s", ratio=1.2, ci=(1.1, 1.3), verdict="regression")),
        overall="regression",
        notes=(name,),
    )
    markdown = verdict_markdown(verdict, advice=[advice_line(name, name)])
    assert (
        tables(markdown)[CHANGED_HEADER][0][0]
        == escape_cell(name)
        == "a &amp; b &lt;c&gt; \"q\" 'x'"
    )
    assert tables(markdown)[ADVICE_HEADER][0][:2] == [escape_cell(name)] * 2
    assert f"- {escape_text(name)}\n" in markdown
    for doubled in ("&amp;amp;", "&amp;lt;", "&#34;", "&#39;", "&quot;"):
        assert doubled not in markdown
    assert "<details><summary>" in markdown  # the template's own markup is not escaped either


# --- command line ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "does not exist"),
        ("{not json", "is not valid JSON"),
        (b"\xff\xfe\x00", "is not valid JSON"),
        ('{"schema": "perfgate.verdict"}', "not a perfgate.advice document"),
        (
            json.dumps(advice_doc(advised("gpt", advice_item("a", "big")))),
            "at workloads/0/advice/0/saving: 'big' is not of type 'number'",
        ),
    ],
)
def test_compare_rejects_a_bad_advice_file_before_measuring(
    content: str | bytes | None, needle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "advice.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    result = CliRunner().invoke(app, ["compare", "head.json", "--advice", str(path)])
    assert result.exit_code == ExitCode.USAGE, result.output
    message = " ".join(result.output.split())
    assert needle in message and str(path) in message
    assert "pass a file written by perfgate advise --json" in message
    assert "head.json" not in message  # the advice is checked first


def test_compare_writes_the_advice_into_the_markdown_and_job_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "advice.json"
    path.write_text(json.dumps(ranking_doc()))
    summary, out = tmp_path / "summary.md", tmp_path / "comment.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    lines = outputs.advice_lines(outputs.read_advice(path))
    assert lines == top_advice(read(ranking_doc())) and outputs.advice_lines(None) == []
    assert outputs.read_advice(None) is None
    link = "perfgate-report.html (job artifact)"
    written = outputs.write_outputs(twelve_metrics(), "exit4", None, out, lines, link)
    assert written == [f"markdown: {out}", f"job summary: appended to {summary}"]
    comment = out.read_text()
    assert comment == verdict_markdown(twelve_metrics(), advice=lines, report_link=link)
    assert comment.endswith("Full report: perfgate-report.html (job artifact)\n")
    # gpt's verified zeta first (a measurement outranks an estimate), then bert's estimates
    assert [row[0] for row in tables(comment)[ADVICE_HEADER]] == ["gpt", "bert", "bert"]
    assert summary.read_text() == comment + "\n"


# --- files --------------------------------------------------------------------------------------


def test_step_summary_is_appended_only_when_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "summary.md"
    assert append_step_summary("# x", {}) is None
    assert append_step_summary("# x", {"GITHUB_STEP_SUMMARY": ""}) is None
    assert not summary.exists()
    assert append_step_summary("first", {"GITHUB_STEP_SUMMARY": str(summary)}) == summary
    assert summary.read_text() == "first\n"
    summary.write_text("an earlier step wrote this\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert append_step_summary("second") == summary
    assert summary.read_text() == "an earlier step wrote this\nsecond\n"


@pytest.mark.parametrize("target", ["missing-dir/summary.md", "."])
def test_unwritable_step_summary_is_an_infrastructure_error(tmp_path: Path, target: str) -> None:
    with pytest.raises(InfrastructureError, match="GITHUB_STEP_SUMMARY") as caught:
        append_step_summary("x", {"GITHUB_STEP_SUMMARY": str(tmp_path / target)})
    assert caught.value.fix and "\n" not in caught.value.one_line()


def test_write_markdown_replaces_atomically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "out" / "verdict.md"
    write_markdown(path, "old\n")
    write_markdown(path, "new ✓\n")
    assert path.read_text(encoding="utf-8") == "new ✓\n"

    def broken_replace(src: str, dst: Path) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(compare_markdown.os, "replace", broken_replace)
    with pytest.raises(InfrastructureError, match="disk full"):  # a failed write is typed
        write_markdown(path, "half")
    assert path.read_text(encoding="utf-8") == "new ✓\n"
    assert os.listdir(path.parent) == ["verdict.md"]


def test_write_markdown_to_an_unwritable_place_is_a_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UsageError, match="cannot write") as caught:
        write_markdown(blocker / "verdict.md", "x")
    assert caught.value.fix == "choose a writable --markdown path"
