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
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from perfgate.cli.advise import advise_command
from perfgate.cli.baseline import baseline_app
from perfgate.cli.calibrate import calibrate_command
from perfgate.cli.compare import compare_command
from perfgate.cli.console import GuardedGroup, errors, guarded, say
from perfgate.cli.console import console as terminal
from perfgate.cli.diagnose import diagnose_command
from perfgate.cli.gate import gate_command
from perfgate.cli.report import report_command
from perfgate.cli.rules import rules_app
from perfgate.config import check_seconds, load_config
from perfgate.errors import ExitCode
from perfgate.report.terminal import PlainTable

if TYPE_CHECKING:
    from perfgate.run import RunOutcome
    from perfgate.runner.plan import Selection

app = typer.Typer(
    cls=GuardedGroup,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="perfgate: the performance gate for ML training in CI.",
)
CONFIG_OPTION = typer.Option(
    None, "--config", help="perfgate.toml or pyproject.toml (default: nearest one upwards)"
)


@app.command()
def run(
    suite: str | None = typer.Option(None, help="suite to run: smoke, full, or one from config"),
    workload: list[str] = typer.Option(
        [], "--workload", "-w", help="workload (repeatable; NAME or NAME@preset); overrides --suite"
    ),
    preset: str | None = typer.Option(None, help="preset for every selected workload"),
    repeats: int | None = typer.Option(None, help="fresh processes per workload"),
    steps: int | None = typer.Option(None, help="measured steps per repeat"),
    warmup: int | None = typer.Option(None, help="discarded warm-up steps per repeat (>= 1)"),
    device: str | None = typer.Option(None, help="cpu, cuda or auto (default: config, else auto)"),
    knob: list[str] = typer.Option(
        [], "--knob", "-k", help="KEY=VALUE or WORKLOAD.KEY=VALUE (repeatable)"
    ),
    timeout: float | None = typer.Option(None, help="seconds allowed per repeat process"),
    threads: int | None = typer.Option(None, help="intra-op CPU threads (default: physical cores)"),
    seed: int | None = typer.Option(None, help="seed for weights and synthetic data"),
    shard: str | None = typer.Option(None, help="run shard i/n of the selected workloads"),
    nproc_per_node: int | None = typer.Option(
        None, "--nproc-per-node", help="ranks per distributed workload (torchrun; e.g. ddp)"
    ),
    trigger: str | None = typer.Option(None, help="pr, nightly or manual (default: from CI)"),
    out: Path | None = typer.Option(None, "--out", "-o", help="result document path"),
    no_store: bool = typer.Option(False, "--no-store", help="write the document only, no database"),
    inject_slowdown: str | None = typer.Option(
        None,
        "--inject-slowdown",
        help="canary: add this much honest extra cost per step (e.g. 5%)",
    ),
    profile: bool = typer.Option(
        False, help="also profile each workload (own process) and print the ranked advice"
    ),
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Run workloads, write a result document, and store it (unless --no-store)."""
    from perfgate.runner.plan import Selection, parse_slowdown

    slowdown = (
        guarded(lambda: parse_slowdown(inject_slowdown)) if inject_slowdown is not None else None
    )
    if timeout is not None:
        guarded(lambda: check_seconds("--timeout", timeout, "give seconds, e.g. --timeout 600"))

    selection = Selection(
        suite=suite,
        workloads=workload,
        preset=preset,
        knobs=knob,
        repeats=repeats,
        steps=steps,
        warmup=warmup,
        timeout_s=timeout,
        threads=threads,
        seed=seed,
        shard=shard,
        inject_slowdown=slowdown,
        nproc_per_node=nproc_per_node,
    )
    outcome = guarded(lambda: _measure(config, selection, device, out, not no_store, trigger))
    from perfgate.report.run_summary import (
        diagnosis_lines,
        distributed_lines,
        failure_lines,
        mfu_notes,
        summary_table,
    )

    terminal.print(summary_table(outcome.result))
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
            terminal.print(advice_table(result))
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
    with RunProgress(terminal) as progress:
        return execute_run(
            config,
            selection,
            device=device or config.device,
            out=out,
            store=store,
            trigger=trigger,
            observer=progress,
        )


@app.command()
def doctor(
    peak: bool = typer.Option(
        False, "--peak", help="measure this machine's ceilings (matmul, bandwidth) and store them"
    ),
    device: str = typer.Option("auto", help="--peak: cpu, cuda or auto"),
    threads: int | None = typer.Option(
        None, help="intra-op CPU threads (default: config, else physical cores, as run pins)"
    ),
    json_out: Path | None = typer.Option(None, "--json", help="--peak: also write them here"),
    config: Path | None = CONFIG_OPTION,
) -> None:
    """What this machine can measure (GPU, NVML, clocks, torch build) and what it can't;
    with --peak, its measured ceilings."""
    from rich.text import Text

    from perfgate.doctor import diagnose_machine

    if peak:
        _doctor_peak(device, threads, json_out, config)
        return
    settings = guarded(lambda: load_config(config))
    table = PlainTable(title="perfgate doctor", title_justify="left")
    table.add_column("capability")
    table.add_column("status")
    table.add_column("detail")
    mark = {
        True: Text("yes", style="green"),
        False: Text("no", style="red"),
        None: Text("n/a", style="yellow"),
    }
    for capability in diagnose_machine(settings.root, threads or settings.threads):
        table.add_row(capability.name, mark[capability.ok], capability.detail)
    terminal.print(table)


def _doctor_peak(
    device: str, threads: int | None, json_out: Path | None, config_path: Path | None
) -> None:
    """``doctor --peak``: measure, store per fingerprint, print the table and where."""
    from perfgate.ceilings.peak import doctor_peak
    from perfgate.ceilings.report import ceilings_table

    outcome = guarded(lambda: doctor_peak(load_config(config_path), device, threads, json_out))
    terminal.print(ceilings_table(outcome.ceilings))
    key = outcome.ceilings.fingerprint_key[:12]
    say(f"stored in {outcome.path} (environment {key})")
    if json_out is not None:
        say(f"written to {json_out}")


@app.command()
def workloads(config: Path | None = CONFIG_OPTION) -> None:
    """List the workloads (built-in and configured), their presets and knobs."""
    from perfgate.runner.plan import available_workloads

    definitions = guarded(lambda: available_workloads(load_config(config)))
    table = PlainTable(title="workloads", title_justify="left")
    for header in ("name", "kind", "presets", "knobs (default)", "description"):
        table.add_column(header)
    for name, definition in sorted(definitions.items()):
        knobs = ", ".join(
            f"{k}={definition.default_knobs.get(k, spec.default)}"
            for k, spec in sorted(definition.knobs.items())
        )
        table.add_row(
            name, definition.kind, ", ".join(definition.presets), knobs, definition.description
        )
    terminal.print(table)


@app.command()
def ingest(
    files: list[Path] = typer.Argument(..., help="result documents to store"),
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Store result documents in the database (idempotent: a run is stored once)."""
    for line in guarded(lambda: _ingest(files, config)):
        say(line)


def _ingest(files: list[Path], config_path: Path | None) -> list[str]:
    from perfgate.result import load_result
    from perfgate.store.engine import masked_url
    from perfgate.store.ingest import store_runs

    config = load_config(config_path)
    results = [(load_result(path), path) for path in files]  # all valid before any is stored
    stored = store_runs(config.database_url, results, config.root)
    where = masked_url(config.database_url)
    return [
        f"{path}: run {result.run_id} {'stored' if new else 'already stored'} in {where}"
        for (result, path), new in zip(results, stored, strict=True)
    ]


@app.command()
def merge(
    shards: list[Path] = typer.Argument(..., help="result documents of perfgate run --shard i/n"),
    out: Path = typer.Option(..., "--out", "-o", help="where to write the merged run"),
) -> None:
    """Merge the shard documents of one run into one result document (for compare and store)."""

    def action() -> str:
        from perfgate.files import check_output_path
        from perfgate.merge import merge_shards
        from perfgate.result import load_result, write_result

        check_output_path(out, "--out")
        merged = merge_shards([load_result(path) for path in shards])
        write_result(out, merged)
        return f"merged {len(shards)} shards ({len(merged.workloads)} workloads): {out}"

    say(guarded(action))


db_app = typer.Typer(
    no_args_is_help=True, help="The database: schema upgrades and pruning of old raw samples."
)
app.add_typer(db_app, name="db")
app.add_typer(baseline_app, name="baseline")
app.add_typer(rules_app, name="rules")
app.command("compare")(compare_command)
app.command("gate")(gate_command)
app.command("advise")(advise_command)
app.command("diagnose")(diagnose_command)
app.command("calibrate")(calibrate_command)
app.command("report")(report_command)


@db_app.command("upgrade")
def db_upgrade(config: Path | None = CONFIG_OPTION) -> None:
    """Migrate the database schema to this perfgate's revision (safe to run again)."""
    say(guarded(lambda: _db_upgrade(config)))


def _db_upgrade(config_path: Path | None) -> str:
    from perfgate.store.engine import masked_url, upgrade_database

    config = load_config(config_path)
    before, after = upgrade_database(config.database_url, config.root)
    where = masked_url(config.database_url)
    if before == after:
        return f"{where}: schema already at revision {after}"
    return f"{where}: schema upgraded from {before or 'empty'} to revision {after}"


@db_app.command("prune")
def db_prune(
    keep_days: int = typer.Option(..., "--keep-days", help="keep raw samples of this many days"),
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Clear raw per-step arrays of old runs (medians, summaries and live baselines stay)."""
    say(guarded(lambda: _db_prune(keep_days, config)))


MAX_KEEP_DAYS = 100 * 366
"""A century: a longer ``--keep-days`` is a typo (and overflows a date)."""


def _db_prune(keep_days: int, config_path: Path | None) -> str:
    from perfgate.errors import UsageError
    from perfgate.store.maintenance import prune_samples

    if keep_days > MAX_KEEP_DAYS:
        raise UsageError(
            f"--keep-days {keep_days} is more than a century", "pass the days of raw data to keep"
        )
    config = load_config(config_path)
    outcome = prune_samples(config.database_url, config.root, keep_days)
    return (
        f"pruned raw samples of {outcome.pruned} repeats older than {keep_days} days; "
        f"kept {outcome.kept_for_baselines} for live baselines"
    )


def main() -> None:
    """Console-script entry point.

    A stop signal (a cancelled CI job's SIGTERM, a Ctrl-C) kills every worker and fork server
    before anything else, then ends the command with one line and ``128 + N``, never 0 or 1: an
    interrupted gate neither passed nor found a regression (``perfgate.runner.lifetime``).
    """
    from perfgate.runner.lifetime import Interrupted, stop_on_signals

    for stream in (sys.stdout, sys.stderr):  # a path that is not UTF-8 prints escaped
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    stop_on_signals()
    try:
        app(prog_name="perfgate")
    except Interrupted as stopped:
        say(f"{stopped}: every worker it started was killed", to=errors)
        sys.exit(stopped.exit_code)


if __name__ == "__main__":
    main()
