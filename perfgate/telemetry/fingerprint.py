"""The environment fingerprint: everything about the machine and software stack that changes speed.

A step time means nothing without the hardware and stack it was measured on, so every result
carries this record, and the store only compares runs whose ``fingerprint_key`` matches.
The key covers what makes two runs comparable (GPU model and count, MIG, driver, CUDA, cuDNN,
torch, Python major.minor, CPU model and physical cores, thread count, device kind, and for a
distributed run its world size and backend) and none of what varies between identical machines
or from minute to minute (UUIDs, current clocks, free memory), which would make every run its
own island. Some facts are shown when they differ without refusing the comparison
(``fingerprint_notes``): the NCCL version and NVLink.

The hostname is deliberately absent: results travel into PR comments, artifacts and shared
databases, where host names leak infrastructure details, and two identical machines with
different names are exactly as comparable as one machine twice.

torch is imported inside the functions so that ``import perfgate.telemetry`` stays cheap. CUDA
facts come from NVML rather than ``torch.cuda``, which would create a CUDA context in the parent.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import platform
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import psutil

from perfgate import __version__
from perfgate.errors import UsageError
from perfgate.telemetry.host import affinity_count, cpu_quota_cores
from perfgate.telemetry.nvml import (
    NvmlDevice,
    NvmlSession,
    Unavailable,
    nvlink_summary,
    open_nvml,
)

PERFORMANCE_ENV_VARS: tuple[str, ...] = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_MODULE_LOADING",
    "CUBLAS_WORKSPACE_CONFIG",
    "NVIDIA_TF32_OVERRIDE",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_ALLOC_CONF",
    "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "TORCH_CUDNN_V8_API_DISABLED",
    "TORCH_USE_CUDA_DSA",
)
"""Variables recorded when set: each changes threading, kernel choice, allocation or launch
behaviour (``CUDA_LAUNCH_BLOCKING=1`` alone can halve GPU throughput)."""

PERFORMANCE_ENV_PREFIXES: tuple[str, ...] = ("TORCH_COMPILE_", "TORCHINDUCTOR_", "KMP_", "OMP_")

_CPUINFO = Path("/proc/cpuinfo")


def collect_fingerprint(device: str, threads: int | None) -> dict[str, Any]:
    """The JSON-ready fingerprint of this machine for a run on ``device`` (``cpu``/``cuda``).

    ``threads`` is the intra-op thread count the worker pins; None records torch's default.
    """
    ordinal = _cuda_ordinal(device) if device.startswith("cuda") else None
    session = open_nvml() if ordinal is not None else None
    try:
        gpu, gpu_reason = _gpu_facts(device, ordinal, session)
        distributed = distributed_facts(session)
    finally:
        if isinstance(session, NvmlSession):
            session.close()
    return {
        "perfgate_version": __version__,
        "device": device.split(":")[0],
        "gpu": gpu,
        "gpu_unavailable_reason": gpu_reason,
        "distributed": distributed,
        "torch": _torch_facts(),
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
        },
        "cpu": _cpu_facts(),
        "memory_total_bytes": int(psutil.virtual_memory().total),
        "os": {
            "system": platform.system(),
            "release": platform.release(),
            "machine": platform.machine(),
            "platform": platform.platform(),
        },
        "threads": {"intra_op": threads if threads is not None else _torch_threads()},
        "env": performance_env(os.environ),
    }


def performance_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The set variables among ``PERFORMANCE_ENV_VARS`` and ``PERFORMANCE_ENV_PREFIXES``."""
    return {
        name: value
        for name, value in sorted(environ.items())
        if name in PERFORMANCE_ENV_VARS or name.startswith(PERFORMANCE_ENV_PREFIXES)
    }


def _gpu_facts(
    device: str, ordinal: int | None, session: NvmlSession | Unavailable | None
) -> tuple[dict[str, Any] | None, str | None]:
    """The GPU block (for the GPU ``device`` uses) or None with the reason."""
    if ordinal is None or session is None:
        return None, f"device is {device!r}: no GPU in use"
    if isinstance(session, Unavailable):
        return None, session.reason
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    nvml_device = session.device_for_cuda_ordinal(ordinal, visible)
    if isinstance(nvml_device, Unavailable):
        return None, nvml_device.reason
    return _gpu_block(session, nvml_device, visible), None


def _cuda_ordinal(device: str) -> int:
    """``"cuda"`` → 0, ``"cuda:1"`` → 1."""
    _, _, ordinal = device.partition(":")
    if not ordinal:
        return 0
    if not ordinal.isdigit():
        raise UsageError(f"device {device!r} has no valid CUDA ordinal", "use cuda or cuda:N")
    return int(ordinal)


