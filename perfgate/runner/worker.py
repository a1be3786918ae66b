"""The worker: one repeat of one workload, in a fresh process.

Protocol with the parent (``perfgate.runner.orchestrator``): the parent writes a spec file (a
``perfgate.worker-spec`` document, ``perfgate.documents.worker``) and starts ``python -m
perfgate.runner.worker SPEC OUT`` — or has its fork server fork a child that calls ``main([SPEC,
OUT])`` (``perfgate.runner.forkserver``: as fresh a process, without paying for the imports
again). The worker builds the workload through its factory, counts FLOPs if asked (outside the
timed loop), runs warm-up and measured steps, and writes exactly one report (a
``perfgate.worker-report`` document) to OUT atomically. Exit codes:

- 0: measured; the report's status is ``ok`` and it holds the measurement.
- 1: the workload raised; status ``error``, with the error text.
- 2: bad input (a factory breaking the protocol, a knob the device cannot honour); status
  ``usage_error``, and the parent aborts the whole run with exit code 2.

Anything else (a signal, ``os._exit``, an OOM kill, a missing OUT) is a crash, judged by the
parent, which reads the report as untrusted input: the workload's code runs in this process.

Under ``torchrun`` (``perfgate run --nproc-per-node N``) every rank is such a worker: it joins
the process group before building the workload (``perfgate.distributed.process_group``) and
writes its own report next to OUT (``x.out.rank1.json``); the parent merges them.

A spec with a ``profile`` window asks for the profiling mode instead (``perfgate advise``): the
same build and warm-up, then a ``torch.profiler`` window and no timed steps (see
``perfgate.trace.capture``). The timed path never imports it.
"""

from __future__ import annotations

import json
import math
import resource
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from perfgate.distributed.process_group import launched_rank, process_group
from perfgate.documents.result import WorkCounters
from perfgate.documents.worker import (
    WORKER_REPORT,
    WORKER_SPEC,
    CountedFlops,
    Measurement,
    Timer,
    WorkerReport,
    WorkerSpec,
)
from perfgate.errors import UsageError
from perfgate.files import rank_output_path, rank_trace_path, write_json_atomic
from perfgate.parent import die_with_parent
from perfgate.runner.canary import SlowdownInjector
from perfgate.runner.steady import steady_start
from perfgate.runner.step_clock import VirtualClock, install_step_clock
from perfgate.runner.timing import make_timer
from perfgate.runner.witness import WindowReporter
from perfgate.workloads.drive import StepProgram, drive_setup, fetch, step
from perfgate.workloads.protocol import DistributedContext, TrainingSetup
from perfgate.workloads.scripted import run_script
from perfgate.workloads.setup import (
    BatchSource,
    check_setup,
    count_step_flops,
    count_step_work,
    counted_step,
    counted_work_step,
    load_factory,
    rank_place,
    workload_context,
)

EXIT_ERROR = 1
EXIT_USAGE = 2


