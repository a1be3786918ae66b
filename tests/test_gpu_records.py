"""The result documents measured on an H200 (``tests/data/h200``) against today's code.

No GPU is needed: the documents were written by ``perfgate run --device cuda`` on a lent H200.
They must keep loading (the result schema cannot drift away from what a GPU run writes), pass
the checks of ``benchmarks/gpu_check.py``, and carry MFU that is exactly the achieved TFLOP/s
over the peak table's entry for the compute dtype.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from perfgate.documents.result import load_result
from perfgate.telemetry.peaks import lookup_peak

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import gpu_check

RECORDS = Path(__file__).resolve().parent / "data" / "h200"


@pytest.mark.parametrize("path", sorted(RECORDS.glob("gpu-*.json")), ids=lambda p: p.stem)
def test_h200_result_documents_pass_the_gpu_checks(path: Path) -> None:
    result = load_result(path)
    assert result.environment["gpu"]["model"] == "NVIDIA H200"
    for workload in result.workloads:
        assert gpu_check.check_workload(result, workload) == [], workload.name
        summary = workload.summary
        assert summary is not None and summary.tflops is not None
        peak = lookup_peak("NVIDIA H200", workload.compute_dtype or "fp32").tflops
        assert peak is not None and summary.mfu == pytest.approx(summary.tflops / peak)


def test_bf16_runs_use_the_bf16_peak() -> None:
    result = load_result(RECORDS / "gpu-bf16.json")
    by_name = {workload.name: workload for workload in result.workloads}
    assert {w.compute_dtype for w in by_name.values()} == {"bf16"}
    gpt = by_name["gpt"].summary
    assert gpt is not None and gpt.mfu is not None and 0.2 < gpt.mfu < 0.6  # 32 % measured
