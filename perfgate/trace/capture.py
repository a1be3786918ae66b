"""The worker's profiling windows: a short ``torch.profiler`` window and what it records.

This is the code that runs *inside* a worker process (``python -m perfgate.runner.worker``),
never inside a timed repeat: the profiler's per-op bookkeeping slows every op, and what it
records is evidence for advice, not a measurement to gate on. The worker imports this module
only when it profiles. Two windows:

- **The profiling mode** (:func:`run_profile`, a spec with a ``profile`` window: ``perfgate
  advise``). Build the workload as a timed repeat would, run the spec's warm-up steps, drain the
  GPU, then profile ``1 + steps`` steps under ``schedule(wait=0, warmup=1, active=steps)`` — the
  profiler's own warm-up step absorbs its start-up cost — with ``record_shapes`` on (dtypes and
  matmul dimensions come from op inputs). Each batch fetch is wrapped in a
  ``perfgate.batch_fetch`` range, so a batch source that is not a DataLoader still shows its
  wait. Python's collector is timed over the active steps only. The trace is exported when the
  window closes; the worker's report carries the facts (``perfgate.trace.facts``) and the
  trace's path.
- **The communication window of a distributed repeat** (:func:`measure_communication`). Step
  times say how long a step took on each rank, not why. How much of it was collective
  communication, and how much of that computation hid, is only visible on a timeline, so after
  its measured steps every rank of the first repeat profiles a short window (the timed steps
  are over: the profiler's overhead costs no measurement), reads its own trace
  (``perfgate.trace.communication``) and reports the summary in its report. The trace itself
  is deleted: ``perfgate advise`` keeps traces, a timed run only needs the numbers.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.documents.worker import (
    CommunicationWindow,
    ProfileReport,
    WorkerReport,
    WorkerSpec,
)
from perfgate.files import rank_trace_path
from perfgate.trace.categories import FETCH_RANGE, MODULE_RANGE
from perfgate.trace.communication import communication_summary
from perfgate.trace.facts import Facts, GcMonitor, collect_facts
from perfgate.trace.loader import load_trace
from perfgate.workloads import drive
from perfgate.workloads.drive import StepProgram, drive_setup
from perfgate.workloads.protocol import DistributedContext, KnobValue, TrainingSetup
from perfgate.workloads.scripted import run_script
from perfgate.workloads.setup import (
    BatchSource,
    check_setup,
    count_step_flops,
    counted_step,
    load_factory,
    rank_place,
    workload_context,
)

if TYPE_CHECKING:
    import torch


def run_profile(spec: WorkerSpec, distributed: DistributedContext | None) -> WorkerReport:
    """Build the workload, warm it up, profile the window; returns the worker's report.

    Under torchrun every rank profiles the same window into its own trace (rank 0 into the
    spec's path, rank r next to it), so the parent can compare the ranks' compute time.
    """
    import torch

    profile = spec.profile
    if profile is None:
        raise ValueError("the spec asks for no profiling window")
    trace_path = profile.trace_path
    if distributed is not None:
        trace_path = rank_trace_path(trace_path, distributed.rank)
    context = workload_context(spec, distributed)
    if spec.script is not None:

        def program_for(setup: TrainingSetup) -> StepProgram[Facts]:
            return scripted_profile(setup, spec, profile.steps, trace_path)

        needed = 1 + spec.warmup + 1 + profile.steps  # counted, warm-up, profiler's, active
        setup, facts = run_script(spec.script, context, program_for, needed)
    else:
        reference = spec.factory
        setup = check_setup(load_factory(reference)(context), reference)
        facts = profile_workload(
            setup,
            device=spec.device,
            knobs=spec.knobs,
            warmup=spec.warmup,
            steps=profile.steps,
            trace_path=trace_path,
            reference=reference,
        )
    return WorkerReport(
        status="ok",
        rank=rank_place(distributed),
        profile=ProfileReport(
            trace_path=trace_path,
            profiled_steps=profile.steps,
            threads=torch.get_num_threads(),
            applied_knobs=dict(setup.knobs),
            facts=facts,
        ),
    )


def profile_workload(
    setup: TrainingSetup,
    *,
    device: str,
    knobs: Mapping[str, KnobValue],
    warmup: int,
    steps: int,
    trace_path: Path,
    reference: str = "(in-process)",
) -> Facts:
    """Warm ``setup`` up, profile ``steps`` steps into ``trace_path``; returns the facts.

    ``knobs`` are the requested knob values; the ones the factory reports as applied win.
    ``reference`` names the factory in error messages.
    """
    source = BatchSource(setup.batches, reference)
    flops = _flops_per_step(setup, source)
    program = profile_program(
        setup, flops, device=device, knobs=knobs, warmup=warmup, steps=steps, trace_path=trace_path
    )
    return drive_setup(program, setup, source)


def profile_program(
    setup: TrainingSetup,
    flops: float | None,
    *,
    device: str,
    knobs: Mapping[str, KnobValue],
    warmup: int,
    steps: int,
    trace_path: Path,
) -> StepProgram[Facts]:
    """The profiling mode's step program (``perfgate.workloads.drive``): ``warmup`` steps, the
    GPU drained, then the profiled window under ``perfgate.module:`` ranges; returns the facts,
    with ``flops`` (one step's, counted or analytic) for the window's FLOP rate."""
    import torch

    yield from drive.steps(warmup)
    if device == "cuda":
        torch.cuda.synchronize()
    applied = {**knobs, **setup.knobs}
    with module_ranges(setup.model, compiled=bool(applied.get("compile"))):
        monitor = yield from profiled_steps(device, steps, trace_path)
    return {**collect_facts(setup, device, applied, flops), **monitor.facts(steps)}


def scripted_profile(
    setup: TrainingSetup, spec: WorkerSpec, steps: int, trace_path: Path
) -> StepProgram[Facts]:
    """The profiling mode for a training script: its first step counted (the window's FLOP
    rate), then :func:`profile_program` over its next steps."""
    counted = yield from counted_step()
    flops = float(counted.counted_per_step) if counted.counted_per_step else None
    return (
        yield from profile_program(
            setup,
            flops if flops is not None else setup.analytic_flops_per_step,
            device=spec.device,
            knobs=spec.knobs,
            warmup=spec.warmup,
            steps=steps,
            trace_path=trace_path,
        )
    )


def profile_steps(
    setup: TrainingSetup, source: BatchSource, device: str, steps: int, trace_path: Path
) -> GcMonitor:
    """:func:`profiled_steps` over a factory's setup."""
    return drive_setup(profiled_steps(device, steps, trace_path), setup, source)


def profiled_steps(device: str, steps: int, trace_path: Path) -> StepProgram[GcMonitor]:
    """Run one profiler warm-up step and ``steps`` active steps; the trace goes to ``trace_path``.

    No synchronisation is added inside the window (it would show up as the workload's own host
    sync); the profiler drains the GPU when it stops, after the last step has closed. Each
    batch fetch sits in a ``perfgate.batch_fetch`` range: for a script, everything its loop
    does between two steps.
    """
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    monitor = GcMonitor()
    try:
        with profile(
            activities=activities,
            record_shapes=True,
            schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
            on_trace_ready=lambda prof: prof.export_chrome_trace(str(trace_path)),
        ) as profiler:
            for index in range(steps + 1):
                if index == 1:
                    monitor.start()
                with record_function(FETCH_RANGE):
                    yield from drive.fetch()
                yield from drive.step()
                if index == steps:
                    monitor.stop()
                profiler.step()
    finally:
        monitor.stop()
    if not trace_path.exists():
        raise RuntimeError(f"the profiler exported no trace to {trace_path}")
    return monitor


@contextlib.contextmanager
def module_ranges(model: torch.nn.Module, *, compiled: bool) -> Iterator[None]:
    """A ``perfgate.module:`` range around every forward of the model's own modules (classes
    defined outside torch) and of ``nn.MultiheadAttention``, named with the module's path, its
    class and the file and line of its ``forward``: the trace then says where an op ran
    (``perfgate.trace.sites``) without the cost of recording every Python frame
    (``with_stack``). A compiled model gets none: a hook added after compiling would make it
    recompile."""
    import torch

    if compiled or hasattr(model, "_orig_mod"):
        yield
        return
    handles = []
    for path, module in model.named_modules():
        cls = type(module)
        if cls.__module__.startswith("torch.") and cls is not torch.nn.MultiheadAttention:
            continue
        source = "" if cls.__module__.startswith("torch.") else _forward_source(cls)
        name = f"{MODULE_RANGE}{path or '(model)'} ({cls.__name__}){source}"
        opened: list[Any] = []

        def enter(_module: Any, _args: Any, name: str = name, opened: list[Any] = opened) -> None:
            span = torch.profiler.record_function(name)
            span.__enter__()
            opened.append(span)

        def leave(_module: Any, _args: Any, _out: Any, opened: list[Any] = opened) -> None:
            if opened:
                opened.pop().__exit__(None, None, None)

        handles.append(module.register_forward_pre_hook(enter))
        handles.append(module.register_forward_hook(leave, always_call=True))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _forward_source(cls: type) -> str:
    """`` file.py:line`` of the class's ``forward`` (relative to the working folder when under
    it), or "" when Python cannot tell."""
    try:
        function = cls.forward  # type: ignore[attr-defined]
        file = inspect.getsourcefile(function)
        _, line = inspect.getsourcelines(function)
    except (AttributeError, OSError, TypeError):
        return ""
    if file is None:
        return ""
    path = Path(file)
    with contextlib.suppress(ValueError):
        path = path.relative_to(Path.cwd())
    return f" {path}:{line}"


def measure_communication(
    setup: TrainingSetup, source: BatchSource, device: str, steps: int, trace_path: Path
) -> CommunicationWindow | None:
    """The rank's communication summary over ``steps`` profiled steps; None without collectives."""
    profile_steps(setup, source, device, steps, trace_path)
    try:
        summary = communication_summary(load_trace(trace_path))
    finally:
        trace_path.unlink(missing_ok=True)
    return CommunicationWindow(**summary.to_dict()) if summary is not None else None


def _flops_per_step(setup: TrainingSetup, source: BatchSource) -> float | None:
    """FLOPs of one step, counted, else analytic: the window's FLOP rate, against the vendor
    peak (MFU, CUDA only: there is no CPU peak) and against the machine's own measured matmul
    ceiling when ``perfgate doctor --peak`` stored one (any device)."""
    counted = count_step_flops(setup, source).counted_per_step
    return float(counted) if counted else setup.analytic_flops_per_step
