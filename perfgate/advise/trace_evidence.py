"""Kineto / Chrome trace JSON → evidence: where step time goes, precision, attention, shapes, syncs.

The torch profiler writes one JSON document per window (``export_chrome_trace``); HTA and the
TensorBoard plugin read the same format. This module reads it in three passes:

1. **Nesting.** Host events (``cpu_op``, ``user_annotation``, ``cuda_runtime``) are nested per
   thread by time, which gives every op its parent, so a kernel can be traced back through its
   launch call (``correlation``) to the op, the ``Optimizer.step`` region or the SDPA call that
   launched it.
2. **Patterns.** A softmax with a batched matmul just before and just after it among its sibling
   ops, outside any SDPA call, is hand-written attention; its backward nodes are found through the
   autograd ``Sequence number`` they share with the forward ops.
3. **Accounting.** Steps are the ``ProfilerStep#N`` windows (the whole trace when there are none).
   On a GPU trace the device categories are kernel time on the GPU timeline (the launching op
   first, the kernel name as fallback, so a kernel family no table knows lands in ``other``
   instead of breaking anything); on a CPU trace they are op self time.

A metric the trace cannot support (no GPU events, no ``Input type``/``Input Dims`` because
``record_shapes`` was off, no ops at all) is left out, never reported as zero.
"""

from __future__ import annotations

import bisect
import functools
import gzip
import json
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate.advise.catalogue import Evidence

SHORT_KERNEL_US = 10.0
"""Kernels shorter than this are launch-overhead bound: the launch costs about as much."""

ALIGNMENT = 8
"""Tensor cores want matmul dimensions in multiples of 8 (fp16/bf16; TF32 needs 4)."""

HOT_MATMUL_COVERAGE = 0.9
"""The "hot" matmuls are the biggest ops that together carry this fraction of matmul time."""

ATTENTION_WINDOW = 8
"""How many sibling ops before and after a softmax may separate it from its matmuls."""

MATMUL, CONV, ATTENTION, ELEMENTWISE, COPY, LAYOUT = (
    "matmul",
    "conv",
    "attention",
    "elementwise",
    "copy",
    "layout_conversion",
)
OPTIMIZER, DATALOADER, SYNC, H2D, COMM, OTHER = (
    "optimizer",
    "dataloader_wait",
    "host_sync",
    "h2d_copy",
    "communication",
    "other",
)

_MATMUL_OPS = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "einsum", "addmv", "mv", "dot",
    "_scaled_mm", "_addmm_activation", "mkldnn_linear", "_int_mm",
})  # fmt: skip
_BATCHED_MATMUL_OPS = frozenset({"bmm", "baddbmm", "matmul", "einsum"})
_CONV_OPS = frozenset({
    "conv1d", "conv2d", "conv3d", "convolution", "_convolution", "cudnn_convolution",
    "mkldnn_convolution", "miopen_convolution", "convolution_overrideable",
    "_slow_conv2d_forward", "slow_conv3d", "thnn_conv2d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "convolution_backward", "cudnn_convolution_transpose",
    "miopen_convolution_transpose", "_nnpack_spatial_convolution", "slow_conv_dilated2d",
    "_slow_conv2d_backward",
})  # fmt: skip
_COPY_OPS = frozenset({
    "copy_", "contiguous", "clone", "to", "_to_copy", "to_copy", "_copy_from",
    "_copy_from_and_resize", "copy",
})  # fmt: skip
_SYNC_OPS = frozenset({"item", "_local_scalar_dense", "local_scalar_dense"})
_SOFTMAX_OPS = frozenset({"softmax", "_softmax", "_safe_softmax", "safe_softmax"})
_BOOKKEEPING_OPS = frozenset({
    "view", "_unsafe_view", "unsafe_view", "reshape", "_reshape_alias", "t", "transpose",
    "permute", "expand", "as_strided", "slice", "select", "narrow", "detach", "alias", "squeeze",
    "unsqueeze", "flatten", "unflatten", "split", "chunk", "unbind", "empty", "empty_strided",
    "empty_like", "new_empty", "resize_", "set_", "lift_fresh", "resolve_conj", "resolve_neg",
    "_has_compatible_shallow_copy_type", "is_nonzero", "size", "stride", "numel",
})  # fmt: skip
_FUSED_ATTENTION = re.compile(
    r"scaled_?dot_?product|flash_?attention|efficient_?attention|cudnn_?attention|flash_attn",
    re.IGNORECASE,
)
_FLASH_OPS = re.compile(
    r"flash|efficient_attention|cudnn_attention|EfficientAttention|CudnnAttention", re.IGNORECASE
)
_SYNC_CALLS = frozenset(
    f"{api}{what}Synchronize" for api in ("cuda", "hip") for what in ("Device", "Stream", "Event")
) | frozenset({"cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize"})
_REGION_PREFIXES = (
    ("Optimizer.step", OPTIMIZER),
    ("enumerate(DataLoader)", DATALOADER),
    ("perfgate.batch_fetch", DATALOADER),
)
_STEP_NAME = re.compile(r"^ProfilerStep#\d+$")
_BACKWARD_NODE = re.compile(r"^(?:autograd::engine::evaluate_function: )?(\w+?)Backward\d*$")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")

