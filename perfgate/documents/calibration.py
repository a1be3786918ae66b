"""The calibration document (``perfgate.calibration``): one workload's A/A noise on one
environment, and what the gate can detect with it (``perfgate calibrate --json``; the same
records are stored in the database's calibrations table).

Format history:

- 1.0 (perfgate 0.1, 2026-11): first version.
- 1.1 (2026-12-02): the header's ``schema_minor``.

Infinite figures (a test that can never reach significance) are written as null, like the
verdict document's ``min_detectable``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfgate.documents.base import DocumentKind


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


@dataclass(frozen=True, kw_only=True)
class CalibrationReport:
    """What one ``perfgate calibrate`` measured: a record per workload."""

    calibrations: list[Calibration]


CALIBRATION: DocumentKind[CalibrationReport] = DocumentKind(
    name="perfgate.calibration",
    major=1,
    minor=1,
    model=CalibrationReport,
    produced_by="perfgate calibrate --json",
    infinite_as_null=True,
)
