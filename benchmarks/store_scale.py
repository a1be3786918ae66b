"""The store at scale: 20,000 runs × 4 workloads on SQLite (or any URL).

Measures, in one run: ingest rate (runs/s through ``store_runs``), ``baseline refresh`` time over
the branch's newest runs, and the time to fetch one live baseline by key (target < 100 ms on
SQLite). Documents are synthetic (small repeats, realistic noise with one step change per
workload) so that the database, not the generator, is what is measured.

    python benchmarks/store_scale.py [--runs 20000] [--url sqlite:///tmp/scale.db]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
from sqlmodel import Session

from perfgate.baseline.refresh import refresh_baselines
from perfgate.documents.result import (
    RepeatResult,
    RunResult,
    RunSettings,
    SourceInfo,
    WorkloadResult,
    WorkloadSummary,
)
from perfgate.store.engine import make_engine
from perfgate.store.history import list_baselines, live_baseline
from perfgate.store.ingest import store_runs

WORKLOADS = {"gpt": 0.014, "resnet": 0.013, "mlp": 0.0015, "datapipe": 0.058}
START = datetime(2024, 1, 1, tzinfo=timezone.utc)


def synthetic_run(index: int, rng: np.random.Generator, total: int) -> RunResult:
    """One nightly run; every workload gets 10 % slower 200 runs before the end of the history
    (inside the window refresh reads, so the benchmark includes finding the step)."""
    workloads = []
    for name, base in WORKLOADS.items():
        level = base * (1.10 if index >= total - 200 else 1.0)
        repeats = [
            RepeatResult(
                index=r,
                status="ok",
                timer="perf_counter",
                step_times_s=[float(v) for v in level * (1 + 0.03 * rng.standard_normal(8))],
                losses=[2.0],
                peak_memory={"rss_bytes": 300_000_000},
            )
            for r in range(3)
        ]
        workloads.append(
            WorkloadResult(
                name=name,
                version=1,
                kind="builtin",
                factory=f"perfgate.workloads.{name}:build",
                preset="smoke",
                definition_hash=name[0] * 64,
                knobs={},
                params={},
                device="cpu",
                status="ok",
                samples_per_step=8,
                repeats=repeats,
                summary=WorkloadSummary(ok_repeats=3, median_step_s=level, mfu_reason="CPU"),
            )
        )
    started = (START + timedelta(hours=index)).isoformat(timespec="seconds")
    return RunResult(
        run_id=str(uuid.UUID(int=index + 1)),
        perfgate_version="0.1.0",
        started_at=started,
        finished_at=started,
        suite="smoke",
        device="cpu",
        settings=RunSettings(repeats=3, steps=8, warmup=1, timeout_s=60, threads=2, seed=0),
        source=SourceInfo(commit=f"{index:040x}", branch="main", trigger="nightly"),
        environment={"device": "cpu", "cpu": {"model": "bench"}},
        workloads=workloads,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--url", default=None, help="database URL (default: a temp SQLite file)")
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="perfgate-scale-"))
    url = args.url or f"sqlite:///{scratch / 'scale.db'}"
    rng = np.random.default_rng(0)

    ingest_s = 0.0
    for first in range(0, args.runs, args.batch):
        batch = [
            (synthetic_run(i, rng, args.runs), None)
            for i in range(first, min(args.runs, first + args.batch))
        ]
        started = time.perf_counter()
        store_runs(url, batch, scratch)
        ingest_s += time.perf_counter() - started
    print(
        f"ingest: {args.runs} runs × {len(WORKLOADS)} workloads in {ingest_s:.1f} s "
        f"= {args.runs / ingest_s:.0f} runs/s"
    )

    engine = make_engine(url, scratch)
    started = time.perf_counter()
    outcomes = refresh_baselines(engine, "main").keys
    refresh_s = time.perf_counter() - started
    actions = ", ".join(
        f"{o.workload}: {o.action} ({len(o.change_points)} change points)" for o in outcomes
    )
    print(f"baseline refresh: {refresh_s:.2f} s over the newest 500 runs — {actions}")

    with Session(engine) as session:
        keys = [b.key for b in list_baselines(session, branch="main")]
    timings = []
    for key in keys * 25:
        started = time.perf_counter()
        with Session(engine) as session:
            baseline = live_baseline(session, key)
            assert baseline is not None and baseline.metrics
        timings.append(time.perf_counter() - started)
    print(
        f"fetch one baseline: median {statistics.median(timings) * 1e3:.2f} ms, "
        f"max {max(timings) * 1e3:.2f} ms over {len(timings)} fetches"
    )


if __name__ == "__main__":
    main()
