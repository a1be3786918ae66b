"""A trace file → :class:`~perfgate.trace.model.Trace`, once.

:func:`load_trace` reads a file as the profiler wrote it (``.json``, or ``.json.gz`` as
``tensorboard_trace_handler`` writes it) and parses it; :func:`load_document` stops at the JSON,
for a caller that wants the raw events (a test counting them independently of the parser).
:func:`parse_trace` turns a document into the model, skipping whatever it does not use: an
event without a time or duration, a phase other than a complete event (``ph: X``), a category
no analysis reads. Python frames and the allocator's ``[memory]`` samples are kept apart from
the host events (``perfgate.trace.model``).

A trace without ``ProfilerStep#`` marks (a forward timed by hand inside ``record_function``)
can name its step: ``step_annotation`` is the name of the range that spans one step, and every
instance of it not nested in another becomes ``ProfilerStep#1``, ``#2`` … in time order.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfgate.errors import UsageError
from perfgate.files import read_bytes
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
    MemorySample,
    PythonFrame,
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


_CUDA_DEVICE_TYPE = 1
"""``Device Type`` of a ``[memory]`` sample taken on a CUDA device (0 is the host)."""


def load_trace(path: Path, step_annotation: str | None = None) -> Trace:
    """Read and parse a trace file (``.json`` or ``.json.gz``)."""
    return parse_trace(load_document(path), step_annotation)


def load_document(path: Path) -> dict[str, Any]:
    """A trace file's JSON (``.json`` or ``.json.gz``); a bare event list is wrapped."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    data = json.loads(raw)
    return {"traceEvents": data} if isinstance(data, list) else data


TRACE_FIX = (
    "pass a trace written by torch.profiler (export_chrome_trace, or the .pt.trace.json[.gz] "
    "files tensorboard_trace_handler writes)"
)


def read_trace_file(path: Path) -> dict[str, Any]:
    """A trace file given by a user, as :func:`load_document` reads it, with every way the
    file can be wrong (missing, a folder, not gzip, not JSON, no events) one usage error."""
    raw = read_bytes(path, what="trace", path_fix=TRACE_FIX)
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        data = json.loads(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise UsageError(f"trace {path} is not a readable gzip file ({exc})", TRACE_FIX) from None
    except RecursionError:
        raise UsageError(f"trace {path} is nested too deeply to be a trace", TRACE_FIX) from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise UsageError(f"trace {path} is not JSON ({exc})", TRACE_FIX) from None
    document = {"traceEvents": data} if isinstance(data, list) else data
    events = document.get("traceEvents") if isinstance(document, dict) else None
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise UsageError(f"trace {path} holds no list of trace events", TRACE_FIX)
    return document


def as_trace(trace: Trace | Mapping[str, Any]) -> Trace:
    """``trace`` itself, or the model of a trace document."""
    return trace if isinstance(trace, Trace) else parse_trace(trace)


def parse_trace(document: Mapping[str, Any], step_annotation: str | None = None) -> Trace:
    """The model of a trace document (``{"traceEvents": [...], "deviceProperties": ...}``);
    ``step_annotation``: see the module docstring."""
    host: list[HostEvent] = []
    gpu: list[GpuActivity] = []
    python: list[PythonFrame] = []
    samples: list[MemorySample] = []
    for event in document.get("traceEvents", []):
        if event.get("name") == "[memory]":
            sample = _memory_sample(event.get("args"))
            if sample is not None:
                samples.append(sample)
            continue
        times = _times(event)
        if times is None:
            continue
        ts, end = times
        category = str(event.get("cat", "")).lower()
        if category == "python_function":
            thread = (event.get("pid"), event.get("tid"))
            python.append(PythonFrame(str(event.get("name", "")), ts, end, thread))
            continue
        if category != "kernel" and category not in _HOST_KINDS and category not in _MEMORY_KINDS:
            continue
        name, args = str(event.get("name", "")), event.get("args")
        if not isinstance(args, dict):
            args = {}
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
        steps=_steps(host) if step_annotation is None else _named_steps(host, step_annotation),
        devices=_devices(document.get("deviceProperties")),
        distributed=_distributed(document.get("distributedInfo")),
        collectives=tuple(
            Collective(name=e.name, ts=e.ts, end=e.end, thread=e.thread)
            for e in host
            if e.kind == "annotation" and COLLECTIVE.match(e.name)
        ),
        rocm="roctracer_version" in document or "hip_runtime_version" in document,
        python=tuple(python),
        memory_samples=tuple(samples),
    )


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _times(event: Mapping[str, Any]) -> tuple[float, float] | None:
    """A complete event's ``(start, end)``; None for any other phase, or a time that is not a
    finite number (a hand-edited or truncated trace is read around, not crashed on)."""
    if event.get("ph") != "X":
        return None
    ts, dur = event.get("ts"), event.get("dur")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (ts, dur)):
        return None
    start, end = float(ts), float(ts) + float(dur)  # type: ignore[arg-type]
    return (start, end) if math.isfinite(start) and math.isfinite(end) and end >= start else None


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
        concrete_inputs=tuple(str(v) for v in _list(args.get("Concrete Inputs"))),
    )


