"""``perfgate ingest`` and ``perfgate db upgrade / prune``: thin commands over the store."""

from __future__ import annotations

from pathlib import Path

import typer

from perfgate.cli.console import guarded, say
from perfgate.cli.options import ConfigFile
from perfgate.config import load_config

db_app = typer.Typer(
    no_args_is_help=True, help="The database: schema upgrades and pruning of old raw samples."
)


def ingest_command(
    files: list[Path] = typer.Argument(..., help="result documents to store"),
    config: ConfigFile = None,
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


@db_app.command("upgrade")
def db_upgrade(config: ConfigFile = None) -> None:
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
    config: ConfigFile = None,
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
