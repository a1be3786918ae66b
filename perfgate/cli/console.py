"""Where the command line writes: the two consoles, verbatim lines, and the error guard.

Every command module of ``perfgate.cli`` prints through these, so the rules hold for all commands:

- a line of text is printed **verbatim**: never wrapped at the terminal's width (a command or a
  path in it must stay copyable from a CI log) and never read as rich markup (``[tool.perfgate]``
  is a TOML table, not a style tag). The consoles themselves never read markup, so a table
  cell, a title or a progress bar holding a workload or file name like ``[/x]`` is shown as it
  is too, instead of crashing the renderer;
- tables are rich renderables, laid out to the console's width;
- whatever ends a command early becomes one line on stderr and a documented exit code
  (:func:`fail`): a perfgate error its own, an OS error 2 (the path) or 3 (the disk), an
  unexpected exception — a perfgate bug — 5, with its traceback in a log file.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
import traceback
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup

from perfgate import __version__
from perfgate.errors import ExitCode, InfrastructureError, PerfgateError
from perfgate.files import os_error


def _output_width() -> int | None:
    """The width to lay tables out to: the terminal's own (rich reads it, and ``COLUMNS``);
    off a terminal (CI logs, pipes) ``COLUMNS`` when set, else 160, wide enough for the tables
    instead of rich's 80 columns."""
    if sys.stdout.isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) >= 20 else 160


console = Console(width=_output_width(), markup=False, emoji=False)
errors = Console(stderr=True, markup=False, emoji=False)
T = TypeVar("T")
INTERNAL_LOG_PREFIX = "perfgate-internal-error-"


def say(text: str, *, to: Console = console) -> None:
    """Print one line of plain text verbatim (see the module docstring)."""
    to.print(text, markup=False, highlight=False, soft_wrap=True)


def guarded(action: Callable[[], T]) -> T:
    """Run ``action``; whatever it raises ends the command as :func:`fail` says."""
    try:
        return action()
    except (Exception, KeyboardInterrupt) as exc:
        fail(exc)


def fail(exc: BaseException) -> NoReturn:
    """End the command because of ``exc``: one line on stderr, and its documented exit code.

    - a perfgate error: its own line and code;
    - an OS error no reader or writer turned into one: 2 when the path is the problem (a
      folder where a file belongs, no permission), 3 when the disk or machine is (full, I/O);
    - Ctrl-C: ``interrupted``, 130;
    - the command line's own exceptions (a malformed option, an explicit exit) and
      ``SystemExit``: re-raised for typer to report;
    - anything else is a perfgate bug: exit 5 (``INTERNAL``), never 1, which CI would read as a
      regression, and its traceback goes to a log file the line names, not to the terminal.
    """
    if isinstance(exc, (typer.Exit, typer.Abort, typer.TyperException)):
        raise exc
    if isinstance(exc, KeyboardInterrupt):
        say("interrupted", to=errors)
        raise typer.Exit(130) from None
    if isinstance(exc, BrokenPipeError):
        exc = InfrastructureError(
            "the reader of perfgate's output went away (broken pipe)",
            "let the output be read to its end, or write it to a file",
        )
    elif isinstance(exc, OSError):
        exc = os_error(exc)
    if isinstance(exc, PerfgateError):
        _error_line(exc.one_line())
        raise typer.Exit(int(exc.exit_code)) from None
    if not isinstance(exc, Exception):  # SystemExit, GeneratorExit
        raise exc
    _error_line(_internal_error(exc))
    raise typer.Exit(int(ExitCode.INTERNAL)) from None


def _error_line(text: str) -> None:
    errors.print(Text.assemble(("error:", "bold red"), " ", text), highlight=False, soft_wrap=True)


def _internal_error(exc: Exception) -> str:
    """Write ``exc``'s traceback to a new log file in the temporary folder (a unique name,
    created exclusively and readable by this user only: ``mkstemp``); the line to print."""
    name = type(exc).__name__
    header = f"perfgate {__version__}: internal error\ncommand: {shlex.join(sys.argv)}\n\n"
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    fix = "this is a perfgate bug: please report it"
    try:
        fd, log = tempfile.mkstemp(prefix=INTERNAL_LOG_PREFIX, suffix=".log")
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(header + trace)
    except OSError as log_error:
        reason = log_error.strerror or log_error
        return f"internal error ({name}); its traceback could not be written ({reason}) — {fix}"
    return f"internal error ({name}); its traceback is in {log} — {fix} with that file"


class GuardedGroup(TyperGroup):
    """The root command group: every command runs under :func:`fail`, so what escapes a
    command's own ``guarded`` calls (rendering a table, printing a path) ends the same way."""

    def invoke(self, ctx: Any) -> Any:  # typer's (vendored click's) Context
        try:
            return super().invoke(ctx)
        except (Exception, KeyboardInterrupt) as exc:
            fail(exc)
