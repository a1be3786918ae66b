"""One rank's profiler trace → how much of its step was collective communication, and how exposed.

A data-parallel step is only as fast as its slowest all-reduce allows. Whether that costs time
depends on overlap: DDP starts a bucket's all-reduce while backward still computes the earlier
layers, and only the part no computation hides (the *exposed* part) lengthens the step. This
module measures both from the Chrome trace the torch profiler writes (the same input as
``perfgate.advise.trace_evidence``), on one of two timelines:

- **GPU** (the trace has kernels): NCCL/RCCL collectives are kernels on their own stream, named
  by ``kernel_family``; every other kernel is computation. Copies and memsets are neither: a
  copy engine transfer does not make the SMs busy.
- **CPU** (no kernels): gloo runs a collective on its own thread, recorded as a
  ``gloo:all_reduce``-style annotation (``nccl:``, ``mpi:``, ``ucc:`` likewise). Computation is
  the ops of the main thread (the one carrying the ``ProfilerStep#N`` markers) with the
  communication calls cut out: a synchronous ``dist.all_reduce`` blocks the main thread inside
  ``c10d::allreduce_`` or a wait, and that blocked time is exposed communication, not overlap.
  Cutting the call's time out of every op (not just dropping the call) matters because its
  parent op, a module's forward or an autograd node, spans it too.

Only time inside the ``ProfilerStep#N`` windows counts (the whole span of the analysed events
when the trace has no markers), so set-up and the warm-up step do not dilute the shares. On a
GPU the windows are the host's markers: kernels lag their launch, so the first window holds the
tail of the warm-up step's kernels in place of the last step's, which on steady steps is a wash.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from perfgate.advise.trace_evidence import COMM, kernel_family

Interval = tuple[float, float]
"""``(start, end)`` in trace microseconds."""

_STEP_NAME = re.compile(r"^ProfilerStep#\d+$")
_COLLECTIVE = re.compile(r"^(?:gloo|nccl|mpi|ucc):")
"""A collective as the process group records it on its communication thread."""
_COMM_CALL = re.compile(
    r"^(?:_?c10d(?:_functional)?::|(?:gloo|nccl|mpi|ucc):|record_param_comms$|aten::wait$)"
)
"""Main-thread ops that issue or wait for a collective: communication, not computation."""
_OP_CATEGORIES = frozenset({"cpu_op", "operator"})
"""Op events: ``operator`` is what older profilers called ``cpu_op``."""
_MARKER_CATEGORIES = frozenset({"cpu_op", "operator", "user_annotation"})


@dataclass(frozen=True, kw_only=True)
class CommunicationSummary:
    """Communication and computation time of one rank over its profiled steps."""

    device: str
    """``cuda`` or ``cpu``: which timeline was analysed."""
    backend: str | None
    """The process group's backend (``nccl``, ``gloo``) when the trace records it."""
    steps: int
    """``ProfilerStep#N`` windows analysed (1 for a trace without markers: its whole span)."""
    window_us: float
    """Total duration of those windows."""
    compute_us: float
    """Time in the windows during which some computation ran."""
    compute_us_per_step: tuple[float, ...] = ()
    """``compute_us`` of each window, in time order (one per ProfilerStep)."""
    communication_us: float
    """Time in the windows during which some collective ran."""
    exposed_us: float
    """Communication time during which no computation ran: what the step waits for."""
    collectives: int
    """Collective calls (CPU) or kernels (GPU) in the windows."""

    @property
    def share(self) -> float:
        """Fraction of the window spent in collectives."""
        return _fraction(self.communication_us, self.window_us)

    @property
    def exposed_share(self) -> float:
        """Fraction of the window spent in collectives that no computation hid."""
        return _fraction(self.exposed_us, self.window_us)

    @property
    def overlap(self) -> float | None:
        """Fraction of collective time hidden behind computation; None without communication."""
        if self.communication_us <= 0:
            return None
        return 1.0 - _fraction(self.exposed_us, self.communication_us)

    def to_dict(self) -> dict[str, Any]:
        """Every field and the three derived values, ready for JSON."""
        return {
            "device": self.device,
            "backend": self.backend,
            "steps": self.steps,
            "window_us": self.window_us,
            "compute_us": self.compute_us,
            "compute_us_per_step": list(self.compute_us_per_step),
            "communication_us": self.communication_us,
            "exposed_us": self.exposed_us,
            "collectives": self.collectives,
            "share": self.share,
            "exposed_share": self.exposed_share,
            "overlap": self.overlap,
        }


def communication_summary(trace: dict[str, Any]) -> CommunicationSummary | None:
    """None when the trace holds no collective at all (a single-process run)."""
    events = [
        event
        for event in trace.get("traceEvents", [])
        if event.get("ph") == "X" and "ts" in event and "dur" in event
    ]
    markers = _step_markers(events)
    kernels = [event for event in events if _category(event) == "kernel"]
    blocked: list[Interval] = []
    if kernels:
        device = "cuda"
        communication = [_interval(k) for k in kernels if kernel_family(_name(k)) == COMM]
        computation = [_interval(k) for k in kernels if kernel_family(_name(k)) != COMM]
    else:
        device = "cpu"
        communication, computation, blocked = _cpu_timeline(events, markers)
    if not communication:
        return None
    spans = [_interval(marker) for marker in markers]
    if not spans:
        analysed = communication + computation
        spans = [(min(s for s, _ in analysed), max(e for _, e in analysed))]
    windows = _merge(spans)
    busy = _subtract(_intersect(_merge(computation), windows), _merge(blocked))
    talking = _intersect(_merge(communication), windows)
    info = trace.get("distributedInfo")
    backend = info.get("backend") if isinstance(info, dict) else None
    return CommunicationSummary(
        device=device,
        backend=str(backend) if backend else None,
        steps=max(1, len(markers)),
        window_us=_length(windows),
        compute_us=_length(busy),
        compute_us_per_step=tuple(_length(_intersect(busy, [span])) for span in sorted(spans)),
        communication_us=_length(talking),
        exposed_us=_length(_subtract(talking, busy)),
        collectives=sum(1 for interval in communication if _touches(interval, windows)),
    )


