"""The store's side of one live baseline per key: ``save_baseline`` never retires a baseline
that is no longer live, and a serialised transaction that keeps losing gives up cleanly."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest_db import count_rows, fake_run, query
from sqlmodel import Session

from perfgate.errors import ExitCode
from perfgate.store.engine import make_engine
from perfgate.store.history import save_baseline
from perfgate.store.ingest import store_run
from perfgate.store.serialised import ATTEMPTS, LostRaces, StaleRead, serialised
from perfgate.store.tables import BaselineRow
from perfgate.telemetry.fingerprint import fingerprint_key

pytest_plugins = ["conftest_db"]


def baseline(status: str = "live", created_at: str = "2026-01-01T00:00:00+00:00") -> BaselineRow:
    """A baseline of key ``k`` on the environment of ``fake_run``."""
    return BaselineRow(
        key="k",
        workload="mlp",
        definition_hash="a" * 64,
        knobs={},
        environment_key=fingerprint_key(fake_run().environment),
        branch="main",
        status=status,
        created_at=created_at,
        reason="test",
        method={},
        metrics={},
    )


def test_save_baseline_refuses_to_retire_a_baseline_someone_else_retired(
    database_url: str, tmp_path: Path
) -> None:
    """The caller decided against a live baseline that another writer has retired since: the
    retirement is not overwritten and nothing is added."""
    store_run(database_url, fake_run(), tmp_path)
    engine = make_engine(database_url, tmp_path)
    try:
        with Session(engine) as session:
            stale = baseline(status="retired")
            stale.retired_at = "2026-01-02T00:00:00+00:00"
            session.add(stale)
            session.commit()
            session.refresh(stale)
            with pytest.raises(StaleRead, match="no longer live"):
                save_baseline(session, baseline(), [], replacing=stale, retired_at="2026-01-03")
            session.rollback()
    finally:
        engine.dispose()
    rows = query(database_url, "SELECT status, retired_at FROM baselines")
    assert rows == [("retired", "2026-01-02T00:00:00+00:00")]


def test_a_transaction_that_always_conflicts_gives_up_with_nothing_written(
    database_url: str, tmp_path: Path
) -> None:
    """Every attempt adds two live baselines for one key: the index refuses each, and after
    ``ATTEMPTS`` runs the caller gets one line (exit 3) and an untouched database."""
    store_run(database_url, fake_run(), tmp_path)
    engine = make_engine(database_url, tmp_path)
    attempts: list[int] = []

    def two_live(session: Session) -> None:
        attempts.append(len(attempts))
        session.add(baseline())
        session.flush()
        session.add(baseline(created_at="2026-01-02T00:00:00+00:00"))

    try:
        with pytest.raises(LostRaces) as lost:
            serialised(engine, "two live baselines", two_live)
    finally:
        engine.dispose()
    assert len(attempts) == ATTEMPTS
    assert lost.value.exit_code == ExitCode.INFRASTRUCTURE
    message = lost.value.one_line()
    assert message.startswith(
        f"two live baselines: still conflicting with another writer after {ATTEMPTS} attempts ("
    )
    assert "\n" not in message
    assert count_rows(database_url, "baselines") == 0