def run_repeat(spec: WorkerSpec, distributed: DistributedContext | None) -> WorkerReport:
    """Build the workload and measure it; returns the worker's report.

    On a distributed repeat every rank measures its own steps, and the first repeat's ranks then
    profile a short communication window (``spec.communication``).
    """
    phases = {"start": time.time()}
    import torch

    phases["imports_done"] = time.time()
    if spec.device == "cuda":
        init_cuda()
        phases["cuda_ready"] = time.time()
    clock = install_step_clock(spec.step_clock)
    context = workload_context(spec, distributed)
    reporter = WindowReporter(
        spec.clock_witness, distributed.rank if distributed is not None else 0
    )
    source: BatchSource | None = None
    if spec.script is not None:

        def program_for(setup: TrainingSetup) -> StepProgram[ScriptedRepeat]:
            phases["setup_done"] = time.time()
            return scripted_repeat(spec, phases, clock, reporter)

        needed = spec.warmup + spec.steps + (2 if spec.count_flops else 0)
        setup, (flops, measured, work) = run_script(spec.script, context, program_for, needed)
    else:
        reference = spec.factory
        setup = check_setup(load_factory(reference)(context), reference)
        source = BatchSource(setup.batches, reference)
        phases["setup_done"] = time.time()
        flops = None
        if spec.count_flops:
            flops = count_step_flops(setup, source)
            phases["flops_done"] = time.time()
        measured = measure_steps(
            setup,
            source,
            spec.device,
            spec.warmup,
            spec.steps,
            phases,
            inject_slowdown=spec.inject_slowdown,
            clock=clock,
            reporter=reporter,
        )
        work = None
        if spec.count_flops:  # the counting repeat counts a steady step's work after timing
            work = count_step_work(setup, source)
            phases["work_done"] = time.time()
    # Read before the communication window, which is no measured step (its batches and memory
    # are not the repeat's):
    threads = torch.get_num_threads()
    setup_info = {**describe_setup(setup), **describe_device(spec.device)}
    epoch_restarts = source.epoch_restarts if source is not None else 0
    memory = peak_memory(spec.device)
    communication = None
    window = spec.communication
    if distributed is not None and window is not None and source is not None:
        from perfgate.trace.capture import measure_communication  # lazy: profiler, after timing

        trace = rank_trace_path(window.trace_path, distributed.rank)
        communication = measure_communication(setup, source, spec.device, window.steps, trace)
    return WorkerReport(
        status="ok",
        rank=rank_place(distributed),
        measurement=Measurement(
            **asdict(measured),
            threads=threads,
            epoch_restarts=epoch_restarts,
            peak_memory=memory,
            phases=phases,
            samples_per_step=setup.samples_per_step,
            tokens_per_step=setup.tokens_per_step,
            compute_dtype=setup.compute_dtype,
            analytic_flops_per_step=setup.analytic_flops_per_step,
            analytic_formula=setup.analytic_formula,
            flops=flops,
            applied_knobs=dict(setup.knobs),
            setup_info=setup_info,
            communication=communication,
            work=work,
        ),
    )


def init_cuda() -> None:
    """Initialise CUDA and create the current device's context now (a synchronisation needs
    one), so its cost is a phase of its own, not part of the factory's. Under torchrun the
    rank's device is already current (``perfgate.distributed.process_group``)."""
    import torch

    torch.cuda.synchronize()


ScriptedRepeat = tuple[CountedFlops | None, "MeasuredSteps", WorkCounters | None]


def scripted_repeat(
    spec: WorkerSpec,
    phases: dict[str, float],
    clock: VirtualClock | None,
    reporter: WindowReporter,
) -> StepProgram[ScriptedRepeat]:
    """A timed repeat of a training script: its first step under the FLOP counter (when this
    repeat counts), then the warm-up and measured steps, then (when it counts) one more under
    the work counter, all taken by the script's own loop (``perfgate.workloads.scripted``)."""
    flops = None
    if spec.count_flops:
        flops = yield from counted_step()
        phases["flops_done"] = time.time()
    measured = yield from timed_steps(
        spec.device, spec.warmup, spec.steps, phases, spec.inject_slowdown, clock, reporter
    )
    work = None
    if spec.count_flops:
        work = yield from counted_work_step()
        phases["work_done"] = time.time()
    return flops, measured, work


@dataclass(frozen=True, kw_only=True)
class MeasuredSteps:
    """The timed loop's part of a :class:`~perfgate.documents.worker.Measurement`."""

    timer: Timer
    first_step_s: float
    warmup_times_s: list[float]
    step_times_s: list[float]
    steady_start: int
    dataloader_wait_s: list[float]
    losses: list[float | None]
    inject_reference_s: float | None
    injected_s_per_step: float | None


def measure_steps(
    setup: TrainingSetup,
    source: BatchSource,
    device: str,
    warmup: int,
    steps: int,
    phases: dict[str, float],
    inject_slowdown: float | None = None,
    clock: VirtualClock | None = None,
    reporter: WindowReporter | None = None,
) -> MeasuredSteps:
    """Warm-up then measured steps of a factory workload (:func:`timed_steps` driven over its
    setup)."""
    program = timed_steps(device, warmup, steps, phases, inject_slowdown, clock, reporter)
    return drive_setup(program, setup, source)


