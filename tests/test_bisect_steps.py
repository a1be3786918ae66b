"""The nightly's bisection of new slowdowns (issue 20, item 3): which steps of a refresh are
searched and which are reported as not searchable, the markdown of a bisection and of a night,
and the opt-in issue script against a fake ``gh``.

The real thing — a stored history that steps, ``baseline refresh --json`` and
``bisect-steps`` naming the commit — runs in ``tests/test_bisect.py``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import factories
import pytest
from cli_in_process import invoke

from perfgate.bisect.steps import StepsRequest, bisect_steps
from perfgate.documents.bisect import ExplainedStep
from perfgate.documents.refresh import REFRESH, KeyRefresh, RefreshReport, RefreshStep
from perfgate.errors import ExitCode
from perfgate.files import write_json_atomic
from perfgate.report.bisect_markdown import NIGHTLY_TITLE, bisect_markdown, nightly_markdown

ROOT = Path(__file__).resolve().parent.parent
A, B, C = "a" * 40, "b" * 40, "c" * 40


def step(before: str | None, after: str | None, change: float, *, new: bool = True) -> RefreshStep:
    return RefreshStep(
        index=5, metric="step_time_s", median_before=0.1, median_after=0.1 * (1 + change),
        run_before="r4", run_after="r5", commit_before=before, commit_after=after, new=new,
    )  # fmt: skip


def refresh_file(tmp_path: Path, *steps: tuple[str, RefreshStep]) -> Path:
    keys = [
        KeyRefresh(
            key=f"{n:064x}",
            workload=workload,
            suite="nightly",
            action="moved",
            reason="step",
            runs_in_history=10,
            change_points=[s],
        )
        for n, (workload, s) in enumerate(steps)
    ]
    path = tmp_path / "refresh.json"
    report = RefreshReport(branch="main", refreshed_at="2026-12-07T03:40:00+00:00", keys=keys)
    write_json_atomic(path, REFRESH.dump(report))
    return path


def never(*_: object) -> None:
    raise AssertionError("nothing here may be measured")


def test_only_new_slowdowns_with_two_commits_are_searched(tmp_path: Path) -> None:
    refresh = refresh_file(
        tmp_path,
        ("faster", step(A, B, -0.2)),  # a speed-up is not explained
        ("old", step(A, B, 0.3, new=False)),  # explained on an earlier night
        ("drift", step(A, A, 0.15)),  # the same commit on both sides: not the code
        ("unknown", step(None, B, 0.12)),
        ("forged", step("--output=/tmp/x", B, 0.11)),  # never handed to git
        ("real", step(B, C, 0.10)),
    )
    request = StepsRequest(refresh=refresh, out_dir=tmp_path / "out", max_steps=0)
    outcome = bisect_steps(request, never)  # type: ignore[arg-type]
    assert outcome.branch == "main"
    # Largest step first; nothing bisected (max 0), each with its reason.
    assert [(e.workload, e.bisect) for e in outcome.explained] == [
        ("drift", None), ("unknown", None), ("forged", None), ("real", None),
    ]  # fmt: skip
    reasons = {e.workload: e.skipped or "" for e in outcome.explained}
    assert "measured the same commit" in reasons["drift"]
    assert "recorded no commit" in reasons["unknown"]
    assert "no commit id git can check out" in reasons["forged"]
    assert "--max-steps" in reasons["real"]


def test_a_bad_refresh_file_or_limit_is_a_usage_error(tmp_path: Path) -> None:
    missing = invoke("bisect-steps", str(tmp_path / "none.json"))
    assert missing.code == ExitCode.USAGE and "refresh file" in missing.stderr
    (tmp_path / "verdict.json").write_text(json.dumps({"schema": "perfgate.verdict"}))
    other = invoke("bisect-steps", str(tmp_path / "verdict.json"))
    assert other.code == ExitCode.USAGE and "is not a perfgate.refresh document" in other.stderr
    assert "perfgate baseline refresh --json" in other.stderr
    refresh = refresh_file(tmp_path, ("real", step(B, C, 0.10)))
    negative = invoke("bisect-steps", str(refresh), "--max-steps", "-1")
    assert negative.code == ExitCode.USAGE and "--max-steps -1 is negative" in negative.stderr


def test_a_night_without_searchable_steps_writes_its_summary(tmp_path: Path) -> None:
    refresh = refresh_file(tmp_path, ("drift", step(A, A, 0.15)))
    summary = tmp_path / "bisect.md"
    job_summary = tmp_path / "job-summary.md"
    os.environ["GITHUB_STEP_SUMMARY"] = str(job_summary)
    try:
        ended = invoke("bisect-steps", str(refresh), "--summary", str(summary))
    finally:
        del os.environ["GITHUB_STEP_SUMMARY"]
    assert ended.code == ExitCode.OK, ended.stderr
    assert "drift: step time +15.0% between aaaaaaaaaaaa and aaaaaaaaaaaa" in ended.stdout
    text = summary.read_text()
    assert text.startswith(f"## {NIGHTLY_TITLE} main\n") and "the code did not change" in text
    assert job_summary.read_text() == text + "\n"


def test_the_bisection_markdown_names_the_culprit_and_escapes_its_subject() -> None:
    report = factories.bisect_report()
    text = bisect_markdown(report)
    assert text.startswith(f"### perfgate bisect `{A[:12].replace('a', '1')}")
    assert "**Culprit: `444444444444`** Copy the inputs \\`contiguous\\` &lt;b&gt;" in text
    assert "Against its parent: gpt step time +25.0 % (+20.0 … +31.0 %), 14 rounds, 42 s" in text
    assert "| aten.clone | 0 | 1 | \\+1, new |" in text  # a cell's leading + escaped
    assert "| aten::copy\\_ (slower) | \\+3.10 ms/step (+2.90 ms … +3.30 ms, +408 %) |" in text
    assert "<b>" not in text.replace("<details><summary>", "")
    assert "<details><summary>4 probes, 58 A/B rounds, 163 s</summary>" in text
    narrowed = dataclasses.replace(report, conclusion="narrowed", effect=None)
    assert "The change is after `333333333333`, at or before `444444444444`." in bisect_markdown(
        narrowed
    )


def test_the_nightly_markdown_holds_every_step() -> None:
    found = ExplainedStep(workload="gpt", suite="nightly", step=step(A, B, 0.25),
                          bisect=factories.bisect_report(), document="out/gpt.json")  # fmt: skip
    skipped = ExplainedStep(workload="mlp", suite=None, step=step(A, A, 0.1), skipped="same commit")
    text = nightly_markdown("main", [found, skipped])
    assert text.startswith(f"## {NIGHTLY_TITLE} main\n")
    assert "**gpt** (nightly): step time 100.00 ms → 125.00 ms (+25.0%) between runs of" in text
    assert "#### perfgate bisect" in text and "> same commit" in text
    assert nightly_markdown("main", []).endswith("No new slowdown in the stored history.\n")


FAKE_GH = """#!/usr/bin/env python3
import json, sys, pathlib
store = pathlib.Path({store!r})
args = sys.argv[1:]
fields = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "-f")
issues = sorted(p for p in store.iterdir() if p.suffix == ".json")
if "--method" not in args:  # GET: the open issues, as --jq would select them
    for path in issues:
        if json.loads(path.read_text())["body"].startswith("<!-- perfgate-nightly-slowdown -->"):
            print(path.stem)
