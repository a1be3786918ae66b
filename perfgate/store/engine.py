"""Database engines from a URL: SQLite by default (WAL, busy timeout), PostgreSQL for a fleet.

Several CI jobs on one runner may write to the same SQLite file at once: WAL lets readers run
beside one writer, and the busy timeout makes a second writer wait instead of failing. Writers
take the write lock up front (``BEGIN IMMEDIATE``): a transaction that reads first and upgrades
to a write later fails at once under WAL when another writer got in between, busy timeout or not.

The schema is versioned with Alembic (``perfgate/store/migrations``). An empty database is
brought to the current revision on first use, so a first ``perfgate run`` needs no setup step;
any other database that is not at this perfgate's revision is refused with the fix, never
migrated behind the user's back.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import event, inspect, text
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlmodel import create_engine

from perfgate.errors import InfrastructureError, UsageError

SQLITE_BUSY_TIMEOUT_MS = 120_000
"""How long a writer waits for SQLite's write lock. Two minutes, not SQLite's usual seconds:
on a loaded CI runner eight jobs creating one database at once queued more than 30 s behind
the first one's migrations (the clean-clone suite under load once failed so), and a job that
waits is better than one that fails with "database is locked"."""
WAL_SWITCH_RETRY_S = 0.01
"""Pause between tries of the switch to WAL that SQLite refused at once (:func:`_switch_to_wal`)."""
POSTGRES_CONNECT_TIMEOUT_S = 10
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
LEGACY_REVISION = "0001"
"""What a database made by perfgate 0.1's ``create_all`` (no ``alembic_version`` table) is at."""
MIGRATION_LOCK_KEY = 0x70657266676174
"""PostgreSQL advisory lock taken around migrations ("perfgat"), so one process migrates."""
SUPPORTED_BACKENDS = ("sqlite", "postgresql")


class StoreUnavailable(InfrastructureError):
    """The database could not be reached or written."""


class SchemaOutOfDate(StoreUnavailable):
    """The database is at an older schema revision than this perfgate needs."""


class SchemaTooNew(StoreUnavailable):
    """The database was migrated by a newer perfgate: this one cannot read it safely."""


SECRET_QUERY_KEYS = ("password", "passwd", "pwd", "sslpassword", "secret", "token")
"""Query parameters that carry a secret (libpq takes ``?password=…`` as well as ``user:pass@``)."""


def masked_url(url: str) -> str:
    """The URL with any password replaced by ``***`` — in its user part and in its query
    (``?password=…``, ``?sslpassword=…``): safe to print and log."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return "<unparseable database URL>"
    query = {
        key: "***" if any(word in key.lower() for word in SECRET_QUERY_KEYS) else value
        for key, value in parsed.query.items()
    }
    rendered = parsed.set(query=query).render_as_string(hide_password=True)
    return rendered.replace("%2A%2A%2A", "***")  # the query's mask, unescaped for reading


def normalise_url(url: str) -> str:
    """``postgresql://`` and ``postgres://`` (Heroku, libpq style) mean psycopg 3, the driver
    perfgate depends on; SQLAlchemy would otherwise look for psycopg2."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def parse_url(url: str) -> URL:
    """The database URL parsed (``postgres://`` meaning psycopg 3) and of a supported database.
    One that cannot be parsed is a usage error that shows none of it (it may hold a password):
    SQLAlchemy refuses most with an ArgumentError, but a port that is not a number with a bare
    ValueError from ``int()``."""
    fix = (
        "use sqlite:///path.db or postgresql://user@host:5432/db "
        "(database_url in the config, or PERFGATE_DATABASE_URL)"
    )
    try:
        parsed = make_url(normalise_url(url))
    except (ArgumentError, ValueError) as exc:
        why = "its port is not a number" if isinstance(exc, ValueError) else "it is not a URL"
        raise UsageError(f"the database URL cannot be parsed: {why}", fix) from None
    if parsed.get_backend_name() not in SUPPORTED_BACKENDS:
        raise UsageError(f"database URL {masked_url(url)} names an unsupported database", fix)
    return parsed


def resolve_url(url: str, root: Path) -> str:
    """Relative SQLite paths are taken from the project root, not the working directory."""
    parsed = parse_url(url)
    database = _sqlite_file(parsed)
    if database is not None:
        path = Path(database)
        if not path.is_absolute():
            path = root / path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailable(f"cannot create {path.parent}: {exc.strerror or exc}") from None
        return parsed.set(database=str(path)).render_as_string(hide_password=False)
    return parsed.render_as_string(hide_password=False)


def database_exists(url: str, root: Path) -> bool:
    """False only for a SQLite file that is not there yet: a reader need not create one."""
    parsed = parse_url(url)
    database = _sqlite_file(parsed)
    if database is None:
        return True
    path = Path(database)
    return (path if path.is_absolute() else root / path).is_file()


def _sqlite_file(url: URL) -> str | None:
    """The file a SQLite URL names by path (not in memory, not a ``file:`` URI taken as given)."""
    database = url.database
    if url.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    return None if database.startswith("file:") else database


def make_engine(url: str, root: Path) -> Engine:
    """An engine on a database at this perfgate's schema revision (an empty one is migrated)."""
    engine = _open_engine(url, root)
    try:
        with unavailable_on_error(url):
            _ensure_current(engine)
    except BaseException:
        engine.dispose()
        raise
    return engine


