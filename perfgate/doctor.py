"""``perfgate doctor`` as a library call: what this machine can and cannot measure, and why.

A benchmark report is only as good as its denominators and its sensors. Before trusting an MFU,
a utilisation trace or a low-noise claim, a user should know whether the GPU is in the peak table,
whether NVML exposes each counter on this board, and whether the clocks are pinned. Each
``Capability`` answers one such question: ``ok`` True (works), False (missing or degraded, with
the consequence in ``detail``) or None (not applicable here, or unknowable); ``facts`` carries the
raw values for a JSON rendering. The CLI only renders these objects.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.ceilings.store import (
    ceilings_path,
    environment_key,
    read_ceilings_file,
    save_ceilings,
    stored_ceilings,
)
from perfgate.config import Config, load_config
from perfgate.documents.ceilings import CEILINGS
from perfgate.errors import UsageError
from perfgate.files import check_writable, write_json_atomic
from perfgate.telemetry.fingerprint import collect_fingerprint, cpu_model, distributed_facts
from perfgate.telemetry.host import (
    HostProbe,
    affinity_count,
    cpu_quota_cores,
    default_thread_count,
)
from perfgate.telemetry.nvml import NvmlDevice, NvmlSession, Unavailable, open_nvml
from perfgate.telemetry.peaks import DTYPES, lookup_peak

if TYPE_CHECKING:
    from perfgate.ceilings.bench import Ceilings

_CXX_COMPILERS = ("c++", "g++", "clang++")
"""Inductor compiles its CPU kernels as C++ (``$CXX`` first, like inductor itself)."""


@dataclass(frozen=True)
class Capability:
    """One thing perfgate may or may not be able to measure on this machine."""

    name: str
    ok: bool | None
    detail: str
    facts: dict[str, Any] = field(default_factory=dict)


def doctor_session(config_path: Path | None, threads: int | None = None) -> list[Capability]:
    """``perfgate doctor``: :func:`diagnose_machine` for the project of the configuration at
    ``config_path`` (None: the nearest one upwards), with its threads unless ``threads``."""
    settings = load_config(config_path)
    return diagnose_machine(settings.root, threads or settings.threads)


def diagnose_machine(root: Path | None = None, threads: int | None = None) -> list[Capability]:
    """Every capability, in the order a reader needs them: stack, GPUs, CPU, tools.

    ``root`` is the project root whose ``.perfgate/ceilings.json`` is checked for this
    environment's measured ceilings (default: the working directory); ``threads`` the thread
    count runs pin (default: one per physical core)."""
    import torch

    capabilities = [_torch_build(torch), _cuda(torch)]
    session = open_nvml()
    capabilities.append(_nvml(session))
    gpus = _nvml_gpus(session) if isinstance(session, NvmlSession) else _torch_gpus(torch)
    capabilities += gpus or [_cpu_mfu()]
    return [
        *capabilities,
        _cpu(),
        _threads(),
        _ceilings(torch, root or Path.cwd(), threads or default_thread_count()),
        _process_metrics(),
        _distributed(session if isinstance(session, NvmlSession) else None),
        _compile(torch),
        _profiler(),
        _flop_counter(),
    ]


def _distributed(session: NvmlSession | None) -> Capability:
    """What ``--nproc-per-node`` would train over: torch.distributed, gloo, NCCL, NVLink."""
    facts = distributed_facts(session)
    if not facts["torch_distributed"]:
        return Capability(
            "torch.distributed",
            False,
            "this torch build has no torch.distributed: distributed workloads cannot run",
            facts,
        )
    parts = [
        "gloo (CPU ranks)" if facts["gloo_available"] else "no gloo: no CPU ranks",
        f"NCCL {facts['nccl_version'] or ''} (GPU ranks)".replace("  ", " ")
        if facts["nccl_available"]
        else "no NCCL" + (": GPU ranks would need gloo" if facts["gpu_count"] else ""),
    ]
    if facts["nvlink"] is not None:
        links = facts["nvlink_active_links"]
        parts.append(f"NVLink: {links} active links" if facts["nvlink"] else "no active NVLink")
    parts.append("--nproc-per-node launches ranks through torchrun")
    return Capability("torch.distributed", bool(facts["gloo_available"]), "; ".join(parts), facts)


def _torch_build(torch: Any) -> Capability:
    """Which backend the installed torch was built for, and whether it is a debug build."""
    if torch.version.hip:
        kind = f"ROCm {torch.version.hip} build"
    elif torch.version.cuda:
        kind = f"CUDA {torch.version.cuda} build"
    else:
        kind = "CPU-only build"
    facts = {
        "version": torch.__version__,
        "git_version": torch.version.git_version,
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
        "debug": bool(torch.version.debug),
    }
    if torch.version.debug:
        return Capability(
            "torch build",
            False,
            f"torch {torch.__version__}, {kind}, DEBUG build: "
            "timings are not representative of a release build",
            facts,
        )
    return Capability("torch build", True, f"torch {torch.__version__}, {kind}", facts)


def _cuda(torch: Any) -> Capability:
    """Whether torch can run GPU workloads here."""
    if not torch.version.cuda and not torch.version.hip:
        return Capability(
            "CUDA",
            False,
            f"torch {torch.__version__} is a CPU-only build: GPU "
            "workloads cannot run; CPU workloads can",
            {"device_count": 0},
        )
    if not torch.cuda.is_available():
        return Capability(
            "CUDA",
            False,
            "torch has GPU support but sees no usable GPU (no "
            "device, no driver, or CUDA_VISIBLE_DEVICES hides them)",
            {"device_count": 0},
        )
    count = torch.cuda.device_count()
    return Capability("CUDA", True, f"{count} GPU(s) visible to torch", {"device_count": count})


def _nvml(session: NvmlSession | Unavailable) -> Capability:
    """Whether GPU counters (utilisation, clocks, power, throttling) can be sampled at all."""
    if isinstance(session, Unavailable):
        return Capability(
            "NVML",
            False,
            f"{session.reason}: GPU utilisation, clocks, power, "
            "energy and throttle reasons cannot be sampled",
            {"reason": session.reason},
        )
    facts = {
        "driver_version": session.driver_version,
        "cuda_driver_version": session.cuda_driver_version,
        "device_count": session.device_count,
    }
    return Capability(
        "NVML",
        True,
        f"driver {session.driver_version}, CUDA driver API "
        f"{session.cuda_driver_version}, {session.device_count} GPU(s)",
        facts,
    )


def _nvml_gpus(session: NvmlSession) -> list[Capability]:
    """The capabilities of every GPU NVML sees (empty on a machine without GPUs)."""
    capabilities: list[Capability] = []
    with session:
        for index in range(session.device_count):
            device = session.device(index)
            if isinstance(device, Unavailable):
                capabilities.append(Capability(f"GPU {index}", False, device.reason))
            else:
                capabilities += _nvml_gpu(device)
    return capabilities


def _nvml_gpu(device: NvmlDevice) -> list[Capability]:
    """Identity, peak-table entry, each sampled counter, clock policy and MIG of one GPU."""
    facts = device.facts()
    sample = device.sample()
    label = f"GPU {device.index}"
    identity = Capability(
        label,
        True,
        f"{facts.name}, compute capability {facts.compute_capability}, "
        f"{_gib(facts.memory_total_bytes)}, power limit {facts.power_limit_w} W, "
        f"NVLink links active: {facts.nvlink_active_links}",
        facts.to_dict(),
    )
    counters = [
        _counter(
            label,
            "utilisation",
            sample.util_percent,
            "%",
            "share of time a kernel was running (not SM occupancy)",
        ),
        _counter(
            label, "clocks", sample.sm_clock_mhz, " MHz (SM)", "SM and memory clocks over the run"
        ),
        _counter(label, "power", sample.power_w, " W", "board power draw"),
        _counter(
            label,
            "energy counter",
            sample.energy_mj,
            " mJ since driver load",
            "energy per run, for perf/W",
        ),
        _counter(
            label,
            "throttle reasons",
            sample.throttle_reasons,
            "",
            "flags thermal/power slowdowns inside the measured window",
        ),
    ]
    return [
        identity,
        _peak(label, facts.name),
        *counters,
        _clock_policy(label, facts.clocks_locked),
        _mig(label, facts.mig_enabled),
    ]


def _torch_gpus(torch: Any) -> list[Capability]:
    """Without NVML, torch still names the GPUs, which is enough for the peak table."""
    if not torch.cuda.is_available():
        return []
    return [
        _peak(f"GPU {index}", torch.cuda.get_device_name(index))
        for index in range(torch.cuda.device_count())
    ]


def _peak(label: str, name: str | None) -> Capability:
    """Whether MFU can be computed on this GPU, and for which dtypes."""
    lookups = [lookup_peak(name, dtype) for dtype in DTYPES]
    known = {lookup.dtype: lookup.tflops for lookup in lookups if lookup.tflops is not None}
    if not known:
        return Capability(
            f"{label} MFU", False, f"{lookups[0].reason}: MFU will be null", {"peaks_tflops": {}}
        )
    figures = ", ".join(f"{dtype} {tflops:g}" for dtype, tflops in known.items())
    gaps = "; ".join(lookup.reason for lookup in lookups if lookup.reason)
    source = next(lookup.source for lookup in lookups if lookup.source)
    detail = f"peak TFLOP/s (dense): {figures} ({source})"
    return Capability(
        f"{label} MFU", True, f"{detail}. {gaps}" if gaps else detail, {"peaks_tflops": known}
    )


def _counter(label: str, what: str, value: object, unit: str, purpose: str) -> Capability:
    """One NVML counter: readable on this board or not."""
    if value is None:
        return Capability(
            f"{label} {what}", False, f"not supported by this GPU/driver: {purpose} will be null"
        )
    return Capability(f"{label} {what}", True, f"{purpose}; now: {value}{unit}", {what: value})


def _clock_policy(label: str, locked: bool | None) -> Capability:
    """Pinned clocks cut run-to-run noise; boost clocks wander with temperature and power."""
    name = f"{label} clocks locked"
    if locked is None:
        return Capability(name, None, "NVML cannot report application clocks on this GPU")
    if locked:
        return Capability(name, True, "application clocks are set: lower run-to-run noise")
    return Capability(
        name,
        False,
        "clocks follow default boost behaviour: expect higher noise "
        "(pin them with `nvidia-smi --lock-gpu-clocks` or `-ac`, needs root); "
        "a lock set with --lock-gpu-clocks is not visible to this check",
    )


def _mig(label: str, enabled: bool | None) -> Capability:
    """A MIG slice is a fraction of the GPU: device counters and peaks describe the whole."""
    name = f"{label} MIG"
    if enabled is None:
        return Capability(name, None, "MIG not supported on this GPU (whole GPU in use)")
    if enabled:
        return Capability(
            name,
            False,
            "MIG enabled: a run sees one slice, while NVML "
            "utilisation/power and the peak table describe the whole GPU",
        )
    return Capability(name, True, "MIG disabled: the whole GPU is measured")


def _cpu_mfu() -> Capability:
    """On a machine without GPUs MFU is undefined rather than missing."""
    reason = lookup_peak(None, "fp32").reason or ""
    return Capability("MFU", None, reason)


def _cpu() -> Capability:
    import psutil

    facts = {
        "model": cpu_model(),
        "logical_cores": psutil.cpu_count(logical=True),
        "physical_cores": psutil.cpu_count(logical=False),
        "affinity_count": affinity_count(),
        "quota_cores": cpu_quota_cores(),
    }
    quota = f", cgroup quota {facts['quota_cores']:g} cores" if facts["quota_cores"] else ""
    return Capability(
        "CPU",
        True,
        f"{facts['model']}: {facts['physical_cores']} physical / "
        f"{facts['logical_cores']} logical cores, {facts['affinity_count']} in this "
        f"process's affinity mask{quota}",
        facts,
    )


def _threads() -> Capability:
    """The intra-op thread count ``perfgate run`` pins when none is configured."""
    threads = default_thread_count()
    return Capability(
        "threads",
        True,
        f"perfgate pins {threads} intra-op thread(s) (one per "
        "available physical core) unless --threads or the config says otherwise",
        {"threads": threads},
    )


def _ceilings(torch: Any, root: Path, threads: int) -> Capability:
    """Whether ``perfgate doctor --peak`` has measured this environment's ceilings, so runs
    report the fraction of the measured ceiling next to MFU."""
    name = "measured ceilings"
    path = ceilings_path(root)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    key = environment_key(collect_fingerprint(device, threads))
    try:
        stored = stored_ceilings(root, key)
    except UsageError as exc:
        return Capability(name, False, exc.one_line(), {"path": str(path)})
    facts: dict[str, Any] = {"path": str(path), "fingerprint_key": key, "device": device}
    if stored is None:
        return Capability(
            name,
            False,
            f"none stored for this environment ({device}, {threads} thread(s)) in {path}: "
            "runs report MFU only; run `perfgate doctor --peak` to measure them",
            facts,
        )
    figures = ", ".join(
        f"{dtype} {tflops * 1e3:.1f} GFLOP/s" if tflops < 1 else f"{dtype} {tflops:.1f} TFLOP/s"
        for dtype, tflops in stored.matmul_tflops.items()
    )
    facts.update(measured_at=stored.measured_at, matmul_tflops=stored.matmul_tflops)
    return Capability(
        name,
        True,
        f"matmul {figures} on {device}, measured {stored.measured_at[:10]} "
        f"(doctor --peak, {path}): runs report the fraction of this ceiling",
        facts,
    )


def _process_metrics() -> Capability:
    """psutil can read this process, so it can read a worker and its DataLoader children."""
    sample = HostProbe(os.getpid()).sample()
    if sample.process_rss_bytes is None:
        return Capability(
            "process metrics",
            False,
            "psutil cannot read process RSS/CPU here: host telemetry will be null",
        )
    return Capability(
        "process metrics",
        True,
        "psutil reads process and child-process CPU and "
        "RSS (DataLoader workers included) and system CPU",
    )


def _compile(torch: Any) -> Capability:
    """torch.compile needs dynamo support for this Python, and a compiler for inductor."""
    if not hasattr(torch, "compile"):
        return Capability("torch.compile", False, f"torch {torch.__version__} has no torch.compile")
    dynamo = importlib.import_module("torch._dynamo")
    if not dynamo.is_dynamo_supported():
        return Capability("torch.compile", False, "dynamo does not support this Python version")
    candidates = (os.environ.get("CXX"), *_CXX_COMPILERS)
    compiler = next(filter(None, (shutil.which(c) for c in candidates if c)), None)
    triton = importlib.util.find_spec("triton") is not None
    facts = {"cxx_compiler": compiler, "triton": triton}
    problems = (
        [] if compiler else ["no C++ compiler (c++/g++/clang++): inductor cannot build CPU kernels"]
    )
    if torch.cuda.is_available() and not triton:
        problems.append("triton not installed: inductor cannot build GPU kernels")
    if problems:
        return Capability("torch.compile", False, "; ".join(problems), facts)
    gpu = ", triton for GPU" if triton else ""
    return Capability("torch.compile", True, f"inductor: C++ compiler {compiler}{gpu}", facts)


def _profiler() -> Capability:
    """torch.profiler with Kineto attributes step time to operators and device kernels."""
    try:
        profiler = importlib.import_module("torch.profiler")
    except ImportError:
        return Capability("torch.profiler", False, "torch.profiler cannot be imported")
    if not profiler.kineto_available():
        return Capability(
            "torch.profiler",
            False,
            "torch.profiler without Kineto: only CPU-side operator times, no device traces",
        )
    return Capability("torch.profiler", True, "torch.profiler with Kineto traces")


def _flop_counter() -> Capability:
    """FlopCounterMode gives the counted FLOPs that MFU's numerator comes from."""
    if importlib.util.find_spec("torch.utils.flop_counter") is None:
        return Capability(
            "FLOP counter",
            False,
            "torch.utils.flop_counter missing: MFU needs an "
            "analytic FLOP formula from the workload",
        )
    return Capability(
        "FLOP counter",
        True,
        "torch.utils.flop_counter.FlopCounterMode counts FLOPs of one eager step",
    )


