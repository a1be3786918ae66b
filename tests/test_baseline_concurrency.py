"""Exactly one live baseline per key, however many refreshes run at once (issue 16).

The partial unique index of migration 0004 makes a second live baseline impossible; a refresh
takes the write lock (SQLite) or the branch's advisory lock (PostgreSQL) first, so the others
wait, then re-read what the first one wrote and leave it alone. Every trial starts from the same
history: one refresh already ran on its first part, so of the three keys one moves after a step,
one moves because its window moved on, and one gets its first baseline.
"""

from __future__ import annotations

import multiprocessing
import shutil
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from multiprocessing.queues import Queue
from pathlib import Path
from threading import Barrier

import pytest
from conftest_db import postgres_database, query
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import IntegrityError

from perfgate.baseline.refresh import refresh_baselines
from perfgate.documents.result import (
    RepeatResult,
    RunResult,
    RunSettings,
    SourceInfo,
    WorkloadResult,
    WorkloadSummary,
)
from perfgate.documents.snapshot import baseline_key
from perfgate.store.engine import make_engine
from perfgate.store.ingest import store_runs
from perfgate.telemetry.fingerprint import fingerprint_key

pytest_plugins = ["conftest_db"]

PROCESSES = 6
TRIALS = 10
START = datetime(2026, 11, 1, tzinfo=timezone.utc)
ENVIRONMENT = {"device": "cpu", "cpu": {"model": "test cpu", "physical_cores": 2}}
BEFORE, AFTER = 20, 12
"""Runs refreshed once before the trial, and runs added after that refresh."""


def level(workload: str, index: int) -> float | None:
    """Median step time of ``workload`` in run ``index``: ``mlp`` steps up by 25 % after the
    first refresh, ``gpt`` stays flat, ``conv`` only starts running after it."""
    wobble = 1 + 0.01 * ((index * 7) % 5 - 2)
    if workload == "mlp":
        return (0.100 if index < BEFORE else 0.125) * wobble
    if workload == "gpt":
        return 0.200 * wobble
    return 0.050 * wobble if index >= BEFORE else None


def nightly_run(index: int) -> RunResult:
    """Run ``index`` of the nightly history, with every workload that ran that night."""
    workloads = []
    for position, name in enumerate(("mlp", "gpt", "conv")):
        step_s = level(name, index)
        if step_s is None:
            continue
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
        workloads.append(
            WorkloadResult(
                name=name,
                version=1,
                kind="builtin",
                factory=f"perfgate.workloads.{name}:build",
                preset="smoke",
                definition_hash=str(position) * 64,
                knobs={},
                params={},
                device="cpu",
                status="ok",
                samples_per_step=64,
                repeats=repeats,
                summary=WorkloadSummary(ok_repeats=3, median_step_s=step_s, mfu_reason="CPU"),
            )
        )
    started = (START + timedelta(hours=index)).isoformat(timespec="seconds")
    return RunResult(
        run_id=f"00000000-0000-4000-8000-{index:012d}",
        perfgate_version="0.1.0",
        started_at=started,
        finished_at=started,
        suite="smoke",
        device="cpu",
        settings=RunSettings(repeats=3, steps=3, warmup=1, timeout_s=60, threads=2, seed=0),
        source=SourceInfo(commit=f"c{index:03d}", branch="main", trigger="nightly"),
        environment=ENVIRONMENT,
        workloads=workloads,
    )


def prepare_history(url: str, root: Path) -> None:
    """The first runs, a refresh over them, then the runs every trial's refreshes will see."""
    store_runs(url, [(nightly_run(i), None) for i in range(BEFORE)], root)
    engine = make_engine(url, root)
    try:
        assert {o.action for o in refresh_baselines(engine, "main").keys} == {"created"}
    finally:
        engine.dispose()
    store_runs(url, [(nightly_run(i), None) for i in range(BEFORE, BEFORE + AFTER)], root)


