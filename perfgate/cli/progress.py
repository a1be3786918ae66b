"""Progress of ``perfgate run`` and of an A/B (rich bars on a terminal, plain lines in a log),
fed by the orchestrator's callbacks."""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from perfgate.documents.result import WorkloadResult
from perfgate.runner.plan import PlannedWorkload

if TYPE_CHECKING:
    from typing_extensions import Self


class _Bars:
    """A rich progress display that starts and stops with a ``with`` block; one bar per
    workload, counting ``unit`` (repeats for a run, rounds for an A/B). Descriptions are
    literal text: a workload named ``[/x]`` is shown as it is (``perfgate.cli.console``)."""

    def __init__(self, console: Console, unit: str) -> None:
        self._progress = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(unit),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> Self:
        self._progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._progress.live.is_started:  # a display never started prints nothing at its end
            self._progress.stop()


class RunProgress(_Bars):
    """One bar per workload, advanced per repeat; implements ``RunObserver``.

    In a CI log or a pipe, where a live display shows nothing until it ends, one plain line
    per repeat instead (``mlp@smoke: repeat 2/5 ok (3.1 s)``), flushed as it happens.
    """

    def __init__(self, console: Console) -> None:
        super().__init__(console, "repeats")
        self._console = console
        self._live = console.is_terminal
        self._totals: dict[str, int] = {}
        self._started: dict[str, float] = {}

    def __enter__(self) -> Self:
        if self._live:
            self._progress.start()
        return self

    def workload_started(self, planned: PlannedWorkload, repeats: int) -> None:
        name = planned.definition.name
        label = f"{name}@{planned.preset}"
        self._totals[name] = repeats
        self._started[name] = time.monotonic()
        if not self._live:
            self._line(f"{label}: {repeats} repeats")
            return
        self._tasks[name] = self._progress.add_task(label, total=repeats)

    def repeat_finished(self, planned: PlannedWorkload, index: int, status: str) -> None:
        name = planned.definition.name
        if not self._live:
            elapsed = time.monotonic() - self._started[name]
            total = self._totals[name]
            self._line(
                f"{name}@{planned.preset}: repeat {index + 1}/{total} {status} ({elapsed:.1f} s)"
            )
            return
        task = self._tasks[name]
        if status != "ok":
            self._progress.update(task, description=f"{name} {status}")
        self._progress.advance(task)

    def workload_finished(self, result: WorkloadResult) -> None:
        if not self._live:
            return
        task = self._tasks[result.name]
        if result.status != "ok":  # stopped early: show the bar as finished, with its status
            self._progress.update(task, total=len(result.repeats))

    def _line(self, text: str) -> None:
        self._console.print(text, markup=False, highlight=False, soft_wrap=True)
        self._console.file.flush()


class RoundProgress(_Bars):
    """Progress of an interleaved A/B, round by round; implements ``InterleaveObserver``.

    On a terminal, one live bar per workload whose text is the judge's reading (the interval
    so far and the decision); in a CI log, where a live display shows nothing until it ends,
    one plain line per round instead.
    """

    def __init__(self, console: Console) -> None:
        super().__init__(console, "A/B rounds")
        self._console = console
        self._live = console.is_terminal

    def __enter__(self) -> Self:
        if self._live:
            self._progress.start()
        return self

    def round_finished(
        self, workload: str, round_index: int, rounds: int, reading: str | None = None
    ) -> None:
        if not self._live:
            line = reading or f"{workload}: round {round_index + 1}"
            self._console.print(
                f"{line} (at most {rounds} rounds)", markup=False, highlight=False, soft_wrap=True
            )
            return
        description = reading or workload
        if workload not in self._tasks:
            self._tasks[workload] = self._progress.add_task(description, total=rounds)
        self._progress.update(
            self._tasks[workload], completed=round_index + 1, description=description
        )


class AdviseProgress(RoundProgress):
    """Progress of ``perfgate advise``: a line as each stage starts (profiling, verifying),
    printed above the live bars on a terminal and flushed as it happens in a log; then the
    verification's A/B rounds as ``RoundProgress`` shows them. Implements ``AdviseObserver``."""

    def stage(self, text: str) -> None:
        target = self._progress.console if self._live else self._console
        target.print(text, markup=False, highlight=False, soft_wrap=True)
