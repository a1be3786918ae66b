"""perfgate's own overhead: a bare training loop against the same loop under perfgate's runner.

Side by side in one run, interleaved (bare, perfgate, perfgate, bare, …) so machine drift cancels:

1. End to end: each pair runs the same workload once as ``benchmarks/bare_loop.py`` (one clock
   read around the whole loop) and once through ``perfgate.runner.process.run_worker`` (per-step
   timer marks, loss collection, DataLoader-wait timing, and the parent-side telemetry sampler at
   4 Hz). The ratio of mean step times per pair, its median and a seeded bootstrap 95 % interval
   are printed. Between-process noise on a shared CPU is 5–20 %, so this interval is wide; the
   next two figures isolate the costs directly.
2. In-process instrumentation cost per step (timer mark, batch-wait clock, loss detach/append),
   measured on a no-op step and expressed as a share of the workload's step time.
3. The telemetry sampler's own CPU use per wall second, as a share of the machine's cores (it runs
   in the parent and competes with the timed process only for CPU).
4. In one process, alternating blocks: the bare loop against perfgate's measuring loop while a
   separate sampler process samples it (as the runner's parent does). Alternating blocks in one
   process cancel the between-process noise that blurs figure 1, so this is the tightest
   end-to-end estimate this machine allows. (A sampler *thread inside* the timed process would
   cost about 3 % here through the GIL: that is why the runner samples from the parent.)

Target: overhead under 1 %.  Usage: ``python benchmarks/runner_overhead.py [--pairs 8]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
from scipy import stats

from perfgate.config import load_config
from perfgate.documents.result import RunSettings
from perfgate.documents.worker import WorkerSpec
from perfgate.runner.orchestrator import SAMPLE_INTERVAL_S, worker_spec
from perfgate.runner.plan import Selection, make_plan
from perfgate.runner.process import run_worker
from perfgate.runner.timing import PerfCounterTimer
from perfgate.telemetry.host import default_thread_count
from perfgate.telemetry.sampler import TelemetrySampler
from perfgate.workloads.setup import BatchSource

HERE = Path(__file__).resolve().parent


def bare_mean_step(workload: str, preset: str, threads: int, warmup: int, steps: int) -> float:
    """Mean step time of the hand-written loop, in a fresh process."""
    completed = subprocess.run(
        [
            sys.executable,
            str(HERE / "bare_loop.py"),
            workload,
            preset,
            str(threads),
            str(warmup),
            str(steps),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(json.loads(completed.stdout.strip().splitlines()[-1])["mean_step_s"])


def perfgate_mean_step(spec: WorkerSpec, scratch: Path, label: str) -> float:
    """Mean step time of the same loop under perfgate's worker, telemetry sampler on."""
    outcome = run_worker(spec, scratch, label, 600, None, SAMPLE_INTERVAL_S)
    if outcome.measurement is None:
        raise SystemExit(f"perfgate worker failed: {outcome.error}")
    return statistics.fmean(outcome.measurement.step_times_s)


def instrumentation_cost(iterations: int = 20000) -> float:
    """Seconds per step of everything the worker adds around a step, on a no-op step."""
    import itertools

    import torch

    loss = torch.zeros(())
    source = BatchSource(itertools.repeat(None), "bench")
    timer = PerfCounterTimer()
    losses, waits = [], []

    started = time.perf_counter()
    timer.mark()
    for _ in range(iterations):
        _, wait = source.next()
        losses.append(loss.detach())
        waits.append(wait)
        timer.mark()
    timer.durations()
    torch.stack(losses).tolist()
    instrumented = time.perf_counter() - started

    batches = itertools.repeat(None)
    started = time.perf_counter()
    for _ in range(iterations):
        next(batches)
    bare = time.perf_counter() - started
    return (instrumented - bare) / iterations


def sampler_cpu_share(seconds: float = 5.0) -> float:
    """CPU seconds the sampler thread burns per wall second, as a share of all cores."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    me = psutil.Process()
    try:
        before = me.cpu_times()
        started = time.perf_counter()
        with TelemetrySampler(sleeper.pid, None, SAMPLE_INTERVAL_S):
            time.sleep(seconds)
        wall = time.perf_counter() - started
        after = me.cpu_times()
    finally:
        sleeper.kill()
        sleeper.wait()
    used = (after.user - before.user) + (after.system - before.system)
    return used / wall / (psutil.cpu_count() or 1)


SAMPLER_PROCESS = """
import sys
from perfgate.telemetry.sampler import TelemetrySampler
sampler = None
for line in sys.stdin:
    if line.strip() == "start":
        sampler = TelemetrySampler(int(sys.argv[1]), None, float(sys.argv[2]))
        sampler.start()
    elif sampler is not None:
        sampler.stop()
    print("ok", flush=True)
