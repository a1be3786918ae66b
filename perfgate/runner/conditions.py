"""The measurement conditions of one repeat, read off the parent's telemetry.

A stored-baseline comparison pits a head measured now against repeats measured hours or days
ago; if a neighbour was taking the CPU during one side and not the other, the ratio measures the
neighbour. The parent's sampler already watches the machine while the worker runs
(``perfgate.telemetry.sampler``); this module reduces its series, over the samples whose windows
overlap the timed steps, to the few figures that say whether two sides ran under the same
conditions (``perfgate.documents.result.RepeatConditions``; judged in
``perfgate.compare.conditions``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from perfgate.documents.result import RepeatConditions


def repeat_conditions(
    series: dict[str, Any] | None, start: float | None, end: float | None
) -> RepeatConditions:
    """Conditions over the samples whose window (the time since the previous sample) overlaps
    ``[start, end]``, the measured steps; every sample when either end is unknown."""
    times: Sequence[float] = (series or {}).get("t") or []
    chosen = [
        i
        for i, t in enumerate(times)
        if (start is None or t >= start) and (end is None or i == 0 or times[i - 1] <= end)
    ]
    host = (series or {}).get("host") or {}
    gpu = (series or {}).get("gpu") or {}

    def mean(column: Sequence[Any] | None, scale: float = 1.0) -> float | None:
        values = _numbers(column, chosen)
        return round(sum(values) / len(values) * scale, 4) if values else None

    others = _numbers(gpu.get("other_processes"), chosen)
    return RepeatConditions(
        samples=len(chosen),
        runqueue_wait_share=mean(host.get("process_runqueue_wait_percent"), 0.01),
        other_cpu_cores=mean(host.get("system_other_cpu_percent"), 0.01),
        cpu_pressure_share=mean(host.get("system_cpu_pressure_percent"), 0.01),
        steal_share=mean(host.get("system_steal_percent"), 0.01),
        cpu_mhz=mean(host.get("cpu_freq_mhz")),
        gpu_other_processes=int(max(others)) if others else None,
        gpu_sm_mhz=mean(gpu.get("sm_clock_mhz")),
    )


def _numbers(column: Sequence[Any] | None, chosen: Sequence[int]) -> list[float]:
    if not column:
        return []
    return [
        float(column[i])
        for i in chosen
        if i < len(column)
        and isinstance(column[i], int | float)
        and not isinstance(column[i], bool)
    ]
