"""The result document: the one contract between runner, store, compare, advisor and report.

One JSON file per ``perfgate run``. It holds every raw per-step sample, the telemetry, the
environment fingerprint and the source revision, so any later stage can recompute what it needs
without going back to the machine that measured it.

Format history (:data:`RESULT`, ``perfgate.documents.base`` for the compatibility rule):

- 1.0 (perfgate 0.1, 2026-11): first version.
- 1.1 (2026-11-30): ``source.subject`` (optional).
- 1.2 (2026-12-01): distributed runs (optional, written only when set):
  ``settings.nproc_per_node``, ``repeat.slowest_rank`` and ``repeat.ranks``, and the summary's
  ``world_size``, ``rank_spread``, ``communication_*`` and ``rank_imbalance``.
- 1.3 (2026-12-01): measured ceilings (optional, written only when set): the summary's
  ``ceiling_tflops``, ``ceiling_fraction`` and ``ceiling_measured_at``.
- 1.4 (2026-12-02): measurement conditions (optional): ``repeat.conditions`` and the
  ``virtual`` timer of the test harness's step clock; the header's ``schema_minor``.
- 1.5 (2026-12-05): a training script's workload (``factory`` may read ``script:PATH``).
- 1.6 (2026-12-06): exact work counters of one step (optional): the workload's ``work``.

Readers call :func:`load_result` (:data:`RESULT`'s reader, then :func:`check_measurements`):
a document from a newer major version is refused with a clear error instead of misread; one of
a newer minor is read, its unknown fields ignored.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from perfgate.documents.base import DocumentKind, build
from perfgate.errors import InfrastructureError, UsageError
from perfgate.files import read_json, write_json_atomic

RepeatStatus = Literal["ok", "error", "crashed", "timeout"]
WorkloadStatus = Literal["ok", "error", "crashed", "timeout", "skipped"]


@dataclass(frozen=True, kw_only=True)
class RankResult:
    """One rank of a distributed repeat: its own steps and its communication window."""

    rank: int
    median_step_s: float
    """Median of this rank's steady steps."""
    step_times_s: list[float] = field(default_factory=list)
    steady_start: int = 0
    dataloader_wait_s: list[float] = field(default_factory=list)
    peak_memory: dict[str, int | None] = field(default_factory=dict)
    first_step_s: float | None = None
    communication: dict[str, Any] | None = None
    """First repeat only: ``perfgate.trace.communication.CommunicationSummary.to_dict()``
    of this rank's profiled window (null when it saw no collective)."""


@dataclass(frozen=True, kw_only=True)
class RepeatConditions:
    """What else the machine was doing while one repeat's steps were timed: the evidence for
    judging whether two measurements ran under the same conditions (``perfgate.conditions``).

    Means over the parent's telemetry samples whose windows overlap the measured steps (at
    4 Hz a short repeat has one: conditions at the sampler's resolution). Null where the
    platform does not show a figure (no schedstat, no PSI, a CPU clock the VM hides, no GPU).
    """

    samples: int
    """Telemetry samples the figures come from (0: none overlapped the measured steps)."""
    runqueue_wait_share: float | None = None
    """Time the worker's threads were runnable but waiting for a CPU, per second of wall time
    (0.3: a neighbour took 30 % of a thread's time); the direct measure of CPU contention."""
    other_cpu_cores: float | None = None
    """CPU used by processes outside the worker's tree, in cores."""
    cpu_pressure_share: float | None = None
    """Share of the time some task on the machine waited for a CPU (PSI)."""
    steal_share: float | None = None
    """Share of the CPUs' time a hypervisor gave to other guests."""
    cpu_mhz: float | None = None
    """Mean CPU clock."""
    gpu_other_processes: int | None = None
    """Most compute processes outside the worker's tree seen on its GPU at once."""
    gpu_sm_mhz: float | None = None
    """Mean SM clock of the worker's GPU."""


