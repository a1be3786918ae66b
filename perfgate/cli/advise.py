"""``perfgate advise``: thin command over ``perfgate.advise.session``."""

from __future__ import annotations

from pathlib import Path

import typer

from perfgate.cli.console import console, errors, guarded, say
from perfgate.cli.options import (
    ConfigFile,
    Device,
    Knobs,
    NprocPerNode,
    Preset,
    Steps,
    Suite,
    Threads,
    Warmup,
    Workloads,
    build_selection,
)
from perfgate.errors import ExitCode
from perfgate.report.advice_table import advice_table


def advise_command(
    suite: Suite = None,
    workload: Workloads = [],
    preset: Preset = None,
    knob: Knobs = [],
    device: Device = None,
    threads: Threads = None,
    nproc_per_node: NprocPerNode = None,
    profile_steps: int = typer.Option(5, help="steps inside the profiler window"),
    rule: list[str] = typer.Option([], "--rule", help="only this rule id (repeatable)"),
    verify: bool = typer.Option(False, help="prove each advice by an interleaved A/B re-run"),
    rounds: int = typer.Option(6, help="--verify: A/B rounds per advice"),
    steps: Steps = None,
    warmup: Warmup = None,
    trace_dir: Path | None = typer.Option(None, help="keep the profiler traces here"),
    json_out: Path | None = typer.Option(None, "--json", help="write the advice document here"),
    config: ConfigFile = None,
) -> None:
    """Profile each workload, rank the rules' advice by estimated saving, optionally prove it."""
    from perfgate.advise.session import (  # lazy: the profiler and rules load only to advise
        AdviseRequest,
        advise_session,
    )

    request = AdviseRequest(
        config=config,
        selection=build_selection(
            suite=suite,
            workloads=workload,
            preset=preset,
            knobs=knob,
            steps=steps,
            warmup=warmup,
            threads=threads,
            nproc_per_node=nproc_per_node,
        ),
        device=device,
        profile_steps=profile_steps,
        verify=verify,
        rounds=rounds,
        trace_dir=trace_dir,
        only_rules=rule,
        json_out=json_out,
    )
    results = guarded(lambda: advise_session(request))
    for result in results:
        console.print(advice_table(result))
    if json_out is not None:
        say(f"advice: {json_out}")
    failed = [r for r in results if r.status != "ok"]
    for result in failed:
        say(
            f"{result.name}: profiling {result.status}: {result.error}",
            to=errors,
        )
    if failed:
        raise typer.Exit(int(ExitCode.INFRASTRUCTURE))
