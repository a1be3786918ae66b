"""Where step time goes: time per category and step, shares of the window, GPU busy time.

On a GPU trace the device categories are kernel time on the GPU timeline (the launching op
first, the kernel name as fallback, so a kernel family no table knows lands in ``other``
instead of breaking anything); on a CPU trace they are op self time. Host ranges (the
optimizer step, the wait for a batch) count their whole duration on either.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from perfgate.trace.categories import (
    ATTENTION,
    COMM,
    CONV,
    COPY,
    DATALOADER,
    ELEMENTWISE,
    H2D,
    LAYOUT,
    MATMUL,
    OPTIMIZER,
    OTHER,
    SYNC,
    SYNC_CALLS,
)
from perfgate.trace.intervals import length, merge
from perfgate.trace.model import Kernel
from perfgate.trace.timeline import GpuNode, HostNode, Timeline

GPU_CATEGORIES = (MATMUL, CONV, ATTENTION, ELEMENTWISE, COPY, LAYOUT, OPTIMIZER, H2D, COMM,
                  DATALOADER, SYNC, OTHER)  # fmt: skip
"""Categories of a GPU trace's shares."""
CPU_CATEGORIES = (MATMUL, CONV, ATTENTION, ELEMENTWISE, COPY, OPTIMIZER, DATALOADER, SYNC, OTHER)
"""Categories of a CPU trace's shares."""

_HOST_OPTIMIZER = "host optimizer"


def on_gpu(timeline: Timeline) -> bool:
    """Whether the trace has GPU activity: a CPU run on a GPU machine lists the GPUs too, and
    its shares must be op time, not the (absent) kernel time."""
    return bool(timeline.gpu)


def mean_step_ms(timeline: Timeline) -> float | None:
    """The window over the ``ProfilerStep#N`` steps, per step; None without step markers."""
    if not timeline.marked_steps:
        return None
    return timeline.window_us / len(timeline.steps) / 1000.0


def device_category(timeline: Timeline, node: GpuNode) -> str:
    """A GPU activity's category: its launching op first, then its name."""
    activity = node.activity
    if not isinstance(activity, Kernel):
        if activity.kind == "memcpy":
            name = activity.name
            return H2D if "HtoD" in name else COPY if "DtoD" in name else OTHER
        return ELEMENTWISE
    launcher = timeline.host[node.launcher] if node.launcher >= 0 else None
    by_name = activity.family
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


def time_by_step(timeline: Timeline) -> list[defaultdict[str, float]]:
    """Microseconds per category in each step.

    On a GPU the optimizer costs its kernel time, unless the host took longer to launch them
    (a per-parameter loop of tiny kernels is launch-bound): the step waits for both.
    """
    gpu = on_gpu(timeline)
    steps: list[defaultdict[str, float]] = [defaultdict(float) for _ in timeline.steps]
    host = timeline.host
    if gpu:
        for node in timeline.gpu:
            if node.step >= 0:
                steps[node.step][device_category(timeline, node)] += node.end - node.ts
        for event in host:
            if event.step >= 0 and event.kind == "runtime" and event.name in SYNC_CALLS:
                steps[event.step][SYNC] += event.end - event.ts
    else:
        for event in host:
            if event.step >= 0 and event.kind == "op" and event.region is None:
                category = ATTENTION if event.attention else event.category or OTHER
                steps[event.step][category] += max(0.0, event.end - event.ts - event.children_us)
    for event in host:
        if event.step >= 0 and event.region and _outermost(host, event):
            times = steps[event.step]
            key = _HOST_OPTIMIZER if event.region == OPTIMIZER else event.region
            times[key] += event.end - event.ts
    for times in steps:
        host_time = times.pop(_HOST_OPTIMIZER, 0.0)
        times[OPTIMIZER] = max(times[OPTIMIZER], host_time) if gpu else host_time
    return steps


def category_shares(timeline: Timeline) -> dict[str, float]:
    """Shares of step time by category (:data:`GPU_CATEGORIES` or :data:`CPU_CATEGORIES`).

    On a CPU trace each step's time is exactly its own, so a share is the median over steps: one
    step stretched by a preemption or a collection does not move it. On a GPU trace a step's
    kernels may run during the next step's host time, so shares are totals over the window.
    """
    per_step = time_by_step(timeline)
    if on_gpu(timeline):
        totals: defaultdict[str, float] = defaultdict(float)
        for times in per_step:
            for category, time in times.items():
                totals[category] += time
        window = timeline.window_us
        return {category: min(1.0, totals[category] / window) for category in GPU_CATEGORIES}
    durations = [end - start for start, end in timeline.steps]
    return {
        category: statistics.median(
            min(1.0, times[category] / duration) if duration > 0 else 0.0
            for times, duration in zip(per_step, durations, strict=True)
        )
        for category in CPU_CATEGORIES
    }


def gpu_utilisation(timeline: Timeline) -> float:
    """Share of the window during which some GPU activity of a step ran."""
    busy = length(merge((node.ts, node.end) for node in timeline.gpu if node.step >= 0))
    return min(1.0, busy / timeline.window_us)


def gpu_idle_share(timeline: Timeline) -> float:
    """Share of the window during which no GPU activity of a step ran."""
    return 1.0 - gpu_utilisation(timeline)


def _outermost(host: tuple[HostNode, ...], event: HostNode) -> bool:
    return event.parent < 0 or host[event.parent].region != event.region
