"""``perfgate.api``, the notebook API: the CLI's verdicts, as typed values.

In-process parity with ``perfgate compare`` on documents (the same verdict document, bit for
bit, from the same inputs), the knob mapping and bad input; then, in the slow tier, real
measuring on the A/B scratch project under the deterministic step clock: ``api.run`` twice and
``api.compare_runs`` against the CLI's own verdict on the same two documents, and
``api.compare_refs`` deciding a 25 % slower commit.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from factories import run as factory_run
from fixture_types import CliRun
from hypothesis import given
from hypothesis import strategies as st
from scratch_repo import VIRTUAL, commit_edit, committed_project

from perfgate import api
from perfgate.compare.session import BaselineChoice, CompareRequest, compare_session
from perfgate.documents.result import load_result, write_result
from perfgate.documents.verdict import VERDICT
from perfgate.errors import ExitCode, UsageError
from perfgate.workloads.knobs import parse_knob_assignments


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project folder as the working directory (its database never exists)."""
    (tmp_path / "perfgate.toml").write_text('database_url = "sqlite:///.perfgate/none.db"\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


def documents(folder: Path) -> tuple[Path, Path]:
    base = factory_run(run_id="11111111-2222-4333-8444-555555555555")
    head = factory_run(settings=replace(base.settings, inject_slowdown=None))
    paths = folder / "base.json", folder / "head.json"
    write_result(paths[0], base)
    write_result(paths[1], head)
    return paths


def test_compare_runs_gives_the_verdict_document_perfgate_compare_writes(project: Path) -> None:
    base, head = documents(project)
    cli_json = project / "cli.json"
    compare_session(
        CompareRequest(head=head, baseline=BaselineChoice(document=base), json_out=cli_json)
    )
    comparison = api.compare_runs(load_result(head), base)  # a RunResult and a path both do
    written = comparison.write_json(project / "api.json")
    assert json.loads(written.read_text()) == json.loads(cli_json.read_text())
    verdict = VERDICT.load(written, "verdict")
    assert comparison.overall == verdict.overall
    assert comparison.exit_code == int(verdict.exit_code())


def test_a_comparison_renders_as_the_pr_comment_and_reports_as_html(project: Path) -> None:
    base, head = documents(project)
    comparison = api.compare_runs(head, base, inconclusive="pass")
    assert comparison.policy == "pass"
    text = comparison._repr_markdown_()
    assert text == comparison.markdown() and text.startswith("## perfgate: inconclusive")
    assert "https://ci.example/report" in comparison.markdown("https://ci.example/report")
    page = comparison.write_html(project / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and comparison.head.run_id in page


def test_bad_input_is_perfgate_s_own_error(project: Path) -> None:
    base, _ = documents(project)
    with pytest.raises(UsageError, match="the head is a dict, not a result"):
        api.compare_runs({}, base)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="--inconclusive 'maybe' is not allowed"):
        api.compare_runs(base, base, inconclusive="maybe")
    with pytest.raises(UsageError, match="--inject-slowdown"):
        api.run(["mlp"], inject_slowdown="lots")
    with pytest.raises(UsageError, match="not a name"):
        api.knob_assignments({"a=b": 1})


knob_names = st.from_regex(r"[a-z][a-z0-9_]{0,12}(\.[a-z][a-z0-9_]{0,8})?", fullmatch=True)
knob_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.from_regex(r"[a-z0-9_]{1,8}", fullmatch=True),
)


@given(st.dictionaries(knob_names, knob_values, max_size=6))
def test_knobs_reach_the_runner_as_the_command_line_would_give_them(
    knobs: dict[str, str | int | bool | None],
) -> None:
    parsed = parse_knob_assignments(api.knob_assignments(knobs))
    flat = {
        (f"{scope}.{key}" if scope != "*" else key): value
        for scope, values in parsed.items()
        for key, value in values.items()
    }
    expected = {
        key: "none"
        if value is None
        else str(value).lower()
        if isinstance(value, bool)
        else str(value)
        for key, value in knobs.items()
    }
    assert flat == expected


@pytest.fixture
def ab_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The A/B scratch project, committed, as the working directory, on the step clock."""
    repo = committed_project(tmp_path / "repo")
    monkeypatch.chdir(repo)
    for name, value in VIRTUAL.items():
        monkeypatch.setenv(name, value)
    return repo


@pytest.mark.slow
def test_two_runs_from_a_notebook_get_the_cli_s_verdict(
    ab_repo: Path, perfgate_cli: CliRun
) -> None:
    base = api.run(steps=10, warmup=2, device="cpu", repeats=5, out=ab_repo / "base.json")
    head = api.run(steps=10, warmup=2, device="cpu", repeats=5, out="head.json")
    (workload,) = head.workloads
    assert workload.name == "costly" and workload.status == "ok"
    assert len(workload.repeats) == 5 and len(workload.repeats[0].step_times_s) == 10
    assert workload.flops is not None and workload.flops.counted_per_step
    assert not (ab_repo / ".perfgate" / "ab.db").exists()  # a notebook run is not stored
    assert load_result(ab_repo / "head.json") == head
    assert base.run_id != head.run_id
    comparison = api.compare_runs(head, "base.json")
    assert comparison.overall != "regression"  # the same code: never a confident slowdown
    cli = perfgate_cli(
        "compare", "head.json", "--baseline", "base.json", "--json", "cli.json",
        cwd=ab_repo, env={**os.environ, **VIRTUAL},
    )  # fmt: skip
    assert cli.returncode == comparison.exit_code, cli.stdout + cli.stderr
    api_json = json.loads(comparison.write_json(ab_repo / "api.json").read_text())
    assert api_json == json.loads((ab_repo / "cli.json").read_text())


@pytest.mark.slow
def test_compare_refs_decides_a_slower_commit_interleaved(ab_repo: Path) -> None:
    commit_edit(ab_repo, "BASE_WAIT_S = 0.008", "BASE_WAIT_S = 0.010", "head: 25 % slower")
    comparison = api.compare_refs(
        "HEAD~1", "HEAD", rounds=30, out_dir="ab", steps=10, warmup=2, device="cpu"
    )
    assert comparison.overall == "regression"
    assert comparison.exit_code == ExitCode.REGRESSION
    assert comparison.verdict.method == "interleaved"
    (judged,) = comparison.verdict.workloads
    step = next(c for c in judged.comparisons if c.metric == "step_time_s")
    assert step.ratio == pytest.approx(1.25, rel=0.05)
    assert (ab_repo / "ab" / "head.json").exists()