@pytest.fixture(scope="module")
def sqlite_history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file holding the history, prepared once and copied by each trial."""
    root = tmp_path_factory.mktemp("history")
    path = root / "history.db"
    prepare_history(f"sqlite:///{path}", root)
    assert not path.with_name("history.db-wal").exists()  # checkpointed: the file is complete
    return path


@pytest.fixture(scope="module")
def postgres_history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The name of a PostgreSQL database holding the history: each trial's is a copy of it."""
    with postgres_database() as url:
        prepare_history(url, tmp_path_factory.mktemp("history"))
        name = make_url(url).database
        assert name is not None
        yield name


@pytest.fixture(params=["sqlite", "postgresql"])
def history_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database holding the prepared history."""
    if request.param == "sqlite":
        path = tmp_path / "perfgate.db"
        shutil.copyfile(request.getfixturevalue("sqlite_history"), path)
        yield f"sqlite:///{path}"
        return
    with postgres_database(template=request.getfixturevalue("postgres_history")) as url:
        yield url


def serve_refreshes(commands: Queue, start: Barrier, done: Queue) -> None:
    """Worker: for each ``(url, root)`` received, open the store, wait for every worker,
    refresh, and report the actions or the traceback (a worker that raised must fail the
    test, not hang it); None ends it."""
    while (job := commands.get()) is not None:
        url, root = job
        try:
            engine = make_engine(url, Path(root))
            start.wait(timeout=120)
            outcomes = refresh_baselines(engine, "main").keys
            engine.dispose()
            done.put([(o.workload, o.action) for o in outcomes])
        except BaseException:
            done.put(traceback.format_exc())


class RefreshPool:
    """``PROCESSES`` spawned processes (no state shared through fork), started once for the
    module: a process pays its imports (scipy, ruptures, SQLAlchemy: 1.3-2.7 s on the CI
    machine) once, not once per trial, and every trial still releases them together."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._start = context.Barrier(PROCESSES)
        self._done: Queue = context.Queue()
        self._commands: list[Queue] = [context.Queue() for _ in range(PROCESSES)]
        self._workers = [
            context.Process(target=serve_refreshes, args=(commands, self._start, self._done))
            for commands in self._commands
        ]
        for worker in self._workers:
            worker.start()

    def refresh_concurrently(self, url: str, root: Path) -> list[list[tuple[str, str]] | str]:
        """Every process refreshes ``url`` at once; their reports."""
        for commands in self._commands:
            commands.put((url, str(root)))
        return [self._done.get(timeout=300) for _ in self._workers]

    def close(self) -> None:
        for commands in self._commands:
            commands.put(None)
        for worker in self._workers:
            worker.join(timeout=30)
            assert worker.exitcode == 0


@pytest.fixture(scope="module")
def refresh_pool() -> Iterator[RefreshPool]:
    pool = RefreshPool()
    try:
        yield pool
    finally:
        pool.close()


def live_per_workload(url: str) -> dict[str, int]:
    """Live baselines per workload (each workload is one key here)."""
    rows = query(url, "SELECT workload, count(*) FROM baselines WHERE status = 'live' GROUP BY 1")
    return dict(rows)


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(TRIALS))
def test_concurrent_refreshes_leave_one_live_baseline_per_key(
    history_url: str, tmp_path: Path, trial: int, refresh_pool: RefreshPool
) -> None:
    """Six refreshes at once: one moves or creates each baseline, the five others find it done."""
    reports = refresh_pool.refresh_concurrently(history_url, tmp_path)
    failures = [report for report in reports if isinstance(report, str)]
    assert failures == []
    actions = Counter(pair for report in reports for pair in report)
    assert actions == {
        ("mlp", "moved"): 1,
        ("gpt", "moved"): 1,
        ("conv", "created"): 1,
        ("mlp", "unchanged"): PROCESSES - 1,
        ("gpt", "unchanged"): PROCESSES - 1,
        ("conv", "unchanged"): PROCESSES - 1,
    }
    assert live_per_workload(history_url) == {"mlp": 1, "gpt": 1, "conv": 1}
    statuses = query(
        history_url, "SELECT workload, status, count(*) FROM baselines GROUP BY 1, 2 ORDER BY 1, 2"
    )
    assert statuses == [
        ("conv", "live", 1),
        ("gpt", "live", 1),
        ("gpt", "retired", 1),
        ("mlp", "live", 1),
        ("mlp", "retired", 1),
    ]
    assert query(history_url, "SELECT count(*) FROM change_points") == [(1,)]


