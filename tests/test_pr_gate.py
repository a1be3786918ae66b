"""The pull-request gate, run as CI runs it: ``scripts/pr-gate.sh`` on a scratch repository.

The scratch project (``tests/fixtures/gate_project``) has one user workload whose step calls
the team's ``model.py``: a tiny MLP plus a 20 ms transform (a sleep). Every worker times its
steps on the deterministic step clock (``PERFGATE_TEST_STEP_CLOCK``: the sleeps, with seeded
noise), so each exit code is exact however busy the machine is. Main gets baselines the way the
nightly job makes them: three stored runs, ``baseline refresh``, ``baseline export`` into
``baselines/``, committed. Then each test opens a pull request branch off main and runs the gate
script, exactly as the workflow does, and checks its exit code and the comment it wrote:

(a) a PR that makes the transform 25 % slower fails with exit code 1, and its comment says so;
(b) the same PR that also rewrites ``baselines/`` and raises its own threshold still fails:
    thresholds and snapshots are read from the base ref;
(c) an A/A PR passes;
(d) a PR whose workload crashes exits 3, with the error in the comment, never a regression;
(e) a PR the budget cannot decide is neutral: the script exits 0, compare's own code (4) is
    kept, and the comment says what would decide;
(f) a project's first PR, with no baseline anywhere, is judged by an A/B of main against it;
(g) on real time, the 25 % slower PR is never passed (inconclusive is accepted).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
GATE = ROOT / "scripts" / "pr-gate.sh"
FIXTURE = ROOT / "tests" / "fixtures" / "gate_project"


def git(repo: Path, *args: str) -> str:
    completed = subprocess.run(
        ["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return completed.stdout.strip()


def perfgate(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [sys.executable, "-m", "perfgate", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
        env=_environment(),
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    return completed


VIRTUAL = "virtual:between=0.02,within=0.01"


def _environment(**extra: str) -> dict[str, str]:
    environment = {**os.environ, "COLUMNS": "200", "PERFGATE_TEST_STEP_CLOCK": VIRTUAL}
    for name in ("PERFGATE_DATABASE_URL", "GITHUB_STEP_SUMMARY", "GITHUB_BASE_REF"):
        environment.pop(name, None)
    return {**environment, **extra}


@pytest.fixture(scope="module")
def gate_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The scratch repository with main's baselines committed, as the nightly job leaves it."""
    repo = tmp_path_factory.mktemp("gate") / "repo"
    shutil.copytree(FIXTURE, repo)
    git(repo, "init", "--quiet", "--initial-branch=main")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "the team's project")
    for _ in range(3):
        perfgate(repo, "run", "--device", "cpu", "--repeats", "3")
    perfgate(repo, "baseline", "refresh", "--branch", "main")
    exported = perfgate(repo, "baseline", "export", "--branch", "main")
    assert "wrote" in exported.stdout
    git(repo, "add", "baselines")
    git(repo, "commit", "--quiet", "-m", "baselines from the nightly refresh")
    yield repo


def open_pr(repo: Path, name: str, edits: dict[str, tuple[str, str]]) -> None:
    """A branch off main with ``edits`` (file → (old text, new text)) committed."""
    git(repo, "checkout", "--quiet", "main")
    git(repo, "checkout", "--quiet", "-b", name)
    for relative, (old, new) in edits.items():
        path = repo / relative
        text = path.read_text()
        assert old in text, (relative, old)
        path.write_text(text.replace(old, new))
    git(repo, "commit", "--quiet", "-am", name)


def run_gate(repo: Path, *, advise: bool = False, **extra: str) -> tuple[int, str, str, Path]:
    """The gate script as the workflow runs it; (exit code, comment, log, output folder)."""
    out = repo / "perfgate-out"
    completed = subprocess.run(
        ["bash", str(GATE)],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=900,
        env=_environment(
            PERFGATE_CMD=f"{sys.executable} -m perfgate",
            PERFGATE_BASE_REF="main",
            PERFGATE_DEVICE="cpu",
            PERFGATE_ADVISE="1" if advise else "0",
            GITHUB_STEP_SUMMARY=str(repo / "summary.md"),
            **extra,
        ),
    )
    log = completed.stdout + completed.stderr
    print(log[-4000:])
    comment = (out / "comment.md").read_text() if (out / "comment.md").exists() else ""
    return completed.returncode, comment, log, out


SLOWER = {"model.py": ("TRANSFORM_S = 0.020", "TRANSFORM_S = 0.025")}


