"""The ``perfgate`` command line: parse, call the library, print, exit. Nothing else.

Exit codes (stable, documented in the README): 0 pass · 1 regression · 2 usage or config error ·
3 infrastructure error (a workload crashed, the database is unreachable) · 4 inconclusive ·
5 internal error (a perfgate bug; its traceback goes to a log file,
``perfgate.cli.console.fail``) ·
128 + N stopped by signal N (130 SIGINT, 143 SIGTERM, 129 SIGHUP; every worker killed first).
"""

from __future__ import annotations

import io
import sys

import typer

from perfgate import __version__
from perfgate.cli.advise import advise_command
from perfgate.cli.baseline import baseline_app
from perfgate.cli.bisect import bisect_command, bisect_steps_command
from perfgate.cli.calibrate import calibrate_command
from perfgate.cli.compare import compare_command
from perfgate.cli.console import GuardedGroup, errors, say
from perfgate.cli.db import db_app, ingest_command
from perfgate.cli.diagnose import diagnose_command
from perfgate.cli.doctor import doctor_command
from perfgate.cli.export import export_command
from perfgate.cli.gate import gate_command
from perfgate.cli.merge import merge_command
from perfgate.cli.monitor import monitor_command
from perfgate.cli.report import report_command
from perfgate.cli.rules import rules_app
from perfgate.cli.run import run_command
from perfgate.cli.workloads import workloads_command

app = typer.Typer(
    cls=GuardedGroup,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="perfgate: the performance gate for ML training in CI.",
)


def show_version(requested: bool) -> None:
    """``perfgate --version``: the installed version, then exit (before any command loads)."""
    if requested:
        print(f"perfgate {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=show_version,
        is_eager=True,
        help="print perfgate's version and exit",
    ),
) -> None:
    """perfgate: the performance gate for ML training in CI."""


app.command("run")(run_command)
app.command("doctor")(doctor_command)
app.command("workloads")(workloads_command)
app.command("ingest")(ingest_command)
app.command("merge")(merge_command)
app.add_typer(db_app, name="db")
app.add_typer(baseline_app, name="baseline")
app.add_typer(rules_app, name="rules")
app.command("compare")(compare_command)
app.command("bisect")(bisect_command)
app.command("bisect-steps")(bisect_steps_command)
app.command("gate")(gate_command)
app.command("advise")(advise_command)
app.command("diagnose")(diagnose_command)
app.command("calibrate")(calibrate_command)
app.command("report")(report_command)
app.command("export")(export_command)
app.command("monitor")(monitor_command)


def main() -> None:
    """Console-script entry point.

    A stop signal (a cancelled CI job's SIGTERM, a Ctrl-C) kills every worker and fork server
    before anything else, then ends the command with one line and ``128 + N``, never 0 or 1: an
    interrupted gate neither passed nor found a regression (``perfgate.runner.lifetime``).
    """
    from perfgate.runner.lifetime import (  # lazy: signal handling, for the console script only
        Interrupted,
        stop_on_signals,
    )

    for stream in (sys.stdout, sys.stderr):  # a path that is not UTF-8 prints escaped
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    stop_on_signals()
    try:
        app(prog_name="perfgate")
    except Interrupted as stopped:
        say(f"{stopped}: every worker it started was killed", to=errors)
        sys.exit(stopped.exit_code)
