"""The pull-request gate, run as CI runs it: ``scripts/pr-gate.sh`` on a scratch repository.

The scratch repository and the way the gate is run are ``conftest_gate``'s. Each test opens a
pull request branch off main, runs the gate script exactly as the workflow does, and checks its
exit code and the comment it wrote:

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
from pathlib import Path

import pytest
from conftest_gate import SLOWER, compare_code, git, new_repository, open_pr, run_gate

pytestmark = pytest.mark.slow
pytest_plugins = ["conftest_gate"]


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
    repo = new_repository(tmp_path_factory.mktemp("first"))
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
