"""The calibration record: one workload's A/A noise and what the gate can detect with it.

Format history of the JSON document (``CALIBRATION_VERSION``):

- 1 (perfgate 0.1, 2026-11): first version.

Infinite figures (a test that can never reach significance) are written as null, like the
verdict document's ``min_detectable``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from perfgate.errors import UsageError

CALIBRATION_SCHEMA = "perfgate.calibration"
CALIBRATION_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """One workload calibrated on one environment.

    Noise figures are relative (0.03 = 3 %); change figures are relative worsenings.
    """

    workload: str
    preset: str
    definition_hash: str
    """Which code, preset and knobs were measured: compare uses a calibration only for the same."""
    knobs: dict[str, Any]
    device: str
    environment_key: str
    """``fingerprint_key`` of the machine: noise on one runner says nothing about another."""
    created_at: str
    repeats: int
    """A/A repeats measured (fresh processes)."""
    steps: int
    warmup: int
    step_median_s: float
    """Median over repeats of each repeat's median steady step time."""
    within_cv: float
    """Within-process noise: median over repeats of the robust CV of the steady steps."""
    between_sigma: float
    """Between-process noise: standard deviation of log(repeat step time), ≈ CV."""
    repeat_values_s: tuple[float, ...]
    """The per-repeat step times ``between_sigma`` was computed from."""
    threshold: float
    """The gate's practical threshold for step time of this workload."""
    configured_repeats: int
    """Repeats a plain ``perfgate run`` of this selection uses (config, else preset default)."""
    min_detectable: float
    """Smallest worsening flagged with 95 % power at ``configured_repeats`` a side (inf: never)."""
    recommended_threshold: float
    """Narrowest threshold an A/A comparison at ``configured_repeats`` passes 95 % of the time."""
    target: float
    """The change the user wants to catch (``--target``)."""
    repeats_for_target: int | None
    """Repeats a side detecting ``target`` at ``threshold`` (None: never within 200, or the
    target lies inside the band)."""
    repeats_for_target_tuned: int | None
    """Repeats a side detecting ``target`` with the threshold set to the recommended one for
    that many repeats (None: not within 200)."""


def parse_target(text: str) -> float:
    """``--target`` text (``2%`` or ``2``, both percent, as in ``--inject-slowdown``) as a
    fraction (0.02); 0 < N < 100."""
    number = text.strip().removesuffix("%").strip()
    try:
        percent = float(number)
    except ValueError:
        percent = math.nan
    if not 0 < percent < 100:  # also rejects nan and inf
        raise UsageError(
            f"--target {text!r} is not a percentage in (0, 100)", "write e.g. --target 2%"
        )
    return percent / 100


def calibration_document(calibrations: list[Calibration]) -> dict[str, Any]:
    """The JSON-ready document of a calibrate run (``--json``); inf written as null."""
    return {
        "schema": CALIBRATION_SCHEMA,
        "schema_version": CALIBRATION_VERSION,
        "calibrations": [finite_fields(c) for c in calibrations],
    }


def finite_fields(calibration: Calibration) -> dict[str, Any]:
    """The record as a dict with infinite floats as None (JSON and SQL both get null)."""
    data = asdict(calibration)
    data["repeat_values_s"] = list(calibration.repeat_values_s)
    return {
        k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in data.items()
    }


def from_fields(data: dict[str, Any]) -> Calibration:
    """The inverse of :func:`finite_fields`: null figures become inf again."""
    values = dict(data)
    for name in ("min_detectable", "recommended_threshold"):
        if values.get(name) is None:
            values[name] = math.inf
    values["repeat_values_s"] = tuple(float(v) for v in values.get("repeat_values_s") or ())
    values["knobs"] = dict(values.get("knobs") or {})
    return Calibration(**values)
