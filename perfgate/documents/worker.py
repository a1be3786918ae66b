"""The two documents a repeat exchanges with its worker process: the spec the parent writes
(``perfgate.worker-spec``) and the report the worker writes back (``perfgate.worker-report``).

The parent (``perfgate.runner.orchestrator``, ``perfgate.advise.evidence``) builds a
:class:`WorkerSpec`, writes it through :data:`WORKER_SPEC` and starts the worker
(``perfgate.runner.worker``) on it; the worker measures (or profiles) and writes one
:class:`WorkerReport` through :data:`WORKER_REPORT`; under ``torchrun`` every rank writes its
own (``perfgate.distributed.ranks`` combines them).

**Who trusts what.** The spec is written by perfgate itself and read by the worker before it
imports any workload code: the worker reads it with its name and version checked but without
schema validation (:meth:`DocumentKind.read_trusted`), which would import jsonschema into every
worker. The report is written by a process that runs the workload's code — in a gate, the pull
request's — which can write anything there: the parent reads it as untrusted input
(:func:`load_report`: a regular file of bounded size, strict JSON without NaN or infinity, the
schema, then what the schema cannot say: the report belongs to this spec, its durations fit the
repeat's timeout, its steady window holds a step). A report that fails any of these fails its
repeat with the one-line reason, never a traceback and never a pass.

Format history (both):

- 1.0 (2026-12-02): first version (the spec and the report were plain JSON objects before).
- spec 1.1 (2026-12-05): ``script``, a training script's workload.
- report 1.1 (2026-12-06): the measurement's ``work`` (exact work counters of one step).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from perfgate.documents.base import DocumentKind
from perfgate.documents.result import (
    MAX_MEMORY_BYTES,
    MAX_STEP_S,
    RankResult,
    RepeatConditions,
    WorkCounters,
)
from perfgate.errors import UsageError
from perfgate.files import check_json_values

KnobSetting = bool | int | float | str | None
"""One knob's value (``perfgate.workloads.protocol.KnobValue``)."""
FactValue = float | bool | str
"""One fact of a profiling window (``perfgate.trace.facts.Facts``)."""
Timer = Literal["perf_counter", "cuda_event", "virtual"]
"""The clock the worker timed its steps with (``perfgate.runner.timing``)."""


# --- the spec --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class StepClockSpec:
    """How the virtual clock of one repeat behaves (``perfgate.runner.step_clock``: the test
    harness's deterministic clock; travels in the worker's spec)."""

    between: float = 0.02
    within: float = 0.01
    load: float = 1.0
    step: float = 0.001
    seed: int = 0

    def conditions(self) -> RepeatConditions:
        """The virtual machine's conditions: only the load it was given competes with it."""
        return RepeatConditions(
            samples=0,
            runqueue_wait_share=round(max(0.0, 1 - 1 / self.load), 4) if self.load > 0 else 0.0,
            other_cpu_cores=round(max(0.0, self.load - 1), 4),
            cpu_pressure_share=0.0,
            steal_share=0.0,
        )

    def for_repeat(self, label: str) -> StepClockSpec:
        """The clock of one repeat: the seed mixed with the repeat's own label."""
        digest = hashlib.sha256(f"{self.seed}:{label}".encode()).digest()
        return replace(self, seed=int.from_bytes(digest[:8], "big"))


@dataclass(frozen=True, kw_only=True)
class ProfilerWindow:
    """A profiled window the worker runs: ``steps`` active steps, traced to ``trace_path``."""

    steps: int
    trace_path: Path
    """Rank 0's trace (rank r's lies beside it, ``perfgate.files.rank_trace_path``)."""


