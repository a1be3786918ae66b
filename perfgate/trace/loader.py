"""A trace file → :class:`~perfgate.trace.model.Trace`, once.

:func:`load_trace` reads a file as the profiler wrote it (``.json``, or ``.json.gz`` as
``tensorboard_trace_handler`` writes it) and parses it; :func:`load_document` stops at the JSON,
for a caller that wants the raw events (a test counting them independently of the parser).
:func:`parse_trace` turns a document into the model, skipping whatever it does not use: an
event without a time or duration, a phase other than a complete event (``ph: X``), a category
no analysis reads.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfgate.trace.categories import COLLECTIVE, STEP_NAME, kernel_dtype, kernel_family
from perfgate.trace.model import (
    Collective,
    DeviceProperties,
    DistributedInfo,
    GpuActivity,
    HostEvent,
    HostKind,
    Kernel,
    MemoryKind,
    MemoryOp,
    StepWindow,
    Thread,
    Trace,
)

_HOST_KINDS: dict[str, HostKind] = {
    "cpu_op": "op",
    "operator": "op",  # what older profilers called cpu_op
    "user_annotation": "annotation",
    "cuda_runtime": "runtime",
    "runtime": "runtime",
    "cuda_driver": "runtime",
}
_MEMORY_KINDS: dict[str, MemoryKind] = {
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
}
"""Event categories (lower-cased) perfgate reads, besides ``kernel``; any other is skipped."""


def load_trace(path: Path) -> Trace:
    """Read and parse a trace file (``.json`` or ``.json.gz``)."""
    return parse_trace(load_document(path))


def load_document(path: Path) -> dict[str, Any]:
    """A trace file's JSON (``.json`` or ``.json.gz``); a bare event list is wrapped."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    data = json.loads(raw)
    return {"traceEvents": data} if isinstance(data, list) else data


def as_trace(trace: Trace | Mapping[str, Any]) -> Trace:
    """``trace`` itself, or the model of a trace document."""
    return trace if isinstance(trace, Trace) else parse_trace(trace)


def parse_trace(document: Mapping[str, Any]) -> Trace:
    """The model of a trace document (``{"traceEvents": [...], "deviceProperties": ...}``)."""
    host: list[HostEvent] = []
    gpu: list[GpuActivity] = []
    for event in document.get("traceEvents", []):
        if event.get("ph") != "X" or "dur" not in event or "ts" not in event:
            continue
        category = str(event.get("cat", "")).lower()
        if category != "kernel" and category not in _HOST_KINDS and category not in _MEMORY_KINDS:
            continue
        ts = float(event["ts"])
        end = ts + float(event["dur"])
        name, args = str(event.get("name", "")), event.get("args") or {}
        if category == "kernel":
            gpu.append(
                Kernel(
                    name=name,
                    ts=ts,
                    end=end,
                    device=args.get("device"),
                    stream=args.get("stream"),
                    correlation=args.get("correlation"),
                    family=kernel_family(name),
                    dtype=kernel_dtype(name),
                )
            )
        elif category in _MEMORY_KINDS:
            size = args.get("bytes")
            gpu.append(
                MemoryOp(
                    name=name,
                    kind=_MEMORY_KINDS[category],
                    ts=ts,
                    end=end,
                    device=args.get("device"),
                    stream=args.get("stream"),
                    correlation=args.get("correlation"),
                    bytes=size if isinstance(size, int | float) else None,
                )
            )
        else:
            thread = (event.get("pid"), event.get("tid"))
            host.append(_host_event(name, _HOST_KINDS[category], ts, end, thread, args))
    return Trace(
        host=tuple(host),
        gpu=tuple(gpu),
        steps=_steps(host),
        devices=_devices(document.get("deviceProperties")),
        distributed=_distributed(document.get("distributedInfo")),
        collectives=tuple(
            Collective(name=e.name, ts=e.ts, end=e.end, thread=e.thread)
            for e in host
            if e.kind == "annotation" and COLLECTIVE.match(e.name)
        ),
        rocm="roctracer_version" in document or "hip_runtime_version" in document,
    )


def _host_event(
    name: str, kind: HostKind, ts: float, end: float, thread: Thread, args: Mapping[str, Any]
) -> HostEvent:
    return HostEvent(
        name=name,
        kind=kind,
        ts=ts,
        end=end,
        thread=thread,
        correlation=args.get("correlation"),
        sequence_number=args.get("Sequence number"),
        input_types=tuple(args.get("Input type") or ()),
        input_dims=args.get("Input Dims") or (),
    )


def _steps(host: list[HostEvent]) -> tuple[StepWindow, ...]:
    """One window per ``ProfilerStep#N`` (a step can be recorded twice: as op and annotation),
    the first event of each name, ordered by start (the trace's order among equal starts)."""
    seen: dict[str, StepWindow] = {}
    for event in host:
        if event.kind in ("op", "annotation") and STEP_NAME.match(event.name):
            seen.setdefault(event.name, StepWindow(event.name, event.ts, event.end, event.thread))
    return tuple(sorted(seen.values(), key=lambda step: step.ts))


def _devices(listed: Any) -> tuple[DeviceProperties, ...]:
    return tuple(
        DeviceProperties(
            id=entry.get("id"),
            name=entry.get("name"),
            compute_major=entry.get("computeMajor"),
            compute_minor=entry.get("computeMinor"),
        )
        for entry in listed or ()
        if isinstance(entry, dict)
    )


def _distributed(info: Any) -> DistributedInfo | None:
    if not isinstance(info, dict):
        return None
    backend = info.get("backend")
    return DistributedInfo(
        backend=str(backend) if backend else None,
        rank=info.get("rank"),
        world_size=info.get("world_size"),
    )
