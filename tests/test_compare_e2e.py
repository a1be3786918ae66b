"""A real A/A comparison on this CPU: two runs of the same workload must not be a regression."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfgate.errors import ExitCode

pytestmark = pytest.mark.slow


def test_real_aa_compare_is_not_a_regression(tmp_path: Path, perfgate_cli) -> None:  # type: ignore[no-untyped-def]
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
        cwd=tmp_path,
    )
    assert compared.returncode in (ExitCode.OK, ExitCode.INCONCLUSIVE), compared.stdout
    document = json.loads(verdict.read_text())
    assert document["overall"] in ("pass", "inconclusive")
    (workload,) = document["workloads"]
    metrics = {c["metric"]: c for c in workload["comparisons"]}
    assert {"step_time_s", "tokens_per_s", "tflops"} <= set(metrics)
    assert workload["status"] == "compared"  # same seed: identical losses
    assert metrics["step_time_s"]["ci_low"] <= metrics["step_time_s"]["ci_high"]