@dataclass(frozen=True, kw_only=True)
class RepeatResult:
    """One repeat: one fresh worker process, the statistical unit of every later comparison."""

    index: int
    status: RepeatStatus
    error: str | None = None
    """Error text (exception and the end of its traceback, signal name, or timeout)."""
    exit_code: int | None = None
    wall_s: float = 0.0
    """Wall time of the whole worker process, import and set-up included."""
    timer: Literal["perf_counter", "cuda_event", "virtual"] | None = None
    """``virtual``: the test harness's deterministic clock (``perfgate.runner.step_clock``)."""
    threads: int | None = None
    """Intra-op threads the worker pinned with ``torch.set_num_threads``."""
    first_step_s: float | None = None
    """The very first step (compile, autotune, allocator growth): reported, never compared."""
    warmup_times_s: list[float] = field(default_factory=list)
    step_times_s: list[float] = field(default_factory=list)
    """Measured steps after the fixed warm-up, in order."""
    steady_start: int = 0
    """Index into ``step_times_s`` of the first step judged steady (earlier ones are excluded)."""
    losses: list[float | None] = field(default_factory=list)
    """Loss of every step, warm-up included, in order; None where it was not finite (NaN, inf)."""
    dataloader_wait_s: list[float] = field(default_factory=list)
    """Host time spent in ``next(batches)`` for each measured step."""
    epoch_restarts: int = 0
    peak_memory: dict[str, int | None] = field(default_factory=dict)
    """``rss_bytes`` (CPU), ``cuda_allocated_bytes`` and ``cuda_reserved_bytes`` (GPU)."""
    phases: dict[str, float] = field(default_factory=dict)
    """Unix times of the repeat's phases, in order: ``spawned`` (the parent starts the worker;
    on every repeat, failed ones too), then from the worker's own document (an ok repeat only)
    ``start`` (the repeat's code begins), ``imports_done`` (torch imported), ``cuda_ready``
    (CUDA context created; device cuda only), ``setup_done`` (the factory returned),
    ``flops_done`` (FLOPs counted; the first repeat only), ``measure_start`` (warm-up done),
    ``measure_end``, ``work_done`` (the work counted after the timed steps; the first repeat
    only). The measured window aligns the telemetry; the rest is what a repeat costs
    before its first timed step (``benchmarks/startup.py``)."""
    telemetry: dict[str, Any] | None = None
    """Columnar samples from the parent-side sampler (see ``perfgate.telemetry.sampler``)."""
    telemetry_summary: dict[str, Any] | None = None
    """Telemetry restricted to the measured window."""
    stderr_tail: str | None = None
    injected_s_per_step: float | None = None
    """Canary runs only: seconds of real work added to each measured step (``--inject-slowdown``),
    so a reader can check the gate saw the regression it was given."""
    slowest_rank: int | None = None
    """Distributed repeats only: the rank whose steps these are (the highest steady median)."""
    ranks: list[RankResult] | None = None
    """Distributed repeats only: every rank's samples, the slowest one included."""
    conditions: RepeatConditions | None = None
    """What else the machine did during the measured steps (null in older documents)."""


@dataclass(frozen=True, kw_only=True)
class FlopCount:
    """FLOPs of one training step and where the number came from."""

    counted_per_step: int | None
    """``torch.utils.flop_counter.FlopCounterMode`` over one eager step, outside timing."""
    analytic_per_step: float | None = None
    analytic_formula: str | None = None
    used: Literal["counted", "analytic"] | None = None
    """Which figure TFLOP/s and MFU are computed from."""
    by_operator: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class WorkCounters:
    """The exact work of one training step: counts that no timing noise touches.

    Counted once per workload by a dispatch mode (``perfgate.workloads.work``) over one eager
    step taken after the timed ones (a steady step: the first one also creates the optimizer's
    state), so two runs of the same code on the same inputs count the same, and any difference
    is a change of the work itself (``perfgate.compare.work``).
    """

    operators: int
    """aten operators dispatched (views and in-place ones included): the host's launch work."""
    allocations: int
    """Operator outputs with storage of their own (not a view or an input written in place)."""
    allocated_bytes: int
    host_syncs: int
    """Operators whose result the host must wait for on an accelerator: ``.item()`` and other
    scalar reads, data-dependent shapes (``nonzero``, ``masked_select``, ``unique``), and
    blocking device-to-host copies."""
    host_to_device_bytes: int
    device_to_host_bytes: int
    collectives: int
    """Collective operations (c10d) called by the step; 0 in a single process."""
    collective_bytes: int
    """Bytes of the tensors the collectives were given."""
    by_operator: dict[str, int] = field(default_factory=dict)
    """Dispatches per aten overload packet (``aten.mm``), sorted by name."""