def _gib(value: int | None) -> str:
    return f"{value / 2**30:.0f} GiB" if value else "memory unknown"


@dataclass(frozen=True)
class PeakOutcome:
    """What ``doctor --peak`` measured and where it was stored."""

    ceilings: Ceilings
    path: Path


def doctor_peak(
    config: Config, device: str, threads: int | None, json_out: Path | None = None
) -> PeakOutcome:
    """Measure the ceilings of ``device`` (cpu, cuda or auto) at the thread count a run pins
    (``threads``, else the config's, else one per physical core), store them under the
    environment's fingerprint key, and write them to ``json_out`` when given.

    The ceilings file and ``json_out`` are checked before anything is measured: a corrupt
    file or an unwritable path fails in a moment, not after the benchmarks."""
    from perfgate.ceilings.bench import measure_ceilings  # lazy: the benchmarks, for --peak
    from perfgate.report.ceilings import ceilings_document  # lazy: as above
    from perfgate.runner.device import resolve_device  # lazy: the measuring stack, for --peak

    if threads is not None and threads < 1:
        raise UsageError(f"--threads {threads} is not a thread count", "use 1 or more")
    resolved = resolve_device(device)
    read_ceilings_file(ceilings_path(config.root))
    if json_out is not None:
        check_writable(json_out, "--json")
    pinned = threads or config.threads or default_thread_count()
    ceilings = measure_ceilings(resolved, threads=pinned)
    path = save_ceilings(config.root, ceilings)
    if json_out is not None:
        document = CEILINGS.dump(ceilings_document(ceilings))
        write_json_atomic(json_out, document, option="--json")
    return PeakOutcome(ceilings, path)
