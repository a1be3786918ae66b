"""Runs every planned workload, repeat by repeat, each repeat in a fresh process.

Between-process variance is usually larger than within-process variance, so each repeat is a new
process and the repeat is the statistical unit (forked by one fork server per run where it can
be, ``perfgate.runner.forkserver``: a fresh process without a fresh ``import torch``). A failed
repeat ends its workload (the failure is recorded with its text; retrying a deterministic
exception or a hang only multiplies the wait) and the next workload runs.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from perfgate.documents.result import RepeatResult, RunSettings, WorkloadResult
from perfgate.documents.worker import Measurement, ProfilerWindow, WorkerSpec
from perfgate.runner.conditions import repeat_conditions
from perfgate.runner.forkserver import ForkServer, reused_or_own, worker_launcher
from perfgate.runner.plan import PlannedWorkload
from perfgate.runner.process import RepeatProcessResult, repeat_environment, run_worker
from perfgate.runner.step_clock import step_clock_from_env
from perfgate.runner.summary import choose_flops, summarize_workload
from perfgate.telemetry.host import default_thread_count
from perfgate.telemetry.sampler import summarize as summarize_telemetry

if TYPE_CHECKING:
    from perfgate.ceilings.store import StoredCeilings

SAMPLE_INTERVAL_S = 0.25

COMMUNICATION_STEPS = 3
"""Profiled steps of a distributed workload's first repeat, after its timed steps (see
``perfgate.trace.capture.measure_communication``)."""


class RunObserver(Protocol):
    """Progress callbacks (the CLI draws a progress bar from them)."""

    def workload_started(self, planned: PlannedWorkload, repeats: int) -> None: ...

    def repeat_finished(self, planned: PlannedWorkload, index: int, status: str) -> None: ...

    def workload_finished(self, result: WorkloadResult) -> None: ...


@contextmanager
def warm_launcher(
    plan: Sequence[PlannedWorkload], settings: RunSettings, device: str
) -> Iterator[ForkServer | None]:
    """The launcher for the repeats of ``plan``, its fork server already starting.

    The server's imports take seconds; started here, before the caller's fingerprint (which
    imports torch in this process), they run on the other core meanwhile. It is started for
    the environment of the plan's first single-process workload (torchrun repeats are never
    forked), so the first repeat finds it ready or nearly so.
    """
    with worker_launcher() as launcher:
        specs = (worker_spec(p, settings, device, count_flops=True) for p in plan)
        forked = next((spec for spec in specs if not spec.nproc_per_node), None)
        if launcher is not None and forked is not None:
            launcher.prestart(repeat_environment(forked))
        yield launcher


def run_workloads(
    plan: Sequence[PlannedWorkload],
    settings: RunSettings,
    device: str,
    environment: dict[str, Any],
    observer: RunObserver | None = None,
    ceilings: StoredCeilings | None = None,
    launcher: ForkServer | None = None,
) -> list[WorkloadResult]:
    """Measure each planned workload; failures are recorded, never raised (bad input is).

    ``environment`` is the run's fingerprint: it names the GPU (for MFU) and its NVML index
    (for the telemetry sampler). ``ceilings`` are its measured ceilings, when stored (each
    summary then has the fraction of the measured matmul ceiling). ``launcher`` is the
    caller's (:func:`warm_launcher`); without one the run opens its own.
    """
    gpu = environment.get("gpu") or {}
    results = []
    with (
        tempfile.TemporaryDirectory(prefix="perfgate-run-") as scratch,
        reused_or_own(launcher) as launcher,
    ):
        for planned in plan:
            if observer:
                observer.workload_started(planned, settings.repeats)
            result = _run_workload(
                planned, settings, device, gpu, Path(scratch), observer, ceilings, launcher
            )
            if observer:
                observer.workload_finished(result)
            results.append(result)
    return results


def _run_workload(
    planned: PlannedWorkload,
    settings: RunSettings,
    device: str,
    gpu: dict[str, Any],
    scratch: Path,
    observer: RunObserver | None,
    ceilings: StoredCeilings | None = None,
    launcher: ForkServer | None = None,
) -> WorkloadResult:
    repeats: list[RepeatResult] = []
    first: Measurement | None = None
    for index in range(settings.repeats):
        repeat, measured = run_repeat(
            planned, settings, device, gpu, scratch, index, launcher=launcher
        )
        repeats.append(repeat)
        if observer:
            observer.repeat_finished(planned, index, repeat.status)
        if repeat.status != "ok":
            break
        first = first or measured
    return workload_result(planned, device, gpu, repeats, first, ceilings)


def run_repeat(
    planned: PlannedWorkload,
    settings: RunSettings,
    device: str,
    gpu: dict[str, Any],
    scratch: Path,
    index: int,
    tag: str = "",
    launcher: ForkServer | None = None,
) -> tuple[RepeatResult, Measurement | None]:
    """One repeat in a fresh worker process (forked by ``launcher`` when given): its result
    and, when it is ok, the measurement the worker reported.

    FLOPs are counted in repeat 0 only (the count is deterministic and costs a step). Under
    the test harness's ``PERFGATE_TEST_STEP_CLOCK`` the worker times on a virtual clock seeded
    by this repeat's label (``perfgate.runner.step_clock``).
    """
    label = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{tag}{planned.definition.name}")
    spec = worker_spec(planned, settings, device, count_flops=index == 0)
    clock = step_clock_from_env(os.environ)
    if clock is not None:
        spec = replace(spec, step_clock=clock.for_repeat(f"{label}-{index}"))
    if index == 0 and spec.nproc_per_node:
        window = ProfilerWindow(
            steps=COMMUNICATION_STEPS, trace_path=scratch / f"{label}-{index}.comm.json"
        )
        spec = replace(spec, communication=window)

    def measure(attempt: str) -> RepeatProcessResult:
        return run_worker(
            spec,
            scratch,
            f"{label}-{index}{attempt}",
            settings.timeout_s,
            gpu.get("nvml_index") if device == "cuda" else None,
            SAMPLE_INTERVAL_S,
            launcher=launcher,
        )

    outcome = measure("")
    if outcome.clock_problem is not None:
        # Once may be the machine (a stall delaying a marker); twice is the worker's clock.
        outcome = measure("-again")
        if outcome.clock_problem is not None:
            outcome = replace(
                outcome,
                status="error",
                error=f"untrustworthy measurement, twice in a row: {outcome.clock_problem}",
            )
    repeat = _repeat_result(index, outcome)
    if clock is not None:  # the test harness's virtual machine: its own conditions
        repeat = replace(repeat, conditions=clock.conditions())
    return repeat, outcome.measurement


def worker_spec(
    planned: PlannedWorkload, settings: RunSettings, device: str, count_flops: bool
) -> WorkerSpec:
    """The spec one worker process receives (``nproc_per_node`` only for a distributed
    workload: it makes the repeat a torchrun of that many ranks)."""
    definition = planned.definition
    distributed = definition.distributed
    return WorkerSpec(
        name=definition.name,
        factory=definition.factory,
        script=list(definition.script) or None,
        python_path=list(definition.python_path),
        preset=planned.preset,
        params=dict(planned.params),
        knobs=dict(planned.knobs),
        device=device,
        seed=settings.seed,
        threads=rank_threads(settings, device) if distributed else settings.threads,
        warmup=settings.warmup,
        steps=settings.steps,
        timeout_s=settings.timeout_s,
        count_flops=count_flops,
        inject_slowdown=settings.inject_slowdown,
        nproc_per_node=settings.nproc_per_node if distributed else None,
        environment_allow=list(planned.worker_env),
    )


def rank_threads(settings: RunSettings, device: str) -> int | None:
    """Intra-op threads per rank: on CPU the run's threads shared among its ranks.

    torch would give every rank all the cores, and N ranks would then fight over them: the
    step time would measure the oversubscription, not the training.
    """
    threads = settings.threads or default_thread_count()
    if device != "cpu":
        return settings.threads
    return max(1, threads // settings.nproc_per_node)


def _repeat_result(index: int, outcome: RepeatProcessResult) -> RepeatResult:
    measured = outcome.measurement
    phases = {"spawned": outcome.spawned, **(measured.phases if measured is not None else {})}
    start, end = phases.get("measure_start"), phases.get("measure_end")
    summary = summarize_telemetry(outcome.telemetry, start, end)
    return RepeatResult(
        index=index,
        status=outcome.status,  # type: ignore[arg-type]
        error=outcome.error,
        exit_code=outcome.exit_code,
        wall_s=outcome.wall_s,
        phases=phases,
        telemetry=outcome.telemetry,
        telemetry_summary=summary,
        stderr_tail=outcome.stderr_tail if outcome.status != "ok" else None,
        conditions=repeat_conditions(outcome.telemetry, start, end),
        **_measured_fields(outcome),
    )


def _measured_fields(outcome: RepeatProcessResult) -> dict[str, Any]:
    """An ok repeat's measured fields of its ``RepeatResult`` (a failed one keeps the
    defaults: no steps, no memory, no ranks)."""
    measured = outcome.measurement
    if measured is None:
        return {}
    return {
        "timer": measured.timer,
        "threads": measured.threads,
        "first_step_s": measured.first_step_s,
        "warmup_times_s": list(measured.warmup_times_s),
        "step_times_s": list(measured.step_times_s),
        "steady_start": measured.steady_start,
        "losses": list(measured.losses),
        "dataloader_wait_s": list(measured.dataloader_wait_s),
        "epoch_restarts": measured.epoch_restarts,
        "peak_memory": dict(measured.peak_memory),
        "injected_s_per_step": measured.injected_s_per_step,
        "slowest_rank": outcome.slowest_rank,
        "ranks": outcome.ranks,
    }


def workload_result(
    planned: PlannedWorkload,
    device: str,
    gpu: dict[str, Any],
    repeats: list[RepeatResult],
    first: Measurement | None,
    ceilings: StoredCeilings | None = None,
) -> WorkloadResult:
    """The workload's result from its repeats; ``first`` is the first ok repeat's measurement
    (FLOPs, batch facts and setup information come from it); ``ceilings`` the environment's
    measured ceilings, when stored."""
    setup_info = dict(first.setup_info) if first is not None else {}
    gpu_name = gpu.get("model") or setup_info.get("cuda_device_name")
    failed = next((r for r in repeats if r.status != "ok"), None)
    flops = None
    if first is not None:
        counted = first.flops
        flops = choose_flops(
            counted.counted_per_step if counted is not None else None,
            first.analytic_flops_per_step,
            first.analytic_formula,
            dict(counted.by_operator) if counted is not None else {},
        )
    samples = first.samples_per_step if first is not None else None
    tokens = first.tokens_per_step if first is not None else None
    dtype = first.compute_dtype if first is not None else None
    applied = first.applied_knobs if first is not None else {}
    definition = planned.definition
    return WorkloadResult(
        name=definition.name,
        version=definition.version,
        kind=definition.kind,
        factory=definition.factory,
        preset=planned.preset,
        definition_hash=planned.definition_hash,
        knobs={**planned.knobs, **applied},
        params=dict(planned.params),
        device=device,
        status=failed.status if failed else "ok",
        error=f"repeat {failed.index}: {failed.error}" if failed else None,
        samples_per_step=samples,
        tokens_per_step=tokens,
        compute_dtype=dtype,
        flops=flops,
        setup_info=setup_info,
        repeats=repeats,
        work=first.work if first is not None else None,
        summary=summarize_workload(
            repeats,
            samples_per_step=samples,
            tokens_per_step=tokens,
            flops=flops,
            compute_dtype=dtype,
            device=device,
            gpu_name=gpu_name,
            ceilings=ceilings,
        ),
    )
