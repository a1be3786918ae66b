"""Step timers: boundaries marked between steps, durations read once at the end.

On a GPU, kernels run asynchronously, so host clocks would time the *launch*, not the work.
CUDA events recorded on the stream at each step boundary time the GPU timeline, and a single
synchronisation after the last step keeps the timed loop free of per-step host stalls. On the CPU
the work is synchronous and ``time.perf_counter`` is the right clock.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

from perfgate.documents.worker import Timer

if TYPE_CHECKING:
    from perfgate.runner.step_clock import VirtualClock


class StepTimer(Protocol):
    """Marks step boundaries; ``durations()`` returns seconds between consecutive marks."""

    name: Timer

    def mark(self) -> None:
        """Record a boundary (before the first step and after every step)."""

    def durations(self) -> list[float]:
        """Seconds per step, read after the last mark (may synchronise the device once)."""


class PerfCounterTimer:
    """Host clock for synchronous (CPU) execution."""

    name: Timer = "perf_counter"

    def __init__(self) -> None:
        self._marks: list[float] = []

    def mark(self) -> None:
        self._marks.append(time.perf_counter())

    def durations(self) -> list[float]:
        return [b - a for a, b in zip(self._marks, self._marks[1:], strict=False)]


class CudaEventTimer:
    """CUDA events on the current stream; one ``synchronize`` when durations are read.

    Marks at step boundaries (not start/stop pairs) mean that any gap between steps — a host
    stall fetching the next batch that starves the GPU — is charged to a step, as it is in real
    training.
    """

    name: Timer = "cuda_event"

    def __init__(self) -> None:
        import torch

        self._torch = torch
        self._events: list[torch.cuda.Event] = []

    def mark(self) -> None:
        event = self._torch.cuda.Event(enable_timing=True)
        event.record()
        self._events.append(event)

    def durations(self) -> list[float]:
        self._torch.cuda.synchronize()
        return [
            a.elapsed_time(b) / 1000.0 for a, b in zip(self._events, self._events[1:], strict=False)
        ]


class VirtualTimer:
    """The test harness's deterministic clock (``perfgate.runner.step_clock``)."""

    name: Timer = "virtual"

    def __init__(self, clock: VirtualClock) -> None:
        self._clock = clock
        self._marks: list[float] = []

    def mark(self) -> None:
        if self._marks:  # a boundary after a step: that step's own computation
            self._clock.step_done()
        self._marks.append(self._clock.now())

    def durations(self) -> list[float]:
        return [b - a for a, b in zip(self._marks, self._marks[1:], strict=False)]


def make_timer(device: str, clock: VirtualClock | None = None) -> StepTimer:
    """The right clock for ``device``, or the test harness's virtual one when given."""
    if clock is not None:
        return VirtualTimer(clock)
    return CudaEventTimer() if device == "cuda" else PerfCounterTimer()
