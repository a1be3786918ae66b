"""The README's main job on this CPU: real runs stored in a real database, then the report.

``perfgate run --profile`` twice (so the history has two points and the advice file lies next
to the result), then ``perfgate report`` on the second: the page must show the stored history
of both runs, the CPU telemetry of a real process and the advice of the real profile.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from fixture_types import CliRun

pytestmark = pytest.mark.slow


def test_run_then_report_shows_history_telemetry_and_advice(
    tmp_path: Path, perfgate_cli: CliRun
) -> None:
    env = {"PERFGATE_DATABASE_URL": f"sqlite:///{tmp_path / 'perfgate.db'}"}
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("*\n")
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], cwd=tmp_path, check=True)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.strip()
    for name in ("first", "second"):
        ran = perfgate_cli(
            "run", "-w", "mlp@smoke", "--device", "cpu", "--repeats", "2", "--steps", "6",
            "--warmup", "2", "--threads", "1", "--profile", "--out", str(tmp_path / f"{name}.json"),
            cwd=tmp_path, env=env,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
    advice = json.loads((tmp_path / "second.advice.json").read_text())
    report = tmp_path / "perfgate-report.html"
    made = perfgate_cli(
        "report", str(tmp_path / "second.json"), "-o", str(report), cwd=tmp_path, env=env
    )
    assert made.returncode == 0, made.stderr
    assert f"report: {report}" in made.stdout.replace("\n", "")
    html = report.read_text(encoding="utf-8")
    section = html[html.index('id="workload-mlp"') :]
    # Both stored runs are points of the history, each telling its commit.
    assert section.count(f"<title>{commit[:10]} ·") >= 2
    assert "Last 2 stored runs on this branch" in section
    # CPU telemetry of the real worker process.
    assert "process CPU" in section and "seconds since start" in section
    # The advice of the real profile, each piece under its anchor.
    (mlp,) = advice["workloads"]
    for item in mlp["advice"]:
        assert f'id="advice-mlp-{item["rule_id"]}"' in section
    if not mlp["advice"]:
        assert "No rule fired" in section