def _gpu_block(
    session: NvmlSession, nvml_device: NvmlDevice, cuda_visible_devices: str | None
) -> dict[str, Any]:
    facts = nvml_device.facts()
    return {
        "model": facts.name,
        "uuid": facts.uuid,
        "count": _visible_count(session, cuda_visible_devices),
        "nvml_index": facts.index,
        "memory_total_bytes": facts.memory_total_bytes,
        "mig_enabled": facts.mig_enabled,
        "driver_version": session.driver_version,
        "cuda_driver_version": session.cuda_driver_version,
        "compute_capability": facts.compute_capability,
        "clocks_locked": facts.clocks_locked,
        "applications_sm_clock_mhz": facts.applications_sm_clock_mhz,
        "sm_clock_max_mhz": facts.sm_clock_max_mhz,
        "power_limit_w": facts.power_limit_w,
        "nvlink_active_links": facts.nvlink_active_links,
    }


def distributed_facts(session: NvmlSession | Unavailable | None) -> dict[str, Any]:
    """What multi-process training on this machine would run over: torch.distributed and its
    backends, the NCCL version, the visible GPUs and their NVLink.

    ``session`` is the NVML session of a CUDA run (None for a CPU run, which has no GPU
    interconnect to describe). ``nvlink`` is True when any visible GPU has an active link, False
    when NVML answers and none has, None when NVML cannot be asked. A distributed run adds its
    ``world_size`` and ``backend`` with ``with_world``.
    """
    import torch

    dist = torch.distributed
    available = bool(dist.is_available())
    nccl = available and bool(dist.is_nccl_available())
    facts: dict[str, Any] = {
        "torch_distributed": available,
        "nccl_available": nccl,
        "nccl_version": _nccl_version() if nccl else None,
        "gloo_available": available and bool(dist.is_gloo_available()),
        "gpu_count": None,
        "nvlink": None,
        "nvlink_active_links": None,
    }
    if isinstance(session, NvmlSession):
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        nvlink, links = nvlink_summary(session.visible_devices(visible))
        count = _visible_count(session, visible)
        facts.update(gpu_count=count, nvlink=nvlink, nvlink_active_links=links)
    elif torch.version.cuda is None and torch.version.hip is None:
        facts["gpu_count"] = 0  # a CPU-only build of torch: no GPU can be used, NVML or not
    return facts


def _nccl_version() -> str | None:
    """NCCL's version as torch links it ("2.21.5"); None when it cannot be read.

    ``torch.cuda.nccl.version()`` asks the library (it creates no CUDA context)."""
    try:
        import torch.cuda.nccl

        return nccl_version_text(torch.cuda.nccl.version())
    except (AttributeError, ImportError, RuntimeError):
        return None


def nccl_version_text(version: object) -> str | None:
    """torch's ``(2, 21, 5)`` (with a suffix element when NCCL has one: ``(2, 21, 5, "a0")``),
    or the version code older torch returned (``22105`` since NCCL 2.9, major·10000 + minor·100
    + patch; ``2708`` before, major·1000) → ``"2.21.5"`` (``"2.21.5a0"``)."""
    if isinstance(version, tuple | list) and version:
        numbers = ".".join(str(part) for part in version if isinstance(part, int))
        return numbers + "".join(str(part) for part in version if isinstance(part, str))
    if isinstance(version, int) and not isinstance(version, bool) and version > 0:
        major_unit = 10000 if version >= 10000 else 1000
        major, rest = divmod(version, major_unit)
        return f"{major}.{rest // 100}.{rest % 100}"
    return None


def with_world(fingerprint: Mapping[str, Any], world_size: int, backend: str) -> dict[str, Any]:
    """A copy of ``fingerprint`` for a distributed run of ``world_size`` processes over
    ``backend``: both become key fields, so its baselines are never those of another world."""
    copied = copy.deepcopy(dict(fingerprint))
    section = copied.get("distributed")
    section = dict(section) if isinstance(section, Mapping) else {}
    section.update(world_size=int(world_size), backend=str(backend))
    copied["distributed"] = section
    return copied


def _visible_count(session: NvmlSession, cuda_visible_devices: str | None) -> int:
    """GPUs the process may use: NVML's count, or fewer under ``CUDA_VISIBLE_DEVICES``."""
    count = session.device_count
    if cuda_visible_devices is not None:
        count = min(count, len([e for e in cuda_visible_devices.split(",") if e.strip()]))
    return count


def _torch_facts() -> dict[str, Any]:
    import torch

    return {
        "version": torch.__version__,
        "git_version": torch.version.git_version,
        "debug": bool(torch.version.debug),
        "cuda_runtime": torch.version.cuda,
        "hip": torch.version.hip,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
    }


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


