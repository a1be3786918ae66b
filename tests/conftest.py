"""Shared fixtures: paths to the example and fixture projects, and a CLI runner on subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_types import CliRun

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def faulty_project(tmp_path: Path) -> Path:
    """A copy of the faulty-workloads project, so its database lands in a temp folder."""
    import shutil

    target = tmp_path / "faulty_project"
    shutil.copytree(FIXTURES / "faulty_project", target)
    return target


@pytest.fixture
def perfgate_cli() -> CliRun:
    """Run ``python -m perfgate ARGS`` in a real subprocess, as a user would."""

    def run(
        *args: str, cwd: Path, timeout: float = 600, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        environment = {**os.environ, "COLUMNS": "200"}
        # A test names its database and job summary itself; CI's own must never leak in.
        environment.pop("PERFGATE_DATABASE_URL", None)
        environment.pop("GITHUB_STEP_SUMMARY", None)
        environment.update(env or {})
        return subprocess.run(
            [sys.executable, "-m", "perfgate", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=environment,
        )

    return run
