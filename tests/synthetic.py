"""Synthetic result documents for tests of the statistics and the gate: one workload, repeats
whose steps scatter around a level with seeded noise, and whatever the test varies."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np

from perfgate.documents.result import (
    RepeatConditions,
    RepeatResult,
    RunResult,
    RunSettings,
    SourceInfo,
    WorkloadResult,
    WorkloadStatus,
    WorkloadSummary,
)

ENVIRONMENT = {"device": "cpu", "torch": {"version": "2.13.0"}, "cpu": {"model": "x"}}


def synthetic_run(
    level: float,
    seed: int,
    *,
    loss: float = 2.0,
    env: dict[str, Any] | None = None,
    status: WorkloadStatus = "ok",
    repeats: int = 6,
    steps: int = 6,
    noise: float = 0.01,
    conditions: RepeatConditions | None = None,
    canary: float | None = None,
) -> RunResult:
    """A run of one ``mlp`` workload whose repeats step at ``level`` seconds (relative step
    noise ``noise``), each repeat with the given measurement ``conditions``."""
    rng = np.random.default_rng(seed)
    workload = WorkloadResult(
        name="mlp",
        version=1,
        kind="builtin",
        factory="perfgate.workloads.mlp:build",
        preset="smoke",
        definition_hash="a" * 64,
        knobs={},
        params={},
        device="cpu",
        status=status,
        error=None if status == "ok" else "boom",
        samples_per_step=64,
        repeats=[
            RepeatResult(
                index=i,
                status="ok",
                timer="perf_counter",
                step_times_s=[float(v) for v in level * (1 + noise * rng.standard_normal(steps))],
                losses=[loss],
                peak_memory={"rss_bytes": 300_000_000},
                conditions=conditions,
            )
            for i in range(repeats)
        ],
        summary=WorkloadSummary(
            ok_repeats=repeats, median_step_s=level, final_loss=loss, mfu_reason="CPU"
        ),
    )
    return RunResult(
        run_id=str(uuid.UUID(int=seed + 1)),
        perfgate_version="0.1.0",
        started_at="2026-11-29T18:00:00+00:00",
        finished_at="2026-11-29T18:01:00+00:00",
        suite="smoke",
        device="cpu",
        settings=RunSettings(
            repeats=repeats,
            steps=steps,
            warmup=1,
            timeout_s=60,
            threads=2,
            seed=0,
            inject_slowdown=canary,
        ),
        source=SourceInfo(),
        environment=env or ENVIRONMENT,
        workloads=[workload],
    )
