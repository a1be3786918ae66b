"""Interleaved A/B end to end on this CPU: real git refs, real worker processes, real verdicts.

The scratch project (tests/fixtures/ab_project) has one user workload whose cost is a module
constant, so two commits of it differ only in honest extra work per step. Its thresholds are
the ±15 % band the shared 2-core CI runner supports (see the fixture's comment); each exit
code below comes from a real case, none from a hand-made document.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from perfgate.errors import ExitCode

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parent / "fixtures"

FAST = ("--steps", "10", "--warmup", "2", "--device", "cpu")


def git(repo: Path, *args: str) -> str:
    completed = subprocess.run(
        ["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return completed.stdout.strip()


@pytest.fixture
def ab_repo(tmp_path: Path) -> Path:
    """A git repository holding the scratch project, one commit deep."""
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "ab_project", repo)
    git(repo, "init", "--quiet", "--initial-branch=main")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "base")
    return repo


def commit_passes(repo: Path, passes: int, message: str) -> None:
    source = repo / "costly.py"
    text = source.read_text().replace("EXTRA_PASSES = 0", f"EXTRA_PASSES = {passes}")
    source.write_text(text)
    git(repo, "commit", "--quiet", "-am", message)


def verdict_of(path: Path) -> tuple[dict, dict]:  # type: ignore[type-arg]
    document = json.loads(path.read_text())
    (workload,) = document["workloads"]
    return document, {c["metric"]: c for c in workload["comparisons"]}


def test_ab_between_commits_catches_the_costlier_head(ab_repo: Path, perfgate_cli) -> None:  # type: ignore[no-untyped-def]
    commit_passes(ab_repo, 6, "head: six extra passes per step")
    verdict = ab_repo / "verdict.json"
    completed = perfgate_cli(
        "compare",
        "--ab",
        "HEAD~1",
        "HEAD",
        "--rounds",
        "4",
        *FAST,
        "--ab-out",
        str(ab_repo / "ab"),
        "--json",
        str(verdict),
        cwd=ab_repo,
    )
    assert completed.returncode == ExitCode.REGRESSION, completed.stdout + completed.stderr
    document, metrics = verdict_of(verdict)
    assert document["method"] == "interleaved"
    assert metrics["step_time_s"]["verdict"] == "regression"
    assert metrics["step_time_s"]["ci_low"] > 1.15
    assert document["workloads"][0]["status"] == "compared"  # same loss: only the cost changed
    base = json.loads((ab_repo / "ab" / "base.json").read_text())
    head = json.loads((ab_repo / "ab" / "head.json").read_text())
    assert base["source"]["commit"] == git(ab_repo, "rev-parse", "HEAD~1")
    assert head["source"]["commit"] == git(ab_repo, "rev-parse", "HEAD")
    assert len(base["workloads"][0]["repeats"]) == len(head["workloads"][0]["repeats"]) == 4
    assert git(ab_repo, "worktree", "list").count("\n") == 0  # worktrees removed


def test_ab_of_a_commit_against_itself_passes(ab_repo: Path, perfgate_cli) -> None:  # type: ignore[no-untyped-def]
    verdict = ab_repo / "verdict.json"
    completed = perfgate_cli(
        "compare",
        "--ab",
        "HEAD",
        "HEAD",
        "--rounds",
        "6",
        "--steps",
        "12",
        "--warmup",
        "3",
        "--device",
        "cpu",
        "--ab-out",
        str(ab_repo / "ab"),
        "--json",
        str(verdict),
        cwd=ab_repo,
    )
    assert completed.returncode == ExitCode.OK, completed.stdout + completed.stderr
    document, metrics = verdict_of(verdict)
    assert document["overall"] == "pass"
    assert metrics["step_time_s"]["verdict"] == "no_change"


def test_canary_at_25_percent_is_confirmed_as_a_regression(ab_repo: Path, perfgate_cli) -> None:  # type: ignore[no-untyped-def]
    runs = {}
    for name, extra in (("base", ()), ("head", ("--inject-slowdown", "25%"))):
        runs[name] = ab_repo / f"{name}.json"
        completed = perfgate_cli(
            "run",
            "--repeats",
            "3",
            *FAST,
            *extra,
            "--no-store",
            "--out",
            str(runs[name]),
            cwd=ab_repo,
        )
        assert completed.returncode == 0, completed.stderr
    # Three repeats a side can never be significant: the baseline comparison is inconclusive
    # by construction, and the confirmation decides.
    alone = perfgate_cli("compare", str(runs["head"]), "--baseline", str(runs["base"]), cwd=ab_repo)
    assert alone.returncode == ExitCode.INCONCLUSIVE, alone.stdout + alone.stderr
    verdict = ab_repo / "verdict.json"
    confirmed = perfgate_cli(
        "compare",
        str(runs["head"]),
        "--baseline",
        str(runs["base"]),
        "--confirm",
        "--base-ref",
        "HEAD",
        "--rounds",
        "4",
        "--ab-out",
        str(ab_repo / "ab"),
        "--json",
        str(verdict),
        cwd=ab_repo,
    )
    assert confirmed.returncode == ExitCode.REGRESSION, confirmed.stdout + confirmed.stderr
    document, metrics = verdict_of(verdict)
    assert metrics["step_time_s"]["verdict"] == "regression"
    assert 1.1 < metrics["step_time_s"]["ratio"] < 1.5
    assert "interleaved A/B" in document["workloads"][0]["notes"][0]
    head = json.loads((ab_repo / "ab" / "head.json").read_text())
    assert head["settings"]["inject_slowdown"] == 0.25  # the head side is re-run as measured


def test_head_that_crashes_is_an_infrastructure_error(ab_repo: Path, perfgate_cli) -> None:  # type: ignore[no-untyped-def]
    source = ab_repo / "costly.py"
    source.write_text(
        source.read_text().replace(
            "        optimizer.zero_grad",
            '        raise RuntimeError("head broke")\n        optimizer.zero_grad',
        )
    )
    git(ab_repo, "commit", "--quiet", "-am", "broken head")
    completed = perfgate_cli(
        "compare", "--ab", "HEAD~1", "HEAD", "--rounds", "4", *FAST, cwd=ab_repo
    )
    assert completed.returncode == ExitCode.INFRASTRUCTURE, completed.stdout + completed.stderr
    assert "head workloads did not run" in completed.stderr
    assert "head broke" in completed.stderr


def test_unknown_ref_and_other_environment_are_usage_errors(ab_repo: Path, perfgate_cli) -> None:  # type: ignore[no-untyped-def]
    unknown = perfgate_cli("compare", "--ab", "no-such-branch", "HEAD", cwd=ab_repo)
    assert unknown.returncode == ExitCode.USAGE
    assert "no-such-branch" in unknown.stderr and len(unknown.stderr.strip().splitlines()) == 1
    run = ab_repo / "run.json"
    completed = perfgate_cli(
        "run", "--repeats", "1", *FAST, "--no-store", "--out", str(run), cwd=ab_repo
    )
    assert completed.returncode == 0, completed.stderr
    other = json.loads(run.read_text())
    other["run_id"] = "00000000-0000-0000-0000-000000000001"
    other["environment"]["torch"]["version"] = "2.11.0+cu128"
    elsewhere = ab_repo / "elsewhere.json"
    elsewhere.write_text(json.dumps(other))
    refused = perfgate_cli("compare", str(run), "--baseline", str(elsewhere), cwd=ab_repo)
    assert refused.returncode == ExitCode.USAGE
    assert "2.11.0+cu128" in refused.stderr and "--allow-env-drift" in refused.stderr