# Kernel names, checked in order: the first family whose pattern matches (lower-cased) wins.
_KERNEL_FAMILIES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (category, re.compile(pattern))
    for category, pattern in (
        (COMM, r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|multimem|all_?to_?all"
               r"|cross_device_reduce"),
        (LAYOUT, r"nchwtonhwc|nhwctonchw|nchw2nhwc|nhwc2nchw|batched_transpose|transpose_nchw"
                 r"|transpose_nhwc"),
        (ATTENTION, r"flash|fmha|attention|attn|sdpa"),
        (CONV, r"conv(?!ert)|fprop|dgrad|wgrad|winograd|implicit_gemm|implicit_convolve|igemm"
               r"|cudnn::cnn"),
        (MATMUL, r"gemm|gemv|nvjet|cijk_|matmul|cublas|splitkreduce|xmma|cutlass|^bmm_|_mm_"
                 r"|dot_kernel"),
        (COPY, r"copy|transpose"),
        (ELEMENTWISE, r"elementwise|vectorized|reduce|softmax|norm|pointwise|triton|activation"
                      r"|gelu|relu|silu|dropout|pool|index|scatter|gather|embedding|loss|fill"
                      r"|foreach|adam|sgd|rotary|quant|cast|convert|sum|mean|max|min|add|mul"),
    )
)  # fmt: skip

_TYPE_NAMES = {
    "float": "fp32",
    "double": "fp64",
    "c10::half": "fp16",
    "c10::bfloat16": "bf16",
    "c10::float8_e4m3fn": "fp8",
    "c10::float8_e5m2": "fp8",
    "c10::float8_e4m3fnuz": "fp8",
    "c10::float8_e5m2fnuz": "fp8",
    "signed char": "int8",
}
_KERNEL_DTYPES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("fp8", ("fp8", "e4m3", "e5m2")),
    ("bf16", ("bf16", "bfloat16")),
    ("fp16", ("fp16", "f16f16", "h1688", "h884", "h16816", "hgemm", "half")),
    ("tf32", ("tf32", "s1688", "s16816")),
    ("fp32", ("sgemm", "f32f32_f32")),
)


@dataclass(slots=True)
class _Host:
    """One host event and what its ancestors say about it."""

    name: str
    kind: str
    """``op``, ``annotation`` or ``runtime``."""
    ts: float
    end: float
    args: dict[str, Any]
    thread: tuple[Any, Any]
    parent: int = -1
    children: float = 0.0
    """Summed duration of direct children (self time is ``dur − children``)."""
    region: str | None = None
    attention: bool = False
    manual: bool = False
    category: str | None = None
    compute_op: int = -1
    """Innermost matmul or convolution op at or above this event."""
    step: int = -1


@dataclass(slots=True)
class _Device:
    """One GPU activity: a kernel, memcpy or memset."""

    name: str
    kind: str
    ts: float
    end: float
    args: dict[str, Any]
    launcher: int = -1
    step: int = -1


@dataclass
class _Parsed:
    """The trace as this module needs it."""

    host: list[_Host] = field(default_factory=list)
    device: list[_Device] = field(default_factory=list)
    steps: list[tuple[float, float]] = field(default_factory=list)
    marked_steps: bool = False
    window_us: float = 0.0
    properties: dict[str, Any] = field(default_factory=dict)
    vendor: str | None = None
    manual_softmax: list[int] = field(default_factory=list)
    """Softmax ops at the centre of a hand-written attention chain."""