def upgrade_database(url: str, root: Path) -> tuple[str | None, str]:
    """Migrate the database to this perfgate's revision: ``(revision before, revision now)``.

    ``None`` before means the database was empty. Safe to run twice and from several processes.
    """
    engine = _open_engine(url, root)
    try:
        with unavailable_on_error(url):
            return _upgrade(engine)
    finally:
        engine.dispose()


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A connection in a transaction that holds SQLite's write lock from its first statement.

    Commits when the block ends normally, rolls back when it raises.
    """
    with engine.connect() as connection:
        if connection.dialect.name == "sqlite":
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            yield connection
        except BaseException:
            connection.rollback()
            raise
        connection.commit()


def head_revision() -> str:
    """The schema revision this perfgate reads and writes."""
    head = _script_directory().get_current_head()
    assert head is not None, "perfgate ships at least one migration"
    return head


def schema_revision(connection: Connection) -> str | None:
    """The database's revision; ``None`` when empty, ``0001`` when made by perfgate 0.1."""
    inspector = inspect(connection)
    if inspector.has_table("alembic_version"):
        return MigrationContext.configure(connection).get_current_revision()
    return LEGACY_REVISION if inspector.has_table("runs") else None


def _open_engine(url: str, root: Path) -> Engine:
    resolved = resolve_url(url, root)
    is_sqlite = make_url(resolved).get_backend_name() == "sqlite"
    connect_args: dict[str, Any] = (
        {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
        if is_sqlite
        else {"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S}
    )
    try:
        engine = create_engine(resolved, connect_args=connect_args)
    except (ArgumentError, ImportError) as exc:
        raise UsageError(
            f"cannot use database URL {masked_url(url)} ({exc})",
            "install the driver (psycopg for PostgreSQL) or fix the URL",
        ) from None
    if is_sqlite:
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


@contextmanager
def unavailable_on_error(url: str) -> Iterator[None]:
    """Driver errors (unreachable, refused, read-only, …) become one masked line."""
    try:
        yield
    except SQLAlchemyError as exc:
        raise StoreUnavailable(f"database {masked_url(url)}: {_first_line(exc)}") from None


def _first_line(exc: SQLAlchemyError) -> str:
    original = getattr(exc, "orig", None) or exc
    lines = str(original).strip().splitlines()
    return lines[0] if lines else type(original).__name__


def _ensure_current(engine: Engine) -> None:
    """Migrate an empty database; accept one at this perfgate's revision; refuse any other —
    but only after reading it again under the migration lock, since a process migrating an
    empty database at the same moment (several CI jobs' first use of a new database) can show
    a revision on the way to the head for as long as its migration runs."""
    with engine.connect() as connection:
        revision = schema_revision(connection)
    if revision == head_revision():
        return
    if revision is None:
        _upgrade(engine, only_if_empty=True)
        return
    with _migration_lock(engine) as connection:
        revision = schema_revision(connection)
    _check_revision(revision)


def _check_revision(revision: str | None) -> None:
    head = head_revision()
    if revision == head:
        return
    if revision in _known_revisions():
        raise SchemaOutOfDate(
            f"database schema is at revision {revision}, this perfgate needs {head}",
            "run `perfgate db upgrade`",
        )
    raise SchemaTooNew(
        f"database schema is at revision {revision}, unknown to this perfgate (which needs "
        f"{head}): a newer perfgate migrated it",
        "upgrade perfgate",
    )


def _upgrade(engine: Engine, *, only_if_empty: bool = False) -> tuple[str | None, str]:
    """Migrate under the lock, reading the revision again: another process may have done it."""
    with _migration_lock(engine) as connection:
        before = schema_revision(connection)
        if before is not None and before not in _known_revisions():
            _check_revision(before)  # raises SchemaTooNew
        if before is not None and only_if_empty:
            _check_revision(before)  # another process migrated it: fine only if to head
            return before, before
        config = _alembic_config(connection)
        if before == LEGACY_REVISION and not inspect(connection).has_table("alembic_version"):
            command.stamp(config, LEGACY_REVISION)
        command.upgrade(config, "head")
    return before, head_revision()


@contextmanager
def _migration_lock(engine: Engine) -> Iterator[Connection]:
    with write_transaction(engine) as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
            )
        yield connection


def _alembic_config(connection: Connection) -> AlembicConfig:
    """Alembic configured in code (no alembic.ini), migrating on the caller's connection."""
    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


@cache
def _script_directory() -> ScriptDirectory:
    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(config)


@cache
def _known_revisions() -> frozenset[str]:
    return frozenset(script.revision for script in _script_directory().walk_revisions())


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    _switch_to_wal(cursor)
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _switch_to_wal(cursor: Any) -> None:
    """``PRAGMA journal_mode=WAL``, tried again for as long as a writer would wait.

    A file not yet in WAL mode (a new database) takes the switch under a lock upgrade, and
    SQLite answers "database is locked" at once, without its busy handler, when another
    connection holds the write lock meanwhile (waiting could deadlock). Several jobs' first use
    of one new database hits that: one of eight processes failed so in the parallel test run.
    Once the file is in WAL mode the switch takes no lock, so this loops only at creation.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "database is locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(WAL_SWITCH_RETRY_S)
