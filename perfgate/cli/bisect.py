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

DEFAULT_MAX_STEPS = 3
"""Bisections a night at most (``perfgate.bisect.steps`` takes the number it is given)."""


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
    markdown: Path | None = typer.Option(
        None, help="write the bisection as markdown here (a PR comment or issue section)"
    ),
    config: ConfigFile = None,
) -> None:
    """Find the commit between GOOD and BAD that made training slower, by interleaved A/B
    probes: exit 0 when found (or no regression), 4 when only narrowed."""
    from perfgate.bisect.session import BisectRequest, bisect_session  # lazy: the A/B stack
    from perfgate.cli.progress import RoundProgress  # lazy: rich's progress display
    from perfgate.files import check_writable, write_text_atomic  # lazy: with the session
    from perfgate.report.bisect_markdown import bisect_markdown  # lazy: the report's renderer
    from perfgate.report.bisect_text import bisect_lines  # lazy: the report's renderer

    if markdown is not None:
        guarded(lambda: check_writable(markdown, "--markdown"))  # before minutes of measuring

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
    if markdown is not None:
        text = bisect_markdown(report)
        guarded(lambda: write_text_atomic(markdown, text, option="--markdown"))
        say(f"markdown: {markdown}")
    raise typer.Exit(int(ExitCode.INCONCLUSIVE if report.conclusion == "narrowed" else ExitCode.OK))


def bisect_steps_command(
    refresh: Path = typer.Argument(
        ..., metavar="REFRESH", help="a refresh document (perfgate baseline refresh --json)"
    ),
    out_dir: Path = typer.Option(
        Path("perfgate-bisect"), help="folder for each bisection's document and probes"
    ),
    summary: Path | None = typer.Option(
        None, help="write the summary markdown here (also appended to $GITHUB_STEP_SUMMARY)"
    ),
    max_steps: int = typer.Option(
        DEFAULT_MAX_STEPS, help="bisect at most this many new steps, the largest first"
    ),
    steps: Steps = None,
    warmup: Warmup = None,
    device: Device = None,
    rounds: int | None = typer.Option(
        None, help="most A/B rounds per probe; a probe stops when decided (config ab_rounds)"
    ),
    budget: float | None = typer.Option(
        None, help="seconds allowed per probe (config confirm_budget_s)"
    ),
    config: ConfigFile = None,
) -> None:
    """Bisect every new slowdown a baseline refresh found (the nightly job's step): exit 0
    whatever the bisections concluded; the summary names each culprit."""
    from perfgate.bisect.steps import StepsRequest, bisect_steps  # lazy: the A/B stack
    from perfgate.cli.progress import RoundProgress  # lazy: rich's progress display
    from perfgate.files import check_writable, write_text_atomic  # lazy: with the session
    from perfgate.report.bisect_markdown import nightly_markdown  # lazy: the report's renderer
    from perfgate.report.bisect_text import bisect_lines  # lazy: the report's renderer
    from perfgate.report.compare_markdown import append_step_summary  # lazy: the renderer

    if summary is not None:
        guarded(lambda: check_writable(summary, "--summary"))
    request = StepsRequest(
        refresh=refresh,
        out_dir=out_dir,
        config=config,
        device=device,
        rounds=rounds,
        budget_s=budget,
        steps=steps,
        warmup=warmup,
        max_steps=max_steps,
    )
    outcome = guarded(lambda: bisect_steps(request, lambda: RoundProgress(console)))
    if not outcome.explained:
        say("bisect-steps: no new slowdown in the refresh")
    for entry in outcome.explained:
        step = entry.step
        say(
            f"{entry.workload}: step time {step.relative_change:+.1%} between "
            f"{(step.commit_before or '?')[:12]} and {(step.commit_after or '?')[:12]}"
        )
        if entry.bisect is not None:
            for line in bisect_lines(entry.bisect):
                say(f"  {line}")
        else:
            say(f"  {entry.skipped}")
    text = nightly_markdown(outcome.branch, outcome.explained)
    if summary is not None:
        guarded(lambda: write_text_atomic(summary, text, option="--summary"))
        say(f"summary: {summary}")
    guarded(lambda: append_step_summary(text))
