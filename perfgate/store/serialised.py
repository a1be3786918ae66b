"""Read-decide-write transactions that run one at a time, and run again when a race is lost.

A baseline refresh reads the live baseline, decides, then retires it and adds a new one. Two
refreshes doing that at once both read the same live baseline (or none), and both wrote a new
live one (issue 16). Here the transaction takes a lock before its first read, so the second
waits for the first to commit and then reads what it wrote: on SQLite the database's write lock
(``BEGIN IMMEDIATE``; WAL readers carry on, writers wait up to the busy timeout), on PostgreSQL
a transaction-level advisory lock named by the caller (only work under the same name waits).
At PostgreSQL's default READ COMMITTED every statement after the lock sees what the previous
holder committed; a snapshot isolation level would read from before the wait, so none is set.

The lock is the normal path; the database's unique indexes are the guarantee. A writer that
takes no lock (an older tool, a hand-run SQL script) can still land between the read and the
write: the transaction then fails on the index, or finds the row it decided about already
changed (``StaleRead``), and is rolled back and run again from its first read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from perfgate.store.engine import StoreUnavailable, unavailable_on_error, write_transaction

T = TypeVar("T")

ATTEMPTS = 5
"""Runs of one transaction before giving up: each lost race means another writer finished."""


class StaleRead(Exception):
    """A row the transaction decided about was changed by another writer since it was read."""


class LostRaces(StoreUnavailable):
    """Another writer kept changing the same rows: the transaction never got to commit."""


def serialised(engine: Engine, lock: str, work: Callable[[Session], T]) -> T:
    """``work(session)`` in one transaction holding ``lock``, committed when it returns.

    ``work`` must do all its reading through the session and may be called again (after a
    rollback) when a race is lost, so it must not act outside the database. Driver errors
    become ``StoreUnavailable``.
    """
    conflict = ""
    with unavailable_on_error(engine.url.render_as_string(hide_password=False)):
        for _ in range(ATTEMPTS):
            try:
                with write_transaction(engine) as connection, Session(bind=connection) as session:
                    _take_lock(connection, lock)
                    outcome = work(session)
                    session.flush()
                return outcome
            except (IntegrityError, StaleRead) as exc:
                lines = str(getattr(exc, "orig", None) or exc).strip().splitlines()
                conflict = lines[0] if lines else type(exc).__name__
    raise LostRaces(
        f"{lock}: still conflicting with another writer after {ATTEMPTS} attempts ({conflict})",
        "run it again once the other writers are done",
    )


def _take_lock(connection: Connection, lock: str) -> None:
    """PostgreSQL: wait for ``lock`` (released at commit or rollback). SQLite: already held."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _lock_key(lock)})


def _lock_key(lock: str) -> int:
    """The signed 64-bit advisory lock key for a lock name (the first 8 bytes of its SHA-256)."""
    return int.from_bytes(hashlib.sha256(lock.encode()).digest()[:8], "big", signed=True)
