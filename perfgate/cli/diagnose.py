"""``perfgate diagnose``: thin command over ``perfgate.diagnose.session``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

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

if TYPE_CHECKING:
    from rich.table import Table

    from perfgate.config import Config
    from perfgate.diagnose.session import WorkloadDiagnosis
    from perfgate.runner.plan import Selection


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
    from perfgate.cli.console import console, guarded, say

    selection = build_selection(
        suite=suite,
        workloads=workload,
        preset=preset,
        knobs=knob,
        repeats=repeats,
        steps=steps,
        warmup=warmup,
        threads=threads,
        nproc_per_node=nproc_per_node,
    )

    def action() -> list[tuple[Path, list[WorkloadDiagnosis]]]:
        from perfgate.config import load_config
        from perfgate.diagnose.session import diagnose_result
        from perfgate.files import check_writable
        from perfgate.result import load_result

        if json_out is not None:
            check_writable(json_out, "--json")  # before the measuring, not after
        if results:
            return [(path, diagnose_result(load_result(path))) for path in results]
        settings = load_config(config)
        path, diagnosed = measure_and_diagnose(settings, selection, device, out, profile)
        return [(path, diagnosed)]

    diagnosed = guarded(action)
    for path, items in diagnosed:
        console.print(diagnosis_table(path, items))
    if json_out is not None:
        from perfgate.diagnose.session import diagnosis_document
        from perfgate.files import write_json_atomic

        documents = [diagnosis_document(items, path) for path, items in diagnosed]
        document = documents[0] if len(documents) == 1 else documents
        guarded(lambda: write_json_atomic(json_out, document, option="--json"))
        say(f"diagnosis: {json_out}")


def measure_and_diagnose(
    config: Config, selection: Selection, device: str | None, out: Path | None, profile: bool
) -> tuple[Path, list[WorkloadDiagnosis]]:
    """Run the selection (no store), profile each workload that ran, and classify."""
    from perfgate.advise.evidence import profile_workloads
    from perfgate.cli.console import console
    from perfgate.cli.progress import RunProgress
    from perfgate.diagnose.session import diagnose_result
    from perfgate.run import execute_run

    with RunProgress(console) as progress:
        outcome = execute_run(
            config,
            selection,
            device=device or config.device,
            out=out,
            store=False,
            observer=progress,
        )
    evidence = {}
    if profile:
        for profiled in profile_workloads(config, selection, device=outcome.result.device):
            if profiled.status == "ok":
                evidence[profiled.name] = profiled.evidence
    return outcome.path, diagnose_result(outcome.result, evidence)


def diagnosis_table(path: Path, items: list[WorkloadDiagnosis]) -> Table:
    """One row per workload: what bounds it, how sure, and why (with the numbers)."""
    from rich.text import Text

    from perfgate.report.terminal import PlainTable

    table = PlainTable(title=f"perfgate diagnose · {path}", title_justify="left")
    for header in ("workload", "bound by", "confidence", "why"):
        table.add_column(header)
    for item in items:
        found = item.diagnosis
        if found is None:
            status = Text(item.status, style="red")
            table.add_row(item.name, status, "", (item.error or "")[:120])
            continue
        source = "" if item.profiled else " (from the timed run only)"
        table.add_row(item.name, found.label, found.confidence, found.reason + source)
    return table
