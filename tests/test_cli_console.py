"""The command line's output rules: lines verbatim (never wrapped, never read as markup), one
error line with its exit code."""

from __future__ import annotations

import io

import pytest
import typer
from cli_in_process import invoke
from rich.console import Console

import perfgate
from perfgate.cli.console import guarded, say
from perfgate.errors import ExitCode, UsageError


def narrow() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=40, force_terminal=False), buffer


def test_a_line_with_a_command_a_path_and_a_toml_table_is_printed_verbatim() -> None:
    console, buffer = narrow()
    line = (
        "unknown [tool.perfgate] key repeat — run perfgate ingest "
        "/a/very/long/path/that/is/wider/than/the/terminal/result.json [bold]later[/bold]"
    )
    say(line, to=console)
    assert buffer.getvalue() == line + "\n"


def test_an_error_is_one_unwrapped_line_with_its_exit_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    console, buffer = narrow()
    monkeypatch.setattr("perfgate.cli.console.errors", console)
    problem = "[tool.perfgate] in /a/very/long/path/pyproject.toml has an unknown key repeat"

    def fail() -> None:
        raise UsageError(problem, "run perfgate workloads to list them")

    with pytest.raises(typer.Exit) as raised:
        guarded(fail)
    assert raised.value.exit_code == ExitCode.USAGE
    assert buffer.getvalue() == f"error: {problem} — run perfgate workloads to list them\n"


def test_version_prints_the_installed_version_and_exits_zero() -> None:
    ended = invoke("--version")
    assert (ended.code, ended.stdout) == (0, f"perfgate {perfgate.__version__}\n")


def test_the_shell_completion_script_is_offered() -> None:
    ended = invoke("--help")
    assert ended.code == 0
    assert "--install-completion" in ended.stdout and "--show-completion" in ended.stdout
