"""Alembic environment: perfgate always hands Alembic an open connection in its own transaction.

The caller (``perfgate.store.migrations.upgrade``) holds the write lock on that connection, so
migrations must run inside its transaction rather than opening their own.
"""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=None)
with context.begin_transaction():
    context.run_migrations()
