"""A training script as a workload: the worker runs it and drives its step program from the
script's own ``with session.step():`` blocks (``perfgate.workloads.session``).

The worker's loops (the timed steps, the FLOP count, the profiling window) are step programs
(``perfgate.workloads.drive``): generators that say when a batch and a step are due. For a
factory workload the runner calls the step; here the script does, so the program is advanced
from inside the script's loop — all in the script's thread, where the dispatch modes and
the profiler the program opens see the step's operators. The script runs as ``__main__``
with its own folder first on ``sys.path`` and ``sys.argv`` set to its path and arguments, as
``python train.py ARGS`` would run it.
"""

from __future__ import annotations

import runpy
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Generic, TypeVar

from perfgate.errors import UsageError
from perfgate.workloads.drive import Due, StepProgram
from perfgate.workloads.protocol import TrainingSetup, WorkloadContext
from perfgate.workloads.session import ScriptFinished, Session, install_driver
from perfgate.workloads.setup import check_setup

Result = TypeVar("Result")


def script_setup(session: Session, reference: str) -> TrainingSetup:
    """The session as the TrainingSetup the worker's reports and facts read. Its batches and
    step are the script's own, so the setup holds none: nothing calls them."""
    setup = TrainingSetup(
        model=session.model,
        optimizer=session.optimizer,
        batches=(),
        step=_taken_by_the_script,
        samples_per_step=session.samples_per_step,
        tokens_per_step=session.tokens_per_step,
        compute_dtype=session.compute_dtype,
        analytic_flops_per_step=session.analytic_flops_per_step,
        analytic_formula=session.analytic_formula,
        dataloader=session.dataloader,
        knobs=dict(session.knobs),
        info=dict(session.info),
    )
    return check_setup(setup, reference)


def _taken_by_the_script(batch: Any) -> Any:
    raise RuntimeError("a script workload's steps are taken by the script itself")


class ScriptHarness(Generic[Result]):
    """The driver a script's session reports to: it advances one step program."""

    def __init__(
        self,
        context: WorkloadContext,
        program_for: Callable[[TrainingSetup], StepProgram[Result]],
        reference: str,
    ) -> None:
        self.context = context
        self._program_for = program_for
        self._reference = reference
        self._program: StepProgram[Result] | None = None
        self._started = False
        self._last_end = 0.0
        self.steps_taken = 0
        self.setup: TrainingSetup | None = None
        self.finished = False
        self.result: Result | None = None

    def attach(self, session: Session) -> None:
        if self._program is not None:
            raise UsageError(
                f"{self._reference} created a second perfgate.Session",
                "create one Session, after the model and optimizer, before the loop",
            )
        self.setup = script_setup(session, self._reference)
        self._program = self._program_for(self.setup)

    def begin_step(self) -> None:
        program = self._require_program()
        if self.finished:
            raise ScriptFinished
        if not self._started:  # the program's set-up (its first boundary mark) happens now
            self._started = True
            self._expect(next(program), Due.FETCH)
            wait = 0.0
        else:
            wait = time.perf_counter() - self._last_end
        self._expect(program.send(wait), Due.STEP)

    def end_step(self, loss: Any) -> None:
        program = self._require_program()
        self.steps_taken += 1
        try:
            self._expect(program.send(loss), Due.FETCH)
        except StopIteration as done:
            self.finished = True
            self.result = done.value
            raise ScriptFinished from None
        self._last_end = time.perf_counter()

    def _require_program(self) -> StepProgram[Result]:
        if self._program is None:
            raise UsageError(
                f"{self._reference} entered session.step() before creating its perfgate.Session",
                "create perfgate.Session(model=..., optimizer=..., samples_per_step=...) "
                "before the training loop",
            )
        return self._program

    @staticmethod
    def _expect(due: Due, expected: Due) -> None:
        if due is not expected:  # a step program alternates FETCH and STEP by construction
            raise RuntimeError(f"step program yielded {due.value} where {expected.value} was due")


def run_script(
    script: list[str],
    context: WorkloadContext,
    program_for: Callable[[TrainingSetup], StepProgram[Result]],
    steps_needed: int,
) -> tuple[TrainingSetup, Result]:
    """Run ``script`` (its path, then its arguments) until ``program_for(setup)`` has its steps.

    A script that ends first (or never creates its session) is a usage error naming the
    steps it took and the steps needed; a script that raises fails the repeat with its error.
    """
    path = Path(script[0])
    reference = f"script {path.name}"
    harness = ScriptHarness(context, program_for, reference)
    try:
        with _as_main(script):
            install_driver(harness)
            runpy.run_path(str(path), run_name="__main__")
    except ScriptFinished:
        pass
    except SystemExit as exited:
        if exited.code not in (None, 0):
            raise RuntimeError(
                f"{reference} exited with status {exited.code} after {harness.steps_taken} "
                "measured steps"
            ) from None
    finally:
        install_driver(None)
    if harness.setup is None:
        raise UsageError(
            f"{reference} ended without creating a perfgate.Session",
            "add session = perfgate.Session(model=..., optimizer=..., samples_per_step=...) "
            "and wrap each training step in `with session.step():`",
        )
    if not harness.finished:
        raise UsageError(
            f"{reference} ended after {harness.steps_taken} steps; perfgate needs "
            f"{steps_needed} (warm-up, measured and counted steps)",
            "let the script train for more iterations (its own arguments, args in "
            "[tool.perfgate.workloads]) or ask for fewer --steps/--warmup",
        )
    return harness.setup, harness.result  # type: ignore[return-value]


@contextmanager
def _as_main(script: list[str]) -> Iterator[None]:
    """``sys.argv`` and ``sys.path[0]`` as ``python SCRIPT ARGS`` sets them, restored after."""
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [str(Path(script[0])), *script[1:]]
    sys.path.insert(0, str(Path(script[0]).resolve().parent))
    try:
        yield
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
