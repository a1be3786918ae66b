"""What moved inside the step, base against head: the trace diff of ``perfgate.trace.diff``
over several profiled windows of each side, so a mover comes with the spread it survived.

One window of each side says what differs between two processes, and two processes of the
same code differ too (a few per cent of any op's time on a shared CPU). So each side is
profiled in several windows, alternated (base, head, base, head, …) like the timed A/B, each
reduced to calls and self time per step (:func:`perfgate.trace.diff.step_profile`). An op or
kernel is *slower* only when every head window minus every base window is above zero and the
median change is at least :data:`~perfgate.trace.diff.MIN_STEP_SHARE` of the base step
(*faster* the same way down); present on one side only it is *added* or *removed*; otherwise
a change of its calls per step is *more* or *less frequent*. Movers are listed by how much
of the step they moved.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from perfgate.documents.trace_diff import ChangeKind, Side
from perfgate.documents.verdict import Attribution, Mover
from perfgate.trace.diff import MIN_CALLS, MIN_STEP_SHARE, Profile, Usage, step_profile
from perfgate.trace.timeline import Timeline

DEFAULT_MOVERS = 8
"""Movers an attribution lists (the PR comment shows the first few)."""


def attribute(
    base: Sequence[Timeline], head: Sequence[Timeline], top: int = DEFAULT_MOVERS
) -> Attribution:
    """The movers from the ``base`` windows to the ``head`` windows (at least one each)."""
    if not base or not head:
        raise ValueError("attribution needs a profiled window of each side")
    old, new = [step_profile(t) for t in base], [step_profile(t) for t in head]
    base_step_us = statistics.median(_step_us(t) for t in base)
    movers = []
    keys: set[tuple[Side, str]] = set()
    for profile in (*old, *new):
        keys.update(profile)
    for key in sorted(keys):
        side, name = key
        mover = _mover(side, name, _uses(old, key), _uses(new, key), base_step_us)
        if mover is not None:
            movers.append(mover)
    movers.sort(key=lambda m: (-abs(m.head_us - m.base_us), m.side, m.name))
    return Attribution(
        windows=min(len(base), len(head)),
        base_step_ms=base_step_us / 1000.0,
        head_step_ms=statistics.median(_step_us(t) for t in head) / 1000.0,
        movers=movers[:top],
        omitted=max(0, len(movers) - top),
    )


def _step_us(timeline: Timeline) -> float:
    return timeline.window_us / max(len(timeline.steps), 1)


def _uses(profiles: Sequence[Profile], key: tuple[Side, str]) -> list[Usage]:
    return [profile.get(key, Usage(0.0, 0.0)) for profile in profiles]


def _mover(
    side: Side, name: str, was: list[Usage], now: list[Usage], step_us: float
) -> Mover | None:
    base_calls = statistics.median(u.calls for u in was)
    head_calls = statistics.median(u.calls for u in now)
    base_us = statistics.median(u.us for u in was)
    head_us = statistics.median(u.us for u in now)
    differences = [n.us - w.us for n in now for w in was]
    low, high = min(differences), max(differences)
    moved = head_us - base_us
    large = step_us > 0 and abs(moved) >= MIN_STEP_SHARE * step_us
    change: ChangeKind
    if base_calls == 0 and head_calls > 0:
        change = "added"
    elif head_calls == 0 and base_calls > 0:
        change = "removed"
    elif large and low > 0:
        change = "slower"
    elif large and high < 0:
        change = "faster"
    elif head_calls - base_calls >= MIN_CALLS:
        change = "more frequent"
    elif base_calls - head_calls >= MIN_CALLS:
        change = "less frequent"
    else:
        return None
    return Mover(
        side=side,
        name=name,
        change=change,
        base_calls=base_calls,
        head_calls=head_calls,
        base_us=base_us,
        head_us=head_us,
        delta_low_us=low,
        delta_high_us=high,
        step_share=moved / step_us if step_us > 0 else 0.0,
    )
