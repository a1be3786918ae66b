"""Schema migrations: first use, upgrades that keep data, refusal of older and newer schemas."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from conftest_db import count_rows, fake_run, query
from fixture_types import CliRun
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlmodel import SQLModel

from perfgate.documents.result import write_result
from perfgate.errors import ExitCode, InfrastructureError
from perfgate.store import tables
from perfgate.store.engine import (
    MIGRATIONS,
    SchemaOutOfDate,
    SchemaTooNew,
    StoreUnavailable,
    head_revision,
    make_engine,
    normalise_url,
    schema_revision,
    upgrade_database,
)
from perfgate.store.ingest import store_run

pytest_plugins = ["conftest_db"]
FIRST_TABLES = ["environments", "runs", "workload_results", "repeat_samples"]
NEW_TABLES = ["metric_summaries", "baselines", "baseline_runs", "change_points", "calibrations"]


@contextmanager
def connected(url: str) -> Iterator[Connection]:
    """A committed transaction on a plain engine (no perfgate schema check)."""
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            yield connection
    finally:
        engine.dispose()


def migrate_to(url: str, revision: str) -> None:
    with connected(url) as connection:
        config = AlembicConfig()
        config.set_main_option("script_location", str(MIGRATIONS))
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def create_all_first_tables(url: str) -> None:
    """What perfgate 0.1 did: ``create_all`` of its four tables, no ``alembic_version``."""
    engine = create_engine(url)
    names = set(FIRST_TABLES)
    SQLModel.metadata.create_all(
        engine, tables=[t for t in SQLModel.metadata.sorted_tables if t.name in names]
    )
    engine.dispose()


def insert_first_version_rows(url: str) -> None:
    """A run with two workloads and three samples, as plain SQL (no ORM of today's tables)."""
    with connected(url) as connection:
        sql = [
            "INSERT INTO environments (key, fingerprint) VALUES ('env1', :json)",
            "INSERT INTO runs (id, suite, device, trigger, started_at, finished_at, status, "
            "perfgate_version, environment_key, settings, document_sha256) VALUES ('run1', "
            "'smoke', 'cpu', 'manual', '2026-01-01T00:00:00+00:00', "
            "'2026-01-01T00:01:00+00:00', 'ok', '0.1.0', 'env1', :json, 'abc')",
        ]
        for statement in sql:
            connection.execute(text(statement), {"json": json.dumps({"k": 1})})
        for name in ("gpt", "mlp"):
            connection.execute(
                text(
                    "INSERT INTO workload_results (run_id, name, version, kind, preset, "
                    "definition_hash, knobs, status, median_step_s, peak_memory_bytes, summary) "
                    "VALUES ('run1', :name, 1, 'builtin', 'smoke', 'h', '{}', 'ok', 0.5, 1000, "
                    "'{}')"
                ),
                {"name": name},
            )
        for name, steps in (("gpt", "[0.5, 0.5]"), ("gpt", "[0.5]"), ("mlp", "[0.5]")):
            connection.execute(
                text(
                    "INSERT INTO repeat_samples (workload_result_id, repeat_index, status, "
                    "steady_start, median_step_s, step_times_s, losses, dataloader_wait_s) "
                    "SELECT id, 0, 'ok', 0, 0.5, :steps, '[1.0]', '[]' FROM workload_results "
                    "WHERE name = :name"
                ),
                {"name": name, "steps": steps},
            )


def assert_first_version_rows_intact(url: str) -> None:
    counts = {name: count_rows(url, name) for name in FIRST_TABLES}
    assert counts == {"environments": 1, "runs": 1, "workload_results": 2, "repeat_samples": 3}
    rows = query(url, "SELECT step_times_s FROM repeat_samples ORDER BY id")
    steps = [json.loads(row[0]) if isinstance(row[0], str) else row[0] for row in rows]
    assert steps == [[0.5, 0.5], [0.5], [0.5]]


def table_names(url: str) -> set[str]:
    with connected(url) as connection:
        return set(inspect(connection).get_table_names())


def test_first_use_migrates_an_empty_database_to_head(database_url: str, tmp_path: Path) -> None:
    make_engine(database_url, tmp_path).dispose()
    assert table_names(database_url) >= {*FIRST_TABLES, *NEW_TABLES, "alembic_version"}
    with connected(database_url) as connection:
        assert schema_revision(connection) == head_revision() == "0004"
    assert upgrade_database(database_url, tmp_path) == ("0004", "0004")


def test_migrations_create_exactly_the_tables_of_tables_py(
    database_url: str, tmp_path: Path
) -> None:
    make_engine(database_url, tmp_path).dispose()
    assert tables.RunRow.__tablename__ == "runs"  # registers every table on the metadata
    with connected(database_url) as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        differences = compare_metadata(context, SQLModel.metadata)
    if database_url.startswith("sqlite"):  # INTEGER is 64-bit there: 0002 widens it elsewhere
        differences = [d for d in differences if d[0][3] != "peak_memory_bytes"]
    assert differences == []


@pytest.mark.parametrize(
    "prepare",
    [lambda url: migrate_to(url, "0001"), create_all_first_tables],
    ids=["revision-0001", "legacy-create-all"],
)
def test_upgrade_from_the_first_schema_keeps_every_row(
    database_url: str, tmp_path: Path, prepare: Callable[[str], None]
) -> None:
    prepare(database_url)
    insert_first_version_rows(database_url)
    with connected(database_url) as connection:
        assert schema_revision(connection) == "0001"

    with pytest.raises(SchemaOutOfDate) as refused:
        make_engine(database_url, tmp_path)
    assert refused.value.exit_code == ExitCode.INFRASTRUCTURE
    assert isinstance(refused.value, InfrastructureError)
    assert str(refused.value) == (
        "database schema is at revision 0001, this perfgate needs 0004 — run `perfgate db upgrade`"
    )

    assert upgrade_database(database_url, tmp_path) == ("0001", "0004")
    assert_first_version_rows_intact(database_url)
    assert table_names(database_url) >= set(NEW_TABLES)
    assert store_run(database_url, fake_run(), tmp_path)
    assert count_rows(database_url, "runs") == 2


def insert_baseline(connection: Connection, key: str, status: str, created_at: str) -> int:
    """A baseline row as plain SQL (what revision 0003 allowed); returns its id."""
    return int(
        connection.execute(
            text(
                "INSERT INTO baselines (key, workload, definition_hash, knobs, environment_key, "
                "branch, status, created_at, reason, method, metrics) VALUES (:key, 'mlp', 'h', "
                "'{}', 'env1', 'main', :status, :created_at, 'first baseline', '{}', '{}') "
                "RETURNING id"
            ),
            {"key": key, "status": status, "created_at": created_at},
        ).scalar_one()
    )


def test_upgrade_retires_all_but_the_newest_live_baseline_of_a_key(
    database_url: str, tmp_path: Path
) -> None:
    """What concurrent refreshes left before 0004 (issue 16): four live baselines for one key."""
    migrate_to(database_url, "0003")
    with connected(database_url) as connection:
        connection.execute(
            text("INSERT INTO environments (key, fingerprint) VALUES ('env1', '{}')")
        )
        older = insert_baseline(connection, "k1", "retired", "2026-01-01T00:00:00+00:00")
        duplicates = [
            insert_baseline(connection, "k1", "live", created_at)
            for created_at in (
                "2026-01-02T00:00:00+00:00",
                "2026-01-04T00:00:00+00:00",
                "2026-01-03T00:00:00+00:00",
                "2026-01-04T00:00:00+00:00",  # as new as the second: the higher id wins
            )
        ]
        alone = insert_baseline(connection, "k2", "live", "2026-01-02T00:00:00+00:00")

    assert upgrade_database(database_url, tmp_path) == ("0003", "0004")
    rows = query(database_url, "SELECT id, key, status, retired_at, reason FROM baselines")
    by_id = {row[0]: tuple(row[1:]) for row in rows}
    newest = duplicates[-1]
    assert sorted(i for i, row in by_id.items() if row[1] == "live") == [newest, alone]
    assert by_id[older] == ("k1", "retired", None, "first baseline")
    assert by_id[alone] == ("k2", "live", None, "first baseline")
    for retired in duplicates[:-1]:
        key, status, retired_at, reason = by_id[retired]
        assert (key, status) == ("k1", "retired") and retired_at is not None
        assert reason.startswith("first baseline [retired by migration 0004:")
        assert f"baseline {newest} of the same key was newer" in reason

    with pytest.raises(IntegrityError), connected(database_url) as connection:
        insert_baseline(connection, "k2", "live", "2026-01-05T00:00:00+00:00")
    with connected(database_url) as connection:
        insert_baseline(connection, "k2", "retired", "2026-01-05T00:00:00+00:00")
    assert count_rows(database_url, "baselines") == 7


def test_a_database_from_a_newer_perfgate_is_refused(database_url: str, tmp_path: Path) -> None:
    make_engine(database_url, tmp_path).dispose()
    with connected(database_url) as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    for attempt in (make_engine, upgrade_database):
        with pytest.raises(SchemaTooNew, match=r"0099.*upgrade perfgate"):
            attempt(database_url, tmp_path)


def test_a_new_sqlite_file_locked_by_another_writer_is_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The switch of a new file to WAL, refused at once while another connection holds the
    write lock, is tried again until that writer is done (several jobs' first use of one
    database); the other writer lets go the first time perfgate pauses to retry."""
    path = tmp_path / "new.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    plain = sqlite3.connect(path, timeout=5)
    with closing(plain), pytest.raises(sqlite3.OperationalError):
        plain.execute("PRAGMA journal_mode=WAL")  # SQLite's own answer: locked, at once
    pauses: list[float] = []
    real_sleep = time.sleep

    def pause(seconds: float) -> None:
        if not pauses:
            holder.commit()
        pauses.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", pause)
    engine = make_engine(f"sqlite:///{path}", tmp_path)
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert schema_revision(connection) == head_revision()
    engine.dispose()
    holder.close()
    assert pauses  # the first try was refused, and perfgate waited instead of failing


@pytest.mark.slow
def test_db_upgrade_through_the_cli(
    database_url: str, tmp_path: Path, perfgate_cli: CliRun
) -> None:
    migrate_to(database_url, "0001")
    password_url = database_url.replace("postgres@", "postgres:s3cret@")
    (tmp_path / "perfgate.toml").write_text(f'database_url = "{password_url}"\n')

    document = tmp_path / "run.json"
    write_result(document, fake_run())
    refused = perfgate_cli("ingest", str(document), cwd=tmp_path)
    assert refused.returncode == ExitCode.INFRASTRUCTURE
    assert "revision 0001, this perfgate needs 0004 — run `perfgate db upgrade`" in refused.stderr

    upgraded = perfgate_cli("db", "upgrade", cwd=tmp_path)
    assert upgraded.returncode == ExitCode.OK, upgraded.stderr
    assert "upgraded from 0001 to revision 0004" in upgraded.stdout
    assert "s3cret" not in upgraded.stdout + upgraded.stderr
    stored = perfgate_cli("ingest", str(document), cwd=tmp_path)
    assert stored.returncode == ExitCode.OK and "stored" in stored.stdout


def test_unreachable_postgres_is_store_unavailable_with_the_password_masked(
    tmp_path: Path,
) -> None:
    with pytest.raises(StoreUnavailable) as unavailable:
        make_engine("postgresql://perfgate:hunter2@127.0.0.1:1/perfgate", tmp_path)
    message = str(unavailable.value)
    assert "hunter2" not in message and "***" in message
    assert "\n" not in message and unavailable.value.exit_code == ExitCode.INFRASTRUCTURE


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_postgres_urls_use_psycopg_3(scheme: str) -> None:
    assert normalise_url(f"{scheme}://u:p@h/db") == "postgresql+psycopg://u:p@h/db"
    assert normalise_url("sqlite:///x.db") == "sqlite:///x.db"
