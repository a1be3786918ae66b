"""Exact work judged exactly: the step's work counters of the baseline against the head's.

A timing verdict on a noisy runner needs statistics and can end inconclusive; the counts of
``perfgate.workloads.work`` carry no noise (the same code on the same inputs counts the same,
run after run), so no test is needed: any difference is a change of the work, and is reported
with both numbers whatever the timing said — the signal that survives a busy machine (an
extra ``.contiguous()`` copy is one more ``aten.clone`` and its bytes, a ``.item()`` one more
host sync, even when the milliseconds they cost drown in the noise). It does not decide the
verdict on its own: doing more work can be the point of a pull request.
"""

from __future__ import annotations

from perfgate.documents.result import WorkCounters
from perfgate.documents.verdict import WorkChange
from perfgate.metrics import WORK_COUNTERS


def work_changes(base: WorkCounters | None, head: WorkCounters | None) -> list[WorkChange]:
    """The counters that differ, the step's totals first (in :data:`WORK_COUNTERS` order),
    then each operator whose dispatches changed, largest change first (when both sides kept
    per-operator counts: a result document does, a stored baseline does not)."""
    if base is None or head is None:
        return []
    changes = [
        WorkChange(counter=name, base=getattr(base, name), head=getattr(head, name))
        for name in WORK_COUNTERS
        if getattr(base, name) != getattr(head, name)
    ]
    if base.by_operator and head.by_operator:
        operators = sorted(set(base.by_operator) | set(head.by_operator))
        moved = [
            WorkChange(
                counter=name,
                base=base.by_operator.get(name, 0),
                head=head.by_operator.get(name, 0),
            )
            for name in operators
            if base.by_operator.get(name, 0) != head.by_operator.get(name, 0)
        ]
        changes += sorted(
            moved, key=lambda change: (-abs(change.head - change.base), change.counter)
        )
    return changes
