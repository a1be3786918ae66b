"""What ``perfgate monitor`` costs the training step it watches (issue 21's done-when).

    python benchmarks/monitor_overhead.py [--cycles 8] [--window 6] [--interval 0.5]

The monitor costs a step two things, measured apart:

1. **the step feed**, written by the training process itself at every step
   (``perfgate.workloads.step_feed``): timed directly, a million begin/end pairs, as a share of
   the step;
2. **the sampler**, a separate process reading the job's process tree (psutil) and the feed a
   few times a second, which competes for the CPU: one training process (an MLP step of a few
   milliseconds, every step's time logged inside it) runs throughout while
   ``perfgate monitor --pid`` is attached and detached in turn, ``--window`` seconds each,
   ``--cycles`` times, so both states see the same process and the same drift. The first
   2 s of each attached window (the monitor's own start-up, a one-off) are left out. The
   overhead is the median over cycles of (attached median step / detached median step) with a
   seeded bootstrap 90 % interval.

Prints a markdown table (benchmarks/monitor_overhead.md keeps one).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from perfgate.workloads.step_feed import ENVIRONMENT, FeedWriter

SCRIPT = """
import json, sys, time
import torch
import perfgate
torch.set_num_threads(1)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512))
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
session = perfgate.Session(model=model, optimizer=optimizer, samples_per_step=128)
x = torch.randn(128, 512)
deadline = time.time() + float(sys.argv[1])
with open(sys.argv[2], "w") as log:
    print("ready", flush=True)
    while time.time() < deadline:
        started = time.perf_counter()
        with session.step():
            loss = model(x).square().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        log.write(f"{time.time()} {time.perf_counter() - started}\\n")
"""
STARTUP_S = 2.0


def feed_cost_s(pairs: int = 1_000_000) -> float:
    """Seconds one step's feed write costs (begin + end)."""
    with tempfile.TemporaryDirectory() as scratch:
        writer = FeedWriter(Path(scratch) / "feed")
        started = time.perf_counter()
        for _ in range(pairs):
            writer.begin()
            writer.end()
        return (time.perf_counter() - started) / pairs


def bootstrap(ratios: list[float], seed: int = 7, draws: int = 4000) -> tuple[float, float]:
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choice(ratios) for _ in ratios) for _ in range(draws))
    return medians[int(0.05 * draws)], medians[int(0.95 * draws)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=8)
    parser.add_argument("--window", type=float, default=6.0)
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--port", type=int, default=9469)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        (folder / "train.py").write_text(SCRIPT)
        feed, log = folder / "steps.feed", folder / "steps.log"
        seconds = 2 * args.cycles * args.window + 10
        job = subprocess.Popen(
            [sys.executable, str(folder / "train.py"), str(seconds), str(log)],
            stdout=subprocess.PIPE, text=True, env={**_env(), ENVIRONMENT: str(feed)},
        )  # fmt: skip
        assert job.stdout is not None and job.stdout.readline().strip() == "ready"
        time.sleep(3.0)  # past the first steps' warm-up
        windows: list[tuple[bool, float, float]] = []
        sampler_cpu: list[float] = []
        for _ in range(args.cycles):
            monitor = subprocess.Popen(
                [sys.executable, "-m", "perfgate", "monitor", "--pid", str(job.pid), "--feed",
                 str(feed), "--port", str(args.port), "--interval", str(args.interval),
                 "--no-gpu"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            began = time.time()
            time.sleep(STARTUP_S)
            watched = psutil.Process(monitor.pid)
            cpu_before = sum(watched.cpu_times()[:2])
            time.sleep(args.window - STARTUP_S)
            sampler_cpu.append(
                (sum(watched.cpu_times()[:2]) - cpu_before) / (args.window - STARTUP_S)
            )
            windows.append((True, began + STARTUP_S, time.time()))
            monitor.terminate()
            monitor.wait()
            began = time.time()
            time.sleep(args.window)
            windows.append((False, began, time.time()))
        job.wait()
        steps = [tuple(map(float, line.split())) for line in log.read_text().splitlines()]

    def median_in(start: float, end: float) -> float:
        return statistics.median(dt for t, dt in steps if start <= t < end)

    attached = [median_in(s, e) for on, s, e in windows if on]
    detached = [median_in(s, e) for on, s, e in windows if not on]
    ratios = [a / d for a, d in zip(attached, detached, strict=True)]
    low, high = bootstrap(ratios)
    step = statistics.median(detached)
    write_s = feed_cost_s()
    print("| cost | per step | share of the step | 90 % interval |")
    print("|---|---:|---:|---|")
    print(
        f"| step feed (in the training process) | {write_s * 1e6:.2f} µs | "
        f"{write_s / step:.3%} | — |"
    )
    print(
        f"| sampler attached, every {args.interval:g} s ({args.cycles} cycles of "
        f"{args.window:g} s) | {(statistics.median(ratios) - 1) * step * 1e6:+.1f} µs | "
        f"{statistics.median(ratios) - 1:+.2%} | {low - 1:+.2%} … {high - 1:+.2%} |"
    )
    print(
        f"\ndetached median step {step * 1e3:.3f} ms; the attached sampler used "
        f"{statistics.median(sampler_cpu):.2%} of one core (median over the windows)"
    )
    return 0


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != ENVIRONMENT}


if __name__ == "__main__":
    sys.exit(main())