def timed_steps(
    device: str,
    warmup: int,
    steps: int,
    phases: dict[str, float],
    inject_slowdown: float | None = None,
    clock: VirtualClock | None = None,
    reporter: WindowReporter | None = None,
) -> StepProgram[MeasuredSteps]:
    """Warm-up then measured steps, boundaries marked by the device's timer (or the test
    harness's virtual ``clock``, see ``perfgate.runner.step_clock``): the step program of a
    timed repeat, for a factory's steps and a script's alike (``perfgate.workloads.drive``).

    The ``reporter`` tells the parent when the measured window begins and ends, so that its own
    clock can check the steps reported here (``perfgate.runner.witness``). On a GPU the queue is
    drained before the window opens: otherwise the warm-up's kernels, still running behind the
    host, would sit inside the parent's window but in no measured step.

    Losses are kept as detached tensors and read once at the end, so the loop never forces a
    device synchronisation of its own.

    With ``inject_slowdown`` (a canary run), the warm-up times are read after the warm-up to size
    the extra cost, which then runs after every measured step, before its boundary mark (see
    ``perfgate.runner.canary``). Reading them may synchronise the device, so the measured steps
    start from a fresh boundary mark and that pause is charged to no step.
    """
    timer = make_timer(device, clock)
    injector: SlowdownInjector | None = None
    losses: list[Any] = []
    waits = []
    timer.mark()
    for index in range(warmup + steps):
        if index == warmup:
            if inject_slowdown:
                injector = SlowdownInjector(device, inject_slowdown, timer.durations(), clock)
                timer.mark()
            elif device == "cuda" and clock is None:
                _synchronize()
                timer.mark()  # the drain is charged to no step
            phases["measure_start"] = time.time()
            if reporter is not None:
                reporter.begin()
        waits.append((yield from fetch()))
        losses.append(kept_loss((yield from step())))
        if injector:
            injector.burn()
        timer.mark()
    times = timer.durations()
    if reporter is not None:
        reporter.end()
    phases["measure_end"] = time.time()
    remarked = injector is not None or (device == "cuda" and clock is None)
    measured = times[warmup + 1 :] if remarked else times[warmup:]
    return MeasuredSteps(
        timer=timer.name,
        first_step_s=times[0],
        warmup_times_s=times[:warmup],
        step_times_s=measured,
        steady_start=steady_start(measured),
        dataloader_wait_s=waits[warmup:],
        losses=read_losses(losses),
        inject_reference_s=injector.reference_s if injector else None,
        injected_s_per_step=injector.seconds_per_step if injector else None,
    )


def kept_loss(loss: Any) -> Any:
    """A step's loss as the loop keeps it: a tensor detached (read at the end, so no step waits
    for the device), a number as a float; anything else (a script that records none) None."""
    if hasattr(loss, "detach"):
        return loss.detach()
    if isinstance(loss, (int, float)) and not isinstance(loss, bool):
        return float(loss)
    return None


def _synchronize() -> None:
    import torch

    torch.cuda.synchronize()


def read_losses(losses: list[Any]) -> list[float | None]:
    """All losses as floats, the tensors in one device-to-host copy; NaN/inf and missing ones
    become null (JSON has neither)."""
    import torch

    tensors = [loss.float().reshape(()) for loss in losses if isinstance(loss, torch.Tensor)]
    read = iter(torch.stack(tensors).cpu().tolist() if tensors else [])
    values = [next(read) if isinstance(loss, torch.Tensor) else loss for loss in losses]
    return [v if v is not None and math.isfinite(v) else None for v in values]


def peak_memory(device: str) -> dict[str, int | None]:
    """Peak process RSS, and the CUDA caching allocator's peaks on a GPU."""
    memory: dict[str, int | None] = {"rss_bytes": peak_rss_bytes()}
    if device == "cuda":
        import torch

        memory["cuda_allocated_bytes"] = int(torch.cuda.max_memory_allocated())
        memory["cuda_reserved_bytes"] = int(torch.cuda.max_memory_reserved())
    return memory


