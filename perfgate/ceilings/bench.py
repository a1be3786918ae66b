"""The microbenchmarks behind ``perfgate doctor --peak``: what this machine really does.

A vendor peak says what a chip could do on paper; MFU against it mixes two gaps — the model's
own inefficiency and the distance between the datasheet and this card (clocks, power limit,
cuBLAS, a shared CPU). A *measured* ceiling separates them: the best a plain dense matmul reaches
here, and the bandwidths that bound copy-heavy work.

Every measurement follows one recipe, so the figures are comparable with each other and with a
plain timing loop: warm up (first-call costs — thread pool start, BLAS packing buffers, cuBLAS
handles and heuristics, GPU boost clocks — are not the machine's rate), then several timed
samples, each long enough that timer resolution and wake-up latency are noise; the figure is
the median sample, and the spread (min, max) is kept, because one sample on a shared machine
says little. Inputs are seeded (``seed``), so two runs time the same numbers.

torch is imported inside the functions: ``import perfgate.ceilings`` stays cheap.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from perfgate.ceilings.store import environment_key, fingerprint_summary
from perfgate.documents.ceilings import CeilingValues, RateSamples
from perfgate.telemetry.fingerprint import collect_fingerprint

MATMUL_DTYPES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16")
"""GPU matmul dtypes, named as in ``perfgate.telemetry.peaks`` (the peak table's keys)."""

CPU_SAMPLES = 7
CPU_SAMPLE_S = 0.15
"""Target length of one CPU sample: ≫ perf_counter's resolution and a thread wake-up, short
enough that seven samples of each benchmark leave ``doctor --peak`` far under its 30 s."""

GPU_SAMPLES = 5
GPU_SAMPLE_S = 0.05
GPU_MATMUL_SIZE = 8192
"""n of the n×n GPU products: at 8192 cuBLAS's tiles cover every SM many times over, so the
rate sits on its plateau on any current data-centre GPU (4096 is still ramping on an H100)."""

CPU_COPY_BYTES = 256 * 2**20
"""Size of the CPU copy buffer: several times any last-level cache, so it measures DRAM."""
GPU_COPY_BYTES = 2**30
HOST_COPY_BYTES = 256 * 2**20


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """Repeated samples of one rate (TFLOP/s for a matmul, bytes/s for a copy)."""

    median: float
    minimum: float
    maximum: float
    samples: tuple[float, ...]
    size: int
    """The matrix side n of an n×n product, or the bytes of one copy."""

    @classmethod
    def of(cls, samples: list[float], size: int) -> Measurement:
        return cls(
            median=statistics.median(samples),
            minimum=min(samples),
            maximum=max(samples),
            samples=tuple(samples),
            size=size,
        )

    def document(self) -> RateSamples:
        """As the ceilings documents record it."""
        return RateSamples(
            median=self.median,
            min=self.minimum,
            max=self.maximum,
            samples=self.samples,
            size=self.size,
        )


@dataclass(frozen=True, kw_only=True)
class Ceilings:
    """What ``doctor --peak`` measured on one device, for one environment fingerprint."""

    device: str
    """``cpu`` or ``cuda``."""
    device_name: str | None
    """The CPU model or the GPU name."""
    threads: int
    """Intra-op threads pinned while measuring (part of the fingerprint key)."""
    fingerprint_key: str
    measured_at: str
    fingerprint: dict[str, Any] = field(default_factory=dict)
    """The fingerprint facts a reader of the ceilings file needs (device, models, threads,
    torch); the key is the full fingerprint's."""
    matmul: dict[str, Measurement] = field(default_factory=dict)
    """Dense matmul rate per dtype, in TFLOP/s (a CPU has ``fp32`` only)."""
    bandwidth: dict[str, Measurement] = field(default_factory=dict)
    """Copy rates in bytes/s: ``memory_copy`` (CPU), ``device_copy``, ``h2d_pinned`` and
    ``h2d_pageable`` (GPU)."""
    unsupported: dict[str, str] = field(default_factory=dict)
    """What was not measured, and why (e.g. bf16 on a GPU without bf16 support)."""
    seed: int = 0
    wall_s: float = 0.0

    def values(self) -> CeilingValues:
        """The measurements as the ceilings documents record them."""
        return CeilingValues(
            device=self.device,
            device_name=self.device_name,
            threads=self.threads,
            matmul_tflops={k: m.document() for k, m in self.matmul.items()},
            bandwidth_bytes_per_s={k: m.document() for k, m in self.bandwidth.items()},
            unsupported=dict(self.unsupported),
            seed=self.seed,
            wall_s=self.wall_s,
        )


def matmul_flops(n: int) -> int:
    """FLOPs of one n×n by n×n product: 2n³ (a multiply and an add per term), the convention
    of vendor peaks and of ``FlopCounterMode``, so a fraction compares like with like."""
    return 2 * n**3


def cpu_matmul_size(threads: int) -> int:
    """n of the CPU product: 2048 (17 GFLOP: ~0.1 s on two AVX-512 cores, still over 10 ms on
    sixteen), 4096 beyond sixteen threads. On this project's 2-core CI box the rate is flat
    from n = 1024 up even on one thread (2026-12, ~80–140 GFLOP/s per core through the noise),
    so 2048 sits on the plateau with room for bigger machines; a fixed size per thread count
    keeps one environment's figure the same measurement every time."""
    return 2048 if threads <= 16 else 4096


@contextmanager
def pinned_threads(threads: int) -> Iterator[None]:
    """``torch.set_num_threads(threads)`` for the block, as the run's workers pin it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def host_samples(
    action: Callable[[], object], work: float, samples: int, target_s: float
) -> list[float]:
    """Rates (``work`` per call ÷ seconds) of ``samples`` timed batches of ``action``.

    One untimed call warms up; a second, timed alone, sets how many calls make one batch last
    about ``target_s``; each sample then times that many back-to-back calls with
    ``time.perf_counter`` (host work: the call returns when the work is done)."""
    action()
    start = time.perf_counter()
    action()
    single = max(time.perf_counter() - start, 1e-9)
    calls = max(1, math.ceil(target_s / single))
    rates = []
    for _ in range(samples):
        start = time.perf_counter()
        for _ in range(calls):
            action()
        rates.append(work * calls / (time.perf_counter() - start))
    return rates


def cpu_matmul(
    n: int,
    *,
    threads: int,
    samples: int = CPU_SAMPLES,
    target_s: float = CPU_SAMPLE_S,
    seed: int = 0,
) -> Measurement:
    """fp32 n×n matmul TFLOP/s at ``threads`` intra-op threads (the count perfgate pins).

    Why this way: the product is what a training step's dense layers reduce to, fp32 because
    that is what CPU training runs in; the output is preallocated (``out=``) so the allocator's
    page faults on a fresh 16 MiB result are not timed — only the GEMM is; random normal inputs
    (seeded) because all-zero inputs are pages the kernel maps to one zero page."""
    import torch

    with pinned_threads(threads):
        generator = torch.Generator().manual_seed(seed)
        a = torch.randn(n, n, generator=generator)
        b = torch.randn(n, n, generator=generator)
        out = torch.empty(n, n)
        rates = host_samples(
            lambda: torch.mm(a, b, out=out), matmul_flops(n) / 1e12, samples, target_s
        )
    return Measurement.of(rates, n)


def cpu_copy_bandwidth(
    *,
    threads: int,
    nbytes: int = CPU_COPY_BYTES,
    samples: int = CPU_SAMPLES,
    target_s: float = CPU_SAMPLE_S,
) -> Measurement:
    """Memory bandwidth in bytes/s: ``dst.copy_(src)`` of a buffer far beyond the caches.

    Counted as bytes read + bytes written (2 × size per copy), STREAM's "copy" convention (the
    write-allocate read of ``dst`` is real traffic but not counted, as STREAM does not).
    ``copy_`` is split over the intra-op threads, so the figure is at the pinned count, as a
    run's data movement would be. Both buffers are written before timing, so first-touch page
    faults are not measured."""
    import torch

    with pinned_threads(threads):
        src = torch.empty(nbytes // 4, dtype=torch.float32).fill_(1.0)
        dst = torch.empty_like(src).fill_(0.0)
        rates = host_samples(lambda: dst.copy_(src), 2.0 * src.nbytes, samples, target_s)
    return Measurement.of(rates, src.nbytes)


def measure_cpu(
    *, threads: int, seed: int = 0
) -> tuple[dict[str, Measurement], dict[str, Measurement]]:
    """The CPU ceilings: fp32 matmul (key ``fp32``) and memory copy bandwidth."""
    import psutil

    available = int(psutil.virtual_memory().available)
    nbytes = max(16 * 2**20, min(CPU_COPY_BYTES, available // 8))
    matmul = {"fp32": cpu_matmul(cpu_matmul_size(threads), threads=threads, seed=seed)}
    return matmul, {"memory_copy": cpu_copy_bandwidth(threads=threads, nbytes=nbytes)}


def cuda_seconds(torch: Any, action: Callable[[], object], calls: int) -> float:
    """Seconds of ``calls`` back-to-back launches of ``action``, from CUDA events recorded
    around the batch and one synchronisation at its end: the GPU's time, not the launches'."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        action()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end)) / 1e3


