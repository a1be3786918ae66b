"""Interleaved measurement: several arms (base and head, or plain and canary) alternating
repeat by repeat on the same machine, so drift in between cancels instead of deciding.

On a shared runner the machine itself changes over minutes — a neighbour starts, clocks
settle, caches warm — and a sequential "all of A, then all of B" comparison reads that drift
as a regression (on this project's CI CPU, two sequential A/A runs once differed by 37 %).
Alternating the arms inside each workload, and rotating which arm goes first every round
(A B, B A, A B …, i.e. the ABBA pattern), gives each arm the same share of every period, so a
linear drift adds the same to both.

Every repeat is still a fresh process (the statistical unit of the gate; one fork server
serves every arm, and each repeat imports its own arm's workload modules, see
``perfgate.runner.forkserver``), and a workload stops for every arm as soon as one arm's
repeat fails: a comparison with one side missing would say nothing. With a
:class:`RoundJudge` (the sequential A/B of ``perfgate.compare.sequential``) a workload also
stops as soon as the judge has decided, so the rounds a verdict costs follow from the
evidence, not from a fixed count.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from perfgate.documents.result import RepeatResult, RunSettings, WorkloadResult
from perfgate.documents.worker import Measurement
from perfgate.errors import UsageError
from perfgate.runner.forkserver import ForkServer, reused_or_own
from perfgate.runner.orchestrator import run_repeat, workload_result
from perfgate.runner.plan import PlannedWorkload

MIN_ROUNDS = 4
"""Fewer rounds can never be significant: with 3 repeats a side the exact two-sided
Mann–Whitney test cannot go below p = 0.1, so a time budget never cuts a workload below 4."""


@dataclass(frozen=True, kw_only=True)
class Arm:
    """One side of an interleaved run: what it measures and with which settings."""

    label: str
    """Short name used in progress output and scratch files ("base", "head", "canary")."""
    plan: Sequence[PlannedWorkload]
    settings: RunSettings
    """Per-arm settings: arms may differ only in what they measure (e.g. the canary's
    injected slowdown), never in steps or warm-up, which would make them incomparable."""


class InterleaveObserver(Protocol):
    """Progress callbacks for an interleaved run; ``reading`` is the judge's one-line account
    of where the comparison stands (None without a judge)."""

    def round_finished(
        self, workload: str, round_index: int, rounds: int, reading: str | None = None
    ) -> None: ...


@dataclass(frozen=True, kw_only=True)
class ArmRounds:
    """One arm's repeats of one workload so far, in round order."""

    repeats: Sequence[RepeatResult]
    samples_per_step: int | None


@dataclass(frozen=True, kw_only=True)
class RoundReading:
    """What the judge makes of the rounds so far."""

    decided: bool
    summary: str


class RoundJudge(Protocol):
    """Decides after each round whether a workload needs more (``final``: it will get none)."""

    def judge_round(
        self, workload: str, arms: Sequence[ArmRounds], final: bool
    ) -> RoundReading: ...


def run_interleaved(
    arms: Sequence[Arm],
    device: str,
    environment: dict[str, Any],
    *,
    rounds: int,
    budget_s: float | None = None,
    observer: InterleaveObserver | None = None,
    judge: RoundJudge | None = None,
    launcher: ForkServer | None = None,
) -> list[list[WorkloadResult]]:
    """Measure every workload of the arms in alternating rounds; one result list per arm.

    ``rounds`` is the most a workload gets. ``budget_s`` caps the wall time: it is shared
    evenly among the workloads still to run, and a workload stops early (never below
    :data:`MIN_ROUNDS`) once its next round would not fit. ``judge`` stops it as soon as it
    has decided. ``launcher`` is the caller's (``orchestrator.warm_launcher``); without one
    the rounds open their own.
    """
    names = _common_workloads(arms)
    _check_comparable(arms)
    if rounds < MIN_ROUNDS:
        raise UsageError(
            f"{rounds} interleaved rounds can never show a significant change",
            f"use at least {MIN_ROUNDS} rounds",
        )
    gpu = environment.get("gpu") or {}
    by_name = [{p.definition.name: p for p in arm.plan} for arm in arms]
    deadline = None if budget_s is None else time.monotonic() + budget_s
    results: list[list[WorkloadResult]] = [[] for _ in arms]
    with (
        tempfile.TemporaryDirectory(prefix="perfgate-ab-") as scratch,
        reused_or_own(launcher) as launcher,
    ):
        for position, name in enumerate(names):
            share = _share(deadline, len(names) - position)
            planned = [plans[name] for plans in by_name]
            measured = _interleave_workload(
                arms, planned, device, gpu, Path(scratch), rounds, share, observer, judge, launcher
            )
            for arm_index, (repeats, first) in enumerate(measured):
                results[arm_index].append(
                    workload_result(planned[arm_index], device, gpu, repeats, first)
                )
    return results