def load_trace(path: Path) -> dict[str, Any]:
    """Read a trace file (``.json`` or ``.json.gz``); a bare event list is wrapped."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    data = json.loads(raw)
    return {"traceEvents": data} if isinstance(data, list) else data


def trace_evidence(trace: dict[str, Any]) -> Evidence:
    """Every trace-derived metric of the catalogue that this trace can support."""
    parsed = _parse(trace)
    evidence: Evidence = {}
    # GPU activity, not a device list, makes a GPU trace: a CPU run on a GPU machine lists the
    # GPUs too, and its shares must be op time, not the (absent) kernel time.
    gpu = bool(parsed.device)
    evidence["device"] = "cuda" if gpu else "cpu"
    if gpu:
        evidence.update(_device_facts(parsed))
    if parsed.marked_steps:
        evidence["profiled_steps"] = float(len(parsed.steps))
        evidence["step_time_ms"] = parsed.window_us / len(parsed.steps) / 1000.0
    if parsed.window_us <= 0:
        return evidence
    evidence.update(_shares(parsed, gpu))
    evidence.update(_sync_metrics(parsed, gpu))
    evidence.update(_attention_metrics(parsed))
    evidence.update(_precision_metrics(parsed))
    evidence.update(_shape_metrics(parsed))
    evidence.update(_communication_metrics(trace, gpu))
    if gpu:
        evidence.update(_kernel_metrics(parsed))
        evidence.update(_transfer_metrics(parsed))
    if any("Torch-Compiled Region" in h.name or "CompiledFunction" in h.name for h in parsed.host):
        evidence["compiled"] = True
    return evidence


# --- parsing ----------------------------------------------------------------------------------


def _parse(trace: dict[str, Any]) -> _Parsed:
    parsed = _Parsed()
    events = trace.get("traceEvents", [])
    for event in events:
        if event.get("ph") != "X" or "dur" not in event or "ts" not in event:
            continue
        kind = _event_kind(str(event.get("cat", "")).lower())
        if kind is None:
            continue
        ts, end = float(event["ts"]), float(event["ts"]) + float(event["dur"])
        name, args = str(event.get("name", "")), event.get("args") or {}
        if kind in ("kernel", "memcpy", "memset"):
            parsed.device.append(_Device(name, kind, ts, end, args))
        else:
            thread = (event.get("pid"), event.get("tid"))
            parsed.host.append(_Host(name, kind, ts, end, args, thread))
    parsed.properties = _properties(trace, parsed.device)
    parsed.vendor = _vendor(trace, parsed.properties)
    order = _thread_order(parsed.host)
    _nest(parsed.host, order)
    parsed.manual_softmax = _mark_manual_attention(parsed.host, order)
    _propagate(parsed.host, order)
    _segment(parsed)
    return parsed


def _event_kind(category: str) -> str | None:
    if category in ("cpu_op", "operator"):
        return "op"
    if category == "user_annotation":
        return "annotation"
    if category in ("cuda_runtime", "runtime", "cuda_driver"):
        return "runtime"
    if category == "kernel":
        return "kernel"
    if category in ("gpu_memcpy", "memcpy"):
        return "memcpy"
    if category in ("gpu_memset", "memset"):
        return "memset"
    return None


def _properties(trace: dict[str, Any], device: list[_Device]) -> dict[str, Any]:
    """``deviceProperties`` of the GPU the kernels ran on (a trace lists every visible GPU)."""
    listed = [p for p in trace.get("deviceProperties") or [] if isinstance(p, dict)]
    used = Counter(a.args.get("device") for a in device if a.kind == "kernel")
    busiest = used.most_common(1)[0][0] if used else None
    return next((p for p in listed if p.get("id") == busiest), listed[0] if listed else {})


def _vendor(trace: dict[str, Any], properties: dict[str, Any]) -> str | None:
    name = str(properties.get("name", ""))
    if "roctracer_version" in trace or "hip_runtime_version" in trace or "AMD" in name:
        return "amd"
    if properties:
        return "nvidia"
    return None


def _thread_order(host: list[_Host]) -> list[int]:
    """Indices sorted by thread, then start, longest first: parents before their children."""
    threads = {thread: rank for rank, thread in enumerate(dict.fromkeys(h.thread for h in host))}
    return sorted(
        range(len(host)), key=lambda i: (threads[host[i].thread], host[i].ts, -host[i].end)
    )


def _nest(host: list[_Host], order: list[int]) -> None:
    """Set each event's parent: the innermost earlier event on its thread that contains it."""
    stack: list[int] = []
    thread: tuple[Any, Any] | None = None
    for index in order:
        event = host[index]
        if event.thread != thread:
            stack, thread = [], event.thread
        while stack and event.end > host[stack[-1]].end + 1e-3:
            stack.pop()
        if stack:
            event.parent = stack[-1]
            host[stack[-1]].children += event.end - event.ts
        stack.append(index)


