"""Database engines from a URL: SQLite by default (WAL, busy timeout), PostgreSQL for a fleet.

Several CI jobs on one runner may write to the same SQLite file at once: WAL lets readers run
beside one writer, and the busy timeout makes a second writer wait instead of failing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError
from sqlmodel import SQLModel, create_engine

from perfgate.errors import InfrastructureError, UsageError

SQLITE_BUSY_TIMEOUT_MS = 30_000


class StoreUnavailable(InfrastructureError):
    """The database could not be reached or written."""


def masked_url(url: str) -> str:
    """The URL with any password replaced by ``***``: safe to print and log."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparseable database URL>"


def resolve_url(url: str, root: Path) -> str:
    """Relative SQLite paths are taken from the project root, not the working directory."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise UsageError(
            f"database URL {masked_url(url)} is not a valid URL",
            "use sqlite:///path.db or postgresql+psycopg://user@host/db",
        ) from None
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        path = Path(parsed.database)
        if not path.is_absolute():
            path = root / path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailable(f"cannot create {path.parent}: {exc.strerror or exc}") from None
        return parsed.set(database=str(path)).render_as_string(hide_password=False)
    return url


def make_engine(url: str, root: Path) -> Engine:
    """An engine with the tables created; SQLite connections get WAL and a busy timeout."""
    resolved = resolve_url(url, root)
    is_sqlite = make_url(resolved).get_backend_name() == "sqlite"
    kwargs: dict[str, Any] = (
        {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}} if is_sqlite else {}
    )
    try:
        engine = create_engine(resolved, **kwargs)
    except (ArgumentError, ImportError) as exc:
        raise UsageError(
            f"cannot use database URL {masked_url(url)} ({exc})",
            "install the driver (psycopg for PostgreSQL) or fix the URL",
        ) from None
    if is_sqlite:
        event.listen(engine, "connect", _sqlite_pragmas)
    from perfgate.store import tables  # noqa: F401  (registers the tables on the metadata)

    try:
        SQLModel.metadata.create_all(engine)
    except Exception as exc:  # OperationalError and driver errors: unreachable, read-only …
        raise StoreUnavailable(f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    return engine


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