def _interleave_workload(
    arms: Sequence[Arm],
    planned: Sequence[PlannedWorkload],
    device: str,
    gpu: dict[str, Any],
    scratch: Path,
    rounds: int,
    budget_s: float | None,
    observer: InterleaveObserver | None,
    judge: RoundJudge | None,
    launcher: ForkServer | None,
) -> list[tuple[list[RepeatResult], Measurement | None]]:
    started = time.monotonic()
    measured: list[tuple[list[RepeatResult], Measurement | None]] = [([], None) for _ in arms]
    name = planned[0].definition.name
    for round_index in range(rounds):
        shift = round_index % len(arms)
        order = [*range(shift, len(arms)), *range(shift)]
        for arm_index in order:
            arm = arms[arm_index]
            repeat, measurement = run_repeat(
                planned[arm_index],
                arm.settings,
                device,
                gpu,
                scratch,
                round_index,
                tag=f"{arm.label}-",
                launcher=launcher,
            )
            repeats, first = measured[arm_index]
            repeats.append(repeat)
            if repeat.status != "ok":
                return measured
            if first is None:
                measured[arm_index] = (repeats, measurement)
        done = round_index + 1
        elapsed = time.monotonic() - started
        out_of_time = (
            budget_s is not None and done >= MIN_ROUNDS and elapsed * (done + 1) / done > budget_s
        )
        reading = None
        if judge is not None:
            progress = [
                ArmRounds(
                    repeats=repeats,
                    samples_per_step=first.samples_per_step if first is not None else None,
                )
                for repeats, first in measured
            ]
            reading = judge.judge_round(name, progress, final=out_of_time or done == rounds)
        if observer:
            observer.round_finished(name, round_index, rounds, reading.summary if reading else None)
        if out_of_time or (reading is not None and reading.decided):
            break
    return measured


def _share(deadline: float | None, workloads_left: int) -> float | None:
    if deadline is None:
        return None
    return max(deadline - time.monotonic(), 0.0) / workloads_left


def _common_workloads(arms: Sequence[Arm]) -> list[str]:
    """Workload names in the first arm's order; every arm must have exactly the same set."""
    if len(arms) < 2:
        raise UsageError("an interleaved run needs at least two arms", "give a base and a head")
    names = [p.definition.name for p in arms[0].plan]
    for arm in arms[1:]:
        theirs = {p.definition.name for p in arm.plan}
        if theirs != set(names):
            missing = sorted(set(names) ^ theirs)
            raise UsageError(
                f"arms {arms[0].label} and {arm.label} select different workloads "
                f"({', '.join(missing)})",
                "select workloads that exist on both sides (--workload)",
            )
    return names


def _check_comparable(arms: Sequence[Arm]) -> None:
    first = arms[0].settings
    for arm in arms[1:]:
        theirs = arm.settings
        if (theirs.steps, theirs.warmup, theirs.threads, theirs.seed) != (
            first.steps,
            first.warmup,
            first.threads,
            first.seed,
        ):
            raise UsageError(
                f"arms {arms[0].label} and {arm.label} use different steps, warm-up, threads "
                "or seed",
                "measure both arms with the same settings",
            )