@dataclass(frozen=True, kw_only=True)
class WorkloadSummary:
    """Headline numbers of one workload, computed from the steady steps of the ok repeats."""

    ok_repeats: int
    median_step_s: float | None = None
    """Median over repeats of each repeat's median steady step time."""
    repeat_medians_s: list[float] = field(default_factory=list)
    between_repeat_cv: float | None = None
    """Coefficient of variation of the repeat medians: the noise that matters for a verdict."""
    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    tflops: float | None = None
    mfu: float | None = None
    mfu_reason: str | None = None
    """Why MFU is null (unknown GPU, CPU run, no FLOP count); null when MFU is set."""
    peak_tflops: float | None = None
    peak_memory_bytes: int | None = None
    first_step_s: float | None = None
    dataloader_wait_share: float | None = None
    """Median fraction of step time spent waiting for the next batch."""
    final_loss: float | None = None
    world_size: int | None = None
    """Distributed runs only: ranks per repeat. Step time and throughput are then the slowest
    rank's step over all ranks' samples; TFLOP/s and MFU are per rank (one GPU's share)."""
    rank_spread: float | None = None
    """(slowest − fastest) / slowest of the rank medians, median over repeats. Small under DDP
    even when the work is uneven: fast ranks wait inside the all-reduce (see rank_imbalance)."""
    communication_share: float | None = None
    """Share of the profiled step spent in collectives, mean over ranks (first repeat)."""
    communication_exposed_share: float | None = None
    """Share of the step in collectives that no computation overlapped, mean over ranks."""
    communication_overlap: float | None = None
    """Fraction of collective time hidden behind computation, mean over ranks."""
    rank_imbalance: float | None = None
    """(most − least) / most busy compute time across ranks in the profiled window."""
    ceiling_tflops: float | None = None
    """The measured matmul ceiling (``perfgate doctor --peak``) of this environment for the
    compute dtype (fp32 on a CPU); null when none is stored."""
    ceiling_fraction: float | None = None
    """Achieved TFLOP/s ÷ ``ceiling_tflops``: how far from what this machine really does
    (MFU says how far from the datasheet; a CPU run has this figure and no MFU)."""
    ceiling_measured_at: str | None = None
    """When the ceiling was measured (ISO time), for the reader to judge its age."""


@dataclass(frozen=True, kw_only=True)
class WorkloadResult:
    """Everything measured for one workload in one run."""

    name: str
    version: int
    kind: Literal["builtin", "user"]
    factory: str
    preset: str
    definition_hash: str
    knobs: dict[str, Any]
    params: dict[str, Any]
    device: str
    status: WorkloadStatus
    error: str | None = None
    samples_per_step: int | None = None
    tokens_per_step: int | None = None
    compute_dtype: str | None = None
    flops: FlopCount | None = None
    setup_info: dict[str, Any] = field(default_factory=dict)
    repeats: list[RepeatResult] = field(default_factory=list)
    summary: WorkloadSummary | None = None
    work: WorkCounters | None = None
    """Exact work counters of one step (format 1.6); None when not counted (an older
    document, a failed first repeat)."""


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """How the run was asked to measure."""

    repeats: int
    steps: int
    warmup: int
    timeout_s: float
    threads: int | None
    seed: int
    shard: str | None = None
    inject_slowdown: float | None = None
    """Canary runs only: the extra cost added to each measured step, as a fraction of the
    workload's warm-up step time. A canary run never becomes part of a baseline."""
    nproc_per_node: int = 1
    """Ranks per distributed workload (``--nproc-per-node``); other workloads run one process."""


