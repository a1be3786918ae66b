"""Several processes ingesting at once, into a database none of them has set up yet.

The first use migrates the empty database, so this also races the migrations themselves. One
test covers both races (the same runs from every process, then distinct runs from each): each
spawned process costs a second of imports on a small CI machine.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.queues import Queue
from pathlib import Path
from threading import Barrier

import pytest
from conftest_db import count_rows, fake_run, query

from perfgate.store.ingest import store_run

pytest_plugins = ["conftest_db"]


def ingest_runs(url: str, root: str, run_ids: list[str], start: Barrier, stored: Queue) -> None:
    """Worker: wait for every process, then store each run; report how many this one stored."""
    start.wait()
    stored.put(sum(store_run(url, fake_run(run_id), Path(root)) for run_id in run_ids))


def ingest_concurrently(url: str, root: Path, batches: list[list[str]]) -> int:
    """Spawned processes (no state shared through fork), released together by a barrier."""
    context = multiprocessing.get_context("spawn")
    start, stored = context.Barrier(len(batches)), context.Queue()
    workers = [
        context.Process(target=ingest_runs, args=(url, str(root), batch, start, stored))
        for batch in batches
    ]
    for worker in workers:
        worker.start()
    counts = [stored.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    return sum(counts)


def run_id(number: int) -> str:
    return f"00000000-0000-4000-8000-{number:012d}"


@pytest.mark.slow
def test_eight_processes_ingesting_at_once(database_url: str, tmp_path: Path) -> None:
    """All eight first store the same 10 runs (each stored once), then 25 runs of their own."""
    shared = [run_id(i) for i in range(10)]
    batches = [shared + [run_id(1000 + p * 100 + i) for i in range(25)] for p in range(8)]
    assert ingest_concurrently(database_url, tmp_path, batches) == 10 + 8 * 25
    assert count_rows(database_url, "runs") == 210
    assert query(database_url, "SELECT count(DISTINCT id) FROM runs") == [(210,)]
    assert count_rows(database_url, "workload_results") == 210
    assert count_rows(database_url, "repeat_samples") == 3 * 210
    assert count_rows(database_url, "environments") == 1