def cuda_samples(
    torch: Any, action: Callable[[], object], work: float, samples: int, target_s: float
) -> list[float]:
    """Like :func:`host_samples`, timed with CUDA events. One untimed call first (cuBLAS handle,
    lazy module loading and kernel choice happen there, and would make one call look long),
    then a warm-up batch of about ``target_s``, enough for the clocks to leave idle."""
    action()
    torch.cuda.synchronize()
    single = max(cuda_seconds(torch, action, 1), 1e-9)
    calls = max(1, math.ceil(target_s / single))
    cuda_seconds(torch, action, calls)
    return [work * calls / cuda_seconds(torch, action, calls) for _ in range(samples)]


def gpu_matmul(
    dtype: str,
    *,
    n: int = GPU_MATMUL_SIZE,
    device: str = "cuda",
    samples: int = GPU_SAMPLES,
    target_s: float = GPU_SAMPLE_S,
    seed: int = 0,
) -> Measurement:
    """Dense n×n matmul TFLOP/s on the GPU in ``dtype``.

    ``fp32`` runs with ``torch.backends.cuda.matmul.allow_tf32`` off (CUDA cores, the vendor's
    fp32 figure), ``tf32`` with it on (tensor cores, fp32 storage), ``bf16``/``fp16`` with inputs
    in that dtype — the four figures the peak table holds, so MFU and the fraction of the
    measured ceiling divide by the same kind of number. The flag is restored afterwards."""
    import torch

    kinds = {
        "fp32": torch.float32,
        "tf32": torch.float32,
        "bf16": torch.bfloat16,
        "fp16": torch.float16,
    }
    kind = kinds[dtype]
    matmul_flags = torch.backends.cuda.matmul
    before = matmul_flags.allow_tf32
    matmul_flags.allow_tf32 = dtype == "tf32"
    try:
        generator = torch.Generator(device=device).manual_seed(seed)
        a = torch.randn(n, n, device=device, dtype=kind, generator=generator)
        b = torch.randn(n, n, device=device, dtype=kind, generator=generator)
        out = torch.empty(n, n, device=device, dtype=kind)
        rates = cuda_samples(
            torch, lambda: torch.mm(a, b, out=out), matmul_flops(n) / 1e12, samples, target_s
        )
    finally:
        matmul_flags.allow_tf32 = before
    return Measurement.of(rates, n)


