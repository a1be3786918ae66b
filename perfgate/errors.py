"""Typed errors and the stable exit codes they map to.

Library code raises these; only the CLI turns them into an exit code and a one-line message.
A usage or configuration error must never be read as a regression, so each class carries its
own code (see ``ExitCode``); an exception that is none of these is a perfgate bug, and gets a
code of its own too (``INTERNAL``, ``perfgate.cli.console``).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Documented, stable process exit codes (README, "Exit codes")."""

    OK = 0
    REGRESSION = 1
    USAGE = 2
    INFRASTRUCTURE = 3
    INCONCLUSIVE = 4
    INTERNAL = 5
    """A perfgate bug (an unexpected exception): its traceback is written to a log file."""


class PerfgateError(Exception):
    """Base class: a problem perfgate can explain in one line, with the fix."""

    exit_code: ExitCode = ExitCode.INFRASTRUCTURE

    def __init__(self, problem: str, fix: str | None = None) -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """The message the CLI prints: the problem, then the fix."""
        return f"{self.problem} — {self.fix}" if self.fix else self.problem


class UsageError(PerfgateError):
    """Bad input: unknown workload, malformed config, a factory breaking the protocol, …"""

    exit_code = ExitCode.USAGE


class InfrastructureError(PerfgateError):
    """The machine or a service failed us: no result could be produced or stored."""

    exit_code = ExitCode.INFRASTRUCTURE


def last_line(error: str | None, limit: int = 160) -> str:
    """The telling line of an error text (a traceback's last line), short enough for one line."""
    lines = [line.strip() for line in (error or "no error text").splitlines() if line.strip()]
    line = lines[-1] if lines else "no error text"
    return line if len(line) <= limit else line[: limit - 1] + "…"
