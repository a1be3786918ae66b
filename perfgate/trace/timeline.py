"""A trace's structure: which op called which, what launched each kernel, which step holds it.

:func:`build_timeline` derives it from a :class:`~perfgate.trace.model.Trace` in three passes,
and the extractors (``perfgate.trace.breakdown`` and its neighbours) read it:

1. **Nesting.** Host events are nested per thread by time, which gives every op its parent, so
   a kernel can be traced back through its launch call (``correlation``) to the op, the
   ``Optimizer.step`` region or the SDPA call that launched it.
2. **Patterns.** A softmax with a batched matmul just before and just after it among its sibling
   ops, outside any SDPA call, is hand-written attention; its backward nodes are found through
   the autograd ``Sequence number`` they share with the forward ops. Region, attention,
   category and the innermost matmul or convolution are then inherited down the tree.
3. **Steps.** Steps are the ``ProfilerStep#N`` windows (the whole trace when there are none). A
   host event belongs to the step it starts in, a GPU activity to the step of its launch.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from dataclasses import dataclass

from perfgate.trace.categories import (
    ATTENTION,
    BATCHED_MATMUL_OPS,
    CONV,
    FUSED_ATTENTION,
    MATMUL,
    MODULE_RANGE,
    REGION_PREFIXES,
    SOFTMAX_OPS,
    is_forward_op,
    op_category,
    op_name,
)
from perfgate.trace.model import GpuActivity, HostEvent, Interval, Thread, Trace

ATTENTION_WINDOW = 8
"""How many sibling ops before and after a softmax may separate it from its matmuls."""


@dataclass(frozen=True, slots=True)
class HostNode:
    """A host event in its place: its parent and what it inherits from its ancestors."""

    event: HostEvent
    parent: int
    """Index of the innermost enclosing event on the same thread; -1 at the top."""
    children_us: float
    """Summed duration of direct children (self time is ``duration − children_us``)."""
    region: str | None
    """``optimizer`` or ``dataloader_wait`` when the event is inside such a range."""
    attention: bool
    """Inside SDPA, or part of a hand-written attention chain (or its backward)."""
    category: str | None
    """The category its own name implies, else its nearest categorised ancestor's."""
    compute_op: int
    """Index of the innermost matmul or convolution op at or above this event; -1 if none."""
    step: int
    """Index of its step; -1 outside every step."""

    @property
    def name(self) -> str:
        return self.event.name

    @property
    def kind(self) -> str:
        return self.event.kind

    @property
    def ts(self) -> float:
        return self.event.ts

    @property
    def end(self) -> float:
        return self.event.end


@dataclass(frozen=True, slots=True)
class GpuNode:
    """A GPU activity in its place: the runtime call that launched it and its step."""

    activity: GpuActivity
    launcher: int
    """Index of the launching runtime call among the host nodes; -1 if not recorded."""
    step: int

    @property
    def name(self) -> str:
        return self.activity.name

    @property
    def ts(self) -> float:
        return self.activity.ts

    @property
    def end(self) -> float:
        return self.activity.end


@dataclass(frozen=True, eq=False)
class Timeline:
    """A trace with its structure: host nodes and GPU nodes in the trace's order, and steps."""

    trace: Trace
    host: tuple[HostNode, ...]
    gpu: tuple[GpuNode, ...]
    steps: tuple[Interval, ...]
    """The step windows by start; one window over the whole work when the trace has none."""
    marked_steps: bool
    """The steps are ``ProfilerStep#N`` marks (not the single fallback window)."""
    window_us: float
    """First step's start to the last step's end, or to the last GPU activity launched in a
    step if that ends later; 0 when there is nothing to analyse."""
    manual_softmax: tuple[int, ...]
    """Softmax ops at the centre of a hand-written attention chain."""


