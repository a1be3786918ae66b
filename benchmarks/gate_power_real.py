"""Part (b) of ``gate_power.py``: real repeats of a workload on this machine, plain and canary.

The arms — plain, and the canary at each injected slowdown (``--inject-slowdown``, real busy
work added to every measured step) — are measured by perfgate's own interleaved runner
(``run_interleaved``): every repeat a fresh process, the arms alternating within each round with
the starting arm rotated, so machine drift lands on all arms alike. Each repeat's value is taken
by ``perfgate.metrics.metric_values``, exactly what ``perfgate compare`` would judge.

Measuring takes minutes, so the pools are cached as JSON and the analysis can be re-run on them.
The machine is shared: the load average is recorded after every round, because neighbours'
jobs are part of what the gate has to survive here and the reader must know how busy it was.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gate_power_samples import RealPools, RealRepeat

PLAIN = "plain"


def canary_label(slowdown: float) -> str:
    """Arm label of the canary injecting ``slowdown`` (0.05 → ``canary-5%``)."""
    return f"canary-{slowdown * 100:g}%"


class _LoadRecorder:
    """Interleave observer: the 1-minute load average and the time after every round."""

    def __init__(self) -> None:
        self.rounds: list[dict[str, float]] = []
        self.started = time.monotonic()

    def round_finished(
        self, workload: str, round_index: int, rounds: int, reading: str | None = None
    ) -> None:
        self.rounds.append(
            {
                "round": round_index,
                "elapsed_s": round(time.monotonic() - self.started, 1),
                "load_1min": os.getloadavg()[0],
            }
        )
        print(
            f"  {workload}: round {round_index + 1}/{rounds} "
            f"({self.rounds[-1]['elapsed_s']:.0f} s, load {self.rounds[-1]['load_1min']:.2f})",
            flush=True,
        )


def measure_pools(
    workload: str, slowdowns: Sequence[float], rounds: int, threads: int | None, seed: int
) -> RealPools:
    """Interleave plain and canary arms of ``workload`` for ``rounds`` rounds on the CPU."""
    from perfgate.config import load_config
    from perfgate.metrics import metric_values
    from perfgate.runner.interleave import Arm, run_interleaved
    from perfgate.runner.plan import Selection, prepare
    from perfgate.telemetry.fingerprint import collect_fingerprint

    config = load_config()
    arms = []
    for slowdown in (None, *slowdowns):
        selection = Selection(
            workloads=[workload], threads=threads, seed=seed, inject_slowdown=slowdown
        )
        plan, settings = prepare(config, selection)
        label = PLAIN if slowdown is None else canary_label(slowdown)
        arms.append(Arm(label=label, plan=plan, settings=settings))
    settings = arms[0].settings
    environment = collect_fingerprint("cpu", settings.threads)
    recorder = _LoadRecorder()
    load_before = os.getloadavg()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    results = run_interleaved(arms, "cpu", environment, rounds=rounds, observer=recorder)
    pools: dict[str, list[RealRepeat]] = {}
    for arm, (result,) in zip(arms, results, strict=True):
        ok = [r for r in result.repeats if r.status == "ok"]
        values = metric_values(result).get("step_time_s", [])
        pools[arm.label] = [
            RealRepeat(
                value=value,
                steps=tuple(r.step_times_s),
                steady_start=r.steady_start,
                wall_s=r.wall_s,
                injected_s_per_step=r.injected_s_per_step,
            )
            for value, r in zip(values, ok, strict=True)
        ]
    meta = {
        "workload": workload,
        "device": "cpu",
        "started_at": started,
        "wall_s": round(time.monotonic() - recorder.started, 1),
        "rounds_requested": rounds,
        "settings": asdict(settings) | {"inject_slowdown": None},
        "slowdowns": list(slowdowns),
        "machine": {
            "cpu_count": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "cpu_model": (environment.get("cpu") or {}).get("model"),
        },
        "load_before": list(load_before),
        "load_after": list(os.getloadavg()),
        "load_per_round": recorder.rounds,
    }
    return RealPools(pools, meta)


def save_pools(path: Path, pools: RealPools) -> None:
    """Write the pools as JSON (atomically: a half-written cache would poison a re-run)."""
    document = {
        "meta": pools.meta,
        "arms": {label: [asdict(r) for r in repeats] for label, repeats in pools.arms.items()},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(path.suffix + ".tmp")
    scratch.write_text(json.dumps(document, indent=1) + "\n")
    scratch.replace(path)


def load_pools(path: Path) -> RealPools:
    """Read pools written by :func:`save_pools`."""
    document: dict[str, Any] = json.loads(path.read_text())
    arms = {
        label: [RealRepeat.from_json(r) for r in repeats]
        for label, repeats in document["arms"].items()
    }
    return RealPools(arms, document["meta"])
