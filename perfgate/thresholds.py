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

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from perfgate.errors import UsageError
from perfgate.metrics import METRICS

LOSS_RELATIVE_TOLERANCE = 1e-2
"""Head and baseline final losses must agree within 1 % (bitwise equality is not expected on
GPUs, where reductions are not deterministic); a bigger gap means the change altered the maths."""

TIME_DERIVED = frozenset({"samples_per_s", "tokens_per_s", "tflops", "mfu"})


@dataclass(frozen=True)
class Thresholds:
    """Per-metric defaults and per-workload overrides, as relative changes (0.05 = 5 %)."""

    defaults: Mapping[str, float] = field(default_factory=dict)
    workloads: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    calibrated: Mapping[str, float] = field(default_factory=dict)
    """Workload → step-time band derived from a stored calibration of this machine's noise
    (``perfgate.calibration.thresholds``): used where the configuration sets none."""

    def threshold(self, workload: str, metric: str) -> float:
        """The band for ``metric`` of ``workload``: workload override, global override, the
        calibrated band (timing metrics), the metric's default."""
        configured = self.configured(workload, metric)
        if configured is not None:
            return configured
        if (metric == "step_time_s" or metric in TIME_DERIVED) and workload in self.calibrated:
            return self.calibrated[workload]
        return METRICS[metric].threshold

    def configured(self, workload: str, metric: str) -> float | None:
        """The band the configuration sets for ``metric`` of ``workload``, if any."""
        keys = (metric, "step_time_s") if metric in TIME_DERIVED else (metric,)
        for table in (self.workloads.get(workload, {}), self.defaults):
            for key in keys:
                if key in table:
                    return table[key]
        return None


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


def losses_match(first: float | None, second: float | None) -> bool | None:
    """Whether two final losses agree within :data:`LOSS_RELATIVE_TOLERANCE`; None when either
    is missing (the same maths gives the same loss: a mismatch means the change altered it)."""
    if first is None or second is None:
        return None
    return math.isclose(first, second, rel_tol=LOSS_RELATIVE_TOLERANCE, abs_tol=1e-6)
