"""Checks on the result documents of ``benchmarks/gpu_check.sh``: every GPU path produced data.

Prints one line per workload (step time, TFLOP/s, MFU, GPU utilisation, SM clock, power,
throttled share) and exits non-zero naming each path that did not deliver.

Two more modes serve the advisor's step of the script: ``--knobs WORKLOAD…`` prints the
``--knob`` arguments that select the planted inefficient variants
(``benchmarks/planted.py``), and ``--advice FILE`` prints which rules fired on them against
the rules the planted defects should draw. ``--sequential WORKLOAD SLOWDOWN ROUNDS`` runs the
sequential interleaved A/B of the plain workload against its canary on CUDA (the PR verdict's
path, without git) and prints the verdict, the rounds it took and each repeat's start-up
phases (fork server or spawn, CUDA context, set-up, warm-up). ``--attribution WORKLOAD KNOB
[DEVICE]`` profiles the workload without and with the knob in alternated windows (compare's
attribution path) and prints what moved; on CUDA the movers must name GPU kernels.
``--monitor`` runs ``perfgate monitor`` beside a CUDA training script and checks /metrics.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from perfgate.documents.result import RunResult, SourceInfo, WorkloadResult, load_result
from perfgate.telemetry.peaks import lookup_peak


def check_workload(result: RunResult, workload: WorkloadResult) -> list[str]:
    """Problems with one workload's GPU measurements (empty when all paths delivered). The
    work counters are checked when the document's format has them (1.6 on; the recorded
    H200 documents in tests/data/h200 predate them)."""
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
    return problems + check_work(workload) + check_distributed(result, workload)


def check_work(workload: WorkloadResult) -> list[str]:
    """The exact work counters of a CUDA step: operators counted, and the matmuls among them."""
    work = workload.work
    if work is None:
        return []
    problems = []
    if work.operators <= 0 or work.operators != sum(work.by_operator.values()):
        problems.append(f"work: {work.operators} operators, per operator {work.by_operator}")
    if not any(name in work.by_operator for name in ("aten.mm", "aten.addmm", "aten.convolution")):
        problems.append("work: no matmul or convolution among the counted operators")
    world = workload.summary.world_size if workload.summary is not None else None
    if (world or 1) > 1 and work.collectives == 0:
        problems.append("work: a distributed step counted no collective")
    return problems


def check_distributed(result: RunResult, workload: WorkloadResult) -> list[str]:
    """A ddp run: one sample set per rank, NCCL, and (on 2+ ranks) the communication window."""
    summary = workload.summary
    if summary is None or summary.world_size is None:
        return []
    problems = []
    ranks = result.settings.nproc_per_node
    if summary.world_size != ranks:
        problems.append(f"world size {summary.world_size}, asked for {ranks} ranks")
    backend = workload.setup_info.get("distributed", {}).get("backend")
    if backend != "nccl":
        problems.append(f"backend {backend} on GPUs, not nccl")
    for repeat in workload.repeats:
        if len(repeat.ranks or []) != ranks:
            problems.append(f"repeat {repeat.index} has {len(repeat.ranks or [])} rank samples")
    if ranks > 1 and summary.communication_share is None:
        problems.append("no NCCL communication seen in the profiled window")
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
    work = workload.work
    counted = (
        f", work {work.operators} ops, {work.allocations} allocations, {work.host_syncs} syncs, "
        f"H2D {work.host_to_device_bytes} B, D2H {work.device_to_host_bytes} B, "
        f"{work.collectives} collectives"
        if work is not None
        else ", work not counted"
    )
    tflops = f"{s.tflops:.1f}" if s.tflops is not None else "n/a"
    return (
        f"{workload.name}@{workload.preset} {workload.compute_dtype} knobs={workload.knobs}: "
        f"step {s.median_step_s * 1e3:.2f} ms, cv {s.between_repeat_cv or 0:.1%}, "
        f"{tflops} TFLOP/s, MFU {mfu}, util {mean('util_percent')} %, "
        f"SM {mean('sm_clock_mhz')} MHz, {mean('power_w')} W, "
        f"throttled {gpu.get('throttled_fraction')}, dataloader wait {s.dataloader_wait_share}"
        + (
            f", {s.world_size} ranks: spread {s.rank_spread}, communication "
            f"{s.communication_share} (exposed {s.communication_exposed_share}, overlap "
            f"{s.communication_overlap}), imbalance {s.rank_imbalance}"
            if s.world_size
            else ""
        )
        + counted
    )


def variant_knobs(workloads: list[str]) -> list[str]:
    """``--knob`` arguments selecting the inefficient variants of ``workloads`` on CUDA."""
    from planted import knob_assignments, variant_pairs  # lazy: imports torch and the workloads

    pairs = [pair for pair in variant_pairs("cuda") if pair.workload in workloads]
    return [arg for knob in knob_assignments(pairs, "inefficient") for arg in ("--knob", knob)]


def check_advice(document: dict[str, Any]) -> list[str]:
    """Lines on an advice document of inefficient variants: the evidence behind the shares, the
    advice, and the planted-defect table with its precision and recall on this GPU.

    A mismatch is printed, not failed: what a defect draws on a GPU depends on the preset and
    the hardware (``tests/test_advise_planted.py`` scores the CPU strictly; here it is measured
    on a GPU), so the table is the finding. A workload that could not be profiled fails.
    """
    from planted import Fired, table_lines, variant_pairs  # lazy: imports torch and the workloads

    by_name = {w["name"]: w for w in document["workloads"]}
    pairs = [pair for pair in variant_pairs("cuda") if pair.workload in by_name]
    lines = []
    for name, workload in by_name.items():
        if workload["status"] != "ok":
            lines.append(f"FAIL {name}: profiling {workload['status']}: {workload['error']}")
            continue
        evidence = workload["evidence"]
        big = {
            key.removesuffix("_share"): value
            for key, value in evidence.items()
            if key.endswith("_share") and isinstance(value, float) and value >= 0.02
        }
        ordered = sorted(big.items(), key=_largest_first)
        shares = ", ".join(f"{key} {value:.0%}" for key, value in ordered)
        lines.append(
            f"{name}@{workload['preset']} on {evidence.get('gpu_name')}: step "
            f"{evidence.get('step_time_ms', float('nan')):.1f} ms; {shares}"
        )
        for item in workload["advice"]:
            lines.append(f"  {item['tier']:<6} {item['saving']:6.1%}  {item['rule_id']}")
    fired: Fired = {
        (w["name"], "inefficient"): {a["rule_id"] for a in w["advice"]} for w in by_name.values()
    }
    applicable = {rule for pair in pairs for defect in pair.defects for rule in defect.rules}
    everything = applicable | {rule for rules in fired.values() for rule in rules}
    lines += table_lines(pairs, fired, everything, sides=("inefficient",))
    return lines


def sequential_canary(
    workload: str, slowdown: float, rounds: int, device: str = "cuda"
) -> list[str]:
    """The plain workload against its canary, interleaved and judged round by round (on CUDA;
    ``device`` cpu tries the script here)."""
    from dataclasses import replace

    from perfgate.compare.sequential import SequentialJudge, judge_interleaved
    from perfgate.config import load_config
    from perfgate.run import run_fingerprint
    from perfgate.runner.interleave import Arm, run_interleaved
    from perfgate.runner.plan import Selection, prepare

    config = load_config()
    plan, settings = prepare(config, Selection(workloads=[workload], repeats=rounds))
    environment = run_fingerprint(plan, settings, device)
    arms = [
        Arm(label="base", plan=plan, settings=settings),
        Arm(label="head", plan=plan, settings=replace(settings, inject_slowdown=slowdown)),
    ]
    judge = SequentialJudge(config.thresholds, 1, rounds)
    lines: list[str] = []

    class Progress:
        def round_finished(
            self, name: str, index: int, total: int, reading: str | None = None
        ) -> None:
            lines.append(f"  {reading}")

    started = time.monotonic()
    base, head = run_interleaved(
        arms, device, environment, rounds=rounds, observer=Progress(), judge=judge
    )
    wall = time.monotonic() - started
    runs = [
        RunResult(
            run_id=label, perfgate_version="check", started_at="", finished_at="", suite=None,
            device=device, settings=arm.settings, source=SourceInfo(), environment=environment,
            workloads=workloads,
        )
        for label, arm, workloads in zip(("base", "head"), arms, (base, head), strict=True)
    ]  # fmt: skip
    verdict = judge_interleaved(runs[0], runs[1], config.thresholds, rounds)
    step = next(c for c in verdict.workloads[0].comparisons if c.metric == "step_time_s")
    lines.append(
        f"sequential A/B, {workload} +{slowdown:.0%} canary on {device}: {step.verdict} after "
        f"{step.head_repeats} of at most {rounds} rounds, ratio {step.ratio:.3f} "
        f"({step.ci_low:.3f}–{step.ci_high:.3f}), {wall:.0f} s"
    )
    for repeat in base[0].repeats + head[0].repeats:
        phases = repeat.phases
        marks = [m for m in ("imports_done", "cuda_ready", "setup_done", "measure_start")
                 if m in phases]  # fmt: skip
        spawned = phases.get("spawned", phases.get("start", 0.0))
        shown = ", ".join(f"{m} +{phases[m] - spawned:.2f} s" for m in marks)
        lines.append(f"  repeat {repeat.index}: wall {repeat.wall_s:.2f} s; {shown}")
    if step.verdict != "regression":
        lines.append(f"FAIL the +{slowdown:.0%} canary was not called a regression")
    return lines


def attribution_check(workload: str, knob: str, device: str = "cuda") -> list[str]:
    """Attribution on ``device``: ``workload`` as it is (base) against it with ``knob`` (head),
    profiled in alternated windows by the profiling worker compare uses, diffed per operator
    and kernel (``perfgate.trace.attribution``)."""
    import tempfile

    from perfgate.advise.evidence import DEFAULT_PROFILE_STEPS, profile_workloads
    from perfgate.config import load_config
    from perfgate.report.formatting import mover_cells
    from perfgate.runner.plan import Selection
    from perfgate.trace.attribution import attribute
    from perfgate.trace.loader import load_trace
    from perfgate.trace.timeline import Timeline, build_timeline

    config = load_config()
    selections = (Selection(workloads=[workload]), Selection(workloads=[workload], knobs=[knob]))
    sides: tuple[list[Timeline], list[Timeline]] = ([], [])
    lines: list[str] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpu-check-attribution-") as scratch:
        for window in range(2):
            for index, selection in enumerate(selections):
                (profiled,) = profile_workloads(
                    config, selection, device=device, steps=DEFAULT_PROFILE_STEPS,
                    trace_dir=Path(scratch) / f"{index}-{window}",
                )  # fmt: skip
                if profiled.status != "ok" or profiled.trace_path is None:
                    return [f"FAIL profiling window {window} side {index}: {profiled.error}"]
                sides[index].append(build_timeline(load_trace(profiled.trace_path)))
    attribution = attribute(*sides)
    lines.append(
        f"attribution on {device}, {workload} against {workload} --knob {knob}: profiled step "
        f"{attribution.base_step_ms:.2f} ms → {attribution.head_step_ms:.2f} ms, "
        f"{len(attribution.movers)} movers, {time.monotonic() - started:.0f} s"
    )
    lines.extend(f"  {m.side}: {' · '.join(mover_cells(m))}" for m in attribution.movers)
    if not attribution.movers:
        lines.append("FAIL nothing moved although the knob changes the step")
    if device == "cuda" and not any(m.side == "kernel" for m in attribution.movers):
        lines.append("FAIL no GPU kernel among the movers on CUDA")
    return lines


MONITORED_SCRIPT = """
import sys, time
import torch
import perfgate
width = 4096
model = torch.nn.Sequential(
    torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.Linear(width, width)
).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
session = perfgate.Session(model=model, optimizer=optimizer, samples_per_step=256)
x = torch.randn(256, width, device="cuda")
deadline = time.monotonic() + float(sys.argv[1])
while time.monotonic() < deadline:
    with session.step():
        loss = model(x).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
