"""A profiler trace → the catalogue's trace evidence.

The trace layer (``perfgate.trace``) reads the trace into one model and measures it; this
module names what it measured as the catalogue does (``perfgate.advise.catalogue``): shares of
step time as ``<category>_share``, per-step counts, dtypes, and the communication metrics.

A metric the trace cannot support (no GPU events, no ``Input type``/``Input Dims`` because
``record_shapes`` was off, no ops at all) is left out, never reported as zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfgate.advise.catalogue import Evidence
from perfgate.trace.attention import attention_shape, attention_use
from perfgate.trace.breakdown import (
    category_shares,
    gpu_idle_share,
    gpu_utilisation,
    mean_step_ms,
    on_gpu,
)
from perfgate.trace.communication import communication_summary
from perfgate.trace.compute import matmul_alignment, precision
from perfgate.trace.gpu import compiled, device_info, kernel_stats, transfers
from perfgate.trace.loader import as_trace
from perfgate.trace.model import Trace
from perfgate.trace.sites import Sites, attention_finding, copy_finding, sync_finding
from perfgate.trace.syncs import host_syncs
from perfgate.trace.timeline import Timeline, build_timeline


def trace_evidence(trace: Trace | Mapping[str, Any] | Timeline) -> Evidence:
    """Every trace-derived metric of the catalogue that ``trace`` (a model, a trace document,
    or a model already structured) can support."""
    timeline = trace if isinstance(trace, Timeline) else build_timeline(as_trace(trace))
    gpu = on_gpu(timeline)
    evidence: Evidence = {"device": "cuda" if gpu else "cpu"}
    if gpu:
        info = device_info(timeline.trace)
        evidence.update(
            _present(
                gpu_name=info.gpu_name,
                gpu_vendor=info.gpu_vendor,
                compute_capability=info.compute_capability,
            )
        )
    step_ms = mean_step_ms(timeline)
    if step_ms is not None:
        evidence["profiled_steps"] = float(len(timeline.steps))
        evidence["step_time_ms"] = step_ms
    if timeline.window_us <= 0:
        return evidence
    evidence.update({f"{c}_share": share for c, share in category_shares(timeline).items()})
    if gpu:
        evidence["gpu_utilisation"] = gpu_utilisation(timeline)
        evidence["gpu_idle_share"] = gpu_idle_share(timeline)
    syncs = host_syncs(timeline)
    evidence.update(
        _present(
            host_sync_count=syncs.host_sync_count,
            item_call_count=syncs.item_call_count,
            op_count=syncs.op_count,
        )
    )
    attention = attention_use(timeline)
    evidence.update(
        _present(
            sdpa_used=attention.sdpa_used,
            flash_attention_used=attention.flash_attention_used,
            manual_attention_detected=attention.manual_attention_detected,
            manual_attention_count=attention.manual_attention_count,
        )
    )
    dtypes = precision(timeline)
    evidence.update(
        _present(
            matmul_dtype=dtypes.matmul_dtype,
            conv_dtype=dtypes.conv_dtype,
            fp32_matmul_fraction=dtypes.fp32_matmul_fraction,
        )
    )
    alignment = matmul_alignment(timeline)
    if alignment is not None:
        evidence["matmul_dims_aligned"] = alignment.aligned
        evidence["misaligned_matmul_fraction"] = alignment.misaligned_fraction
        evidence["hot_matmul_dims"] = alignment.hot_dims
    evidence.update(_communication(timeline, gpu))
    if gpu:
        kernels = kernel_stats(timeline)
        evidence.update(
            _present(
                kernel_count=kernels.kernel_count,
                short_kernel_count=kernels.short_kernel_count,
                short_kernel_fraction=kernels.short_kernel_fraction,
                short_kernel_mean_us=kernels.short_kernel_mean_us,
            )
        )
        copies = transfers(timeline)
        evidence.update(
            _present(
                h2d_copy_count=copies.h2d_copy_count,
                h2d_from_pageable=copies.h2d_from_pageable,
                h2d_bytes=copies.h2d_bytes,
                h2d_pageable_fraction=copies.h2d_pageable_fraction,
            )
        )
    if compiled(timeline.trace):
        evidence["compiled"] = True
    evidence.update(_findings(timeline))
    shape = attention_shape(timeline)
    if shape is not None:
        evidence.update(
            attention_batch_heads=float(shape.batch_heads),
            attention_query_len=float(shape.query_len),
            attention_key_len=float(shape.key_len),
            attention_head_dim=float(shape.head_dim),
            attention_dtype=shape.dtype,
            attention_causal=shape.causal,
            attention_dropout=shape.dropout,
        )
    return evidence


def _findings(timeline: Timeline) -> Evidence:
    """The pattern and site behind the attention, copy and sync findings."""
    sites = Sites(timeline)
    found: Evidence = {}
    for prefix, finding in (
        ("attention", attention_finding(timeline, sites)),
        ("copy", copy_finding(timeline, sites)),
        ("sync", sync_finding(timeline, sites)),
    ):
        if finding is not None:
            found[f"{prefix}_pattern"] = finding.pattern
            if finding.site is not None:
                found[f"{prefix}_site"] = finding.site
    return found


def _communication(timeline: Timeline, gpu: bool) -> Evidence:
    """How much of the collectives' time computation hid, and on CPU their share of the step
    (gloo runs them on its own thread, outside the ops the CPU shares are made of)."""
    summary = communication_summary(timeline.trace)
    if summary is None:
        return {}
    metrics: Evidence = {"communication_exposed_share": summary.exposed_share}
    if summary.overlap is not None:
        metrics["communication_overlap"] = summary.overlap
    if not gpu:
        metrics["communication_share"] = summary.share
    return metrics


def _present(**values: float | bool | str | None) -> Evidence:
    """The values that were measured (None is left out, never reported as zero)."""
    return {name: value for name, value in values.items() if value is not None}
