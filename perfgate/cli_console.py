"""Where the command line writes: the two consoles, verbatim lines, and the error guard.

Every ``cli_*`` module prints through these, so the rules hold for all commands:

- a line of text is printed **verbatim**: never wrapped at the terminal's width (a command or a
  path in it must stay copyable from a CI log) and never read as rich markup (``[tool.perfgate]``
  is a TOML table, not a style tag);
- tables are rich renderables, laid out to the console's width;
- a perfgate error becomes one line on stderr and its documented exit code.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

import typer
from rich.console import Console
from rich.text import Text

from perfgate.errors import PerfgateError

# Not a terminal (CI logs, pipes): wide enough for the summary table instead of rich's 80 columns.
console = Console(width=None if sys.stdout.isatty() else 160)
errors = Console(stderr=True)
T = TypeVar("T")


def say(text: str, *, to: Console = console) -> None:
    """Print one line of plain text verbatim (see the module docstring)."""
    to.print(text, markup=False, highlight=False, soft_wrap=True)


def guarded(action: Callable[[], T]) -> T:
    """Run ``action``; a perfgate error becomes one line on stderr and its exit code."""
    try:
        return action()
    except PerfgateError as exc:
        message = Text.assemble(("error:", "bold red"), " ", exc.one_line())
        errors.print(message, highlight=False, soft_wrap=True)
        raise typer.Exit(int(exc.exit_code)) from None
    except KeyboardInterrupt:
        say("interrupted", to=errors)
        raise typer.Exit(130) from None