def _cpu_facts() -> dict[str, Any]:
    return {
        "model": cpu_model(),
        "logical_cores": psutil.cpu_count(logical=True),
        "physical_cores": psutil.cpu_count(logical=False),
        "affinity_count": affinity_count(),
        "quota_cores": cpu_quota_cores(),
    }


def cpu_model() -> str | None:
    """The CPU's marketing name from /proc/cpuinfo, else ``platform.processor()``."""
    try:
        match = re.search(r"^model name\s*:\s*(.+)$", _CPUINFO.read_text(), re.MULTILINE)
    except OSError:
        match = None
    if match:
        return match.group(1).strip()
    return platform.processor() or None


def _python_minor(fp: Mapping[str, Any]) -> str | None:
    version = _get(fp, "python", "version")
    return ".".join(str(version).split(".")[:2]) if version else None


KEY_FIELDS: tuple[tuple[str, Callable[[Mapping[str, Any]], Any]], ...] = (
    ("device", lambda fp: fp.get("device")),
    ("GPU", lambda fp: _get(fp, "gpu", "model")),
    ("GPU count", lambda fp: _get(fp, "gpu", "count")),
    ("MIG", lambda fp: _get(fp, "gpu", "mig_enabled")),
    ("driver", lambda fp: _get(fp, "gpu", "driver_version")),
    ("CUDA", lambda fp: _get(fp, "torch", "cuda_runtime")),
    ("cuDNN", lambda fp: _get(fp, "torch", "cudnn")),
    ("torch", lambda fp: _get(fp, "torch", "version")),
    ("Python", _python_minor),
    ("CPU", lambda fp: _get(fp, "cpu", "model")),
    ("physical cores", lambda fp: _get(fp, "cpu", "physical_cores")),
    ("threads", lambda fp: _get(fp, "threads", "intra_op")),
    ("world size", lambda fp: _get(fp, "distributed", "world_size")),
    ("backend", lambda fp: _get(fp, "distributed", "backend")),
)
"""The fields two runs must share to be compared, with the label used in differences."""

KEYED_ONLY_WHEN_SET: frozenset[str] = frozenset({"world size", "backend"})
"""Key fields that join the key only when set (``with_world``): a single-process run keeps the
key it had before distributed runs existed, so its stored baselines still match."""

NOTED_FIELDS: tuple[tuple[str, Callable[[Mapping[str, Any]], Any]], ...] = (
    ("NCCL", lambda fp: _get(fp, "distributed", "nccl_version")),
    ("NVLink", lambda fp: _get(fp, "distributed", "nvlink")),
    ("NVLink links", lambda fp: _get(fp, "distributed", "nvlink_active_links")),
    ("worker start", lambda fp: fp.get("worker_start")),
)
"""Fields worth showing when they differ that do not stop a comparison (``fingerprint_notes``):
the NCCL version follows the torch build, NVLink the GPU model and count, which the key holds;
a forked or spawned worker measures the same steps (``benchmarks/startup.md``)."""


def comparability_fields(fp: Mapping[str, Any]) -> dict[str, Any]:
    """The key fields of a fingerprint, by label (missing ones as None, for old records)."""
    return {label: getter(fp) for label, getter in KEY_FIELDS}


def fingerprint_key(fp: Mapping[str, Any]) -> str:
    """SHA-256 (hex) over the comparability fields: equal keys mean comparable runs."""
    fields = {
        label: value
        for label, value in comparability_fields(fp).items()
        if value is not None or label not in KEYED_ONLY_WHEN_SET
    }
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def fingerprint_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Human-readable differences on the key fields, ``"torch: 2.11.0 → 2.13.0"`` (a → b)."""
    before, after = comparability_fields(a), comparability_fields(b)
    return [
        f"{label}: {_show(before[label])} → {_show(after[label])}"
        for label in before
        if before[label] != after[label]
    ]


def fingerprint_notes(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Differences on ``NOTED_FIELDS`` (``"NCCL: 2.21.5 → 2.26.2"``, a → b): shown to the
    reader, never a reason to refuse the comparison (only ``fingerprint_differences`` is)."""
    return [
        f"{label}: {_show(getter(a))} → {_show(getter(b))}"
        for label, getter in NOTED_FIELDS
        if getter(a) != getter(b)
    ]


def _get(fp: Mapping[str, Any], section: str, name: str) -> Any:
    block = fp.get(section)
    return block.get(name) if isinstance(block, Mapping) else None


def _show(value: Any) -> str:
    return "none" if value is None else str(value)
