"""Two traces of one job compared: what was added, removed, slower or more frequent per step.

Written inside the advice document (``perfgate advise --trace AFTER --before BEFORE``), and the
model a per-op attribution of a regression takes. Times are per profiled step, so two traces
of different lengths compare; a change's ``step_share`` is its time against the earlier step,
which is what a reader asks ("aten::copy_ costs 3 % more of the step").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

ChangeKind = Literal["added", "removed", "slower", "faster", "more frequent", "less frequent"]
"""How one op or kernel moved: present on one side only, its time per step changed beyond
the noise floor, or only its calls per step changed."""
Side = Literal["op", "kernel"]
"""A host operator (its self time on the host) or a GPU kernel (its time on the GPU)."""


@dataclass(frozen=True, kw_only=True)
class TraceSide:
    """One of the two traces: where it came from and its step."""

    path: str
    steps: int
    """Steps analysed (``ProfilerStep#N`` windows, or 1: the whole trace)."""
    step_ms: float
    """Mean step (the analysed window over the steps)."""
    device: str
    """``cuda`` when the trace holds GPU activity, else ``cpu``."""


@dataclass(frozen=True, kw_only=True)
class TraceChange:
    """One op or kernel that moved, per step on each side."""

    side: Side
    name: str
    change: ChangeKind
    before_calls: float
    after_calls: float
    before_us: float
    after_us: float
    step_share: float
    """``(after_us - before_us)`` over the earlier step's time: its part of the step's change."""


@dataclass(frozen=True, kw_only=True)
class TraceDiff:
    """What moved between two traces, the largest change of step time first."""

    before: TraceSide
    after: TraceSide
    step_change: float
    """``after.step_ms / before.step_ms - 1``."""
    changes: list[TraceChange] = field(default_factory=list)
    omitted: int = 0
    """Movers left out beyond the list's length (each smaller than the last one listed)."""