def step_imbalance(per_rank_steps: Sequence[Sequence[float]]) -> float | None:
    """:func:`rank_imbalance` of each rank's least computing step.

    Ranks share the machine with the collectives' own threads and with each other, so a step's
    compute time stretches for reasons that are not the work (on a 2-core box single steps of
    the same work vary 2x). Interference only ever adds time: a rank's quickest step is the best
    estimate of the work it was given, as timeit and pyperf take the minimum for the same
    reason. None for fewer than two ranks or a rank without steps.
    """
    if len(per_rank_steps) < 2 or not all(per_rank_steps):
        return None
    return rank_imbalance([min(steps) for steps in per_rank_steps])


def rank_imbalance(compute_us: Sequence[float]) -> float | None:
    """(max - min) / max of per-rank compute time; None for fewer than 2 ranks or max == 0.

    Ranks wait for each other at every collective, so the rank with the least computation
    spends the difference waiting: this is the share of the busiest rank's work the others idle.
    """
    if len(compute_us) < 2 or max(compute_us) <= 0:
        return None
    return (max(compute_us) - min(compute_us)) / max(compute_us)


# --- events -----------------------------------------------------------------------------------


def _category(event: dict[str, Any]) -> str:
    return str(event.get("cat", "")).lower()


def _name(event: dict[str, Any]) -> str:
    return str(event.get("name", ""))


def _thread(event: dict[str, Any]) -> tuple[Any, Any]:
    return (event.get("pid"), event.get("tid"))


def _interval(event: dict[str, Any]) -> Interval:
    start = float(event["ts"])
    return (start, start + float(event["dur"]))


def _step_markers(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One event per ``ProfilerStep#N`` (a step can be recorded twice: as op and annotation)."""
    seen: dict[str, dict[str, Any]] = {}
    for event in events:
        if _category(event) in _MARKER_CATEGORIES and _STEP_NAME.match(_name(event)):
            seen.setdefault(_name(event), event)
    return sorted(seen.values(), key=lambda event: float(event["ts"]))


def _cpu_timeline(
    events: list[dict[str, Any]], markers: list[dict[str, Any]]
) -> tuple[list[Interval], list[Interval], list[Interval]]:
    """Collectives on any thread; the main thread's computation, and its communication calls
    (the time it was blocked issuing or waiting for a collective)."""
    communication = [
        _interval(event)
        for event in events
        if _category(event) == "user_annotation" and _COLLECTIVE.match(_name(event))
    ]
    main = _thread(markers[0]) if markers else _busiest_thread(events)
    ops = [
        event
        for event in events
        if _category(event) in _OP_CATEGORIES
        and _thread(event) == main
        and not _STEP_NAME.match(_name(event))
    ]
    computation = [_interval(op) for op in ops if not _COMM_CALL.match(_name(op))]
    blocked = [_interval(op) for op in ops if _COMM_CALL.match(_name(op))]
    return communication, computation, blocked


def _busiest_thread(events: list[dict[str, Any]]) -> tuple[Any, Any] | None:
    """The thread with the most ops: the training loop's, in a trace without step markers."""
    threads = Counter(_thread(event) for event in events if _category(event) in _OP_CATEGORIES)
    return threads.most_common(1)[0][0] if threads else None


# --- interval sets (sorted, disjoint lists) ---------------------------------------------------


def _merge(intervals: Iterable[Interval]) -> list[Interval]:
    """The union of possibly overlapping intervals, as a sorted list of disjoint ones."""
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _intersect(first: list[Interval], second: list[Interval]) -> list[Interval]:
    """The time covered by both of two merged lists."""
    result: list[Interval] = []
    i = j = 0
    while i < len(first) and j < len(second):
        start, end = max(first[i][0], second[j][0]), min(first[i][1], second[j][1])
        if start < end:
            result.append((start, end))
        if first[i][1] < second[j][1]:
            i += 1
        else:
            j += 1
    return result


def _subtract(kept: list[Interval], removed: list[Interval]) -> list[Interval]:
    """The time of one merged list not covered by another."""
    result: list[Interval] = []
    j = 0
    for start, end in kept:
        while j < len(removed) and removed[j][1] <= start:
            j += 1
        cursor, k = start, j
        while k < len(removed) and removed[k][0] < end:
            if removed[k][0] > cursor:
                result.append((cursor, removed[k][0]))
            cursor = max(cursor, removed[k][1])
            k += 1
        if cursor < end:
            result.append((cursor, end))
    return result


def _length(intervals: list[Interval]) -> float:
    return sum(end - start for start, end in intervals)


def _touches(interval: Interval, windows: list[Interval]) -> bool:
    start, end = interval
    return any(start < w_end and end > w_start for w_start, w_end in windows)


def _fraction(part: float, whole: float) -> float:
    return min(1.0, max(0.0, part / whole)) if whole > 0 else 0.0