def test_the_index_refuses_a_second_live_baseline(history_url: str) -> None:
    """The guarantee is the database's: a second live row fails whoever inserts it."""
    copy_live = (
        "INSERT INTO baselines (key, suite, workload, definition_hash, knobs, environment_key, "
        "branch, status, created_at, reason, method, metrics) SELECT key, suite, workload, "
        "definition_hash, knobs, environment_key, branch, :status, created_at, 'by hand', "
        "method, metrics FROM baselines WHERE status = 'live' AND workload = 'mlp'"
    )
    engine = create_engine(history_url)
    try:
        with engine.begin() as connection:
            connection.execute(text(copy_live), {"status": "retired"})
        with pytest.raises(IntegrityError), engine.begin() as connection:
            connection.execute(text(copy_live), {"status": "live"})
    finally:
        engine.dispose()
    assert live_per_workload(history_url)["mlp"] == 1


CONV_KEY = baseline_key("smoke", "2" * 64, {}, fingerprint_key(ENVIRONMENT), "main")
"""The key of ``conv``, which has no baseline until the history's second part is refreshed."""
INSERT_BY_HAND = (
    "INSERT INTO baselines (key, suite, workload, definition_hash, knobs, environment_key, "
    "branch, status, created_at, reason, method, metrics) SELECT :key, suite, 'conv', "
    "definition_hash, knobs, environment_key, branch, 'live', created_at, 'by hand', method, "
    "metrics FROM baselines WHERE workload = 'mlp'"
)


@pytest.mark.slow
def test_a_refresh_that_loses_the_race_at_the_index_retries(tmp_path: Path) -> None:
    """A live baseline written by a writer that takes no refresh lock (a hand-run SQL script)
    lands between the refresh's read and its write: the refresh's insert fails on the index,
    and its retry re-reads, finds that baseline and retires it like any other.

    PostgreSQL only: on SQLite the refresh holds the write lock from its first read, so nothing
    can land in between.
    """
    with postgres_database() as url:
        prepare_history(url, tmp_path)
        engine = create_engine(url)
        try:
            with engine.connect() as intruder:
                intruder.execute(text(INSERT_BY_HAND), {"key": CONV_KEY})
                refresh = RefreshThread(url, tmp_path)
                refresh.start()
                wait_until_blocked_on_a_lock(engine, refresh)
                intruder.commit()
                refresh.join()
        finally:
            engine.dispose()
        assert refresh.error is None
        assert ("conv", "moved") in refresh.actions
        rows = query(
            url, "SELECT reason, status FROM baselines WHERE key = :key ORDER BY id", key=CONV_KEY
        )
        assert [(reason == "by hand", status) for reason, status in rows] == [
            (True, "retired"),
            (False, "live"),
        ]


class RefreshThread(threading.Thread):
    """A refresh in a thread of this process, keeping its actions or its exception."""

    def __init__(self, url: str, root: Path) -> None:
        super().__init__()
        self.url, self.root = url, root
        self.actions: list[tuple[str, str]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        engine = make_engine(self.url, self.root)
        try:
            self.actions = [(o.workload, o.action) for o in refresh_baselines(engine, "main").keys]
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error = exc
        finally:
            engine.dispose()


def wait_until_blocked_on_a_lock(engine: Engine, refresh: threading.Thread) -> None:
    """Until another session of this database waits for a lock (the refresh, on the index
    entry the uncommitted row holds); fails if the refresh ends without ever waiting."""
    waiting = text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
    )
    while refresh.is_alive():
        with engine.connect() as connection:
            if connection.execute(waiting).scalar_one():
                return
        time.sleep(0.05)
    pytest.fail("the refresh never waited for the uncommitted live baseline")
