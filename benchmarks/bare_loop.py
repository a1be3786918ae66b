"""A bare, hand-written training loop: the reference for perfgate's runner overhead.

Builds the same workload through the same factory (same model, data and step function), then
times N steps with one perf_counter pair around the whole loop — no per-step marks, no loss
collection, no telemetry. Prints one JSON line: the mean step time.

    python benchmarks/bare_loop.py WORKLOAD PRESET THREADS WARMUP STEPS
"""

from __future__ import annotations

import json
import sys
import time

import torch

from perfgate.config import load_config
from perfgate.runner.plan import Selection, make_plan
from perfgate.workloads.protocol import WorkloadContext
from perfgate.workloads.setup import load_factory


def main(workload: str, preset: str, threads: int, warmup: int, steps: int) -> None:
    torch.set_num_threads(threads)
    (planned,), _ = make_plan(load_config(), Selection(workloads=[f"{workload}@{preset}"]))
    torch.manual_seed(0)
    context = WorkloadContext(
        device="cpu", preset=preset, params=planned.params, knobs=planned.knobs, seed=0
    )
    setup = load_factory(planned.definition.factory)(context)
    batches = iter(setup.batches)
    for _ in range(warmup):
        setup.step(next(batches))
    started = time.perf_counter()
    for _ in range(steps):
        setup.step(next(batches))
    elapsed = time.perf_counter() - started
    print(json.dumps({"mean_step_s": elapsed / steps}))


if __name__ == "__main__":
    name, preset_name, *numbers = sys.argv[1:]
    main(name, preset_name, *(int(n) for n in numbers))
