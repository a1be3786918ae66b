"""Types of the shared fixtures, for the tests that take them as parameters."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Protocol


class CliRun(Protocol):
    """conftest's ``perfgate_cli``: runs ``python -m perfgate ARGS`` in a subprocess."""

    def __call__(
        self, *args: str, cwd: Path, timeout: float = ..., env: dict[str, str] | None = ...
    ) -> subprocess.CompletedProcess[str]: ...
