"""Run ``perfgate ARGS`` in the test's own process (typer's ``CliRunner``).

A tenth of a second a command instead of the interpreter's and torch's start-up in a fresh
process, so the error paths of every command can be walked in the fast tier; the tests that
need a real process (its streams, its exit, its children) use conftest's ``perfgate_cli``.
"""

from __future__ import annotations

from dataclasses import dataclass

from typer.testing import CliRunner

from perfgate.cli import app


@dataclass(frozen=True)
class Ended:
    """How a command ended: its exit code and what it printed."""

    code: int
    stdout: str
    stderr: str


def invoke(*args: str) -> Ended:
    """Run ``perfgate ARGS`` in process; nothing may escape the CLI but its exit."""
    result = CliRunner().invoke(app, list(args))
    escaped = result.exception
    assert escaped is None or isinstance(escaped, SystemExit), repr(escaped)
    return Ended(result.exit_code, result.stdout, result.stderr)
