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
from perfgate.config import load_config
from perfgate.errors import ExitCode

if TYPE_CHECKING:
    from perfgate.run import RunOutcome
    from perfgate.runner.plan import Selection


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
    slowdown = selection.inject_slowdown
    outcome = guarded(lambda: _measure(config, selection, device, out, not no_store, trigger))
    from perfgate.report.run_summary import (
        diagnosis_lines,
        distributed_lines,
        failure_lines,
        mfu_notes,
        summary_table,
    )

    console.print(summary_table(outcome.result))
    lines = [
        *distributed_lines(outcome.result),
        *mfu_notes(outcome.result),
        *diagnosis_lines(outcome.result),
    ]
    for note in lines:
        say(note)
    if slowdown:
        say(f"canary run: +{slowdown * 100:g}% injected per step; it will never become a baseline")
    say(f"result: {outcome.path}")
    if outcome.stored_in:
        say(f"stored in {outcome.stored_in}")
    failures = failure_lines(outcome.result)
    for line in failures:
        say(line, to=errors)
    if profile:
        _print_advice(config, selection, outcome)
    if failures:
        raise typer.Exit(int(ExitCode.INFRASTRUCTURE))


def _print_advice(config_path: Path | None, selection: Selection, outcome: RunOutcome) -> None:
    """``run --profile``: the advice for the run just measured, beside its result document.

    Profiling happens after the timed repeats, in its own worker process per workload, so it
    never touches the measured steps; the advice is written to ``<result>.advice.json``.
    """
    from perfgate.advise.session import advice_document, advise_workloads
    from perfgate.cli.advise import advice_table
    from perfgate.cli.rules import rule_folders
    from perfgate.files import write_json_atomic

    def action() -> Path:
        config = load_config(config_path)
        results = advise_workloads(
            config,
            selection,
            rule_folders(config),
            device=outcome.result.device,
            profile_steps=5,
        )
        for result in results:
            console.print(advice_table(result))
        path = outcome.path.with_name(outcome.path.stem + ".advice.json")
        write_json_atomic(path, advice_document(results, outcome.result.device))
        return path

    say(f"advice: {guarded(action)}")


def _measure(
    config_path: Path | None,
    selection: Selection,
    device: str | None,
    out: Path | None,
    store: bool,
    trigger: str | None,
) -> RunOutcome:
    from perfgate.cli.progress import RunProgress
    from perfgate.run import execute_run

    config = load_config(config_path)
    with RunProgress(console) as progress:
        return execute_run(
            config,
            selection,
            device=device or config.device,
            out=out,
            store=store,
            trigger=trigger,
            observer=progress,
        )
