"""The canary's injected slowdown: a known, honest extra cost added to every measured step.

A nightly canary run (``perfgate run --inject-slowdown 5%``) proves the gate still catches a
regression of a known size on the real runner. For that proof to mean anything, the injected
cost must look like a real regression to the timer that measures the workload:

- it is proportional to the workload's own step time (the median warm-up step), so "5%" means
  5% on a 2 ms MLP step and on a 2 s GPT step alike;
- on the CPU it is a busy loop, not ``sleep``: sleeping frees the core, which is not what a
  slower kernel does, and the OS may wake the process late;
- on CUDA it is ``torch.cuda._sleep`` — a kernel that spins for a number of GPU clock cycles —
  so the delay lands on the GPU timeline that the CUDA event timer measures. A host-side delay
  would mostly hide behind the asynchronous queue of already-launched kernels. The cycle count
  comes from a one-time calibration of that kernel against CUDA events.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfgate.runner.step_clock import VirtualClock

CALIBRATION_CYCLES = 20_000_000
"""Clock cycles spun per calibration sample: about 10 ms at the clocks of current GPUs."""
CALIBRATION_SAMPLES = 3


def reference_step_s(warmup_times_s: Sequence[float]) -> float:
    """The workload's own step time: the median warm-up step.

    The first step carries one-off costs (compilation, autotuning, allocator growth), so it is
    left out whenever there is another warm-up step to go by.
    """
    if not warmup_times_s:
        raise ValueError("the injected slowdown needs at least one warm-up step")
    usable = warmup_times_s[1:] if len(warmup_times_s) > 1 else warmup_times_s
    return statistics.median(usable)


class SlowdownInjector:
    """Burns ``fraction × reference`` seconds of real device work each time ``burn`` is called.

    Built after the warm-up (so the reference is known and, on CUDA, the GPU clocks are warm
    for the calibration) and called after each measured step, inside the timed region.
    """

    def __init__(
        self,
        device: str,
        fraction: float,
        warmup_times_s: Sequence[float],
        clock: VirtualClock | None = None,
    ) -> None:
        self.reference_s = reference_step_s(warmup_times_s)
        self.seconds_per_step = fraction * self.reference_s
        self._clock = clock
        self._cuda_cycles = (
            round(self.seconds_per_step * _cuda_sleep_cycles_per_s())
            if device == "cuda" and clock is None
            else None
        )

    def burn(self) -> None:
        """Add one step's extra cost: a spin kernel on CUDA, a busy loop on the CPU (the test
        harness's virtual clock simply advances)."""
        if self._clock is not None:
            self._clock.advance(self.seconds_per_step)
            return
        if self._cuda_cycles is not None:
            import torch

            torch.cuda._sleep(self._cuda_cycles)
            return
        deadline = time.perf_counter() + self.seconds_per_step
        while time.perf_counter() < deadline:
            pass


def _cuda_sleep_cycles_per_s() -> float:
    """How many ``torch.cuda._sleep`` cycles take one second on this GPU, timed by CUDA events.

    One untimed call first loads the kernel; the median of a few timed samples resists a
    sample that an unrelated context switch stretched.
    """
    import torch

    torch.cuda._sleep(1000)
    rates = []
    for _ in range(CALIBRATION_SAMPLES):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(CALIBRATION_CYCLES)
        end.record()
        end.synchronize()
        rates.append(CALIBRATION_CYCLES / (start.elapsed_time(end) / 1000.0))
    return statistics.median(rates)