"""


def monitor_check(seconds: float = 25.0, port: int = 9479) -> list[str]:
    """``perfgate monitor`` beside a CUDA training script: /metrics must carry the step
    series and NVML's GPU series while it trains."""
    import subprocess
    import tempfile
    import urllib.request

    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gpu-check-monitor-") as scratch:
        script = Path(scratch) / "train.py"
        script.write_text(MONITORED_SCRIPT)
        job = subprocess.Popen(
            [sys.executable, "-m", "perfgate", "monitor", "--port", str(port), "--interval",
             "0.5", "--window", "5", "--", sys.executable, str(script), str(seconds)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        time.sleep(seconds * 0.7)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as page:
                text = page.read().decode()
        except OSError as error:
            text = ""
            lines.append(f"FAIL /metrics unreachable: {error}")
        output, _ = job.communicate(timeout=seconds + 60)
    values = {
        line.split(" ")[0]: line.split(" ")[1]
        for line in text.splitlines()
        if line.startswith("perfgate_live_") and " " in line
    }
    lines.append("monitor on cuda: " + ", ".join(f"{k}={v}" for k, v in sorted(values.items())))
    for name in ("perfgate_live_steps_total", "perfgate_live_step_time_seconds",
                 "perfgate_live_gpu_utilization_ratio", "perfgate_live_gpu_power_watts",
                 "perfgate_live_gpu_sm_clock_hertz"):  # fmt: skip
        if name not in values:
            lines.append(f"FAIL {name} missing from /metrics")
    if job.returncode != 0:
        lines.append(f"FAIL the monitored job ended {job.returncode}: {output[-500:]}")
    return lines


def _largest_first(item: tuple[str, float]) -> float:
    return -item[1]


def main(paths: list[str]) -> int:
    if paths[:1] == ["--knobs"]:
        print(" ".join(variant_knobs(paths[1:])))
        return 0
    if paths[:1] == ["--sequential"]:
        lines = sequential_canary(paths[1], float(paths[2]), int(paths[3]), *paths[4:5])
        print("\n".join(lines))
        return 1 if any(line.startswith("FAIL") for line in lines) else 0
    if paths[:1] == ["--monitor"]:
        lines = monitor_check()
        print("\n".join(lines))
        return 1 if any(line.startswith("FAIL") for line in lines) else 0
    if paths[:1] == ["--attribution"]:
        lines = attribution_check(paths[1], paths[2], *paths[3:4])
        print("\n".join(lines))
        return 1 if any(line.startswith("FAIL") for line in lines) else 0
    if paths[:1] == ["--advice"]:
        document = json.loads(Path(paths[1]).read_text())
        lines = check_advice(document)
        print("\n".join(lines))
        return 1 if any(line.startswith("FAIL") for line in lines) else 0

    failures = 0
    for path in paths:
        result = load_result(Path(path))
        print(f"{path}: {(result.environment.get('gpu') or {}).get('model')}")
        for workload in result.workloads:
            print("  " + describe(workload))
            problems = check_workload(result, workload)
            if workload.status == "ok" and workload.work is None:
                problems.append("no work counters in the result (perfgate counts them since 1.6)")
            for problem in problems:
                failures += 1
                print(f"  FAIL {workload.name}: {problem}")
    print("gpu_check:", "all GPU paths delivered" if failures == 0 else f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
