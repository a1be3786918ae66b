"""A deterministic step clock, for testing the gate's logic on a busy machine.

The gate's decisions (sequential A/B, confirm, nightly, the PR gate) must be tested with exact
exit codes, and real step times on a shared 2-core runner cannot give that: the same test passes
on a quiet machine and fails with a neighbour running. With ``PERFGATE_TEST_STEP_CLOCK`` set in
the *parent's* environment (a test harness; never from a workload or a configuration, so the
code under test cannot turn it on), every worker times its steps on a virtual clock instead:

- ``time.sleep(s)`` inside the worker does not sleep; it advances the virtual clock by
  ``s × load × repeat factor × step factor``. Test workloads express their cost as sleeps
  (``tests/fixtures``), so a head that sleeps 25 % longer is exactly 25 % slower;
- the repeat factor (``between``, a log-normal σ: the between-process noise) and the step factor
  (``within``) are drawn from a generator seeded by the clock's seed and the repeat's label
  (``head-sleepy-3``), so every repeat differs, and the same run gives the same numbers;
- the canary's injected cost is added to the virtual clock (``perfgate.runner.canary``);
- real computation takes no virtual time, except a fixed ``step`` cost per step (1 ms by
  default, subject to the same noise), so a workload that never sleeps (a built-in) still has
  a positive step time;
- the machine is virtual too: a repeat's measurement conditions (``RepeatConditions``) are
  the virtual machine's, not the real one's, so a neighbour on the test machine cannot move a
  verdict. ``load`` > 1 is a busy virtual machine: every sleep takes ``load`` times longer and
  the worker's run-queue wait is ``1 − 1/load`` of the time (the share a neighbour took).

Syntax: ``virtual`` or ``virtual:between=0.02,within=0.01,load=1.0,step=0.001,seed=0``.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping
from typing import SupportsIndex

from perfgate.documents.worker import StepClockSpec
from perfgate.errors import UsageError

STEP_CLOCK_ENV = "PERFGATE_TEST_STEP_CLOCK"
_KEYS = ("between", "within", "load", "step", "seed")


def step_clock_from_env(environ: Mapping[str, str]) -> StepClockSpec | None:
    """The clock the test harness asked for, or None (real clocks)."""
    text = environ.get(STEP_CLOCK_ENV, "").strip()
    if not text:
        return None
    kind, _, options = text.partition(":")
    if kind != "virtual":
        raise UsageError(
            f"{STEP_CLOCK_ENV}={text!r} names no step clock", f"use virtual[:{'=…,'.join(_KEYS)}=…]"
        )
    values: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in options.split(","))):
        key, _, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if key not in _KEYS or not math.isfinite(number) or number < 0:
            raise UsageError(
                f"{STEP_CLOCK_ENV}: {item!r} is not a setting of the virtual clock",
                f"use {', '.join(_KEYS)} with non-negative numbers",
            )
        values[key] = number
    return StepClockSpec(
        between=values.get("between", 0.02),
        within=values.get("within", 0.01),
        load=values.get("load", 1.0),
        step=values.get("step", 0.001),
        seed=int(values.get("seed", 0)),
    )


class VirtualClock:
    """The worker's clock in a test: sleeps advance it, nothing else does."""

    name = "virtual"

    def __init__(self, spec: StepClockSpec) -> None:
        self._rng = random.Random(spec.seed)
        self._within = spec.within
        self._scale = spec.load * math.exp(self._rng.gauss(0.0, spec.between))
        self._step = spec.step
        self._now = 0.0

    def now(self) -> float:
        return self._now

    def sleep(self, seconds: float | SupportsIndex) -> None:
        """What ``time.sleep`` does in a worker under test: advance, with the drawn noise."""
        factor = math.exp(self._rng.gauss(0.0, self._within)) if self._within else 1.0
        self._now += max(float(seconds), 0.0) * self._scale * factor

    def step_done(self) -> None:
        """The fixed cost of one step's own computation (see the module docstring)."""
        self.sleep(self._step)

    def advance(self, seconds: float) -> None:
        """Exact extra time (the canary's injected cost), without noise."""
        self._now += max(float(seconds), 0.0)


def install_step_clock(spec: StepClockSpec | None) -> VirtualClock | None:
    """In the worker: replace ``time.sleep`` by the virtual clock's when the spec asks for one."""
    if spec is None:
        return None
    clock = VirtualClock(spec)
    time.sleep = clock.sleep
    return clock