@functools.lru_cache(maxsize=8192)
def _op_name(name: str) -> str:
    """``aten::addmm`` → ``addmm``; an autograd node ``AddmmBackward0`` → ``addmm``."""
    if "::" in name and not name.startswith("autograd::"):
        return name.split("::", 1)[1]
    match = _BACKWARD_NODE.match(name)
    return _CAMEL.sub("_", match.group(1)).lower() if match else ""


@functools.lru_cache(maxsize=8192)
def _op_category(name: str) -> str | None:
    """The category an op's own name implies; None leaves it to its ancestors."""
    if _FUSED_ATTENTION.search(name):
        return ATTENTION
    base = _op_name(name)
    if not base:
        return None
    for names, category in (
        (_MATMUL_OPS, MATMUL),
        (_CONV_OPS, CONV),
        (_COPY_OPS, COPY),
        (_SYNC_OPS, SYNC),
        (_BOOKKEEPING_OPS, OTHER),
    ):
        if base in names:
            return category
    return ELEMENTWISE if name.startswith("aten::") or _BACKWARD_NODE.match(name) else None


def _propagate(host: list[_Host], order: list[int]) -> None:
    """Region, attention flag, category and innermost compute op, inherited down the tree."""
    for index in order:
        event = host[index]
        parent = host[event.parent] if event.parent >= 0 else None
        own_region = next(
            (region for prefix, region in _REGION_PREFIXES if event.name.startswith(prefix)), None
        )
        own = _op_category(event.name) if event.kind == "op" else None
        event.region = own_region or (parent.region if parent else None)
        event.attention = event.manual or own == ATTENTION or bool(parent and parent.attention)
        event.category = own or (parent.category if parent else None)
        inherited = parent.compute_op if parent else -1
        event.compute_op = index if own in (MATMUL, CONV) else inherited


def _siblings(host: list[_Host], order: list[int]) -> dict[tuple[Any, int], list[int]]:
    """Ops grouped by (thread, parent), in time order."""
    groups: dict[tuple[Any, int], list[int]] = defaultdict(list)
    for index in order:
        if host[index].kind == "op":
            groups[(host[index].thread, host[index].parent)].append(index)
    return groups


def _is_forward_op(event: _Host) -> bool:
    """A dispatched op (``aten::…``), not an autograd node named after one."""
    return "::" in event.name and "Backward" not in event.name


def _is_batched_matmul(event: _Host) -> bool:
    base = _op_name(event.name)
    if base not in _BATCHED_MATMUL_OPS or not _is_forward_op(event):
        return False
    dims = event.args.get("Input Dims")
    if base == "matmul" and isinstance(dims, list) and len(dims) >= 2:
        return all(isinstance(d, list) and len(d) >= 3 for d in dims[:2])
    return True


def _under(host: list[_Host], index: int, pattern: re.Pattern[str]) -> bool:
    while index >= 0:
        if pattern.search(host[index].name):
            return True
        index = host[index].parent
    return False


def _mark_manual_attention(host: list[_Host], order: list[int]) -> list[int]:
    """Flag matmul → softmax → matmul chains outside SDPA; returns their softmax ops.

    The forward ops of a chain are flagged, and so are the autograd nodes that carry their
    ``Sequence number`` (their backward), so both directions count as attention.
    """
    found: list[int] = []
    for group in _siblings(host, order).values():
        for position, index in enumerate(group):
            if _op_name(host[index].name) not in _SOFTMAX_OPS or not _is_forward_op(host[index]):
                continue
            if _under(host, host[index].parent, _FUSED_ATTENTION):
                continue
            before = group[max(0, position - ATTENTION_WINDOW) : position]
            after = group[position + 1 : position + 1 + ATTENTION_WINDOW]
            first = next((i for i in reversed(before) if _is_batched_matmul(host[i])), None)
            second = next((i for i in after if _is_batched_matmul(host[i])), None)
            if first is None or second is None:
                continue
            found.append(index)
            for member in group[group.index(first) : group.index(second) + 1]:
                host[member].manual = True
    # The autograd node of a forward op carries its ``Sequence number``; the op that records it
    # is often nested (aten::matmul → aten::bmm), so look below the flagged ops too.
    sequences = {
        (event.thread[0], event.args["Sequence number"])
        for event in host
        if "Sequence number" in event.args
        and _is_forward_op(event)
        and _flagged_at_or_above(host, event)
    }
    for event in host:
        key = (event.thread[0], event.args.get("Sequence number"))
        if "Backward" in event.name and key in sequences:
            event.manual = True
    return found