@dataclass(frozen=True, kw_only=True)
class SourceInfo:
    """The revision of the code under test (git, or GitHub Actions' variables)."""

    commit: str | None = None
    branch: str | None = None
    dirty: bool | None = None
    repository: str | None = None
    pr_number: int | None = None
    trigger: Literal["pr", "nightly", "manual"] = "manual"
    ci: str | None = None
    subject: str | None = None
    """The commit's subject line, shown next to its hash in reports and the PR comment (it is
    whatever its author wrote: every renderer escapes it)."""


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """One ``perfgate run``: the top of the result document."""

    run_id: str
    perfgate_version: str
    started_at: str
    finished_at: str
    suite: str | None
    device: str
    settings: RunSettings
    source: SourceInfo
    environment: dict[str, Any]
    workloads: list[WorkloadResult]

    @property
    def status(self) -> Literal["ok", "partial", "failed"]:
        """``ok`` when every workload succeeded, ``failed`` when none did."""
        ok = sum(1 for w in self.workloads if w.status == "ok")
        if ok == len(self.workloads):
            return "ok"
        return "failed" if ok == 0 else "partial"

    def to_dict(self) -> dict[str, Any]:
        """The on-disk form (:data:`RESULT`'s header, then the fields), with the derived
        ``status`` included.

        Fields added to version 1 for distributed runs and measured ceilings are written only
        when they hold a value, so a single-process run without ceilings is the document an
        older perfgate wrote, byte for byte (its stored digest still matches when it is
        ingested again).
        """
        data = {**RESULT.header(), **asdict(self)}
        data["status"] = self.status
        _drop_defaults(data["settings"], {"nproc_per_node": 1})
        for workload in data["workloads"]:
            _drop_defaults(workload, {"work": None})
            if workload["summary"] is not None:
                _drop_defaults(workload["summary"], dict.fromkeys(_OPTIONAL_SUMMARY))
            for repeat in workload["repeats"]:
                _drop_defaults(repeat, {"slowest_rank": None, "ranks": None, "conditions": None})
        return data


_OPTIONAL_SUMMARY = (
    "world_size",
    "rank_spread",
    "communication_share",
    "communication_exposed_share",
    "communication_overlap",
    "rank_imbalance",
    "ceiling_tflops",
    "ceiling_fraction",
    "ceiling_measured_at",
)
"""Summary fields added to version 1 that are dropped from the document when null."""


