"""One live baseline per key: a partial unique index on ``baselines (key) WHERE status = 'live'``.

Before it, concurrent ``perfgate baseline refresh`` runs could each add a live baseline for the
same key (issue 16), and compare then read whichever came first. A database that already holds
several live baselines for a key is repaired first, or the index could not be built: the newest
one (latest ``created_at``, then highest id) stays live, the others are retired now, and their
``reason`` gains a note saying so; nothing is deleted.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from datetime import datetime, timezone

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

LIVE = "status = 'live'"
BASELINES = sa.table(
    "baselines",
    sa.column("id", sa.Integer()),
    sa.column("key", sa.String()),
    sa.column("status", sa.String()),
    sa.column("created_at", sa.String()),
    sa.column("retired_at", sa.String()),
    sa.column("reason", sa.String()),
)
"""The columns this migration reads and writes, as they are at revision 0003."""


def upgrade() -> None:
    """Retire the surplus live baselines of each key, then add the index."""
    _retire_all_but_the_newest_live()
    op.create_index(
        "uq_baselines_live_key",
        "baselines",
        ["key"],
        unique=True,
        sqlite_where=sa.text(LIVE),
        postgresql_where=sa.text(LIVE),
    )


def _retire_all_but_the_newest_live() -> None:
    bind = op.get_bind()
    c = BASELINES.c
    live = bind.execute(
        sa.select(c.id, c.key, c.reason)
        .where(c.status == "live")
        .order_by(c.key, c.created_at.desc(), c.id.desc())
    ).all()
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    kept: dict[str, int] = {}
    for row in live:
        if row.key not in kept:
            kept[row.key] = row.id
            continue
        note = (
            f" [retired by migration 0004: baseline {kept[row.key]} of the same key was newer; "
            "concurrent refreshes had left several live]"
        )
        bind.execute(
            sa.update(BASELINES)
            .where(c.id == row.id)
            .values(status="retired", retired_at=now, reason=row.reason + note)
        )