def _flagged_at_or_above(host: list[_Host], event: _Host) -> bool:
    while True:
        if event.manual:
            return True
        if event.parent < 0:
            return False
        event = host[event.parent]


def _segment(parsed: _Parsed) -> None:
    """Steps from ``ProfilerStep#N``, and each event's step.

    A trace without step markers is one window holding every event; its length is the GPU's
    busy span (first to last activity) on a GPU trace, the ops' span on a CPU trace, so set-up
    time recorded before the work (model loading) does not dilute every share.
    """
    seen: dict[str, tuple[float, float]] = {}
    for event in parsed.host:
        if event.kind in ("annotation", "op") and _STEP_NAME.match(event.name):
            seen.setdefault(event.name, (event.ts, event.end))
    parsed.marked_steps = bool(seen)
    if not seen:
        spans = [(a.ts, a.end) for a in parsed.device] or [
            (e.ts, e.end) for e in parsed.host if e.kind == "op"
        ]
        if spans:
            parsed.steps = [(min(s for s, _ in spans), max(e for _, e in spans))]
            parsed.window_us = parsed.steps[0][1] - parsed.steps[0][0]
        step = 0 if spans else -1
        for event in parsed.host:
            event.step = step
        for activity in parsed.device:
            activity.step = step
        _link_launches(parsed)
        return
    parsed.steps = sorted(seen.values())
    starts = [start for start, _ in parsed.steps]
    for event in parsed.host:
        event.step = _step_of(event.ts, starts, parsed.steps)
    _link_launches(parsed)
    for activity in parsed.device:
        when = parsed.host[activity.launcher].ts if activity.launcher >= 0 else activity.ts
        activity.step = _step_of(when, starts, parsed.steps)
    ends = [a.end for a in parsed.device if a.step >= 0]
    parsed.window_us = max([parsed.steps[-1][1], *ends]) - parsed.steps[0][0]


def _link_launches(parsed: _Parsed) -> None:
    """Each GPU activity's launching runtime call, through the shared ``correlation`` id."""
    correlated = {
        event.args.get("correlation"): index
        for index, event in enumerate(parsed.host)
        if event.kind == "runtime" and event.args.get("correlation") is not None
    }
    for activity in parsed.device:
        activity.launcher = correlated.get(activity.args.get("correlation"), -1)


def _step_of(ts: float, starts: list[float], steps: list[tuple[float, float]]) -> int:
    position = bisect.bisect_right(starts, ts) - 1
    return position if position >= 0 and ts < steps[position][1] else -1


# --- metrics ----------------------------------------------------------------------------------


def _device_facts(parsed: _Parsed) -> Evidence:
    facts: Evidence = {}
    properties = parsed.properties
    if properties.get("name"):
        facts["gpu_name"] = str(properties["name"])
    if parsed.vendor:
        facts["gpu_vendor"] = parsed.vendor
    if parsed.vendor == "nvidia" and "computeMajor" in properties:
        facts["compute_capability"] = (
            f"{properties['computeMajor']}.{properties.get('computeMinor', 0)}"
        )
    return facts


def _outermost(host: list[_Host], index: int, region: str) -> bool:
    parent = host[index].parent
    return parent < 0 or host[parent].region != region


def _device_category(parsed: _Parsed, activity: _Device) -> str:
    """A GPU activity's category: its launching op first, then its name."""
    if activity.kind == "memcpy":
        return H2D if "HtoD" in activity.name else COPY if "DtoD" in activity.name else OTHER
    if activity.kind == "memset":
        return ELEMENTWISE
    launcher = parsed.host[activity.launcher] if activity.launcher >= 0 else None
    by_name = kernel_family(activity.name)
    if launcher and launcher.region == OPTIMIZER:
        return OPTIMIZER
    if by_name in (COMM, LAYOUT):
        return by_name
    if (launcher and launcher.attention) or by_name == ATTENTION:
        return ATTENTION
    by_op = launcher.category if launcher else None
    if by_op in (MATMUL, CONV, COPY):
        return by_op
    if by_name not in (OTHER, ELEMENTWISE):
        return by_name
    if by_op == SYNC:
        return OTHER
    return by_op or by_name