@dataclass(frozen=True, kw_only=True)
class WorkerSpec:
    """What one worker process is asked to do: build the workload and time it (or, with
    ``profile``, profile it)."""

    name: str
    factory: str
    """``module:function`` of the workload's factory."""
    python_path: list[str]
    """Folders the worker puts first on ``sys.path`` (a user project's root)."""
    preset: str
    params: dict[str, Any]
    knobs: dict[str, KnobSetting]
    device: str
    seed: int
    threads: int | None
    """Intra-op threads to pin (per rank on a distributed CPU run); None: torch's default."""
    warmup: int
    steps: int
    timeout_s: float
    count_flops: bool
    """Count one step's FLOPs before the timed steps (the first repeat only)."""
    inject_slowdown: float | None
    """Canary runs only: the extra cost per measured step, a fraction of the warm-up step."""
    nproc_per_node: int | None
    """Ranks of a distributed workload (the repeat is a torchrun); None: one process."""
    environment_allow: list[str]
    """Variables the worker's environment keeps beyond the built-in allow-list (the parent
    applies it when it starts the worker)."""
    step_clock: StepClockSpec | None = None
    """The test harness's virtual clock; None: real clocks."""
    clock_witness: Path | None = None
    """The FIFO the worker marks its measured window on for the parent's clock
    (``perfgate.runner.witness``); None: nothing is witnessed."""
    communication: ProfilerWindow | None = None
    """A distributed first repeat: the communication window each rank profiles after its
    timed steps (``perfgate.trace.capture.measure_communication``)."""
    profile: ProfilerWindow | None = None
    """The profiling mode (``perfgate advise``): this window instead of timed steps."""
    script: list[str] | None = None
    """A training-script workload (format 1.1): the script's path, then its arguments. The
    worker runs it as ``__main__`` and its ``perfgate.Session`` steps drive the repeat
    (``perfgate.workloads.scripted``); ``factory`` then names the script for messages."""


# --- the report ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class CountedFlops:
    """One eager step's FLOPs by ``FlopCounterMode`` (``perfgate.workloads.flops``)."""

    counted_per_step: int
    by_operator: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class CommunicationWindow:
    """One rank's communication window (``perfgate.trace.communication.CommunicationSummary``
    with its derived shares, in its ``to_dict`` order)."""

    device: str
    backend: str | None
    steps: int
    window_us: float
    compute_us: float
    compute_us_per_step: list[float]
    communication_us: float
    exposed_us: float
    collectives: int
    share: float
    exposed_share: float
    overlap: float | None


@dataclass(frozen=True, kw_only=True)
class RankPlace:
    """Where a worker launched by torchrun sat in the process group."""

    rank: int
    world_size: int
    backend: str


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """A timed repeat's steps and what the factory built (an ok report of a timed spec)."""

    timer: Timer
    threads: int
    """Intra-op threads torch used (``torch.get_num_threads``)."""
    first_step_s: float
    warmup_times_s: list[float]
    step_times_s: list[float]
    steady_start: int
    dataloader_wait_s: list[float]
    losses: list[float | None]
    """Every step's loss, warm-up included; None where it was not finite."""
    inject_reference_s: float | None
    injected_s_per_step: float | None
    epoch_restarts: int
    peak_memory: dict[str, int | None]
    phases: dict[str, float]
    """Unix times of the repeat's phases inside the worker (``RepeatResult.phases``)."""
    samples_per_step: int
    tokens_per_step: int | None
    compute_dtype: str | None
    analytic_flops_per_step: float | None
    analytic_formula: str | None
    flops: CountedFlops | None
    """None unless the spec asked for a count."""
    applied_knobs: dict[str, Any]
    """The knob values the factory reports it applied."""
    setup_info: dict[str, Any]
    """Facts about the model, optimizer, data loading and device (``describe_setup``)."""
    communication: CommunicationWindow | None = None
    """A distributed first repeat: this rank's window; None without collectives, or when
    the spec asked for none."""
    work: WorkCounters | None = None
    """The exact work of one step after the timed ones; None unless the spec asked for a
    count (the same repeat that counts FLOPs)."""