def test_a_pr_25_percent_slower_fails_and_says_so(gate_repo: Path) -> None:
    open_pr(gate_repo, "slower", SLOWER)
    code, comment, log, out = run_gate(gate_repo, advise=True)
    assert code == 1, log[-3000:]
    assert comment.startswith("## perfgate: regression"), comment
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["overall"] == "regression" and verdict["method"] == "interleaved"
    (step,) = [c for c in verdict["workloads"][0]["comparisons"] if c["metric"] == "step_time_s"]
    assert step["verdict"] == "regression" and step["ci_low"] > 1.10
    assert "read from main" in " ".join(verdict["notes"])
    html = (out / "perfgate-report.html").read_text()
    assert 'data-verdict="regression"' in html
    assert (gate_repo / "summary.md").read_text().count("## perfgate: regression") >= 1
    assert "Full report: perfgate-report.html (job artifact)" in comment
    assert (out / "advice.json").exists()


def test_a_pr_that_rewrites_its_baselines_and_threshold_still_fails(gate_repo: Path) -> None:
    open_pr(gate_repo, "slower-and-loosened", SLOWER)
    # Loosen the gate from inside the PR: a 60 % band, and snapshots claiming the slow numbers.
    config = gate_repo / "pyproject.toml"
    config.write_text(config.read_text().replace("step_time_s = 0.10", "step_time_s = 0.60"))
    for snapshot in (gate_repo / "baselines").rglob("*.json"):
        data = json.loads(snapshot.read_text())
        for stats in data["metrics"].values():
            if "repeat_values" in stats:
                stats["repeat_values"] = [v * 1.25 for v in stats["repeat_values"]]
        snapshot.write_text(json.dumps(data))
    git(gate_repo, "commit", "--quiet", "-am", "loosen the gate")
    code, comment, log, out = run_gate(gate_repo)
    assert code == 1, log[-3000:]
    assert comment.startswith("## perfgate: regression"), comment
    verdict = json.loads((out / "verdict.json").read_text())
    (step,) = [c for c in verdict["workloads"][0]["comparisons"] if c["metric"] == "step_time_s"]
    assert step["threshold"] == pytest.approx(0.10)  # main's band, not the PR's 60 %


def test_an_a_a_pr_passes(gate_repo: Path) -> None:
    open_pr(gate_repo, "docs", {".gitignore": ("__pycache__/", "__pycache__/\n*.tmp")})
    code, comment, log, _ = run_gate(gate_repo)
    assert code == 0, log[-3000:]
    assert comment.startswith("## perfgate: pass"), comment


def test_a_pr_whose_workload_crashes_is_an_infrastructure_error(gate_repo: Path) -> None:
    open_pr(gate_repo, "broken", {"model.py": ("BROKEN = False", "BROKEN = True")})
    code, comment, log, _ = run_gate(gate_repo)
    assert code == 3, log[-3000:]
    assert "head workloads did not run" in log and "shapes (32, 64) and (48, 64)" in log
    assert comment.startswith("## perfgate: error"), comment
    assert "regression" not in comment
    assert "exit code **3** (infrastructure)" in comment


def compare_code(out: Path) -> int:
    return int((out / "compare-exit-code").read_text())


def test_a_pr_the_budget_cannot_decide_is_neutral(gate_repo: Path) -> None:
    # 10 % slower against main's ±10 % band, with the base's budget of 4 rounds: undecidable.
    open_pr(
        gate_repo, "at-the-threshold", {"model.py": ("TRANSFORM_S = 0.020", "TRANSFORM_S = 0.022")}
    )
    code, comment, log, out = run_gate(gate_repo)
    assert code == 0, log[-3000:]
    assert compare_code(out) == 4
    assert "perfgate: inconclusive (neutral)" in log
    assert comment.startswith("## perfgate: inconclusive"), comment
    assert "Inconclusive is neutral" in comment and "would decide" in comment


def test_a_first_pr_without_any_baseline_is_judged_by_an_a_b(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    repo = tmp_path_factory.mktemp("first") / "repo"
    shutil.copytree(FIXTURE, repo)
    git(repo, "init", "--quiet", "--initial-branch=main")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "the team's project, no baselines yet")
    open_pr(repo, "slower", SLOWER)
    code, comment, log, out = run_gate(repo)
    assert code == 1, log[-3000:]
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["method"] == "interleaved"
    assert "no stored or committed baseline yet" in " ".join(verdict["workloads"][0]["notes"])
    assert "no stored or committed baseline yet" in comment


def test_on_real_time_a_slower_pr_is_never_passed(gate_repo: Path) -> None:
    open_pr(gate_repo, "slower-real", SLOWER)
    code, comment, log, out = run_gate(gate_repo, PERFGATE_TEST_STEP_CLOCK="")
    assert code in (0, 1), log[-3000:]
    assert compare_code(out) in (1, 4), log[-3000:]  # a regression, or neutral: never a pass
    assert not comment.startswith("## perfgate: pass"), comment