@functools.lru_cache(maxsize=8192)
def kernel_family(name: str) -> str:
    """The category a kernel's name implies (``other`` for a family no table knows)."""
    lowered = name.lower()
    for category, pattern in _KERNEL_FAMILIES:
        if pattern.search(lowered):
            return category
    return OTHER


def _shares(parsed: _Parsed, gpu: bool) -> Evidence:
    """Shares of step time by category: GPU timeline time on a GPU trace, op self time on CPU.

    On a CPU trace each step's time is exactly its own, so a share is the median over steps: one
    step stretched by a preemption or a collection does not move it. On a GPU trace a step's
    kernels may run during the next step's host time, so shares are totals over the window.
    """
    per_step = _time_by_step(parsed, gpu)
    if gpu:
        totals: defaultdict[str, float] = defaultdict(float)
        for times in per_step:
            for category, time in times.items():
                totals[category] += time
        window = parsed.window_us
        shares: Evidence = {f"{c}_share": min(1.0, totals[c] / window) for c in _GPU_SHARES}
        busy = _union((a.ts, a.end) for a in parsed.device if a.step >= 0)
        shares["gpu_utilisation"] = min(1.0, busy / window)
        shares["gpu_idle_share"] = 1.0 - min(1.0, busy / window)
        return shares
    durations = [end - start for start, end in parsed.steps]
    return {
        f"{category}_share": statistics.median(
            min(1.0, times[category] / duration) if duration > 0 else 0.0
            for times, duration in zip(per_step, durations, strict=True)
        )
        for category in _CPU_SHARES
    }


_GPU_SHARES = (MATMUL, CONV, ATTENTION, ELEMENTWISE, COPY, LAYOUT, OPTIMIZER, H2D, COMM,
               DATALOADER, SYNC, OTHER)  # fmt: skip
_CPU_SHARES = (MATMUL, CONV, ATTENTION, ELEMENTWISE, COPY, OPTIMIZER, DATALOADER, SYNC, OTHER)


def _time_by_step(parsed: _Parsed, gpu: bool) -> list[defaultdict[str, float]]:
    """Microseconds per category in each step."""
    steps: list[defaultdict[str, float]] = [defaultdict(float) for _ in parsed.steps]
    host = parsed.host
    if gpu:
        for activity in parsed.device:
            if activity.step >= 0:
                category = _device_category(parsed, activity)
                steps[activity.step][category] += activity.end - activity.ts
        for event in host:
            if event.step >= 0 and event.kind == "runtime" and event.name in _SYNC_CALLS:
                steps[event.step][SYNC] += event.end - event.ts
    else:
        for event in host:
            if event.step >= 0 and event.kind == "op" and event.region is None:
                category = ATTENTION if event.attention else event.category or OTHER
                steps[event.step][category] += max(0.0, event.end - event.ts - event.children)
    for index, event in enumerate(host):
        if event.step >= 0 and event.region and _outermost(host, index, event.region):
            times = steps[event.step]
            key = _HOST_OPTIMIZER if event.region == OPTIMIZER else event.region
            times[key] += event.end - event.ts
    # On a GPU the optimizer costs its kernel time, unless the host took longer to launch them
    # (a per-parameter loop of tiny kernels is launch-bound): the step waits for both.
    for times in steps:
        host_time = times.pop(_HOST_OPTIMIZER, 0.0)
        times[OPTIMIZER] = max(times[OPTIMIZER], host_time) if gpu else host_time
    return steps


_HOST_OPTIMIZER = "host optimizer"


