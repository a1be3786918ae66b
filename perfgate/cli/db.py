"""``perfgate ingest`` and ``perfgate db upgrade / prune``: thin commands over the store."""

from __future__ import annotations

from pathlib import Path

import typer

from perfgate.cli.console import guarded, say
from perfgate.cli.options import ConfigFile

db_app = typer.Typer(
    no_args_is_help=True, help="The database: schema upgrades and pruning of old raw samples."
)


def ingest_command(
    files: list[Path] = typer.Argument(..., help="result documents to store"),
    config: ConfigFile = None,
) -> None:
    """Store result documents in the database (idempotent: a run is stored once)."""
    from perfgate.monitoring.session import ingest_and_push  # lazy: the database stack

    outcome = guarded(lambda: ingest_and_push(config, files))
    for item in outcome.stored.documents:
        state = "stored" if item.new else "already stored"
        say(f"{item.path}: run {item.result.run_id} {state} in {outcome.stored.where}")
    for line in outcome.pushed:
        say(line)


@db_app.command("upgrade")
def db_upgrade(config: ConfigFile = None) -> None:
    """Migrate the database schema to this perfgate's revision (safe to run again)."""
    from perfgate.store.session import upgrade_session  # lazy: the database stack, to migrate

    upgrade = guarded(lambda: upgrade_session(config))
    if upgrade.before == upgrade.after:
        say(f"{upgrade.where}: schema already at revision {upgrade.after}")
    else:
        say(
            f"{upgrade.where}: schema upgraded from {upgrade.before or 'empty'} "
            f"to revision {upgrade.after}"
        )


@db_app.command("prune")
def db_prune(
    keep_days: int = typer.Option(..., "--keep-days", help="keep raw samples of this many days"),
    config: ConfigFile = None,
) -> None:
    """Clear raw per-step arrays of old runs (medians, summaries and live baselines stay)."""
    from perfgate.store.session import prune_session  # lazy: the database stack, to prune

    outcome = guarded(lambda: prune_session(config, keep_days))
    say(
        f"pruned raw samples of {outcome.pruned} repeats older than {keep_days} days; "
        f"kept {outcome.kept_for_baselines} for live baselines"
    )
