"""``perfgate run``: thin command over ``perfgate.run``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from perfgate.cli.console import console, errors, guarded, say
from perfgate.cli.options import (
    ConfigFile,
    Device,
    InjectSlowdown,
    Knobs,
    NprocPerNode,
    Preset,
    Repeats,
    Seed,
    Shard,
    Steps,
    Suite,
    Threads,
    Timeout,
    Warmup,
    Workloads,
    build_selection,
)
from perfgate.errors import ExitCode

if TYPE_CHECKING:
    from perfgate.run import RunOutcome, RunRequest


def run_command(
    suite: Suite = None,
    workload: Workloads = [],
    preset: Preset = None,
    repeats: Repeats = None,
    steps: Steps = None,
    warmup: Warmup = None,
    device: Device = None,
    knob: Knobs = [],
    timeout: Timeout = None,
    threads: Threads = None,
    seed: Seed = None,
    shard: Shard = None,
    nproc_per_node: NprocPerNode = None,
    trigger: str | None = typer.Option(None, help="pr, nightly or manual (default: from CI)"),
    out: Path | None = typer.Option(None, "--out", "-o", help="result document path"),
    no_store: bool = typer.Option(False, "--no-store", help="write the document only, no database"),
    inject_slowdown: InjectSlowdown = None,
    profile: bool = typer.Option(
        False, help="also profile each workload (own process) and print the ranked advice"
    ),
    config: ConfigFile = None,
) -> None:
    """Run workloads, write a result document, and store it (unless --no-store)."""
    from perfgate.cli.progress import RunProgress  # lazy: rich's progress display, to measure
    from perfgate.diagnose.session import diagnose_result  # lazy: the classifier, to summarise
    from perfgate.report.run_summary import (  # lazy: the summary's renderers, to measure
        RunSummaryView,
        diagnosis_lines,
        distributed_lines,
        failure_lines,
        mfu_notes,
    )
    from perfgate.run import RunRequest, run_session  # lazy: the measuring stack, to measure

    selection = guarded(
        lambda: build_selection(
            suite=suite,
            workloads=workload,
            preset=preset,
            knobs=knob,
            repeats=repeats,
            steps=steps,
            warmup=warmup,
            timeout=timeout,
            threads=threads,
            seed=seed,
            shard=shard,
            inject_slowdown=inject_slowdown,
            nproc_per_node=nproc_per_node,
        )
    )
    request = RunRequest(
        config=config,
        selection=selection,
        device=device,
        out=out,
        store=not no_store,
        trigger=trigger,
    )
    outcome = guarded(lambda: run_session(request, progress=lambda: RunProgress(console)))
    console.print(RunSummaryView(outcome.result))
    lines = [
        *distributed_lines(outcome.result),
        *mfu_notes(outcome.result),
        *diagnosis_lines(diagnose_result(outcome.result)),
    ]
    for note in lines:
        say(note)
    slowdown = selection.inject_slowdown
    if slowdown:
        say(f"canary run: +{slowdown * 100:g}% injected per step; it will never become a baseline")
    say(f"result: {outcome.path}")
    if outcome.stored_in:
        say(f"stored in {outcome.stored_in}")
    failures = failure_lines(outcome.result)
    for line in failures:
        say(line, to=errors)
    if profile:
        _print_advice(request, outcome)
    if failures:
        raise typer.Exit(int(ExitCode.INFRASTRUCTURE))


def _print_advice(request: RunRequest, outcome: RunOutcome) -> None:
    """``run --profile``: the advice for the run just measured, printed, and written beside
    its result document (``<result>.advice.json``)."""
    from perfgate.advise.session import (  # lazy: the profiler and rules load only for --profile
        advise_run,
        write_advice_beside,
    )
    from perfgate.report.advice_table import advice_table  # lazy: only for --profile

    results = guarded(lambda: advise_run(request, outcome))
    for result in results:
        console.print(advice_table(result))
    say(f"advice: {guarded(lambda: write_advice_beside(outcome, results))}")
