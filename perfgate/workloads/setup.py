"""A workload's set-up inside a worker: its factory imported and called, the result checked,
its batches cycled, one step's FLOPs and its exact work counted.

Shared by the worker's timed repeat (``perfgate.runner.worker``) and its profiling window
(``perfgate.trace.capture``), which build a workload the same way. Like the worker, this module
imports torch only inside its functions: the worker times its own import of torch as a phase of
the repeat, and only a repeat asked to count FLOPs loads the FLOP counter.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from perfgate.documents.result import WorkCounters
from perfgate.documents.worker import CountedFlops, RankPlace, WorkerSpec
from perfgate.errors import UsageError
from perfgate.workloads.drive import StepProgram, drive_setup, fetch, step
from perfgate.workloads.protocol import DistributedContext, TrainingSetup, WorkloadContext


def load_factory(reference: str) -> Callable[[WorkloadContext], Any]:
    """Import ``module:function``; a UsageError naming the problem when that fails."""
    module_name, sep, attr = reference.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(
            f"workload factory {reference!r} is not of the form module:function",
            'write e.g. factory = "my_project.bench:make_workload"',
        )
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or an error raised while importing the module
        raise UsageError(
            f"cannot import workload module {module_name!r} ({type(exc).__name__}: {exc})",
            "check the factory path and that the module is importable from the project root",
        ) from None
    factory: Any = module
    for part in attr.split("."):
        factory = getattr(factory, part, None)
        if factory is None:
            raise UsageError(
                f"module {module_name!r} has no attribute {attr!r}", "check the factory name"
            )
    if not callable(factory):
        raise UsageError(f"workload factory {reference!r} is not callable", "point at a function")
    return factory


def check_setup(setup: object, reference: str) -> TrainingSetup:
    """Reject a factory result that breaks the protocol, with a message saying what is wrong."""
    if not isinstance(setup, TrainingSetup):
        raise UsageError(
            f"workload factory {reference} returned {type(setup).__name__}, not a TrainingSetup",
            "return perfgate.TrainingSetup(model=..., optimizer=..., batches=..., step=..., "
            "samples_per_step=...)",
        )
    import torch

    problems = []
    if not isinstance(setup.model, torch.nn.Module):
        problems.append("model is not a torch.nn.Module")
    if not isinstance(setup.optimizer, torch.optim.Optimizer):
        problems.append("optimizer is not a torch.optim.Optimizer")
    if not callable(setup.step):
        problems.append("step is not callable")
    if not hasattr(setup.batches, "__iter__"):
        problems.append("batches is not iterable")
    if not isinstance(setup.samples_per_step, int) or setup.samples_per_step < 1:
        problems.append("samples_per_step is not a positive integer")
    if problems:
        raise UsageError(
            f"workload factory {reference} returned a broken TrainingSetup: {'; '.join(problems)}",
            "fix the factory (see README, 'Your own workloads')",
        )
    return setup


class BatchSource:
    """Cycles the workload's batch source, timing each fetch as DataLoader wait."""

    def __init__(self, batches: Any, reference: str) -> None:
        self._batches = batches
        self._reference = reference
        self._iterator: Iterator[Any] = iter(batches)
        self.epoch_restarts = 0

    def next(self) -> tuple[Any, float]:
        """The next batch and the host seconds spent getting it."""
        started = time.perf_counter()
        try:
            batch = next(self._iterator)
        except StopIteration:
            self.epoch_restarts += 1
            self._iterator = iter(self._batches)
            try:
                batch = next(self._iterator)
            except StopIteration:
                raise UsageError(
                    f"workload {self._reference} has an empty batch source",
                    "make batches yield at least one batch",
                ) from None
        return batch, time.perf_counter() - started


def workload_context(spec: WorkerSpec, distributed: DistributedContext | None) -> WorkloadContext:
    """Pin the threads, seed torch and return the context the factory receives."""
    import torch

    if spec.threads:
        torch.set_num_threads(spec.threads)
    torch.manual_seed(spec.seed)
    return WorkloadContext(
        device=spec.device,
        preset=spec.preset,
        params=spec.params,
        knobs=spec.knobs,
        seed=spec.seed,
        distributed=distributed,
    )


def rank_place(distributed: DistributedContext | None) -> RankPlace | None:
    """Where a worker sits in torchrun's process group, for its report (None: one process)."""
    if distributed is None:
        return None
    return RankPlace(
        rank=distributed.rank, world_size=distributed.world_size, backend=distributed.backend
    )


def count_step_flops(setup: TrainingSetup, source: BatchSource) -> CountedFlops:
    """FLOPs of one eager training step, counted before (and apart from) the timed steps."""
    step = setup.flop_step or setup.step
    return drive_setup(counted_step(), setup, source, step_function=step)


def count_step_work(setup: TrainingSetup, source: BatchSource) -> WorkCounters:
    """The exact work of one eager training step, counted after (and apart from) the timed
    steps, so the step counted is a steady one (``perfgate.workloads.work``)."""
    step = setup.flop_step or setup.step
    return drive_setup(counted_work_step(), setup, source, step_function=step)


def counted_work_step() -> StepProgram[WorkCounters]:
    """One step under the work counter: the step program of :func:`count_step_work`, and the
    step after a training script's timed ones (``perfgate.runner.worker``)."""
    from perfgate.workloads.work import counting_work  # lazy: imports torch (a dispatch mode)

    yield from fetch()
    with counting_work() as counter:
        yield from step()
    return counter.counters()


def counted_step() -> StepProgram[CountedFlops]:
    """One step under the FLOP counter: the step program of :func:`count_step_flops`, and what
    a training script's first step runs (``perfgate.workloads.scripted``)."""
    from perfgate.workloads.flops import counting_flops  # lazy: imports torch (FlopCounterMode)

    yield from fetch()
    with counting_flops() as count:
        yield from step()
    return CountedFlops(counted_per_step=count.total, by_operator=count.by_operator)
