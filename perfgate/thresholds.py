"""Practical thresholds: how large a change must be before the gate calls it one.

Defaults come from :data:`perfgate.metrics.METRICS`; ``[tool.perfgate.thresholds]`` overrides
them for every workload (``step_time_s = 0.03``) or for one (``[tool.perfgate.thresholds.gpt]``).
A noisy workload on a shared runner needs a wider band than a quiet one on a dedicated GPU —
``perfgate calibrate`` measures which band this machine can support.

Throughput, TFLOP/s and MFU are the step time inverted (times a constant amount of work), so a
band set for ``step_time_s`` also applies to them unless they have their own: one noise level,
one band, and no rate metric left on a default narrower than the time it is computed from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from perfgate.errors import UsageError
from perfgate.metrics import METRICS

TIME_DERIVED = frozenset({"samples_per_s", "tokens_per_s", "tflops", "mfu"})


@dataclass(frozen=True)
class Thresholds:
    """Per-metric defaults and per-workload overrides, as relative changes (0.05 = 5 %)."""

    defaults: Mapping[str, float] = field(default_factory=dict)
    workloads: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def threshold(self, workload: str, metric: str) -> float:
        """The band for ``metric`` of ``workload``: workload override, global override, default."""
        keys = (metric, "step_time_s") if metric in TIME_DERIVED else (metric,)
        for table in (self.workloads.get(workload, {}), self.defaults):
            for key in keys:
                if key in table:
                    return table[key]
        return METRICS[metric].threshold


def parse_thresholds(origin: str, table: Mapping[str, Any]) -> Thresholds:
    """Validate ``[tool.perfgate.thresholds]``: metric = number, or workload = {metric = number}."""
    defaults: dict[str, float] = {}
    workloads: dict[str, dict[str, float]] = {}
    for key, value in table.items():
        if isinstance(value, Mapping):
            workloads[key] = {
                metric: _relative(origin, f"thresholds.{key}.{metric}", metric, number)
                for metric, number in value.items()
            }
        else:
            defaults[key] = _relative(origin, f"thresholds.{key}", key, value)
    return Thresholds(defaults=defaults, workloads=workloads)


def _relative(origin: str, key: str, metric: str, value: Any) -> float:
    if metric not in METRICS:
        raise UsageError(
            f"{origin}: {key} names no gated metric",
            f"use one of: {', '.join(METRICS)} (or a workload table of them)",
        )
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise UsageError(
            f"{origin}: {key} = {value!r} is not a relative change in (0, 1)",
            "write e.g. 0.05 for 5 %",
        )
    return float(value)
