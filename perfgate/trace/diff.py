"""Two traces of one job → the ops and kernels that moved, per step (Holistic Trace Analysis's
trace diff, on perfgate's trace model).

Each trace is reduced to a per-step profile: for every host operator its calls and *self* time
per step (an op's time minus its children's, so a slower ``aten::linear`` is not counted again
in the ``aten::addmm`` below it), for every GPU kernel, copy or memset its launches and GPU
time per step. Per step, so a trace of 5 steps compares with one of 10. Names are compared as
the profiler wrote them: the same code on the same build launches the same kernel names.

A name on one side only is ``added`` or ``removed``; otherwise a change of time per step of at
least :data:`MIN_STEP_SHARE` of the earlier step is ``slower``/``faster``, and below that a
change of calls per step of at least :data:`MIN_CALLS` is ``more``/``less frequent``. Movers are
listed by how much of the step they moved, largest first.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from perfgate.documents.trace_diff import ChangeKind, Side, TraceChange, TraceDiff, TraceSide
from perfgate.trace.breakdown import on_gpu
from perfgate.trace.timeline import Timeline

MIN_STEP_SHARE = 0.005
"""A change of time per step below half a percent of the step is not a mover by its time."""
MIN_CALLS = 0.5
"""Calls per step must change by at least this for a count change to be listed."""
DEFAULT_TOP = 15
"""Movers listed by default."""


@dataclass(frozen=True, slots=True)
class Usage:
    """One op's or kernel's calls and time per step."""

    calls: float
    us: float


Profile = dict[tuple[Side, str], Usage]
"""``(side, name)`` → its use per step."""


def step_profile(timeline: Timeline) -> Profile:
    """Calls and time per step of every op (self time) and GPU activity in the steps."""
    steps = max(len(timeline.steps), 1)
    calls: defaultdict[tuple[Side, str], int] = defaultdict(int)
    times: defaultdict[tuple[Side, str], float] = defaultdict(float)
    for node in timeline.host:
        if node.kind != "op" or node.step < 0:
            continue
        key: tuple[Side, str] = ("op", node.name)
        calls[key] += 1
        times[key] += max(0.0, node.end - node.ts - node.children_us)
    for gpu in timeline.gpu:
        if gpu.step < 0:
            continue
        key = ("kernel", gpu.name)
        calls[key] += 1
        times[key] += gpu.end - gpu.ts
    return {key: Usage(calls[key] / steps, times[key] / steps) for key in calls}


def trace_side(timeline: Timeline, path: str) -> TraceSide:
    """What a diff says of one trace."""
    steps = max(len(timeline.steps), 1)
    return TraceSide(
        path=path,
        steps=steps,
        step_ms=timeline.window_us / steps / 1000.0,
        device="cuda" if on_gpu(timeline) else "cpu",
    )


def diff_traces(
    before: Timeline,
    after: Timeline,
    *,
    before_path: str,
    after_path: str,
    top: int = DEFAULT_TOP,
) -> TraceDiff:
    """What moved from ``before`` to ``after`` (see the module docstring); at most ``top``
    movers, the rest counted in ``omitted``."""
    first, second = trace_side(before, before_path), trace_side(after, after_path)
    step_us = first.step_ms * 1000.0
    old, new = step_profile(before), step_profile(after)
    movers = []
    for key in sorted(old.keys() | new.keys()):
        was, now = old.get(key, Usage(0.0, 0.0)), new.get(key, Usage(0.0, 0.0))
        change = _change(was, now, step_us)
        if change is None:
            continue
        side, name = key
        movers.append(
            TraceChange(
                side=side,
                name=name,
                change=change,
                before_calls=was.calls,
                after_calls=now.calls,
                before_us=was.us,
                after_us=now.us,
                step_share=(now.us - was.us) / step_us if step_us > 0 else 0.0,
            )
        )
    movers.sort(key=lambda m: (-abs(m.after_us - m.before_us), m.side, m.name))
    return TraceDiff(
        before=first,
        after=second,
        step_change=second.step_ms / first.step_ms - 1.0 if first.step_ms > 0 else 0.0,
        changes=movers[:top],
        omitted=max(0, len(movers) - top),
    )


def _change(was: Usage, now: Usage, step_us: float) -> ChangeKind | None:
    if was.calls == 0:
        return "added"
    if now.calls == 0:
        return "removed"
    moved = now.us - was.us
    if step_us > 0 and abs(moved) >= MIN_STEP_SHARE * step_us:
        return "slower" if moved > 0 else "faster"
    calls = now.calls - was.calls
    if abs(calls) >= MIN_CALLS:
        return "more frequent" if calls > 0 else "less frequent"
    return None
