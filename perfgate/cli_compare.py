"""``perfgate compare``: thin command over ``perfgate.compare``."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import typer
from rich.table import Table

from perfgate.compare.gate import CompareVerdict, InconclusivePolicy


def compare(
    head: Path = typer.Argument(..., help="the head result document (perfgate run --out)"),
    baseline: Path | None = typer.Option(None, help="judge against this result document"),
    baseline_dir: Path | None = typer.Option(None, help="judge against baselines/ snapshots"),
    branch: str = typer.Option("main", help="branch whose baselines are used (snapshots, DB)"),
    allow_env_drift: bool = typer.Option(False, help="compare across different environments"),
    inconclusive: str = typer.Option("exit4", help="exit4 (default), pass or fail"),
    json_out: Path | None = typer.Option(None, "--json", help="write the verdict document here"),
    config: Path | None = typer.Option(None, "--config", help="perfgate.toml or pyproject.toml"),
) -> None:
    """Judge a head run against its baseline: verdict table, verdict document, exit code."""
    from perfgate.cli import console, guarded
    from perfgate.report.compare_table import verdict_table

    def action() -> tuple[Table, int]:
        policy = _policy(inconclusive)
        verdict = _judge(head, baseline, baseline_dir, branch, allow_env_drift, config)
        if json_out is not None:
            from perfgate.compare.document import verdict_document
            from perfgate.result import write_json_atomic

            write_json_atomic(json_out, verdict_document(verdict, policy))
        return verdict_table(verdict), int(verdict.exit_code(policy))

    table, code = guarded(action)
    console.print(table)
    raise typer.Exit(code)


def _policy(text: str) -> InconclusivePolicy:
    from perfgate.errors import UsageError

    if text not in ("exit4", "pass", "fail"):
        raise UsageError(f"--inconclusive {text!r} is not allowed", "use exit4, pass or fail")
    return cast(InconclusivePolicy, text)


def _judge(
    head_path: Path,
    baseline_path: Path | None,
    baseline_dir: Path | None,
    branch: str,
    allow_env_drift: bool,
    config_path: Path | None,
) -> CompareVerdict:
    from perfgate.compare.baseline_source import from_database, from_result, from_snapshots
    from perfgate.compare.gate import compare_runs
    from perfgate.config import load_config
    from perfgate.errors import UsageError
    from perfgate.result import load_result

    if baseline_path is not None and baseline_dir is not None:
        raise UsageError("--baseline and --baseline-dir exclude each other", "give one of them")
    head = load_result(head_path)
    if baseline_path is not None:
        baselines = from_result(load_result(baseline_path), str(baseline_path))
    elif baseline_dir is not None:
        baselines = from_snapshots(baseline_dir, head, branch)
    else:
        settings = load_config(config_path)
        baselines = from_database(settings.database_url, settings.root, head, branch)
    return compare_runs(head, baselines, allow_env_drift=allow_env_drift)