def gpu_device_copy(
    *, nbytes: int, device: str = "cuda", samples: int = GPU_SAMPLES, target_s: float = GPU_SAMPLE_S
) -> Measurement:
    """Device-memory bandwidth in bytes/s: ``dst.copy_(src)`` within the GPU, counted as read +
    written (2 × size), the figure HBM-bound kernels (elementwise ops, optimizers) approach."""
    import torch

    src = torch.ones(nbytes, dtype=torch.uint8, device=device)
    dst = torch.zeros_like(src)
    rates = cuda_samples(torch, lambda: dst.copy_(src), 2.0 * nbytes, samples, target_s)
    return Measurement.of(rates, nbytes)


def gpu_host_to_device(
    *,
    pinned: bool,
    nbytes: int = HOST_COPY_BYTES,
    device: str = "cuda",
    samples: int = GPU_SAMPLES,
    target_s: float = GPU_SAMPLE_S,
) -> Measurement:
    """Host→device bandwidth in bytes/s (size once: the bytes crossing the bus), from pinned or
    from pageable host memory. Pinned memory is DMA'd directly (``non_blocking``); pageable
    memory is staged through a driver buffer by the CPU — the gap between the two is what
    ``pin_memory=True`` buys a DataLoader."""
    import torch

    host = torch.ones(nbytes, dtype=torch.uint8, pin_memory=pinned)
    target = torch.empty(nbytes, dtype=torch.uint8, device=device)
    rates = cuda_samples(
        torch, lambda: target.copy_(host, non_blocking=pinned), float(nbytes), samples, target_s
    )
    return Measurement.of(rates, nbytes)


