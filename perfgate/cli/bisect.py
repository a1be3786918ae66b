"""``perfgate bisect``: thin command over ``perfgate.bisect.session``."""

from __future__ import annotations

from pathlib import Path

import typer

from perfgate.cli.console import console, guarded, say
from perfgate.cli.options import (
    ConfigFile,
    Device,
    Knobs,
    Preset,
    Steps,
    Suite,
    Warmup,
    Workloads,
    build_selection,
)
from perfgate.errors import ExitCode


def bisect_command(
    good: str = typer.Argument(..., metavar="GOOD", help="a commit (or ref) that is not slow"),
    bad: str = typer.Argument(
        ..., metavar="BAD", help="a later commit on its first-parent line that is"
    ),
    suite: Suite = None,
    workload: Workloads = [],
    preset: Preset = None,
    knob: Knobs = [],
    steps: Steps = None,
    warmup: Warmup = None,
    device: Device = None,
    rounds: int | None = typer.Option(
        None, help="most A/B rounds per probe; a probe stops when decided (config ab_rounds)"
    ),
    budget: float | None = typer.Option(
        None, help="seconds allowed per probe (config confirm_budget_s)"
    ),
    ab_out: Path | None = typer.Option(None, help="folder for every probe's result documents"),
    json_out: Path | None = typer.Option(None, "--json", help="write the bisect document here"),
    config: ConfigFile = None,
) -> None:
    """Find the commit between GOOD and BAD that made training slower, by interleaved A/B
    probes: exit 0 when found (or no regression), 4 when only narrowed."""
    from perfgate.bisect.session import BisectRequest, bisect_session  # lazy: the A/B stack
    from perfgate.cli.progress import RoundProgress  # lazy: rich's progress display
    from perfgate.report.bisect_text import bisect_lines  # lazy: the report's renderer

    request = BisectRequest(
        good=good,
        bad=bad,
        config=config,
        selection=guarded(
            lambda: build_selection(
                suite=suite,
                workloads=workload,
                preset=preset,
                knobs=knob,
                steps=steps,
                warmup=warmup,
            )
        ),
        device=device,
        rounds=rounds,
        budget_s=budget,
        out_dir=ab_out,
        json_out=json_out,
    )
    report = guarded(lambda: bisect_session(request, lambda: RoundProgress(console)))
    for line in bisect_lines(report):
        say(line)
    if json_out is not None:
        say(f"bisect: {json_out}")
    raise typer.Exit(int(ExitCode.INCONCLUSIVE if report.conclusion == "narrowed" else ExitCode.OK))