@dataclass(frozen=True, kw_only=True)
class ProfileReport:
    """A profiling window's outcome (an ok report of a spec with ``profile``)."""

    trace_path: Path
    profiled_steps: int
    threads: int
    applied_knobs: dict[str, Any]
    facts: dict[str, FactValue]
    """Facts read from the live objects (``perfgate.trace.facts``), beside the trace."""


WorkerStatus = Literal["ok", "error", "usage_error"]
"""``error``: the workload raised; ``usage_error``: bad input (the run stops)."""


@dataclass(frozen=True, kw_only=True)
class WorkerReport:
    """What one worker (one rank of a torchrun) wrote back for the parent."""

    status: WorkerStatus
    error: str | None = None
    """The failure's text (``error`` and ``usage_error``)."""
    failed_at: float | None = None
    """Unix time of the failure: among failed ranks, the first one is the cause."""
    rank: RankPlace | None = None
    """Under torchrun (an ok report): the rank that wrote it."""
    measurement: Measurement | None = None
    profile: ProfileReport | None = None


WORKER_SPEC: DocumentKind[WorkerSpec] = DocumentKind(
    name="perfgate.worker-spec",
    major=1,
    minor=1,
    model=WorkerSpec,
    produced_by="perfgate's runner for its worker process",
)
WORKER_REPORT: DocumentKind[WorkerReport] = DocumentKind(
    name="perfgate.worker-report",
    major=1,
    minor=1,
    model=WorkerReport,
    produced_by="perfgate's worker process",
)


# --- reading the report: untrusted input -----------------------------------------------------

MAX_REPORT_BYTES = 64 * 2**20
"""The largest report the parent reads. A real one is a few kilobytes (a user's setup
information may add some); a larger file is not a report but a flood."""
MAX_PROBLEM_CHARS = 300
"""A malformed report's reason is one line of at most this many characters."""
_FIX = "a worker writes its report with perfgate.runner.worker"