def measure_gpu(
    *, device: str = "cuda", seed: int = 0
) -> tuple[dict[str, Measurement], dict[str, Measurement], dict[str, str]]:
    """The GPU ceilings: matmul per supported dtype, device copy, and host→device copies."""
    import torch

    major, _ = torch.cuda.get_device_capability(device)
    unsupported: dict[str, str] = {}
    if major < 8:
        unsupported["tf32"] = "no TF32 tensor cores (compute capability below 8.0)"
    if not torch.cuda.is_bf16_supported():
        unsupported["bf16"] = "torch.cuda.is_bf16_supported() is false on this GPU"
    matmul = {
        dtype: gpu_matmul(dtype, device=device, seed=seed)
        for dtype in MATMUL_DTYPES
        if dtype not in unsupported
    }
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info(device)
    bandwidth = {
        "device_copy": gpu_device_copy(nbytes=min(GPU_COPY_BYTES, free // 8), device=device),
        "h2d_pinned": gpu_host_to_device(pinned=True, device=device),
        "h2d_pageable": gpu_host_to_device(pinned=False, device=device),
    }
    torch.cuda.empty_cache()
    return matmul, bandwidth, unsupported


def measure_ceilings(device: str, *, threads: int, seed: int = 0) -> Ceilings:
    """Every ceiling of ``device`` (``cpu`` or ``cuda``, already resolved) at ``threads``,
    keyed by the environment fingerprint a ``perfgate run`` with that device and thread count
    records, so the run finds them."""
    started = time.perf_counter()
    environment = collect_fingerprint(device, threads)
    unsupported: dict[str, str] = {}
    if device == "cpu":  # each CPU benchmark pins ``threads`` itself
        matmul, bandwidth = measure_cpu(threads=threads, seed=seed)
        name = (environment.get("cpu") or {}).get("model")
    else:
        import torch

        matmul, bandwidth, unsupported = measure_gpu(device=device, seed=seed)
        name = (environment.get("gpu") or {}).get("model") or torch.cuda.get_device_name(device)
    return Ceilings(
        device=device.split(":")[0],
        device_name=name,
        threads=threads,
        fingerprint_key=environment_key(environment),
        fingerprint=fingerprint_summary(environment),
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        matmul=matmul,
        bandwidth=bandwidth,
        unsupported=unsupported,
        seed=seed,
        wall_s=time.perf_counter() - started,
    )
