"""``perfgate db prune``: old raw arrays are cleared, except those behind a live baseline."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest_db import fake_run, query
from fixture_types import CliRun
from sqlalchemy import create_engine
from sqlmodel import Session, select

from perfgate.errors import ExitCode, UsageError
from perfgate.store.ingest import store_run
from perfgate.store.maintenance import PruneOutcome, prune_samples
from perfgate.store.tables import BaselineRow, BaselineRunRow, RunRow, WorkloadResultRow

pytest_plugins = ["conftest_db"]
NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
OLD, RECENT = "2026-01-01T00:00:00+00:00", "2026-11-30T12:00:00+01:00"


def add_baseline(url: str, run_id: str, status: str) -> None:
    """A baseline built from ``run_id``'s workload result, inserted directly."""
    engine = create_engine(url)
    with Session(engine) as session:
        run = session.get(RunRow, run_id)
        workload = session.exec(
            select(WorkloadResultRow).where(WorkloadResultRow.run_id == run_id)
        ).one()
        assert run is not None and workload.id is not None
        baseline = BaselineRow(
            key="k" * 64,
            workload=workload.name,
            definition_hash=workload.definition_hash,
            knobs={},
            environment_key=run.environment_key,
            branch="main",
            status=status,
            created_at=OLD,
            reason="test",
            method={},
            metrics={},
        )
        session.add(baseline)
        session.flush()
        assert baseline.id is not None
        session.add(
            BaselineRunRow(baseline_id=baseline.id, workload_result_id=workload.id, run_id=run_id)
        )
        session.commit()
    engine.dispose()


def raw_steps(url: str, run_id: str) -> list[list[float]]:
    rows = query(
        url,
        "SELECT s.step_times_s, s.median_step_s FROM repeat_samples s JOIN workload_results w "
        "ON w.id = s.workload_result_id WHERE w.run_id = :run AND s.status = 'ok' ORDER BY s.id",
        run=run_id,
    )
    assert all(median is not None for _, median in rows)  # medians always survive
    return [json.loads(steps) if isinstance(steps, str) else steps for steps, _ in rows]


def test_prune_keeps_live_baselines_and_recent_runs(database_url: str, tmp_path: Path) -> None:
    live, retired, plain = (fake_run(started_at=OLD) for _ in range(3))
    recent = fake_run(started_at=RECENT)
    for run in (live, retired, plain, recent):
        store_run(database_url, run, tmp_path)
    add_baseline(database_url, live.run_id, "live")
    add_baseline(database_url, retired.run_id, "retired")

    outcome = prune_samples(database_url, tmp_path, keep_days=30, now=NOW)
    assert outcome == PruneOutcome(pruned=4, kept_for_baselines=2)  # 2 ok repeats per run
    assert raw_steps(database_url, retired.run_id) == [[], []]
    assert raw_steps(database_url, plain.run_id) == [[], []]
    assert all(raw_steps(database_url, r.run_id)[0] for r in (live, recent))
    again = prune_samples(database_url, tmp_path, keep_days=30, now=NOW)
    assert again == PruneOutcome(pruned=0, kept_for_baselines=2)


def test_negative_keep_days_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--keep-days"):
        prune_samples(f"sqlite:///{tmp_path / 'x.db'}", tmp_path, keep_days=-1)


@pytest.mark.slow
def test_db_prune_through_the_cli(tmp_path: Path, perfgate_cli: CliRun) -> None:
    (tmp_path / "perfgate.toml").write_text('database_url = "sqlite:///runs.db"\n')
    store_run("sqlite:///runs.db", fake_run(started_at=OLD), tmp_path)
    completed = perfgate_cli("db", "prune", "--keep-days", "7", cwd=tmp_path)
    assert completed.returncode == ExitCode.OK, completed.stderr
    assert "pruned raw samples of 2 repeats older than 7 days; kept 0" in completed.stdout
    refused = perfgate_cli("db", "prune", "--keep-days", "-1", cwd=tmp_path)
    assert refused.returncode == ExitCode.USAGE and "--keep-days" in refused.stderr
