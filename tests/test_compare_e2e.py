"""The whole compare pipeline on two real runs of the same workload on this CPU.

The verdict itself is not asserted: two *sequential* runs on this shared CPU can drift by more
than the threshold (seen here: +37 %, interval 1.17–1.66, for a true A/A pair), which is exactly
why the gate confirms alerts with interleaved A/B runs. What must hold is that real documents
flow through to a complete, well-formed verdict and a documented non-error exit code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixture_types import CliRun

from perfgate.errors import ExitCode

pytestmark = pytest.mark.slow


def test_real_runs_flow_through_compare(tmp_path: Path, perfgate_cli: CliRun) -> None:
    for name in ("a", "b"):
        completed = perfgate_cli(
            "run",
            "-w",
            "gpt",
            "--repeats",
            "5",
            "--steps",
            "8",
            "--warmup",
            "2",
            "--no-store",
            "--out",
            str(tmp_path / f"{name}.json"),
            cwd=tmp_path,
        )
        assert completed.returncode == 0, completed.stderr
    verdict = tmp_path / "verdict.json"
    compared = perfgate_cli(
        "compare",
        str(tmp_path / "b.json"),
        "--baseline",
        str(tmp_path / "a.json"),
        "--json",
        str(verdict),
        "--markdown",
        str(tmp_path / "comment.md"),
        "--html",
        str(tmp_path / "perfgate-report.html"),
        cwd=tmp_path,
    )
    document = json.loads(verdict.read_text())
    # The report and the comment say what the verdict document says.
    html = (tmp_path / "perfgate-report.html").read_text(encoding="utf-8")
    assert f'data-verdict="{document["overall"]}"' in html
    step = document["workloads"][0]["comparisons"][0]
    assert f'data-ratio="{step["ratio"]}"' in html
    assert f"report: {tmp_path / 'perfgate-report.html'}" in compared.stdout.replace("\n", "")
    comment = (tmp_path / "comment.md").read_text(encoding="utf-8")
    assert comment.startswith(f"## perfgate: {document['overall']}")
    assert "Full report: perfgate-report.html (job artifact)" in comment
    assert compared.returncode == document["exit_code"], compared.stdout + compared.stderr
    assert compared.returncode in (ExitCode.OK, ExitCode.REGRESSION, ExitCode.INCONCLUSIVE)
    assert document["overall"] in ("pass", "regression", "inconclusive")
    (workload,) = document["workloads"]
    metrics = {c["metric"]: c for c in workload["comparisons"]}
    assert {"step_time_s", "tokens_per_s", "tflops"} <= set(metrics)
    assert workload["status"] == "compared"  # same seed: identical losses
    assert metrics["step_time_s"]["ci_low"] <= metrics["step_time_s"]["ci_high"]
