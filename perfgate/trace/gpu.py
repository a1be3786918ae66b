"""The GPU side: which device ran the kernels, how many and how short they were, and the
host-to-device copies."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from perfgate.trace.model import DeviceProperties, Kernel, MemoryOp, Trace
from perfgate.trace.timeline import Timeline

SHORT_KERNEL_US = 10.0
"""Kernels shorter than this are launch-overhead bound: the launch costs about as much."""


@dataclass(frozen=True, kw_only=True)
class DeviceInfo:
    """The GPU the kernels ran on, as the trace's header describes it."""

    gpu_name: str | None
    gpu_vendor: str | None
    """``nvidia`` or ``amd``."""
    compute_capability: str | None
    """``8.0``, ``9.0``, … (NVIDIA only: ROCm's numbers are not CUDA capabilities)."""


@dataclass(frozen=True, kw_only=True)
class KernelStats:
    """Kernels launched in the steps, per step; the short ones are launch-overhead bound."""

    kernel_count: float
    short_kernel_count: float | None
    short_kernel_fraction: float | None
    short_kernel_mean_us: float | None


@dataclass(frozen=True, kw_only=True)
class Transfers:
    """Host-to-device copies launched in the steps, per step."""

    h2d_copy_count: float
    h2d_from_pageable: bool
    h2d_bytes: float | None
    """None when a copy's size is not recorded."""
    h2d_pageable_fraction: float | None
    """Of the bytes (or, without sizes, of the copies) that came from pageable memory."""


def kernel_device(trace: Trace) -> DeviceProperties | None:
    """``deviceProperties`` of the GPU most kernels ran on (a trace lists every visible GPU);
    the first listed when no kernel names one."""
    used = Counter(kernel.device for kernel in trace.kernels)
    busiest = used.most_common(1)[0][0] if used else None
    listed = trace.devices
    return next((p for p in listed if p.id == busiest), listed[0] if listed else None)


def device_info(trace: Trace) -> DeviceInfo:
    """Name, vendor and compute capability of the GPU the kernels ran on."""
    properties = kernel_device(trace)
    name = str(properties.name) if properties and properties.name else None
    if trace.rocm or "AMD" in (name or ""):
        vendor: str | None = "amd"
    else:
        vendor = "nvidia" if properties else None
    capability = None
    if vendor == "nvidia" and properties and properties.compute_major is not None:
        minor = properties.compute_minor if properties.compute_minor is not None else 0
        capability = f"{properties.compute_major}.{minor}"
    return DeviceInfo(gpu_name=name, gpu_vendor=vendor, compute_capability=capability)


def kernel_stats(timeline: Timeline) -> KernelStats:
    """Kernel count per step and the very short kernels."""
    steps = len(timeline.steps)
    durations = [
        node.end - node.ts
        for node in timeline.gpu
        if isinstance(node.activity, Kernel) and node.step >= 0
    ]
    short = [d for d in durations if d < SHORT_KERNEL_US]
    return KernelStats(
        kernel_count=len(durations) / steps,
        short_kernel_count=len(short) / steps if durations else None,
        short_kernel_fraction=len(short) / len(durations) if durations else None,
        short_kernel_mean_us=sum(short) / len(short) if short else None,
    )


def transfers(timeline: Timeline) -> Transfers:
    """Host-to-device copies per step, their bytes and how many came from pageable memory."""
    steps = len(timeline.steps)
    copies = [
        node.activity
        for node in timeline.gpu
        if isinstance(node.activity, MemoryOp) and node.step >= 0 and node.activity.host_to_device
    ]
    sizes = [copy.bytes for copy in copies]
    h2d_bytes = fraction = None
    if copies and all(size is not None for size in sizes):
        total = float(sum(size for size in sizes if size is not None))
        h2d_bytes = total / steps
        pageable = sum(copy.bytes for copy in copies if copy.pageable and copy.bytes is not None)
        if total > 0:
            fraction = pageable / total
    elif copies:
        fraction = sum(copy.pageable for copy in copies) / len(copies)
    return Transfers(
        h2d_copy_count=len(copies) / steps,
        h2d_from_pageable=any(copy.pageable for copy in copies),
        h2d_bytes=h2d_bytes,
        h2d_pageable_fraction=fraction,
    )


COMPILED_MARKS = ("Torch-Compiled Region", "CompiledFunction")
"""Names of the host events ``torch.compile``'s regions and autograd functions leave."""


def compiled_regions(trace: Trace) -> list[str]:
    """Names of the host events that are ``torch.compile``'s regions, in the trace's order."""
    return [e.name for e in trace.host if any(mark in e.name for mark in COMPILED_MARKS)]


def compiled(trace: Trace) -> bool:
    """The trace shows ``torch.compile``'s regions (a compiled model or step function)."""
    return bool(compiled_regions(trace))