elif (target := args[args.index("--method") + 2]).endswith("/issues"):
    (store / f"{{len(issues) + 1}}.json").write_text(json.dumps(fields))
else:  # repos/OWNER/NAME/issues/N/comments
    with (store / (target.split("/")[-2] + ".comments")).open("a") as handle:
        handle.write(fields["body"] + "\\n")
"""


def test_the_issue_is_opened_once_then_commented_on(tmp_path: Path) -> None:
    store = tmp_path / "issues"
    store.mkdir()
    (store / "1.json").write_text(json.dumps({"title": "unrelated", "body": "hello"}))
    fake = tmp_path / "bin" / "gh"
    fake.parent.mkdir()
    fake.write_text(FAKE_GH.format(store=str(store)))
    fake.chmod(0o755)
    environment = {
        **os.environ,
        "PATH": f"{fake.parent}:{os.environ['PATH']}",
        "GITHUB_REPOSITORY": "team/model",
    }
    for night in (1, 2):
        summary = tmp_path / "bisect.md"
        summary.write_text(f"## {NIGHTLY_TITLE} main\n\nnight {night}\n")
        completed = subprocess.run(
            ["bash", str(ROOT / "scripts" / "bisect-issue.sh"), str(summary)],
            capture_output=True, text=True, env=environment,
        )  # fmt: skip
        assert completed.returncode == 0, completed.stderr
    opened = json.loads((store / "2.json").read_text())
    assert opened["title"] == f"{NIGHTLY_TITLE} main"
    assert opened["body"].startswith("<!-- perfgate-nightly-slowdown -->\n## perfgate nightly")
    assert "night 1" in opened["body"]
    assert "night 2" in (store / "2.comments").read_text()
    assert sorted(p.name for p in store.iterdir()) == ["1.json", "2.comments", "2.json"]


@pytest.mark.parametrize("empty", [True, False])
def test_the_issue_script_refuses_an_empty_summary(tmp_path: Path, empty: bool) -> None:
    summary = tmp_path / "bisect.md"
    if empty:
        summary.write_text("")
    completed = subprocess.run(
        ["bash", str(ROOT / "scripts" / "bisect-issue.sh"), str(summary)],
        capture_output=True, text=True, env={**os.environ, "GITHUB_REPOSITORY": "team/model"},
    )  # fmt: skip
    assert completed.returncode == 1 and "nothing to post" in completed.stderr