def build_timeline(trace: Trace) -> Timeline:
    """Nest, mark and segment ``trace`` (see the module docstring)."""
    host = trace.host
    order = _thread_order(host)
    parent, children = _nest(host, order)
    manual_softmax, manual = _mark_manual_attention(host, order, parent)
    region, attention, category, compute_op = _propagate(host, order, parent, manual)
    steps, marked, window_us, host_step, launcher, gpu_step = _segment(trace)
    return Timeline(
        trace=trace,
        host=tuple(
            HostNode(
                event=event,
                parent=parent[i],
                children_us=children[i],
                region=region[i],
                attention=attention[i],
                category=category[i],
                compute_op=compute_op[i],
                step=host_step[i],
            )
            for i, event in enumerate(host)
        ),
        gpu=tuple(
            GpuNode(activity=activity, launcher=launcher[j], step=gpu_step[j])
            for j, activity in enumerate(trace.gpu)
        ),
        steps=tuple(steps),
        marked_steps=marked,
        window_us=window_us,
        manual_softmax=tuple(manual_softmax),
    )


# --- nesting ----------------------------------------------------------------------------------


def _thread_order(host: tuple[HostEvent, ...]) -> list[int]:
    """Indices sorted by thread, then start, longest first: parents before their children."""
    threads = {thread: rank for rank, thread in enumerate(dict.fromkeys(h.thread for h in host))}
    return sorted(
        range(len(host)), key=lambda i: (threads[host[i].thread], host[i].ts, -host[i].end)
    )


def _nest(host: tuple[HostEvent, ...], order: list[int]) -> tuple[list[int], list[float]]:
    """Each event's parent (the innermost earlier event on its thread that contains it) and
    its children's summed duration."""
    parent = [-1] * len(host)
    children = [0.0] * len(host)
    stack: list[int] = []
    thread: Thread | None = None
    for index in order:
        event = host[index]
        if event.thread != thread:
            stack, thread = [], event.thread
        while stack and event.end > host[stack[-1]].end + 1e-3:
            stack.pop()
        if stack:
            parent[index] = stack[-1]
            children[stack[-1]] += event.end - event.ts
        stack.append(index)
    return parent, children


# --- patterns ---------------------------------------------------------------------------------


def _siblings(
    host: tuple[HostEvent, ...], order: list[int], parent: list[int]
) -> dict[tuple[Thread, int], list[int]]:
    """Ops grouped by (thread, parent), in time order."""
    groups: dict[tuple[Thread, int], list[int]] = defaultdict(list)
    for index in order:
        if host[index].kind == "op":
            groups[(host[index].thread, parent[index])].append(index)
    return groups


def _is_batched_matmul(event: HostEvent) -> bool:
    base = op_name(event.name)
    if base not in BATCHED_MATMUL_OPS or not is_forward_op(event.name):
        return False
    dims = event.input_dims
    if base == "matmul" and isinstance(dims, list) and len(dims) >= 2:
        return all(isinstance(d, list) and len(d) >= 3 for d in dims[:2])
    return True


def _under(
    host: tuple[HostEvent, ...], parent: list[int], index: int, pattern: re.Pattern[str]
) -> bool:
    while index >= 0:
        name = host[index].name
        if not name.startswith(MODULE_RANGE) and pattern.search(name):
            return True
        index = parent[index]
    return False


def _mark_manual_attention(
    host: tuple[HostEvent, ...], order: list[int], parent: list[int]
) -> tuple[list[int], list[bool]]:
    """Matmul → softmax → matmul chains outside SDPA: their softmax ops, and which events are
    part of one.

    The forward ops of a chain are flagged, and so are the autograd nodes that carry their
    ``Sequence number`` (their backward), so both directions count as attention.
    """
    found: list[int] = []
    manual = [False] * len(host)
    for group in _siblings(host, order, parent).values():
        for position, index in enumerate(group):
            name = host[index].name
            if op_name(name) not in SOFTMAX_OPS or not is_forward_op(name):
                continue
            if _under(host, parent, parent[index], FUSED_ATTENTION):
                continue
            before = group[max(0, position - ATTENTION_WINDOW) : position]
            after = group[position + 1 : position + 1 + ATTENTION_WINDOW]
            first = next((i for i in reversed(before) if _is_batched_matmul(host[i])), None)
            second = next((i for i in after if _is_batched_matmul(host[i])), None)
            if first is None or second is None:
                continue
            found.append(index)
            for member in group[group.index(first) : group.index(second) + 1]:
                manual[member] = True
    # The autograd node of a forward op carries its ``Sequence number``; the op that records it
    # is often nested (aten::matmul → aten::bmm), so look below the flagged ops too.
    sequences = {
        (event.thread[0], event.sequence_number)
        for index, event in enumerate(host)
        if event.sequence_number is not None
        and is_forward_op(event.name)
        and _flagged_at_or_above(parent, manual, index)
    }
    for index, event in enumerate(host):
        if "Backward" in event.name and (event.thread[0], event.sequence_number) in sequences:
            manual[index] = True
    return found, manual


