"""The HTML report, rendered from real documents and checked against them.

Inputs are real: result documents measured on an H200 (``tests/data/h200``), turned into
series of runs with a known effect (each repeat's steps scaled by a factor, with a seeded
jitter), judged by the real gate into real verdict documents, stored in a real SQLite database
whose baselines the real refresh sets. The page is parsed with ``html.parser`` and its numbers
are compared with the verdict document's (the ``data-*`` attributes exactly, the visible cells as
formatted). Hostile strings go in wherever users, git or errors put text, and must come out as
text: no element, attribute or link they could forge.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import factories
import pytest
from cli_in_process import invoke
from fixture_types import CliRun

from perfgate.baseline.refresh import refresh_baselines
from perfgate.compare.baseline_source import from_result
from perfgate.compare.gate import compare_runs
from perfgate.diagnose.session import diagnose_runs
from perfgate.documents.advice import ADVICE, AdviceReport, WorkloadAdvice
from perfgate.documents.bisect import BISECT
from perfgate.documents.history import WorkloadHistory
from perfgate.documents.result import RunResult, SourceInfo, load_result, write_result
from perfgate.documents.verdict import VERDICT, verdict_document
from perfgate.errors import UsageError
from perfgate.report.chart_batch import PARALLEL_FROM
from perfgate.report.documents import merged_advice, read_advice
from perfgate.report.formatting import format_seconds, signed_percent
from perfgate.report.html_report import render_html
from perfgate.report.page import anchor, build_page
from perfgate.store.engine import make_engine
from perfgate.store.ingest import store_run
from perfgate.store.report_history import load_histories

H200 = Path(__file__).resolve().parent / "data" / "h200"
HOSTILE = "<script>alert(1)</script>"
GENERATED_AT = "2026-11-30T12:00:00+00:00"


# --- building inputs from the real documents --------------------------------------------------


def h200_run() -> RunResult:
    return load_result(H200 / "gpu-bf16.json")


def variant(
    base: RunResult,
    *,
    run_id: str,
    factor: float = 1.0,
    repeats: int = 8,
    seed: int = 0,
    commit: str = "c0ffee00",
    started_at: str = "2026-11-20T10:00:00+00:00",
    branch: str = "main",
    slower: Sequence[str] | None = None,
) -> RunResult:
    """``base`` with ``repeats`` repeats per workload (copies of its first, each repeat's steps
    scaled by ``factor`` on the workloads in ``slower`` (all when None) and a ±0.4 % jitter)."""
    rng = random.Random(seed)
    workloads = []
    for workload in base.workloads:
        template = workload.repeats[0]
        scale = factor if slower is None or workload.name in slower else 1.0
        new_repeats = []
        for index in range(repeats):
            jitter = 1 + rng.uniform(-0.004, 0.004)
            new_repeats.append(
                dataclasses.replace(
                    template,
                    index=index,
                    step_times_s=[t * scale * jitter for t in template.step_times_s],
                )
            )
        workloads.append(dataclasses.replace(workload, repeats=new_repeats))
    return dataclasses.replace(
        base,
        run_id=run_id,
        started_at=started_at,
        finished_at=started_at,
        source=dataclasses.replace(base.source, commit=commit, branch=branch, dirty=False),
        workloads=workloads,
    )


def verdict_for(head: RunResult, baseline: RunResult) -> dict[str, Any]:
    verdict = compare_runs(head, from_result(baseline, "baseline.json"))
    return verdict_document(verdict, "exit4")


def render(
    results: Sequence[RunResult], verdict: dict[str, Any] | None = None, **kwargs: Any
) -> str:
    """The page of ``results``; a ``verdict`` document is read back through its model first,
    as ``perfgate report --verdict`` reads the file, so the page is checked against the
    document's own numbers."""
    read = VERDICT.read(verdict, "verdict.json") if verdict is not None else None
    return render_html(build_page(list(results), verdict=read, generated_at=GENERATED_AT, **kwargs))


