"""perfgate compare on synthetic result documents: verdicts, drift refusal, loss parity, files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fixture_types import CliRun
from synthetic import ENVIRONMENT, synthetic_run

from perfgate.compare.baseline_source import from_result
from perfgate.compare.gate import compare_runs
from perfgate.documents.result import (
    RunResult,
    WorkloadStatus,
    write_result,
)
from perfgate.documents.verdict import CompareVerdict, verdict_document
from perfgate.errors import ExitCode, InfrastructureError, UsageError


def run(
    level: float,
    seed: int,
    *,
    loss: float = 2.0,
    env: dict[str, Any] | None = None,
    status: WorkloadStatus = "ok",
) -> RunResult:
    return synthetic_run(level, seed, loss=loss, env=env, status=status)


def judge(base: RunResult, head: RunResult, *, allow_env_drift: bool = False) -> CompareVerdict:
    return compare_runs(head, from_result(base, "base.json"), allow_env_drift=allow_env_drift)


def test_pass_regression_and_improvement() -> None:
    assert judge(run(0.1, 1), run(0.1, 2)).overall == "pass"
    slower = judge(run(0.1, 1), run(0.125, 3))
    assert slower.overall == "regression" and slower.exit_code() == ExitCode.REGRESSION
    by_metric = {c.metric: c for c in slower.workloads[0].comparisons}
    assert by_metric["step_time_s"].verdict == "regression"
    assert by_metric["samples_per_s"].verdict == "regression"
    assert by_metric["peak_memory_bytes"].verdict == "no_change"
    assert judge(run(0.1, 1), run(0.08, 4)).overall == "pass"


def test_loss_mismatch_is_a_correctness_failure() -> None:
    verdict = judge(run(0.1, 1, loss=2.0), run(0.1, 2, loss=2.5))
    assert verdict.overall == "regression"
    assert verdict.workloads[0].status == "loss_mismatch"
    assert "final loss" in verdict.workloads[0].notes[0]


def test_environment_drift_is_refused_unless_allowed() -> None:
    other = {**ENVIRONMENT, "torch": {"version": "2.11.0"}}
    with pytest.raises(UsageError, match="different environment"):
        judge(run(0.1, 1), run(0.1, 2, env=other))
    allowed = judge(run(0.1, 1), run(0.1, 2, env=other), allow_env_drift=True)
    assert allowed.environment_differences


def test_a_newer_nccl_is_shown_but_does_not_refuse_the_comparison() -> None:
    base = {**ENVIRONMENT, "distributed": {"nccl_version": "2.21.5", "nvlink": True}}
    head = {**ENVIRONMENT, "distributed": {"nccl_version": "2.26.2", "nvlink": True}}
    verdict = judge(run(0.1, 1, env=base), run(0.1, 2, env=head))
    assert verdict.environment_differences == []
    assert verdict.notes == [
        "environment differs, not a reason to refuse the comparison: NCCL: 2.21.5 → 2.26.2"
    ]


def test_failed_head_is_an_infrastructure_error() -> None:
    with pytest.raises(InfrastructureError, match="did not run"):
        judge(run(0.1, 1), run(0.1, 2, status="crashed"))


def test_verdict_document_is_json_safe() -> None:
    verdict = judge(run(0.1, 1), run(0.1, 5))
    document = verdict_document(verdict, "fail")
    assert document["schema"] == "perfgate.verdict" and document["exit_code"] == 0
    json.dumps(document, allow_nan=False)  # inf and NaN never reach the file


@pytest.mark.slow
def test_compare_cli_exit_codes(tmp_path: Path, perfgate_cli: CliRun) -> None:
    base, same, slow = tmp_path / "base.json", tmp_path / "same.json", tmp_path / "slow.json"
    write_result(base, run(0.1, 1))
    write_result(same, run(0.1, 2))
    write_result(slow, run(0.13, 3))
    passed = perfgate_cli("compare", str(same), "--baseline", str(base), cwd=tmp_path)
    assert passed.returncode == ExitCode.OK, passed.stdout + passed.stderr
    out = tmp_path / "verdict.json"
    failed = perfgate_cli(
        "compare", str(slow), "--baseline", str(base), "--json", str(out), cwd=tmp_path
    )
    assert failed.returncode == ExitCode.REGRESSION
    assert json.loads(out.read_text())["overall"] == "regression"
    missing = perfgate_cli(
        "compare", str(tmp_path / "nope.json"), "--baseline", str(base), cwd=tmp_path
    )
    assert missing.returncode == ExitCode.USAGE and "does not exist" in missing.stderr


@pytest.mark.slow
def test_compare_cli_writes_markdown_and_the_job_summary(
    tmp_path: Path, perfgate_cli: CliRun
) -> None:
    base, slow = tmp_path / "base.json", tmp_path / "slow.json"
    write_result(base, run(0.1, 1))
    write_result(slow, run(0.13, 3))
    summary = tmp_path / "summary.md"
    summary.write_text("written by an earlier step\n")
    markdown, verdict = tmp_path / "comment.md", tmp_path / "verdict.json"
    completed = perfgate_cli(
        "compare",
        str(slow),
        "--baseline",
        str(base),
        "--markdown",
        str(markdown),
        "--json",
        str(verdict),
        cwd=tmp_path,
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert completed.returncode == ExitCode.REGRESSION, completed.stdout + completed.stderr
    comment = markdown.read_text()
    assert "perfgate: regression" in comment and "<details>" in comment
    step = json.loads(verdict.read_text())["workloads"][0]["comparisons"][0]
    assert step["metric"] == "step_time_s"
    assert f"+{(step['ratio'] - 1) * 100:.1f}" in comment
    assert summary.read_text() == "written by an earlier step\n" + comment + "\n"
    assert f"job summary: appended to {summary}" in completed.stdout
