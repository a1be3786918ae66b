"""Database fixtures for the store tests: every test runs on SQLite and on a real PostgreSQL.

Loaded by the store test modules through ``pytest_plugins``. Each PostgreSQL test gets its own
fresh database (created through the ``test`` database, dropped afterwards), so tests can run in
any order and a failed test leaves nothing behind for the next.

Test modules also import its helpers, so pytest must not try to rewrite it on plugin load
(PYTEST_DONT_REWRITE; it holds no asserts).
"""

from __future__ import annotations

import os
import secrets
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from perfgate.documents.result import (
    FlopCount,
    RepeatResult,
    RunResult,
    RunSettings,
    SourceInfo,
    WorkloadResult,
    WorkloadSummary,
)

POSTGRES_ADMIN_URLS = (
    "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "postgresql+psycopg://root@127.0.0.1:5432/test",
)
STEP_TIMES = [0.30, 0.10, 0.12, 0.11]
"""Steady from index 1: the repeat median is 0.11 s."""


@cache
def postgres_admin() -> tuple[Engine | None, str]:
    """An AUTOCOMMIT engine on the ``test`` database, or None and why it is unreachable."""
    reasons = []
    for url in POSTGRES_ADMIN_URLS:
        engine = create_engine(
            url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3}
        )
        try:
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
            return engine, url
        except OperationalError as exc:
            reasons.append(str(exc.orig).strip().splitlines()[0])
            engine.dispose()
    return None, "; ".join(reasons)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A URL to an empty database: a fresh SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('db') / 'perfgate.db'}"
        return
    with postgres_database() as url:
        yield url


@contextmanager
def postgres_database(template: str | None = None) -> Iterator[str]:
    """A fresh PostgreSQL database (a copy of ``template`` when given), dropped afterwards.

    Skips the test when PostgreSQL is unreachable, or fails it under PERFGATE_REQUIRE_POSTGRES.
    """
    admin, detail = postgres_admin()
    if admin is None:
        message = f"PostgreSQL on 127.0.0.1:5432 is unreachable ({detail})"
        if os.environ.get("PERFGATE_REQUIRE_POSTGRES"):  # CI: never pass by skipping
            pytest.fail(message)
        pytest.skip(message)
    name = f"perfgate_t_{secrets.token_hex(6)}"
    copy = f' TEMPLATE "{template}"' if template else ""
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"{copy}'))
    try:
        yield admin.url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def fake_run(
    run_id: str | None = None,
    *,
    started_at: str = "2026-11-29T18:00:00+00:00",
    device: str = "cpu",
    loss: float = 1.0,
) -> RunResult:
    """A small result document (two ok repeats and one crashed) built without running anything.

    Deterministic for a given ``run_id``: processes building the same id build the same document.
    """
    repeats = [
        RepeatResult(
            index=index,
            status="ok",
            timer="perf_counter",
            step_times_s=[t * (1 + index / 10) for t in STEP_TIMES],
            steady_start=1,
            losses=[loss] * len(STEP_TIMES),
            dataloader_wait_s=[0.001] * len(STEP_TIMES),
            peak_memory={"rss_bytes": 1000 + index, "cuda_allocated_bytes": 5_000_000_000 + index},
        )
        for index in range(2)
    ]
    repeats.append(RepeatResult(index=2, status="crashed", error="SIGKILL"))
    workload = WorkloadResult(
        name="mlp",
        version=1,
        kind="builtin",
        factory="perfgate.workloads.mlp:build",
        preset="smoke",
        definition_hash="a" * 64,
        knobs={"width": 64},
        params={},
        device=device,
        status="ok",
        samples_per_step=32,
        flops=FlopCount(counted_per_step=2_000_000_000, used="counted"),
        repeats=repeats,
        summary=WorkloadSummary(
            ok_repeats=2,
            median_step_s=0.1155,
            peak_tflops=100.0 if device == "cuda" else None,
            peak_memory_bytes=5_000_000_001 if device == "cuda" else 1001,
            mfu_reason=None if device == "cuda" else "CPU",
        ),
    )
    return RunResult(
        run_id=run_id or str(uuid.uuid4()),
        perfgate_version="0.1.0",
        started_at=started_at,
        finished_at=started_at,
        suite="smoke",
        device=device,
        settings=RunSettings(repeats=3, steps=4, warmup=1, timeout_s=10, threads=2, seed=0),
        source=SourceInfo(commit="c0ffee", branch="main"),
        environment={"cpu": "test"},
        workloads=[workload],
    )


def query(url: str, sql: str, **params: object) -> list[Any]:
    """Rows of a plain SQL query, on an engine without perfgate's schema check."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return list(connection.execute(text(sql), params).all())
    finally:
        engine.dispose()


def count_rows(url: str, table: str) -> int:
    """Rows in ``table``."""
    return int(query(url, f"SELECT count(*) FROM {table}")[0][0])