def _steps(host: list[HostEvent]) -> tuple[StepWindow, ...]:
    """One window per ``ProfilerStep#N`` (a step can be recorded twice: as op and annotation),
    the first event of each name, ordered by start (the trace's order among equal starts)."""
    seen: dict[str, StepWindow] = {}
    for event in host:
        if event.kind in ("op", "annotation") and STEP_NAME.match(event.name):
            seen.setdefault(event.name, StepWindow(event.name, event.ts, event.end, event.thread))
    return tuple(sorted(seen.values(), key=lambda step: step.ts))


def _named_steps(host: list[HostEvent], name: str) -> tuple[StepWindow, ...]:
    """The outermost ranges called ``name``, as ``ProfilerStep#1``, ``#2`` … by start (the
    same range recorded twice, or one nested in another, counts once)."""
    ranges = sorted(
        (e for e in host if e.kind in ("op", "annotation") and e.name == name),
        key=lambda e: (e.ts, -e.end),
    )
    outermost: list[HostEvent] = []
    for event in ranges:
        if not any(o.ts <= event.ts and event.end <= o.end for o in outermost):
            outermost.append(event)
    return tuple(
        StepWindow(f"ProfilerStep#{index}", event.ts, event.end, event.thread)
        for index, event in enumerate(outermost, start=1)
    )


def _memory_sample(args: Any) -> MemorySample | None:
    """A CUDA ``[memory]`` sample's reserved bytes; None for a host sample or a malformed one."""
    if not isinstance(args, dict) or args.get("Device Type") != _CUDA_DEVICE_TYPE:
        return None
    reserved = args.get("Total Reserved")
    if isinstance(reserved, bool) or not isinstance(reserved, int | float):
        return None
    device = args.get("Device Id")
    return MemorySample(
        device=device if isinstance(device, int) else None, reserved_bytes=float(reserved)
    )


def _devices(listed: Any) -> tuple[DeviceProperties, ...]:
    return tuple(
        DeviceProperties(
            id=entry.get("id"),
            name=entry.get("name"),
            compute_major=entry.get("computeMajor"),
            compute_minor=entry.get("computeMinor"),
            total_memory=_bytes(entry.get("totalGlobalMem")),
        )
        for entry in listed or ()
        if isinstance(entry, dict)
    )


def _bytes(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value)


def _distributed(info: Any) -> DistributedInfo | None:
    if not isinstance(info, dict):
        return None
    backend = info.get("backend")
    return DistributedInfo(
        backend=str(backend) if backend else None,
        rank=info.get("rank"),
        world_size=info.get("world_size"),
    )
