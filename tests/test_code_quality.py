"""ruff and mypy run as part of the test suite, so CI enforces them (configured in pyproject)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
        ["mypy"],
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
@pytest.mark.slow
def test_tool_is_clean(command: list[str]) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", *command], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
