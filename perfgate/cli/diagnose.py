"""``perfgate diagnose``: thin command over ``perfgate.diagnosis``."""

from __future__ import annotations

from pathlib import Path

import typer

from perfgate.cli.console import console, guarded, say
from perfgate.cli.options import (
    ConfigFile,
    Device,
    Knobs,
    NprocPerNode,
    Preset,
    Repeats,
    Steps,
    Suite,
    Threads,
    Warmup,
    Workloads,
    build_selection,
)
from perfgate.report.diagnosis_table import diagnosis_table


def diagnose_command(
    results: list[Path] = typer.Argument(
        None, help="result documents to diagnose (default: measure the selection now)"
    ),
    suite: Suite = None,
    workload: Workloads = [],
    preset: Preset = None,
    knob: Knobs = [],
    device: Device = None,
    repeats: Repeats = None,
    steps: Steps = None,
    warmup: Warmup = None,
    threads: Threads = None,
    nproc_per_node: NprocPerNode = None,
    profile: bool = typer.Option(
        True, help="also profile a window per workload (the GPU timeline and kernel mix)"
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help="where the result document goes"),
    json_out: Path | None = typer.Option(None, "--json", help="write the diagnoses here"),
    config: ConfigFile = None,
) -> None:
    """What bounds each workload (compute, memory, host, input pipeline, storage,
    communication), with the numbers that decide it."""
    from perfgate.cli.progress import RunProgress  # lazy: rich's progress display, to measure
    from perfgate.diagnose.session import write_diagnoses  # lazy: the classifier, to diagnose
    from perfgate.diagnosis import (  # lazy: the measuring and profiling stacks, to diagnose
        DiagnoseRequest,
        diagnose_session,
    )

    request = DiagnoseRequest(
        results=results or (),
        config=config,
        selection=build_selection(
            suite=suite,
            workloads=workload,
            preset=preset,
            knobs=knob,
            repeats=repeats,
            steps=steps,
            warmup=warmup,
            threads=threads,
            nproc_per_node=nproc_per_node,
        ),
        device=device,
        out=out,
        profile=profile,
        json_out=json_out,
    )
    diagnosed = guarded(lambda: diagnose_session(request, lambda: RunProgress(console)))
    for path, items in diagnosed:
        console.print(diagnosis_table(path, items))
    if json_out is not None:
        guarded(lambda: write_diagnoses(json_out, diagnosed))
        say(f"diagnosis: {json_out}")