def _drop_defaults(data: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Remove the keys of ``defaults`` whose value in ``data`` is that default."""
    for key, default in defaults.items():
        if key in data and data[key] == default:
            del data[key]


def validate_document(data: Any, origin: str = "result document") -> None:
    """Check ``data`` against the format (:data:`RESULT`) and its measurements; a clear
    one-line UsageError when it does not fit."""
    check_measurements(RESULT.validate(data, origin), origin)


def load_result(path: Path) -> RunResult:
    """Read and validate a result document from disk: the format, then the measurements
    (:func:`check_measurements`). Every way the file can be wrong is a one-line UsageError."""
    fix = "pass a file written by perfgate run"
    data = read_json(path, what="result file", fix=fix)
    return result_from_dict(data, origin=str(path))


def result_from_dict(data: Any, origin: str = "result document") -> RunResult:
    """The typed model of a parsed document, validated (format and measurements)."""
    body = RESULT.validate(data, origin)
    check_measurements(body, origin)
    return build(RunResult, body)


MAX_STEP_S = 86_400.0
"""The longest duration a document may record for one step: a day. A longer one is not a
measurement but a corrupt or hand-edited file (``1e308`` overflows the statistics)."""
MAX_MEMORY_BYTES = 2**60
"""The largest peak memory a document may record (an exbibyte)."""


def check_measurements(data: dict[str, Any], origin: str) -> None:
    """What the schema cannot say about a schema-valid document: every duration is positive
    (a wait may be zero), at most ``MAX_STEP_S`` and at most the run's ``timeout_s`` (the repeat
    would have been killed); memory peaks are non-negative and below ``MAX_MEMORY_BYTES``; an
    ``ok`` repeat has a steady step; and an ``ok`` workload has an ``ok`` repeat, so a document
    with nothing measured can never pass a comparison with an empty table.

    NaN and infinity are refused before the schema, when the JSON is read
    (:func:`perfgate.files.check_json_values`).
    """
    fix = "regenerate it with perfgate run"
    if not data["workloads"]:
        raise UsageError(f"{origin} holds no workloads", fix)
    limit = min(MAX_STEP_S, data["settings"]["timeout_s"])

    def seconds(where: str, value: float | None, *, zero_ok: bool = False) -> None:
        if value is not None and not ((value >= 0 if zero_ok else value > 0) and value <= limit):
            low = "[0" if zero_ok else "(0"
            raise UsageError(
                f"{origin}: {where} is {value!r} s, not in {low}, {limit:g}] "
                "(no step outlasts the run's timeout, nor a day)",
                fix,
            )

    def each_second(where: str, values: list[float], *, zero_ok: bool = False) -> None:
        for index, value in enumerate(values):
            seconds(f"{where}/{index}", value, zero_ok=zero_ok)

    def size(where: str, value: int | None) -> None:
        if value is not None and not 0 <= value <= MAX_MEMORY_BYTES:
            raise UsageError(f"{origin}: {where} is {value!r} bytes", fix)

    for w_index, workload in enumerate(data["workloads"]):
        base = f"workloads/{w_index}"
        ok_repeats = 0
        for r_index, repeat in enumerate(workload["repeats"]):
            where = f"{base}/repeats/{r_index}"
            each_second(f"{where}/step_times_s", repeat["step_times_s"])
            each_second(f"{where}/warmup_times_s", repeat["warmup_times_s"])
            seconds(f"{where}/first_step_s", repeat["first_step_s"])
            each_second(f"{where}/dataloader_wait_s", repeat["dataloader_wait_s"], zero_ok=True)
            for key, value in repeat["peak_memory"].items():
                size(f"{where}/peak_memory/{key}", value)
            for k, rank in enumerate(repeat.get("ranks") or []):
                each_second(f"{where}/ranks/{k}/step_times_s", rank["step_times_s"])
                seconds(f"{where}/ranks/{k}/median_step_s", rank["median_step_s"])
            if repeat["status"] == "ok":
                if repeat["steady_start"] >= len(repeat["step_times_s"]):
                    raise UsageError(
                        f"{origin}: {where}/steady_start {repeat['steady_start']} leaves none "
                        f"of its {len(repeat['step_times_s'])} steps",
                        fix,
                    )
                ok_repeats += 1
        summary = workload["summary"] or {}
        seconds(f"{base}/summary/median_step_s", summary.get("median_step_s"))
        each_second(f"{base}/summary/repeat_medians_s", summary.get("repeat_medians_s", []))
        size(f"{base}/summary/peak_memory_bytes", summary.get("peak_memory_bytes"))
        if workload["status"] == "ok" and not ok_repeats:
            raise UsageError(
                f"{origin}: workload {workload['name']!r} is ok but has no ok repeat", fix
            )


def write_result(path: Path, result: RunResult) -> None:
    """Validate, then write the document atomically; refuses to write an invalid document."""
    data = result.to_dict()
    try:
        validate_document(data, origin="the new result document")
    except UsageError as exc:  # a bug in perfgate, not the user's input
        raise InfrastructureError(exc.problem, "please report this as a perfgate bug") from None
    write_json_atomic(path, data)


RESULT: DocumentKind[RunResult] = DocumentKind(
    name="perfgate.result",
    major=1,
    minor=6,
    model=RunResult,
    produced_by="perfgate run",
    dump_model=RunResult.to_dict,
)
