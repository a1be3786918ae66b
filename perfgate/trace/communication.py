"""One rank's trace → how much of its step was collective communication, and how exposed.

A data-parallel step is only as fast as its slowest all-reduce allows. Whether that costs time
depends on overlap: DDP starts a bucket's all-reduce while backward still computes the earlier
layers, and only the part no computation hides (the *exposed* part) lengthens the step. This
module measures both, on one of two timelines:

- **GPU** (the trace has kernels): NCCL/RCCL collectives are kernels on their own stream, of
  the ``communication`` family; every other kernel is computation. Copies and memsets are
  neither: a copy engine transfer does not make the SMs busy.
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

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perfgate.trace.categories import COMM, COMM_CALL, STEP_NAME
from perfgate.trace.intervals import intersect, length, merge, subtract, touches
from perfgate.trace.loader import as_trace
from perfgate.trace.model import Interval, Thread, Trace


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


def communication_summary(trace: Trace | Mapping[str, Any]) -> CommunicationSummary | None:
    """None when the trace (a model or a trace document) holds no collective at all."""
    trace = as_trace(trace)
    blocked: list[Interval] = []
    if trace.kernels:
        device = "cuda"
        communication = [(k.ts, k.end) for k in trace.kernels if k.family == COMM]
        computation = [(k.ts, k.end) for k in trace.kernels if k.family != COMM]
    else:
        device = "cpu"
        communication, computation, blocked = _cpu_timeline(trace)
    if not communication:
        return None
    spans = [(step.ts, step.end) for step in trace.steps]
    if not spans:
        analysed = communication + computation
        spans = [(min(s for s, _ in analysed), max(e for _, e in analysed))]
    windows = merge(spans)
    busy = subtract(intersect(merge(computation), windows), merge(blocked))
    talking = intersect(merge(communication), windows)
    return CommunicationSummary(
        device=device,
        backend=trace.distributed.backend if trace.distributed else None,
        steps=max(1, len(trace.steps)),
        window_us=length(windows),
        compute_us=length(busy),
        compute_us_per_step=tuple(length(intersect(busy, [span])) for span in sorted(spans)),
        communication_us=length(talking),
        exposed_us=length(subtract(talking, busy)),
        collectives=sum(1 for interval in communication if touches(interval, windows)),
    )


def _cpu_timeline(trace: Trace) -> tuple[list[Interval], list[Interval], list[Interval]]:
    """Collectives on any thread; the main thread's computation, and its communication calls
    (the time it was blocked issuing or waiting for a collective)."""
    communication = [(c.ts, c.end) for c in trace.collectives]
    main = trace.steps[0].thread if trace.steps else _busiest_thread(trace)
    ops = [
        event
        for event in trace.host
        if event.kind == "op" and event.thread == main and not STEP_NAME.match(event.name)
    ]
    computation = [(op.ts, op.end) for op in ops if not COMM_CALL.match(op.name)]
    blocked = [(op.ts, op.end) for op in ops if COMM_CALL.match(op.name)]
    return communication, computation, blocked


def _busiest_thread(trace: Trace) -> Thread | None:
    """The thread with the most ops: the training loop's, in a trace without step markers."""
    threads = Counter(event.thread for event in trace.host if event.kind == "op")
    return threads.most_common(1)[0][0] if threads else None


def _fraction(part: float, whole: float) -> float:
    return min(1.0, max(0.0, part / whole)) if whole > 0 else 0.0
