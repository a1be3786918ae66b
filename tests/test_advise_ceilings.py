"""advise's diagnosis reads the stored ceilings exactly as ``perfgate run`` does (issue 18).

The profiled window's FLOP rate (``achieved_tflops``) against the environment's measured matmul
ceiling is the signal that tells a CPU workload's arithmetic from framework overhead; without a
stored ceiling the diagnosis says what to run. The end-to-end check, with the ceilings measured
by ``perfgate doctor --peak``, is in ``test_diagnose_cpu.py`` (slow).
"""

from __future__ import annotations

import pytest

from perfgate.advise.catalogue import Evidence
from perfgate.advise.session import window_signals
from perfgate.ceilings.store import StoredCeilings
from perfgate.diagnose.classify import classify

CPU_CEILINGS = StoredCeilings(
    key="cpu-key",
    measured_at="2026-12-03T00:00:00+00:00",
    device="cpu",
    threads=2,
    matmul_tflops={"fp32": 0.2},
    bandwidth_bytes_per_s={},
)
WINDOW: Evidence = {"device": "cpu", "compute_dtype": "fp32", "achieved_tflops": 0.004}


def test_the_window_is_held_against_the_stored_ceiling() -> None:
    signals = window_signals(WINDOW, CPU_CEILINGS)
    assert signals.ceiling_fraction == pytest.approx(0.02)
    found = classify(signals)
    assert found.bound == "host" and "doctor --peak" not in found.reason


def test_without_a_stored_ceiling_the_diagnosis_says_what_to_run() -> None:
    signals = window_signals(WINDOW, None)
    assert signals.ceiling_fraction is None
    assert "doctor --peak" in classify(signals).reason


def test_cpu_ranks_sharing_the_cores_are_not_held_against_one_machine_ceiling() -> None:
    assert window_signals({**WINDOW, "world_size": 2.0}, CPU_CEILINGS).ceiling_fraction is None
    assert window_signals({**WINDOW, "world_size": 1.0}, CPU_CEILINGS).ceiling_fraction == (
        pytest.approx(0.02)
    )


def test_a_window_without_a_flop_count_has_no_fraction() -> None:
    window: Evidence = {k: v for k, v in WINDOW.items() if k != "achieved_tflops"}
    assert window_signals(window, CPU_CEILINGS).ceiling_fraction is None