def load_report(
    path: Path, spec: WorkerSpec, origin: str, rank: int | None = None
) -> WorkerReport | None:
    """The report at ``path`` of the worker started on ``spec`` (``rank`` of a torchrun);
    None when there is no file (the worker wrote none: how its process ended says why).

    Every way the file can be wrong — not a regular file, too large, not strict JSON, NaN or
    infinity, not the format, not consistent with ``spec`` (:func:`check_report`) — is a
    UsageError whose ``problem`` is one line naming ``origin`` and the place."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _malformed(f"{origin} cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):  # a FIFO there would hang the parent's read
        raise _malformed(f"{origin} is not a regular file")
    if info.st_size > MAX_REPORT_BYTES:
        raise _malformed(f"{origin} is {info.st_size} bytes, more than any report")
    try:
        raw = path.read_bytes()
        data = json.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise _malformed(f"{origin} cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise _malformed(f"{origin} is not UTF-8 text (byte {exc.start})") from None
    except RecursionError:
        raise _malformed(f"{origin} is nested too deeply to be a report") from None
    except ValueError as exc:  # JSONDecodeError, or an integer past Python's digit limit
        raise _malformed(f"{origin} is not valid JSON ({exc})") from None
    try:
        check_json_values(data, origin, _FIX)
        report = WORKER_REPORT.read(data, origin)
    except UsageError as exc:
        raise _malformed(exc.problem) from None
    check_report(report, spec, origin, rank)
    return report


def check_report(
    report: WorkerReport, spec: WorkerSpec, origin: str, rank: int | None = None
) -> None:
    """What the schema cannot say about a report of ``spec``: a failure has its text; an ok
    one holds what the spec asked for (a measurement, or a profiling window), from the rank
    it claims to be; its measurement has the spec's step counts, every duration positive (a
    wait may be zero) and within the repeat's timeout, memory peaks in range, and a steady
    step. A UsageError (one line) when it does not."""
    if report.status != "ok":
        if report.error is None:
            raise _malformed(f"{origin} says {report.status} without an error text")
        return
    if spec.nproc_per_node:
        place = report.rank
        if place is None or place.rank != rank or place.world_size != spec.nproc_per_node:
            claimed = f"rank {place.rank} of {place.world_size}" if place else "no rank"
            raise _malformed(
                f"{origin} says it is {claimed}, not rank {rank} of {spec.nproc_per_node}"
            )
    if spec.profile is not None:
        if report.profile is None:
            raise _malformed(f"{origin} is ok but holds no profiling window")
        return
    if report.measurement is None:
        raise _malformed(f"{origin} is ok but holds no measurement")
    _check_measurement(report.measurement, spec, origin)


def _check_measurement(measured: Measurement, spec: WorkerSpec, origin: str) -> None:
    limit = min(MAX_STEP_S, spec.timeout_s)
    where = f"{origin}: measurement"
    for name, values, count in (
        ("warmup_times_s", measured.warmup_times_s, spec.warmup),
        ("step_times_s", measured.step_times_s, spec.steps),
    ):
        if len(values) != count:
            raise _malformed(f"{where}/{name} holds {len(values)} steps, not the {count} asked")
    durations = [
        ("first_step_s", measured.first_step_s, False),
        *((f"warmup_times_s/{i}", v, False) for i, v in enumerate(measured.warmup_times_s)),
        *((f"step_times_s/{i}", v, False) for i, v in enumerate(measured.step_times_s)),
        *((f"dataloader_wait_s/{i}", v, True) for i, v in enumerate(measured.dataloader_wait_s)),
    ]
    for name, value, zero_ok in durations:
        if not ((value >= 0 if zero_ok else value > 0) and value <= limit):
            low = "[0" if zero_ok else "(0"
            raise _malformed(f"{where}/{name} is {value!r} s, not in {low}, {limit:g}]")
    if not 0 <= measured.steady_start < len(measured.step_times_s):
        raise _malformed(
            f"{where}/steady_start {measured.steady_start} leaves none of its "
            f"{len(measured.step_times_s)} steps"
        )
    for key, size in measured.peak_memory.items():
        if size is not None and not 0 <= size <= MAX_MEMORY_BYTES:
            raise _malformed(f"{where}/peak_memory/{key} is {size!r} bytes")


def _malformed(problem: str) -> UsageError:
    """The error of a malformed report: its problem on one line, bounded in length."""
    line = " ".join(problem.split())
    if len(line) > MAX_PROBLEM_CHARS:
        line = line[: MAX_PROBLEM_CHARS - 1] + "…"
    return UsageError(line, _FIX)


# --- what the parent read for one repeat -----------------------------------------------------

ReportStatus = Literal["ok", "error", "usage_error", "crashed", "malformed"]


@dataclass(frozen=True, kw_only=True)
class RepeatReport:
    """What the parent read for one repeat: its worker's report — every rank's report of a
    torchrun, combined (``perfgate.distributed.ranks``) — or why there is none to trust."""

    status: ReportStatus | None
    """The status the report claims; ``crashed``: a rank of a torchrun wrote none;
    ``malformed``: a report could not be trusted (``error`` says why); None: the worker wrote
    no report at all (how its process ended says why)."""
    error: str | None = None
    report: WorkerReport | None = None
    """The ok report (the slowest rank's, of a torchrun)."""
    slowest_rank: int | None = None
    """A torchrun's timed repeat: the rank whose steps these are (the highest steady median)."""
    ranks: list[RankResult] | None = None
    """A torchrun's timed repeat: every rank's samples."""


def read_report(
    path: Path, spec: WorkerSpec, origin: str = "the worker's report", rank: int | None = None
) -> RepeatReport:
    """The report at ``path`` (:func:`load_report`) as the parent judges it."""
    try:
        report = load_report(path, spec, origin, rank)
    except UsageError as exc:
        return RepeatReport(status="malformed", error=exc.problem)
    if report is None:
        return RepeatReport(status=None)
    return RepeatReport(
        status=report.status, error=report.error, report=report if report.status == "ok" else None
    )
