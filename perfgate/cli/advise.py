"""``perfgate advise``: thin command over ``perfgate.advise.session``."""

from __future__ import annotations

from pathlib import Path

import typer

from perfgate.cli.console import console, errors, fail, guarded, say
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
from perfgate.documents.advice import WorkloadAdvice
from perfgate.errors import ExitCode, UsageError
from perfgate.report.advice_table import advice_notes, advice_table
from perfgate.report.trace_diff_table import trace_diff_table


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
    trace: list[Path] = typer.Option(
        [],
        "--trace",
        help="advise from this torch.profiler trace (.json, .json.gz, or a "
        "tensorboard_trace_handler folder) instead of profiling a workload (repeatable)",
    ),
    before: Path | None = typer.Option(
        None, help="--trace: an earlier trace of the same job; list what moved since"
    ),
    step_annotation: str | None = typer.Option(
        None,
        help="--trace: the record_function range that spans one step, for a trace "
        "without ProfilerStep# marks",
    ),
    top: int = typer.Option(15, help="--before: how many movers to list"),
) -> None:
    """Profile each workload (or read --trace files), rank the rules' advice, optionally
    prove it."""
    if trace or before is not None or step_annotation is not None:
        _advise_traces(
            trace=trace,
            before=before,
            step_annotation=step_annotation,
            top=top,
            only_rules=rule,
            json_out=json_out,
            config=config,
            workload_options={
                "--suite": suite is not None,
                "--workload": bool(workload),
                "--preset": preset is not None,
                "--knob": bool(knob),
                "--device": device is not None,
                "--threads": threads is not None,
                "--nproc-per-node": nproc_per_node is not None,
                "--steps": steps is not None,
                "--warmup": warmup is not None,
                "--verify": verify,
                "--trace-dir": trace_dir is not None,
            },
        )
        return
    from perfgate.advise.session import (  # lazy: the profiler and rules load only to advise
        AdviseRequest,
        advise_session,
    )
    from perfgate.cli.progress import AdviseProgress  # lazy: rich's progress display, to advise

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
    results = guarded(lambda: advise_session(request, lambda: AdviseProgress(console)))
    show(results, json_out)
    failed = [r for r in results if r.status != "ok"]
    for result in failed:
        say(
            f"{result.name}: profiling {result.status}: {result.error}",
            to=errors,
        )
    if failed:
        raise typer.Exit(int(ExitCode.INFRASTRUCTURE))


def _advise_traces(
    *,
    trace: list[Path],
    before: Path | None,
    step_annotation: str | None,
    top: int,
    only_rules: list[str],
    json_out: Path | None,
    config: Path | None,
    workload_options: dict[str, bool],
) -> None:
    """``perfgate advise --trace``: the advice of each trace, and the diff with --before."""
    from perfgate.advise.trace_session import (  # lazy: the trace layer loads only to advise
        TraceAdviseRequest,
        advise_traces_session,
    )

    fix = "use either --trace FILE or the workload options, not both"
    given = [option for option, used in workload_options.items() if used]
    if given:
        fail(UsageError(f"{', '.join(given)} profile a workload; --trace reads a file", fix))
    if not trace:
        fail(UsageError("--before and --step-annotation need --trace", "add --trace FILE"))
    request = TraceAdviseRequest(
        traces=trace,
        before=before,
        step_annotation=step_annotation,
        config=config,
        only_rules=only_rules,
        json_out=json_out,
        top=top,
    )
    show(guarded(lambda: advise_traces_session(request)), json_out)


def show(results: list[WorkloadAdvice], json_out: Path | None) -> None:
    """Each workload's advice table, the lines under it, its trace diff when there is one,
    and where the document went."""
    for result in results:
        console.print(advice_table(result))
        for line in advice_notes(result):
            say(line)
        if result.changes is not None:
            console.print(trace_diff_table(result.changes))
    if json_out is not None:
        say(f"advice: {json_out}")
