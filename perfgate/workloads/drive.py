"""Step programs: the loops around a training step, written once and driven two ways.

The timed loop (``perfgate.runner.worker``), the profiling window (``perfgate.trace.capture``)
and the FLOP count (``perfgate.workloads.setup``) each wrap a workload's steps in something
of their own — boundary marks, a profiler, a dispatch mode — and those wrappers must run in
the thread that takes the steps (torch keeps its dispatch modes and profiler state per
thread). A factory workload hands the runner a step function and a batch source, and the
runner calls them; a training script (``perfgate.workloads.session``) keeps its own loop, and its
``with session.step():`` marks where each step begins and ends. So each loop is written as a
generator, a *step program*: it yields :attr:`Due.FETCH` when the next batch is due (and is
sent the host seconds its fetch took), then :attr:`Due.STEP` when the step is due (and is
sent the step's loss, or None), and returns its result when it has seen all the steps it
needs. :func:`drive_setup` runs a program over a factory's setup; the script session runs the
same program from inside the script's loop (``perfgate.workloads.scripted``). Either way the code
around a step is the same code.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from perfgate.workloads.protocol import TrainingSetup
    from perfgate.workloads.setup import BatchSource


class Due(enum.Enum):
    """What a step program waits for next."""

    FETCH = "fetch"
    """The next batch: send the host seconds the fetch took."""
    STEP = "step"
    """The training step on that batch: send its loss tensor (or None)."""


Result = TypeVar("Result")
StepProgram = Generator[Due, Any, Result]
"""A generator yielding :class:`Due`, sent a float after FETCH and a loss after STEP."""


def fetch() -> Generator[Due, Any, float]:
    """``wait = yield from fetch()``: the next batch is due; the seconds its fetch took."""
    wait = yield Due.FETCH
    return float(wait)


def step() -> Generator[Due, Any, Any]:
    """``loss = yield from step()``: the step is due; its loss (a tensor, or None)."""
    loss = yield Due.STEP
    return loss


def steps(count: int) -> Generator[Due, Any, None]:
    """``yield from steps(n)``: n steps whose waits and losses nobody reads (a warm-up)."""
    for _ in range(count):
        yield from fetch()
        yield from step()


def drive_setup(
    program: StepProgram[Result],
    setup: TrainingSetup,
    source: BatchSource,
    step_function: Callable[[Any], Any] | None = None,
) -> Result:
    """Run ``program`` over a factory workload: fetch from ``source``, step with ``setup``
    (or with ``step_function``: the eager ``flop_step`` the FLOP count takes)."""
    take_step = step_function or setup.step
    batch: Any = None
    try:
        due = next(program)
        while True:
            if due is Due.FETCH:
                batch, wait = source.next()
                due = program.send(wait)
            else:
                due = program.send(take_step(batch))
    except StopIteration as finished:
        return finished.value
