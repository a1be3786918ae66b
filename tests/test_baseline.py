"""Baseline refresh and export on real SQLite and PostgreSQL databases of synthetic nightly runs."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from fixture_types import CliRun
from sqlmodel import Session, col, select

from perfgate.baseline.export import export_baselines
from perfgate.baseline.refresh import RefreshPolicy, refresh_baselines
from perfgate.documents.refresh import REFRESH
from perfgate.documents.result import (
    RepeatResult,
    RunResult,
    RunSettings,
    SourceInfo,
    WorkloadResult,
    WorkloadSummary,
)
from perfgate.documents.snapshot import baseline_key, snapshot_path
from perfgate.store.engine import make_engine
from perfgate.store.ingest import store_run, store_runs
from perfgate.store.tables import BaselineRow, ChangePointRow
from perfgate.telemetry.fingerprint import fingerprint_key

START = datetime(2026, 11, 1, tzinfo=timezone.utc)
ENVIRONMENT = {"device": "cpu", "cpu": {"model": "test cpu", "physical_cores": 2}}


def nightly_run(index: int, step_s: float, branch: str = "main") -> RunResult:
    """One nightly run of ``mlp`` whose three repeats have a median step time of ``step_s``."""
    repeats = [
        RepeatResult(
            index=r,
            status="ok",
            timer="perf_counter",
            step_times_s=[step_s * f for f in (0.99, 1.0, 1.01)],
            losses=[1.0],
        )
        for r in range(3)
    ]
    workload = WorkloadResult(
        name="mlp",
        version=1,
        kind="builtin",
        factory="perfgate.workloads.mlp:build",
        preset="smoke",
        definition_hash="d" * 64,
        knobs={"precision": "off"},
        params={},
        device="cpu",
        status="ok",
        samples_per_step=64,
        repeats=repeats,
        summary=WorkloadSummary(ok_repeats=3, median_step_s=step_s, mfu_reason="CPU"),
    )
    started = (START + timedelta(hours=index)).isoformat(timespec="seconds")
    return RunResult(
        run_id=str(uuid.UUID(int=index + 1)),
        perfgate_version="0.1.0",
        started_at=started,
        finished_at=started,
        suite="smoke",
        device="cpu",
        settings=RunSettings(repeats=3, steps=3, warmup=1, timeout_s=60, threads=2, seed=0),
        source=SourceInfo(commit=f"c{index:03d}", branch=branch, trigger="nightly"),
        environment=ENVIRONMENT,
        workloads=[workload],
    )


pytest_plugins = ["conftest_db"]


def history(url: str, values: list[float], tmp_path: Path) -> str:
    store_runs(
        url, [(nightly_run(index, value), None) for index, value in enumerate(values)], tmp_path
    )
    return url


def noisy(level: float, count: int, seed: int, cv: float = 0.02) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in level * (1 + cv * rng.standard_normal(count))]


KEY = baseline_key("smoke", "d" * 64, {"precision": "off"}, fingerprint_key(ENVIRONMENT), "main")


def test_step_is_found_and_the_baseline_moves_after_it(database_url: str, tmp_path: Path) -> None:
    url = history(database_url, noisy(0.100, 30, 1) + noisy(0.112, 10, 2), tmp_path)
    engine = make_engine(url, tmp_path)
    report = refresh_baselines(engine, "main")
    (outcome,) = report.keys
    assert outcome.key == KEY and outcome.action == "created"
    assert [c.index for c in outcome.change_points] == [30]
    # The step is new tonight, a slowdown, with the commits around it: the range to bisect.
    ((key, new),) = report.new_slowdowns()
    assert key is outcome and new.new and (new.commit_before, new.commit_after) == ("c029", "c030")
    assert new.relative_change == pytest.approx(0.12, abs=0.03)
    # The next refresh still sees the step, but it was explained last night.
    again = refresh_baselines(engine, "main")
    assert [c.new for c in again.keys[0].change_points] == [False] and again.new_slowdowns() == []
    with Session(engine) as session:
        (baseline,) = session.exec(select(BaselineRow)).all()
        (step,) = session.exec(select(ChangePointRow)).all()
    # Newest segment is runs 30..39; the last min_segment-1 = 4 are not confirmed yet.
    assert baseline.method["first_run"] == str(uuid.UUID(int=31))
    assert baseline.method["last_run"] == str(uuid.UUID(int=36))
    assert baseline.metrics["step_time_s"]["median"] == pytest.approx(0.112, rel=0.03)
    assert len(baseline.metrics["step_time_s"]["repeat_values"]) == 6 * 3
    assert (step.commit_before, step.commit_after) == ("c029", "c030")


def test_refresh_is_stable_and_a_spike_never_moves_a_baseline(
    database_url: str, tmp_path: Path
) -> None:
    values = noisy(0.100, 20, 3)
    url = history(database_url, values, tmp_path)
    engine = make_engine(url, tmp_path)
    (first,) = refresh_baselines(engine, "main").keys
    (again,) = refresh_baselines(engine, "main").keys
    assert (first.action, again.action) == ("created", "unchanged")

    store_run(url, nightly_run(20, 0.300), tmp_path)  # one 3x stall
    for offset in range(1, 6):
        store_run(url, nightly_run(20 + offset, noisy(0.100, 1, 10 + offset)[0]), tmp_path)
    (after_spike,) = refresh_baselines(engine, "main").keys
    assert after_spike.change_points == []
    assert after_spike.action == "unchanged"


def test_first_baseline_needs_enough_runs(database_url: str, tmp_path: Path) -> None:
    url = history(database_url, [0.1, 0.1], tmp_path)
    (outcome,) = refresh_baselines(make_engine(url, tmp_path), "main").keys
    assert outcome.action == "insufficient" and "3 needed" in outcome.reason


def test_moved_baseline_retires_the_old_one(database_url: str, tmp_path: Path) -> None:
    url = history(database_url, noisy(0.100, 12, 4), tmp_path)
    engine = make_engine(url, tmp_path)
    refresh_baselines(engine, "main", RefreshPolicy(window=10))
    for offset, value in enumerate(noisy(0.125, 12, 5)):
        store_run(url, nightly_run(12 + offset, value), tmp_path)
    (outcome,) = refresh_baselines(engine, "main", RefreshPolicy(window=10)).keys
    assert outcome.action == "moved" and "change point" in outcome.reason
    with Session(engine) as session:
        rows = session.exec(select(BaselineRow).order_by(col(BaselineRow.id))).all()
    assert [r.status for r in rows] == ["retired", "live"]
    assert rows[0].retired_at is not None
    assert rows[1].metrics["step_time_s"]["median"] == pytest.approx(0.125, rel=0.03)


def test_export_is_deterministic_and_mirrors_live_baselines(
    database_url: str, tmp_path: Path
) -> None:
    url = history(database_url, noisy(0.100, 8, 6), tmp_path)
    engine = make_engine(url, tmp_path)
    refresh_baselines(engine, "main")
    out = tmp_path / "baselines"
    stale = out / "smoke" / ("0" * 64 + ".json")
    stale.parent.mkdir(parents=True)
    stale.write_text('{"schema": "perfgate.baseline", "branch": "main"}')
    written, removed = export_baselines(engine, "main", out)
    path = snapshot_path(out, "smoke", KEY, "mlp", "smoke")
    assert path.name == f"mlp@smoke-{KEY[:12]}.json"
    assert written == [path] and removed == [stale] and not stale.exists()
    first = path.read_bytes()
    export_baselines(engine, "main", out)
    assert path.read_bytes() == first
    import json

    data = json.loads(first)
    assert data["workload"] == "mlp" and data["environment"] == ENVIRONMENT
    assert [r["commit"] for r in data["runs"]][:2] == ["c000", "c001"]
    assert "step_times_s" not in first.decode()


@pytest.mark.slow
def test_baseline_commands_through_the_cli(tmp_path: Path, perfgate_cli: CliRun) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    (tmp_path / "perfgate.toml").write_text(f'database_url = "{url}"\n')
    history(url, noisy(0.100, 20, 7) + noisy(0.120, 12, 8), tmp_path)

    refreshed = perfgate_cli(
        "baseline", "refresh", "--branch", "main", "--json", "refresh.json", cwd=tmp_path
    )
    assert refreshed.returncode == 0, refreshed.stderr
    assert "created" in refreshed.stdout and "@20 +" in refreshed.stdout
    report = REFRESH.load(tmp_path / "refresh.json")
    assert [(s.index, s.new) for s in report.keys[0].change_points] == [(20, True)]

    shown = perfgate_cli("baseline", "show", "--all", cwd=tmp_path)
    assert shown.returncode == 0 and "mlp" in shown.stdout and "live" in shown.stdout

    exported = perfgate_cli("baseline", "export", "--branch", "main", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert (tmp_path / "baselines" / "smoke" / f"mlp@smoke-{KEY[:12]}.json").is_file()

    bad = perfgate_cli("baseline", "refresh", "--branch", "main", "--window", "2", cwd=tmp_path)
    assert bad.returncode == 2 and "--min-runs" in bad.stderr
