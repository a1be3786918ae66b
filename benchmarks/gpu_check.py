"""Checks on the result documents of ``benchmarks/gpu_check.sh``: every GPU path produced data.

Prints one line per workload (step time, TFLOP/s, MFU, GPU utilisation, SM clock, power,
throttled share) and exits non-zero naming each path that did not deliver.
"""

from __future__ import annotations

import sys
from pathlib import Path

from perfgate.result import RunResult, WorkloadResult, load_result
from perfgate.telemetry.peaks import lookup_peak


def check_workload(result: RunResult, workload: WorkloadResult) -> list[str]:
    """Problems with one workload's GPU measurements (empty when all paths delivered)."""
    problems = []
    if workload.status != "ok":
        return [f"status {workload.status}: {workload.error}"]
    gpu = result.environment.get("gpu") or {}
    summary = workload.summary
    assert summary is not None
    for repeat in workload.repeats:
        if repeat.timer != "cuda_event":
            problems.append(f"repeat {repeat.index} timed with {repeat.timer}, not CUDA events")
        if not repeat.peak_memory.get("cuda_allocated_bytes"):
            problems.append(f"repeat {repeat.index} has no CUDA peak memory")
        series = (repeat.telemetry or {}).get("gpu")
        if not series or not any(v is not None for v in series.get("util_percent", [])):
            problems.append(f"repeat {repeat.index} has no NVML utilisation samples")
    peak = lookup_peak(gpu.get("model"), workload.compute_dtype or "fp32")
    if peak.tflops is not None and (summary.mfu is None or not 0 < summary.mfu < 1):
        problems.append(f"MFU {summary.mfu} not in (0, 1) against peak {peak.tflops}")
    if workload.knobs.get("precision") == "bf16" and workload.compute_dtype != "bf16":
        problems.append(f"precision=bf16 but compute dtype {workload.compute_dtype}")
    return problems


def describe(workload: WorkloadResult) -> str:
    """One line of the numbers a reader wants from a GPU run."""
    s = workload.summary
    if s is None or s.median_step_s is None:
        return f"{workload.name}: {workload.status}"
    gpu = (workload.repeats[0].telemetry_summary or {}).get("gpu") or {}

    def mean(column: str) -> str:
        value = (gpu.get(column) or {}).get("mean")
        return f"{value:.0f}" if isinstance(value, (int, float)) else "n/a"

    mfu = f"{s.mfu:.1%}" if s.mfu is not None else f"n/a ({s.mfu_reason})"
    tflops = f"{s.tflops:.1f}" if s.tflops is not None else "n/a"
    return (
        f"{workload.name}@{workload.preset} {workload.compute_dtype} knobs={workload.knobs}: "
        f"step {s.median_step_s * 1e3:.2f} ms, cv {s.between_repeat_cv or 0:.1%}, "
        f"{tflops} TFLOP/s, MFU {mfu}, util {mean('util_percent')} %, "
        f"SM {mean('sm_clock_mhz')} MHz, {mean('power_w')} W, "
        f"throttled {gpu.get('throttled_fraction')}, dataloader wait {s.dataloader_wait_share}"
    )


def main(paths: list[str]) -> int:
    failures = 0
    for path in paths:
        result = load_result(Path(path))
        print(f"{path}: {(result.environment.get('gpu') or {}).get('model')}")
        for workload in result.workloads:
            print("  " + describe(workload))
            for problem in check_workload(result, workload):
                failures += 1
                print(f"  FAIL {workload.name}: {problem}")
    print("gpu_check:", "all GPU paths delivered" if failures == 0 else f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