def _union(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by possibly overlapping intervals."""
    total = 0.0
    current: list[float] | None = None
    for start, end in sorted(intervals):
        if current is None or start > current[1]:
            if current is not None:
                total += current[1] - current[0]
            current = [start, end]
        else:
            current[1] = max(current[1], end)
    if current is not None:
        total += current[1] - current[0]
    return total


def _sync_metrics(parsed: _Parsed, gpu: bool) -> Evidence:
    """Host syncs per step: synchronize calls on a GPU, ``.item()`` outside the optimizer on CPU."""
    steps = len(parsed.steps)
    host = parsed.host
    ops = [e for e in host if e.kind == "op" and e.step >= 0]
    metrics: Evidence = {}
    if gpu:
        calls = sum(
            1 for e in host if e.step >= 0 and e.kind == "runtime" and e.name in _SYNC_CALLS
        )
        metrics["host_sync_count"] = calls / steps
    elif ops:
        outermost = [
            e
            for e in ops
            if e.category == SYNC
            and e.region is None
            and (e.parent < 0 or host[e.parent].category != SYNC)
        ]
        metrics["host_sync_count"] = len(outermost) / steps
    if ops:
        items = [e for e in ops if e.name == "aten::item" and e.region != OPTIMIZER]
        metrics["item_call_count"] = len(items) / steps
        top_level = [e for e in ops if e.parent < 0 or host[e.parent].kind != "op"]
        metrics["op_count"] = len(top_level) / steps
    return metrics


def _attention_metrics(parsed: _Parsed) -> Evidence:
    """SDPA and fused-kernel use from op names; the manual pattern from the nesting pass."""
    ops = [e for e in parsed.host if e.kind == "op"]
    kernels = [a for a in parsed.device if a.kind == "kernel"]
    metrics: Evidence = {}
    fused_kernel = any("flash" in a.name.lower() or "fmha" in a.name.lower() for a in kernels)
    if ops:
        metrics["sdpa_used"] = any("scaled_dot_product" in e.name for e in ops)
        metrics["flash_attention_used"] = fused_kernel or any(
            _FLASH_OPS.search(e.name) and _FUSED_ATTENTION.search(e.name) for e in ops
        )
        chains = [i for i in parsed.manual_softmax if parsed.host[i].step >= 0]
        metrics["manual_attention_detected"] = bool(chains)
        metrics["manual_attention_count"] = len(chains) / len(parsed.steps)
    elif fused_kernel:
        metrics["flash_attention_used"] = True
    return metrics


def _compute_ops(parsed: _Parsed) -> dict[int, tuple[float, list[str]]]:
    """Innermost matmul/conv ops in steps → (time, kernel names): kernel time on a GPU trace
    (a kernel belongs to the innermost compute op above its launch), op duration on CPU."""
    host = parsed.host
    result: dict[int, tuple[float, list[str]]] = {}
    if parsed.device:
        for activity in parsed.device:
            if activity.step < 0 or activity.launcher < 0 or activity.kind != "kernel":
                continue
            op = host[activity.launcher].compute_op
            if op >= 0:
                time, names = result.get(op, (0.0, []))
                names.append(activity.name)
                result[op] = (time + activity.end - activity.ts, names)
        return result
    enclosing = {
        host[event.parent].compute_op
        for index, event in enumerate(host)
        if event.compute_op == index and event.parent >= 0
    }
    for index, event in enumerate(host):
        if event.step >= 0 and event.compute_op == index and index not in enclosing:
            result[index] = (event.end - event.ts, [])
    return result


def op_dtype(event_args: dict[str, Any], kernel_names: Sequence[str] = ()) -> str | None:
    """The compute dtype of a matmul/conv: its first tensor input type (``record_shapes``), fp32
    refined to tf32 when its kernel says so, else read from the kernel name; None if unknown."""
    types = event_args.get("Input type") or []
    declared = next((_TYPE_NAMES[t.lower()] for t in types if t.lower() in _TYPE_NAMES), None)
    from_kernel = next(
        (dtype for name in kernel_names if (dtype := kernel_dtype(name)) is not None), None
    )
    if declared == "fp32" and from_kernel == "tf32":
        return "tf32"
    return declared or from_kernel


def kernel_dtype(name: str) -> str | None:
    """The dtype a GEMM/conv kernel name spells (``…bf16…``, ``…s1688gemm…`` = TF32), or None."""
    lowered = name.lower()
    for dtype, needles in _KERNEL_DTYPES:
        if any(needle in lowered for needle in needles):
            return dtype
    return None


def _precision_metrics(parsed: _Parsed) -> Evidence:
    """Which dtype carries the matmul and convolution time."""
    by_category: dict[str, defaultdict[str, float]] = {
        MATMUL: defaultdict(float),
        CONV: defaultdict(float),
    }
    for index, (time, names) in _compute_ops(parsed).items():
        event = parsed.host[index]
        dtype = op_dtype(event.args, sorted(names, key=len))
        category = _op_category(event.name)
        if dtype and category in by_category:
            by_category[category][dtype] += time
    metrics: Evidence = {}
    for category, key in ((MATMUL, "matmul_dtype"), (CONV, "conv_dtype")):
        if by_category[category]:
            times = by_category[category]
            metrics[key] = max(times, key=lambda dtype: times[dtype])
    total = sum(sum(times.values()) for times in by_category.values())
    fp32 = sum(times.get("fp32", 0.0) + times.get("tf32", 0.0) for times in by_category.values())
    if total > 0:
        metrics["fp32_matmul_fraction"] = fp32 / total
    return metrics


def matmul_operands(name: str, dims: Sequence[Any]) -> list[list[int]]:
    """The two matrix operands' shapes of a matmul op (a bias or accumulator input skipped)."""
    base = _op_name(name)
    skip = 1 if base in ("addmm", "baddbmm", "addbmm", "addmv", "_addmm_activation") else 0
    operands = [d for d in dims[skip : skip + 2] if isinstance(d, list) and d]
    return operands if len(operands) == 2 else []


def _aligned(operands: Sequence[Sequence[int]]) -> bool:
    """Every matrix dimension (the last two of each operand) a multiple of 8; size 1 is exempt."""
    return all(d == 1 or d % ALIGNMENT == 0 for shape in operands for d in shape[-2:])


def _shape_metrics(parsed: _Parsed) -> Evidence:
    """Tensor-core alignment of the hot matmuls, from ``Input Dims`` (absent without shapes)."""
    groups: defaultdict[tuple[str, str], float] = defaultdict(float)
    aligned: dict[tuple[str, str], bool] = {}
    for index, (time, _) in _compute_ops(parsed).items():
        event = parsed.host[index]
        if _op_category(event.name) != MATMUL or time <= 0:
            continue
        operands = matmul_operands(event.name, event.args.get("Input Dims") or [])
        if not operands:
            continue
        key = (_op_name(event.name), "x".join(str(shape) for shape in operands))
        groups[key] += time
        aligned[key] = _aligned(operands)
    total = sum(groups.values())
    if total <= 0:
        return {}
    hot, covered = [], 0.0
    for key, time in sorted(groups.items(), key=lambda item: -item[1]):
        if covered >= HOT_MATMUL_COVERAGE * total:
            break
        hot.append(key)
        covered += time
    name, shapes = hot[0]
    return {
        "matmul_dims_aligned": all(aligned[key] for key in hot),
        "misaligned_matmul_fraction": sum(t for k, t in groups.items() if not aligned[k]) / total,
        "hot_matmul_dims": f"{name} {shapes}",
    }


def _communication_metrics(trace: dict[str, Any], gpu: bool) -> Evidence:
    """How much of the collectives' time computation hid, and on CPU their share of the step
    (gloo runs them on its own thread, outside the ops the CPU shares above are made of)."""
    # Imported here: comm_trace reads this module's kernel families, so a top-level import
    # would be circular.
    from perfgate.distributed.comm_trace import communication_summary

    summary = communication_summary(trace)
    if summary is None:
        return {}
    metrics: Evidence = {"communication_exposed_share": summary.exposed_share}
    if summary.overlap is not None:
        metrics["communication_overlap"] = summary.overlap
    if not gpu:
        metrics["communication_share"] = summary.share
    return metrics


def _kernel_metrics(parsed: _Parsed) -> Evidence:
    """Kernel count per step and the very short kernels (launch-overhead bound)."""
    steps = len(parsed.steps)
    durations = [a.end - a.ts for a in parsed.device if a.kind == "kernel" and a.step >= 0]
    short = [d for d in durations if d < SHORT_KERNEL_US]
    metrics: Evidence = {"kernel_count": len(durations) / steps}
    if durations:
        metrics["short_kernel_count"] = len(short) / steps
        metrics["short_kernel_fraction"] = len(short) / len(durations)
    if short:
        metrics["short_kernel_mean_us"] = sum(short) / len(short)
    return metrics


def _transfer_metrics(parsed: _Parsed) -> Evidence:
    """Host-to-device copies per step, their bytes and how many came from pageable memory."""
    steps = len(parsed.steps)
    copies = [a for a in parsed.device if a.kind == "memcpy" and a.step >= 0 and "HtoD" in a.name]
    metrics: Evidence = {
        "h2d_copy_count": len(copies) / steps,
        "h2d_from_pageable": any("Pageable" in a.name for a in copies),
    }
    sizes = [a.args.get("bytes") for a in copies]
    if copies and all(isinstance(size, int | float) for size in sizes):
        total = float(sum(sizes))  # type: ignore[arg-type]
        metrics["h2d_bytes"] = total / steps
        pageable = sum(a.args["bytes"] for a in copies if "Pageable" in a.name)
        if total > 0:
            metrics["h2d_pageable_fraction"] = pageable / total
    elif copies:
        metrics["h2d_pageable_fraction"] = sum("Pageable" in a.name for a in copies) / len(copies)
    return metrics
