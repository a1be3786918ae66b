"""Host synchronisations and op counts per step.

On a GPU trace a host sync is a ``cudaDeviceSynchronize``-style runtime call (whatever op made
it); on a CPU trace there is no device to wait for, so the ``.item()``-style ops that would
sync a GPU are counted instead (outside the optimizer, which reads its step counters so).
"""

from __future__ import annotations

from dataclasses import dataclass

from perfgate.trace.breakdown import on_gpu
from perfgate.trace.categories import OPTIMIZER, SYNC, SYNC_CALLS
from perfgate.trace.timeline import Timeline


@dataclass(frozen=True, kw_only=True)
class HostSyncs:
    """Per profiled step; None where the trace cannot tell (a CPU trace without ops)."""

    host_sync_count: float | None
    """Synchronize calls (GPU), or outermost sync ops outside a host range (CPU)."""
    item_call_count: float | None
    """``aten::item`` calls outside the optimizer step."""
    op_count: float | None
    """Top-level ops (those not called by another op)."""


def host_syncs(timeline: Timeline) -> HostSyncs:
    """Host syncs, ``.item()`` calls and top-level ops per step of ``timeline``."""
    steps = len(timeline.steps)
    host = timeline.host
    ops = [e for e in host if e.kind == "op" and e.step >= 0]
    sync_count = item_count = op_count = None
    if on_gpu(timeline):
        calls = sum(1 for e in host if e.step >= 0 and e.kind == "runtime" and e.name in SYNC_CALLS)
        sync_count = calls / steps
    elif ops:
        outermost = [
            e
            for e in ops
            if e.category == SYNC
            and e.region is None
            and (e.parent < 0 or host[e.parent].category != SYNC)
        ]
        sync_count = len(outermost) / steps
    if ops:
        items = [e for e in ops if e.name == "aten::item" and e.region != OPTIMIZER]
        item_count = len(items) / steps
        top_level = [e for e in ops if e.parent < 0 or host[e.parent].kind != "op"]
        op_count = len(top_level) / steps
    return HostSyncs(host_sync_count=sync_count, item_call_count=item_count, op_count=op_count)