def peak_rss_bytes() -> int:
    """This process's peak resident memory: ``VmHWM`` of ``/proc/self/status`` on Linux.

    ``getrusage``'s ``ru_maxrss`` is not the worker's own figure there: the kernel carries the
    high-water mark of the image a process ``exec``s from, so a worker spawned by a 1.3 GB test
    process reported 1.37 GB while the same repeat forked reported 0.39 GB. ``VmHWM`` belongs
    to the current address space, which ``exec`` replaces. Elsewhere ``ru_maxrss`` it is.
    """
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, kilobytes elsewhere
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def describe_setup(setup: TrainingSetup) -> dict[str, Any]:
    """Facts about the model, optimizer and data loading that the advisor will read."""
    optimizer = setup.optimizer
    defaults = optimizer.defaults
    info: dict[str, Any] = {
        "parameters": sum(p.numel() for p in setup.model.parameters()),
        "optimizer": {
            "class": type(optimizer).__name__,
            "fused": defaults.get("fused"),
            "foreach": defaults.get("foreach"),
        },
        **{key: _jsonable(value) for key, value in setup.info.items()},
    }
    loader = setup.dataloader
    if loader is not None:
        info["dataloader"] = {
            "num_workers": loader.num_workers,
            "pin_memory": loader.pin_memory,
            "prefetch_factor": loader.prefetch_factor,
            "persistent_workers": loader.persistent_workers,
            "batch_size": loader.batch_size,
        }
    return info


def describe_device(device: str) -> dict[str, Any]:
    """The GPU as torch sees it: the authority for MFU when NVML cannot name the model."""
    if device != "cuda":
        return {}
    import torch

    major, minor = torch.cuda.get_device_capability()
    return {
        "cuda_device_name": torch.cuda.get_device_name(),
        "cuda_capability": f"{major}.{minor}",
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
    }


def run_profile(spec: WorkerSpec, distributed: DistributedContext | None) -> WorkerReport:
    """The profiling mode, imported only when a spec asks for it."""
    from perfgate.trace.capture import run_profile as profile_window  # lazy: never when timed

    return profile_window(spec, distributed)


def _jsonable(value: Any) -> Any:
    """Keep JSON types; anything else is recorded by its ``repr``."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)
    return value


def _error_text(exc: BaseException) -> str:
    """The exception and the last frames of its traceback: enough to act on, bounded in size."""
    frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(frames[-4:]).strip()
    return text[-4000:]


def main(argv: list[str]) -> int:
    """Entry point: ``python -m perfgate.runner.worker SPEC OUT``.

    First of all the worker arranges to die with the process that started it (perfgate, its
    fork server, or torchrun's agent for a rank): a worker must never outlive a cancelled run.
    """
    die_with_parent()
    spec_path, out_path = Path(argv[0]), Path(argv[1])
    spec = read_spec(spec_path)
    for entry in reversed(spec.python_path):
        sys.path.insert(0, entry)
    launched = launched_rank()
    if launched is not None:
        out_path = rank_output_path(out_path, launched[0])
    try:
        with process_group(spec.device, spec.knobs, spec.timeout_s) as group:
            run = run_profile if spec.profile is not None else run_repeat
            report = run(spec, group)
        code = 0
    except UsageError as exc:
        report = WorkerReport(status="usage_error", error=exc.one_line(), failed_at=time.time())
        code = EXIT_USAGE
    except Exception as exc:  # the workload's own failure: recorded, the run goes on
        report = WorkerReport(status="error", error=_error_text(exc), failed_at=time.time())
        code = EXIT_ERROR
    write_json_atomic(out_path, WORKER_REPORT.dump(report))
    return code


def read_spec(path: Path) -> WorkerSpec:
    """The spec the parent wrote, read without schema validation: perfgate's own parent wrote
    it, and the validator's import would cost every spawned worker (each torchrun rank) a
    tenth of a second or more (``DocumentKind.read_trusted``)."""
    return WORKER_SPEC.read_trusted(json.loads(path.read_text()), f"worker spec {path}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
