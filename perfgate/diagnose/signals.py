"""The signals a diagnosis reads, gathered from a result document and from profile evidence.

A timed run knows its waits (batch wait, exposed communication), its telemetry (CPU, disk
reads, I/O wait, sampled from outside the process) and its FLOP rate against the peaks; a
profiler window knows the GPU timeline (idle time, which kernels ran). Each source fills the
fields it can measure and leaves the rest None: the classifier never reads a stand-in zero.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from perfgate.diagnose.classify import Signals
from perfgate.documents.result import WorkloadResult

COMPUTE_KERNELS = ("matmul_share", "conv_share", "attention_share")
"""High arithmetic intensity: many FLOPs per byte moved (the roofline's compute side)."""
MEMORY_KERNELS = ("elementwise_share", "copy_share", "layout_conversion_share", "h2d_copy_share")
"""A byte moved per few FLOPs: bound by memory bandwidth (the roofline's memory side)."""


def run_signals(workload: WorkloadResult, environment: Mapping[str, Any]) -> Signals:
    """Signals of a timed workload: its summary and the telemetry of its measured windows."""
    summary = workload.summary
    host = [r.telemetry_summary.get("host") or {} for r in workload.repeats if r.telemetry_summary]
    cores = (environment.get("cpu") or {}).get("affinity_count")

    def mean_of(column: str) -> float | None:
        values = [(h.get(column) or {}).get("mean") for h in host]
        known = [float(v) for v in values if isinstance(v, int | float)]
        return statistics.median(known) if known else None

    process, children = mean_of("process_cpu_percent"), mean_of("children_cpu_percent")
    busy = None
    if process is not None and isinstance(cores, int) and cores > 0:
        busy = (process + (children or 0.0)) / (100.0 * cores)
    iowait = mean_of("system_iowait_percent")
    pressure = mean_of("system_io_pressure_percent")
    return Signals(
        device=workload.device,
        dataloader_wait_share=summary.dataloader_wait_share if summary else None,
        communication_exposed_share=summary.communication_exposed_share if summary else None,
        read_bytes_per_s=mean_of("process_read_bytes_per_s"),
        iowait_share=iowait / 100.0 if iowait is not None else None,
        io_pressure_share=pressure / 100.0 if pressure is not None else None,
        cpu_busy=busy,
        ceiling_fraction=getattr(summary, "ceiling_fraction", None),
        mfu=summary.mfu if summary else None,
    )


def evidence_signals(evidence: Mapping[str, Any]) -> Signals:
    """Signals of a profiler window (``perfgate advise``'s evidence, or a recorded trace's)."""

    def number(name: str) -> float | None:
        value = evidence.get(name)
        return (
            float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        )

    def total(names: tuple[str, ...]) -> float | None:
        values = [number(name) for name in names]
        known = [v for v in values if v is not None]
        return sum(known) if known else None

    gpu = evidence.get("device") == "cuda"
    return Signals(
        device=str(evidence.get("device") or "cpu"),
        dataloader_wait_share=number("dataloader_wait_share"),
        communication_exposed_share=number("communication_exposed_share"),
        mfu=number("mfu"),
        gpu_busy=number("gpu_utilisation") if gpu else None,
        compute_kernel_share=total(COMPUTE_KERNELS) if gpu else None,
        memory_kernel_share=total(MEMORY_KERNELS) if gpu else None,
    )


def combined(run: Signals, profile: Signals) -> Signals:
    """The run's signals with what only a profiler window sees laid over them (the timeline,
    and its kernel mix); the timed run keeps its own waits, telemetry and FLOP rates."""
    return replace(
        run,
        gpu_busy=profile.gpu_busy,
        compute_kernel_share=profile.compute_kernel_share,
        memory_kernel_share=profile.memory_kernel_share,
        communication_exposed_share=run.communication_exposed_share
        if run.communication_exposed_share is not None
        else profile.communication_exposed_share,
    )
