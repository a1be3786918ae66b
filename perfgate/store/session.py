"""``perfgate ingest`` and ``perfgate db upgrade / prune`` as library calls: each reads the
configuration (None: the nearest perfgate.toml or pyproject.toml upwards) and works on the
database it names; what they report names the database with its password masked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfgate.config import load_config
from perfgate.documents.result import RunResult, load_result
from perfgate.errors import UsageError
from perfgate.store.engine import masked_url, upgrade_database
from perfgate.store.ingest import store_runs
from perfgate.store.maintenance import PruneOutcome, prune_samples

MAX_KEEP_DAYS = 100 * 366
"""A century: a longer ``--keep-days`` is a typo (and overflows a date)."""


@dataclass(frozen=True, kw_only=True)
class Ingested:
    """One result document offered to the database."""

    path: Path
    result: RunResult
    new: bool
    """Stored now; False: the run was already stored."""


@dataclass(frozen=True, kw_only=True)
class IngestOutcome:
    """Every document offered, and the database (password masked)."""

    documents: list[Ingested]
    where: str


@dataclass(frozen=True, kw_only=True)
class SchemaUpgrade:
    """The schema revisions before (None: an empty database) and after an upgrade."""

    where: str
    before: str | None
    after: str


def ingest_session(config_path: Path | None, files: Sequence[Path]) -> IngestOutcome:
    """Store result documents (idempotent: a run is stored once); every document is read and
    validated before any is stored."""
    config = load_config(config_path)
    results = [(load_result(path), path) for path in files]  # all valid before any is stored
    stored = store_runs(config.database_url, results, config.root)
    documents = [
        Ingested(path=path, result=result, new=new)
        for (result, path), new in zip(results, stored, strict=True)
    ]
    return IngestOutcome(documents=documents, where=masked_url(config.database_url))


def upgrade_session(config_path: Path | None) -> SchemaUpgrade:
    """Migrate the database schema to this perfgate's revision (safe to run again)."""
    config = load_config(config_path)
    before, after = upgrade_database(config.database_url, config.root)
    return SchemaUpgrade(where=masked_url(config.database_url), before=before, after=after)


def prune_session(config_path: Path | None, keep_days: int) -> PruneOutcome:
    """Clear the raw per-step arrays of runs older than ``keep_days`` days (their medians,
    summaries and live baselines stay); more than a century is a usage error."""
    if keep_days > MAX_KEEP_DAYS:
        raise UsageError(
            f"--keep-days {keep_days} is more than a century", "pass the days of raw data to keep"
        )
    config = load_config(config_path)
    return prune_samples(config.database_url, config.root, keep_days)
