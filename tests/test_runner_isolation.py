"""A failing workload is isolated: exception, hard exit and hang are recorded; others still run.

These are real worker processes running real (tiny) training steps; nothing is mocked.
"""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest
from fixture_types import CliRun

from perfgate.documents.result import load_result
from perfgate.errors import ExitCode

pytestmark = pytest.mark.slow


def test_failures_are_recorded_and_the_other_workloads_run(
    faulty_project: Path, perfgate_cli: CliRun
) -> None:
    out = faulty_project / "result.json"
    completed = perfgate_cli(
        "run",
        "--suite",
        "mixed",
        "--repeats",
        "2",
        "--steps",
        "4",
        "--warmup",
        "1",
        "--timeout",
        "12",
        "--no-store",
        "--out",
        str(out),
        cwd=faulty_project,
    )
    assert completed.returncode == ExitCode.INFRASTRUCTURE, completed.stderr
    result = load_result(out)  # validates against the schema
    by_name = {w.name: w for w in result.workloads}

    raised = by_name["raises"]
    assert raised.status == "error"
    assert "RuntimeError: simulated failure in the training step" in (raised.error or "")
    assert len(raised.repeats) == 1  # a failed repeat ends the workload

    exited = by_name["exits"]
    assert exited.status == "crashed"
    assert "exited with code 7" in (exited.error or "")
    assert exited.repeats[0].exit_code == 7

    hung = by_name["hangs"]
    assert hung.status == "timeout"
    assert "12 s timeout" in (hung.error or "")
    assert hung.repeats[0].wall_s >= 12

    healthy = by_name["healthy"]
    assert healthy.status == "ok"
    assert [r.status for r in healthy.repeats] == ["ok", "ok"]
    assert healthy.summary is not None and healthy.summary.median_step_s is not None

    assert result.status == "partial"
    assert json.loads(out.read_text())["status"] == "partial"
    for name in ("raises", "exits", "hangs"):
        assert f"{name}: " in completed.stderr
    assert "Traceback" not in completed.stderr

    leftovers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if "perfgate.runner.worker" in " ".join(p.info["cmdline"] or [])
        and str(faulty_project) in " ".join(p.info["cmdline"] or [])
    ]
    assert leftovers == []
