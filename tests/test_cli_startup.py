"""``perfgate --help`` (and every command's parse) loads no heavy stack: torch, scipy, the database
and the HTML renderer import inside the commands that use them, so a typo or ``--help`` answers in
a fraction of a second and a ``perfgate run`` parent never pays for torch (its workers do)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "scipy", "sqlalchemy", "sqlmodel", "alembic", "jinja2", "matplotlib", "pandas")

PROBE = """
import sys
from perfgate.cli import app
from typer.testing import CliRunner
result = CliRunner().invoke(app, sys.argv[1:])
assert result.exit_code == 0, result.output
heavy = {heavy!r}
print("HEAVY:", sorted(m for m in sys.modules if m.split(".")[0] in heavy))
"""


def _loaded(*args: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.strip().splitlines()[-1]


def test_help_imports_no_heavy_stack() -> None:
    assert _loaded("--help") == "HEAVY: []"


def test_a_commands_help_imports_no_heavy_stack() -> None:
    assert _loaded("run", "--help") == "HEAVY: []"
    assert _loaded("compare", "--help") == "HEAVY: []"