class Page(HTMLParser):
    """Tags, attributes, ids and the text of a rendered page."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def by_id(self, element_id: str) -> dict[str, str | None]:
        (found,) = [attrs for _, attrs in self.tags if attrs.get("id") == element_id]
        return found

    def ids(self) -> set[str]:
        return {str(attrs["id"]) for _, attrs in self.tags if attrs.get("id")}

    def joined(self) -> str:
        return " ".join(" ".join(self.text).split())


def assert_self_contained_and_inert(html: str) -> Page:
    page = Page(html)
    names = {tag for tag, _ in page.tags}
    assert not names & {"script", "iframe", "object", "embed", "link", "img", "base", "form"}
    for tag, attrs in page.tags:
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            if name in ("href", "src", "xlink:href", "action"):
                assert value is not None and value.startswith("#"), (tag, name, value)
    assert "url(http" not in html and "@import" not in html
    # Every in-page link resolves.
    ids = page.ids()
    for _, attrs in page.tags:
        href = attrs.get("href")
        if href and href.startswith("#"):
            assert href[1:] in ids, href
    return page


# --- verdicts ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_pass_shows_every_number_of_the_verdict_document() -> None:
    base = h200_run()
    baseline = variant(base, run_id="base", seed=1)
    head = variant(base, run_id="head", seed=2)
    verdict = verdict_for(head, baseline)
    assert verdict["overall"] == "pass"
    page = assert_self_contained_and_inert(render([head], verdict=verdict))
    assert page.by_id("verdict")["data-verdict"] == "pass"
    assert "within their thresholds" in page.joined()
    compared = 0
    for workload in verdict["workloads"]:
        for c in workload["comparisons"]:
            row = page.by_id(anchor("metric", workload["name"], c["metric"]))
            assert float(row["data-ratio"] or "nan") == c["ratio"]
            assert float(row["data-ci-low"] or "nan") == c["ci_low"]
            assert float(row["data-ci-high"] or "nan") == c["ci_high"]
            assert float(row["data-baseline"] or "nan") == c["baseline_median"]
            assert float(row["data-head"] or "nan") == c["head_median"]
            assert float(row["data-threshold"] or "nan") == c["threshold"]
            compared += 1
    assert compared >= 9  # three workloads × step time, rates, TFLOP/s, MFU, memory
    # The visible cells are the same numbers, formatted.
    first = verdict["workloads"][0]["comparisons"][0]
    assert signed_percent(first["ratio"]) in page.joined()


@pytest.mark.slow
def test_a_regression_names_the_workload_and_its_interval() -> None:
    base = h200_run()
    baseline = variant(base, run_id="base", seed=1)
    head = variant(base, run_id="head", seed=2, factor=1.10, slower=["gpt"])
    verdict = verdict_for(head, baseline)
    assert verdict["overall"] == "regression" and verdict["exit_code"] == 1
    page = assert_self_contained_and_inert(render([head], verdict=verdict))
    assert page.by_id("verdict")["data-verdict"] == "regression"
    banner = page.joined()
    assert "gpt: step time" in banner and "worse" in banner and "exit code 1" in banner
    (gpt,) = [w for w in verdict["workloads"] if w["name"] == "gpt"]
    (step,) = [c for c in gpt["comparisons"] if c["metric"] == "step_time_s"]
    assert step["verdict"] == "regression"
    row = page.by_id(anchor("metric", "gpt", "step_time_s"))
    assert float(row["data-ratio"] or "nan") == step["ratio"] > 1.05
    # The distribution is drawn from the very values that were judged: one point each.
    section = html_between(render([head], verdict=verdict), 'id="workload-gpt"', "</section>")
    titles = section.count("<title>")
    assert titles >= len(step["baseline_values"]) + len(step["head_values"]) == 16


@pytest.mark.slow
def test_too_few_repeats_is_inconclusive_with_the_smallest_detectable_change() -> None:
    base = h200_run()  # two repeats per workload, as measured
    head = dataclasses.replace(base, run_id="head")
    verdict = verdict_for(head, base)
    assert verdict["overall"] == "inconclusive"
    html = render([head], verdict=verdict)
    page = assert_self_contained_and_inert(html)
    assert page.by_id("verdict")["data-verdict"] == "inconclusive"
    assert "could not be decided" in page.joined()
    assert "smallest detectable" in page.joined()


def test_a_failed_workload_shows_its_error_as_text() -> None:
    base = h200_run()
    broken = dataclasses.replace(
        base.workloads[1],
        status="crashed",
        error=f'Traceback …\nRuntimeError: <img src=x onerror="alert(1)"> {HOSTILE}',
        repeats=[],
        summary=None,
    )
    head = dataclasses.replace(base, workloads=[base.workloads[0], broken])
    html = render([head])
    page = assert_self_contained_and_inert(html)
    assert page.by_id("verdict")["data-verdict"] == "failed"
    assert page.by_id(anchor("workload", "resnet"))["data-status"] == "crashed"
    assert HOSTILE in page.joined()  # shown, as text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "1 of 2 workloads failed" in page.joined()


def test_empty_history_and_no_advice_say_so() -> None:
    html = render([h200_run()], histories={})
    page = assert_self_contained_and_inert(html)
    text = page.joined()
    assert page.by_id("verdict")["data-verdict"] == "run"
    assert "No stored history for this workload on this branch." in text
    assert "No advice given" in text
    # The summary row shows the run's own numbers.
    gpt = h200_run().workloads[0].summary
    assert gpt is not None and gpt.median_step_s is not None and gpt.mfu is not None
    row = html_between(html, '<td><a href="#workload-gpt">', "</tr>")
    assert format_seconds(gpt.median_step_s) in row and f"{gpt.mfu:.1%}" in row
    # Telemetry of a real GPU run: utilisation, SM clock, power and memory panels.
    section = html_between(html, 'id="workload-gpt"', "</section>")
    for label in ("GPU utilisation", "SM clock", "power", "GPU memory"):
        assert label in section


# --- hostile strings ---------------------------------------------------------------------------


@pytest.mark.slow
def test_hostile_branch_knobs_notes_and_advice_stay_text() -> None:
    base = h200_run()
    baseline = variant(base, run_id="base", seed=1)
    head = variant(base, run_id="head", seed=2, branch=HOSTILE)
    gpt = dataclasses.replace(head.workloads[0], knobs={**head.workloads[0].knobs, "x": HOSTILE})
    head = dataclasses.replace(head, workloads=[gpt, *head.workloads[1:]])
    verdict = verdict_for(head, baseline)
    verdict["notes"] = ["[click](javascript:alert(1)) " + HOSTILE]
    advice = {
        "schema": "perfgate.advice",
        "schema_version": 1,
        "device": "cuda",
        "workloads": [
            {
                "name": "gpt",
                "preset": HOSTILE,
                "knobs": {HOSTILE: HOSTILE},
                "status": "ok",
                "advice": [
                    {
                        "rule_id": "evil",
                        "title": HOSTILE,
                        "category": HOSTILE,
                        "confidence": "high",
                        "tier": "high",
                        "saving": 0.1,
                        "status": "verified",
                        "evidence": {HOSTILE: 1.0},
                        "fix": '<a href="http://evil.example">x</a>',
                        "snippet": "print('</pre><script>alert(1)</script>')",
                        "references": ["javascript:alert(1)"],
                        "verify_knobs": {},
                        "pattern": HOSTILE,
                        "location": HOSTILE,
                        "estimate_basis": HOSTILE,
                    }
                ],
                "verifications": [],
            }
        ],
    }
    html = render([head], verdict=verdict, advice=ADVICE.read(advice, "advice.json"))
    page = assert_self_contained_and_inert(html)
    text = page.joined()
    assert HOSTILE in text and "[click](javascript:alert(1))" in text
    assert '<a href="http://evil.example">x</a>' in text
    assert "alert(1)</script>" in text  # the snippet, highlighted as code
    assert page.by_id(anchor("advice", "gpt", "evil"))["data-status"] == "verified"


# --- history from a real database ----------------------------------------------------------------


@pytest.fixture
def stored_history(tmp_path: Path) -> tuple[str, RunResult, dict[str, WorkloadHistory]]:
    """Sixteen nightly runs with a 10 % step at the ninth, refreshed into a baseline (eight a
    side: the refresh's Mann–Whitney gate at p ≤ 0.001 needs more than five)."""
    url = f"sqlite:///{tmp_path / 'perfgate.db'}"
    base = h200_run()
    runs = [
        variant(
            base,
            run_id=f"run-{day:02d}",
            seed=day,
            factor=1.0 if day < 8 else 1.10,
            commit=f"{day:02d}" + "ab" * 19,
            started_at=f"2026-11-{day + 1:02d}T02:00:00+00:00",
        )
        for day in range(16)
    ]
    for run in runs:
        store_run(url, run, tmp_path)
    engine = make_engine(url, tmp_path)
    refresh_baselines(engine, "main")
    engine.dispose()
    head = runs[-1]
    return url, head, load_histories(url, tmp_path, [head], max_runs=100)


@pytest.mark.slow
def test_history_marks_the_window_the_change_point_and_each_commit(
    stored_history: tuple[str, RunResult, dict[str, WorkloadHistory]],
) -> None:
    _, head, histories = stored_history
    gpt = histories["gpt"]
    assert [run.run_id for run in gpt.runs] == [f"run-{day:02d}" for day in range(16)]
    (step,) = [run for run in gpt.runs if "step_time_s" in run.change_point_metrics]
    assert step.run_id == "run-08"
    # The baseline is built after the step only.
    assert {run.run_id for run in gpt.runs if run.in_baseline} <= {
        f"run-{day:02d}" for day in range(8, 16)
    }
    assert any(run.in_baseline for run in gpt.runs)
    html = render([head], histories=histories)
    page = assert_self_contained_and_inert(html)
    section = html_between(html, 'id="workload-gpt"', "</section>")
    for day in range(16):
        assert f"{day:02d}abababab" in section  # every point tells its commit
    assert "live baseline window" in page.joined()


@pytest.mark.slow
def test_history_is_capped_to_the_newest_runs(
    stored_history: tuple[str, RunResult, dict[str, WorkloadHistory]], tmp_path: Path
) -> None:
    url, head, _ = stored_history
    capped = load_histories(url, tmp_path, [head], max_runs=5)
    assert [run.run_id for run in capped["gpt"].runs] == [f"run-{d:02d}" for d in range(11, 16)]


# --- documents and the command -------------------------------------------------------------------


def test_documents_of_the_wrong_kind_are_refused_in_one_line(tmp_path: Path) -> None:
    wrong = tmp_path / "advice.json"
    wrong.write_text(json.dumps({"schema": "perfgate.result"}))
    with pytest.raises(UsageError, match=r"is not a perfgate\.advice document") as caught:
        read_advice([wrong])
    assert caught.value.fix == ADVICE.fix
    with pytest.raises(UsageError, match="does not exist"):
        read_advice([tmp_path / "missing.json"])
    assert read_advice([]) is None


def test_advice_of_several_documents_is_merged_the_first_workload_winning() -> None:
    def report(*names: str, preset: str) -> AdviceReport:
        workloads = [WorkloadAdvice(name=n, preset=preset, knobs={}, status="ok") for n in names]
        return AdviceReport(device="cpu", workloads=workloads)

    merged = merged_advice([report("gpt", "mlp", preset="a"), report("mlp", "bert", preset="b")])
    assert merged is not None
    assert [(w.name, w.preset) for w in merged.workloads] == [
        ("gpt", "a"),
        ("mlp", "a"),
        ("bert", "b"),
    ]
    assert merged_advice([]) is None


def test_the_page_shows_the_diagnosis_it_is_given() -> None:
    """The report runs no classifier: the bound shown is the one passed in, and without one
    the page says nothing about it."""
    head = h200_run()
    diagnoses = diagnose_runs([head])
    assert diagnoses  # the H200 run's workloads are diagnosed from their timed runs
    found = next(iter(diagnoses.values()))
    with_bound = Page(render([head], diagnoses=diagnoses)).joined()
    assert f"{found.label} ({found.confidence} confidence): {found.reason}" in with_bound
    assert "bound by" not in Page(render([head])).joined()


@pytest.mark.slow
def test_perfgate_report_writes_the_page_with_the_advice_beside_the_result(
    tmp_path: Path, perfgate_cli: CliRun
) -> None:
    head = variant(h200_run(), run_id="00000000-0000-4000-8000-000000000001", seed=2)
    result_path = tmp_path / "head.json"
    write_result(result_path, head)
    (tmp_path / "head.advice.json").write_text(
        (H200 / "advice-inefficient.json").read_text(encoding="utf-8")
    )
    out = tmp_path / "out" / "report.html"
    completed = perfgate_cli(
        "report", str(result_path), "--no-history", "-o", str(out), cwd=tmp_path
    )
    assert completed.returncode == 0, completed.stderr
    assert f"report: {out}" in completed.stdout.replace("\n", "")
    html = out.read_text(encoding="utf-8")
    page = assert_self_contained_and_inert(html)
    # The H200's advice for gpt, ranked as perfgate advise ranked it.
    assert page.by_id(anchor("advice", "gpt", "optimizer-not-fused"))
    bad = perfgate_cli("report", str(result_path), "--verdict", str(result_path), cwd=tmp_path)
    assert bad.returncode == 2
    assert "is not a perfgate.verdict document" in bad.stderr


def test_shards_of_one_run_make_one_page() -> None:
    base = h200_run()
    first = dataclasses.replace(base, workloads=base.workloads[:1])
    second = dataclasses.replace(base, run_id="shard-2", workloads=base.workloads[1:])
    page = assert_self_contained_and_inert(render([first, second]))
    assert {a["data-workload"] for _, a in page.tags if "data-workload" in a} == {
        w.name for w in base.workloads
    }


def html_between(html: str, start: str, end: str) -> str:
    begin = html.index(start)
    return html[begin : html.index(end, begin)]


MARKDOWN_INJECTION = "Fix [it](javascript:alert(1)) ![x](http://e/p.png) @everyone <b>#1</b> | x |"


def test_source_info_branch_and_commit_subject_reach_the_page_escaped() -> None:
    base = h200_run()
    source = SourceInfo(branch=HOSTILE, commit="abc", subject=MARKDOWN_INJECTION)
    html = render([dataclasses.replace(base, source=source)])
    assert_self_contained_and_inert(html)
    text = Page(html).joined()
    assert f"branch: {HOSTILE}" in text and f"subject: {MARKDOWN_INJECTION}" in text


def test_a_hostile_commit_subject_is_inert_in_the_pr_comment() -> None:
    from perfgate.report.compare_markdown import verdict_markdown

    base = h200_run()
    baseline = variant(base, run_id="base", seed=1)
    head = variant(base, run_id="head", seed=2)
    head = dataclasses.replace(
        head, source=dataclasses.replace(head.source, subject=MARKDOWN_INJECTION)
    )
    verdict = compare_runs(head, from_result(baseline, "baseline.json"))
    assert verdict.head_subject == MARKDOWN_INJECTION
    comment = verdict_markdown(verdict)
    (line,) = [line for line in comment.splitlines() if "head run head at c0ffee00" in line]
    # No link or image (brackets escaped), no HTML, no mention, no issue reference.
    assert "\\[it\\](javascript:alert(1))" in line and "!\\[x\\](" in line
    assert "<b>" not in line and "&lt;b&gt;" in line
    assert "@everyone" not in line and "@\u200deveryone" in line
    assert "#1" not in line


@pytest.mark.slow
def test_charts_drawn_in_worker_processes_give_the_same_bytes(
    stored_history: tuple[str, RunResult, dict[str, WorkloadHistory]],
) -> None:
    _, head, histories = stored_history
    page = build_page([head], histories=histories, generated_at=GENERATED_AT)
    assert len(page.charts.jobs) >= PARALLEL_FROM  # enough for the pool to be used
    serial = render_html(page, workers=1)
    assert render_html(page, workers=2) == serial
    assert "<!--perfgate-chart-" not in serial


def test_a_bisection_gets_its_section_with_the_culprit_escaped(tmp_path: Path) -> None:
    """``perfgate report --bisect``: the culprit, its effect, the work it changed, what moved
    and every probe; its commit subject (someone else's text) stays text."""
    bisect = factories.bisect_report()
    html = render([h200_run()], bisect=bisect)
    page = assert_self_contained_and_inert(html)
    assert page.by_id("bisect")
    text = page.joined()
    assert "Culprit: 444444444444 Copy the inputs `contiguous` <b>" in text
    section = html.split('id="bisect"')[1].split("</section>")[0]
    assert "&lt;b&gt;" in section and "<b>" not in section
    assert "gpt step time +25.0 % (+20.0 … +31.0 %), 14 rounds, 42 s" in text
    assert "Probes: 4 probes, 58 A/B rounds, 163 s" in text
    assert 'class="moved"' in section and "aten::copy_ (slower)" in text and "+1, new" in text
    # Through the command: the document is read through its model, a wrong one refused.
    head_path, bisect_path = tmp_path / "head.json", tmp_path / "bisect.json"
    write_result(head_path, h200_run())
    bisect_path.write_text(json.dumps(BISECT.dump(bisect)))
    out = tmp_path / "report.html"
    ended = invoke("report", str(head_path), "--no-history", "--bisect", str(bisect_path),
                   "-o", str(out))  # fmt: skip
    assert ended.code == 0, ended.stderr
    assert 'id="bisect"' in out.read_text(encoding="utf-8")
    wrong = invoke("report", str(head_path), "--no-history", "--bisect", str(head_path))
    assert wrong.code == 2 and "is not a perfgate.bisect document" in wrong.stderr