def _flagged_at_or_above(parent: list[int], manual: list[bool], index: int) -> bool:
    while True:
        if manual[index]:
            return True
        if parent[index] < 0:
            return False
        index = parent[index]


def _propagate(
    host: tuple[HostEvent, ...], order: list[int], parent: list[int], manual: list[bool]
) -> tuple[list[str | None], list[bool], list[str | None], list[int]]:
    """Region, attention flag, category and innermost compute op, inherited down the tree."""
    region: list[str | None] = [None] * len(host)
    attention = [False] * len(host)
    category: list[str | None] = [None] * len(host)
    compute_op = [-1] * len(host)
    for index in order:
        event, up = host[index], parent[index]
        own_region = next(
            (named for prefix, named in REGION_PREFIXES if event.name.startswith(prefix)), None
        )
        own = op_category(event.name) if event.kind == "op" else None
        region[index] = own_region or (region[up] if up >= 0 else None)
        attention[index] = manual[index] or own == ATTENTION or (up >= 0 and attention[up])
        category[index] = own or (category[up] if up >= 0 else None)
        inherited = compute_op[up] if up >= 0 else -1
        compute_op[index] = index if own in (MATMUL, CONV) else inherited
    return region, attention, category, compute_op


# --- steps ------------------------------------------------------------------------------------


def _segment(
    trace: Trace,
) -> tuple[list[Interval], bool, float, list[int], list[int], list[int]]:
    """Steps, whether they are marked, the window, each host event's and activity's step, and
    each activity's launcher.

    A trace without step markers is one window holding every event; its length is the GPU's
    busy span (first to last activity) on a GPU trace, the ops' span on a CPU trace, so set-up
    time recorded before the work (model loading) does not dilute every share.
    """
    host, gpu = trace.host, trace.gpu
    launcher = _link_launches(trace)
    if not trace.steps:
        spans = [(a.ts, a.end) for a in gpu] or [(e.ts, e.end) for e in host if e.kind == "op"]
        steps: list[Interval] = []
        window_us = 0.0
        if spans:
            steps = [(min(s for s, _ in spans), max(e for _, e in spans))]
            window_us = steps[0][1] - steps[0][0]
        step = 0 if spans else -1
        return steps, False, window_us, [step] * len(host), launcher, [step] * len(gpu)
    steps = sorted((window.ts, window.end) for window in trace.steps)
    starts = [start for start, _ in steps]
    host_step = [_step_of(event.ts, starts, steps) for event in host]
    gpu_step = [
        _step_of(host[launched].ts if launched >= 0 else activity.ts, starts, steps)
        for activity, launched in zip(gpu, launcher, strict=True)
    ]
    ends = [a.end for a, step in zip(gpu, gpu_step, strict=True) if step >= 0]
    window_us = max([steps[-1][1], *ends]) - steps[0][0]
    return steps, True, window_us, host_step, launcher, gpu_step


def _link_launches(trace: Trace) -> list[int]:
    """Each GPU activity's launching runtime call, through the shared ``correlation`` id."""
    correlated: dict[int | None, int] = {
        event.correlation: index
        for index, event in enumerate(trace.host)
        if event.kind == "runtime" and event.correlation is not None
    }
    return [correlated.get(activity.correlation, -1) for activity in trace.gpu]


def _step_of(ts: float, starts: list[float], steps: list[Interval]) -> int:
    position = bisect.bisect_right(starts, ts) - 1
    return position if position >= 0 and ts < steps[position][1] else -1