"""


def in_process_ab(
    workload: str, preset: str, blocks: int, block_steps: int, interval_s: float
) -> list[float]:
    """Paired ratios (perfgate loop / bare loop) of mean step time over alternating blocks."""
    import os

    import torch

    from perfgate.runner.worker import measure_steps
    from perfgate.workloads.protocol import WorkloadContext
    from perfgate.workloads.setup import load_factory

    torch.set_num_threads(default_thread_count())
    (planned,), _ = make_plan(load_config(), Selection(workloads=[f"{workload}@{preset}"]))
    context = WorkloadContext(
        device="cpu", preset=preset, params=planned.params, knobs=planned.knobs, seed=0
    )
    setup = load_factory(planned.definition.factory)(context)
    source = BatchSource(setup.batches, workload)
    batches = iter(setup.batches)
    for _ in range(10):
        setup.step(next(batches))

    def bare() -> float:
        started = time.perf_counter()
        for _ in range(block_steps):
            setup.step(next(batches))
        return (time.perf_counter() - started) / block_steps

    sampler = subprocess.Popen(
        [sys.executable, "-c", SAMPLER_PROCESS, str(os.getpid()), str(interval_s)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert sampler.stdin is not None and sampler.stdout is not None

    def command(word: str) -> None:
        sampler.stdin.write(word + "\n")  # type: ignore[union-attr]
        sampler.stdin.flush()  # type: ignore[union-attr]
        sampler.stdout.readline()  # type: ignore[union-attr]

    def instrumented() -> float:
        command("start")
        measured = measure_steps(setup, source, "cpu", 0, block_steps, {})
        command("stop")
        return statistics.fmean(measured.step_times_s)

    ratios = []
    for block in range(blocks):
        if block % 2 == 0:
            reference, candidate = bare(), instrumented()
        else:
            candidate, reference = instrumented(), bare()
        ratios.append(candidate / reference)
    sampler.stdin.close()
    sampler.wait()
    return ratios


def median_ci(ratios: list[float], seed: int = 0) -> tuple[float, float]:
    """Seeded percentile-bootstrap 95 % interval of the median ratio."""
    result = stats.bootstrap(
        (np.asarray(ratios),),
        np.median,
        n_resamples=2000,
        confidence_level=0.95,
        method="percentile",
        random_state=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mlp")
    parser.add_argument("--preset", default="smoke")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--interval", type=float, default=SAMPLE_INTERVAL_S)
    args = parser.parse_args()

    threads = default_thread_count()
    (planned,), _ = make_plan(
        load_config(), Selection(workloads=[f"{args.workload}@{args.preset}"])
    )
    settings = RunSettings(
        repeats=1, steps=args.steps, warmup=args.warmup, timeout_s=600, threads=threads, seed=0
    )
    spec = worker_spec(planned, settings, "cpu", count_flops=False)
    ratios, bare_steps = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for pair in range(args.pairs):
            order = ("bare", "perfgate") if pair % 2 == 0 else ("perfgate", "bare")
            measured = {}
            for side in order:
                measured[side] = (
                    bare_mean_step(args.workload, args.preset, threads, args.warmup, args.steps)
                    if side == "bare"
                    else perfgate_mean_step(spec, Path(scratch), f"pair{pair}")
                )
            ratio = measured["perfgate"] / measured["bare"]
            bare_steps.append(measured["bare"])
            ratios.append(ratio)
            print(
                f"pair {pair}: bare {measured['bare'] * 1e3:8.2f} ms  "
                f"perfgate {measured['perfgate'] * 1e3:8.2f} ms  ratio {ratio:.4f}"
            )

    low, high = median_ci(ratios)
    per_step = instrumentation_cost()
    sampler = sampler_cpu_share()
    print()
    print(
        f"workload {args.workload}@{args.preset}, {args.steps} steps, {threads} threads, "
        f"{args.pairs} interleaved pairs"
    )
    print(
        f"end to end: median perfgate/bare ratio {statistics.median(ratios):.4f} "
        f"(95% CI {low:.4f}–{high:.4f}); overhead {statistics.median(ratios) - 1:+.2%}"
    )
    step = statistics.median(bare_steps)
    print(
        f"in-process instrumentation: {per_step * 1e6:.2f} µs per step = "
        f"{per_step / step:.4%} of the {step * 1e3:.2f} ms step"
    )
    print(f"telemetry sampler: {sampler:.3%} of the machine's CPU while running")
    blocks = in_process_ab(args.workload, args.preset, args.blocks, args.steps, args.interval)
    low, high = median_ci(blocks)
    print(
        f"in one process, {args.blocks} alternating blocks of {args.steps} steps: median ratio "
        f"{statistics.median(blocks):.4f} (95% CI {low:.4f}–{high:.4f}); "
        f"overhead {statistics.median(blocks) - 1:+.2%}"
    )


if __name__ == "__main__":
    main()
