"""The interleaving schedule: ABBA order, a failed repeat stopping every arm, the time budget.

The schedule is what cancels drift, so its order is tested exactly. Worker processes are
replaced by a recorder here (the real processes are exercised end to end in
test_compare_ab.py); everything else — plans, settings, result assembly — is real.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import factories
import pytest

from perfgate.config import load_config
from perfgate.documents.result import RepeatResult, RunSettings
from perfgate.documents.worker import Measurement
from perfgate.errors import UsageError
from perfgate.runner import interleave
from perfgate.runner.interleave import Arm, run_interleaved
from perfgate.runner.plan import PlannedWorkload, Selection, make_plan


class Recorder:
    """Stands in for the worker process: records the order, fails or stalls on request."""

    def __init__(self, fail_at: tuple[str, int] | None = None, clock: list[float] | None = None):
        self.calls: list[tuple[str, str, int]] = []
        self.fail_at = fail_at
        self.clock = clock

    def __call__(
        self,
        planned: PlannedWorkload,
        settings: RunSettings,
        device: str,
        gpu: dict[str, Any],
        scratch: Path,
        index: int,
        tag: str = "",
        launcher: object = None,
    ) -> tuple[RepeatResult, Measurement | None]:
        arm = tag.rstrip("-")
        self.calls.append((arm, planned.definition.name, index))
        if self.clock is not None:
            self.clock[0] += 10.0
        if self.fail_at == (arm, index):
            return RepeatResult(index=index, status="crashed", error="boom"), None
        slow = 1.25 if settings.inject_slowdown else 1.0
        repeat = RepeatResult(
            index=index, status="ok", step_times_s=[0.01 * slow] * 4, losses=[1.0]
        )
        return repeat, factories.measurement(samples_per_step=8)


def arms(tmp_path: Path, *workloads: str) -> list[Arm]:
    plan, settings = make_plan(
        load_config(cwd=tmp_path), Selection(workloads=list(workloads), repeats=4)
    )
    return [
        Arm(label="base", plan=plan, settings=settings),
        Arm(label="head", plan=plan, settings=replace(settings, inject_slowdown=0.25)),
    ]


def test_rounds_alternate_which_arm_goes_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder()
    monkeypatch.setattr(interleave, "run_repeat", recorder)
    base, head = run_interleaved(arms(tmp_path, "mlp", "gpt"), "cpu", {}, rounds=4)
    mlp_order = [arm for arm, name, _ in recorder.calls if name == "mlp"]
    assert mlp_order == ["base", "head", "head", "base", "base", "head", "head", "base"]
    assert [name for _, name, _ in recorder.calls] == ["mlp"] * 8 + ["gpt"] * 8
    assert [w.name for w in base] == [w.name for w in head] == ["mlp", "gpt"]
    assert all(len(w.repeats) == 4 and w.status == "ok" for w in base + head)
    assert head[0].summary is not None and base[0].summary is not None
    assert head[0].summary.median_step_s == pytest.approx(1.25 * base[0].summary.median_step_s)  # type: ignore[operator]


def test_a_failed_repeat_stops_the_workload_for_every_arm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder(fail_at=("head", 1))
    monkeypatch.setattr(interleave, "run_repeat", recorder)
    base, head = run_interleaved(arms(tmp_path, "mlp"), "cpu", {}, rounds=6)
    assert recorder.calls[-1] == ("head", "mlp", 1)
    assert head[0].status == "crashed" and "boom" in (head[0].error or "")
    assert base[0].status == "ok" and len(base[0].repeats) == 1  # round 1 was base-second


def test_the_budget_stops_early_but_never_below_the_minimum(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [0.0]
    monkeypatch.setattr(interleave, "run_repeat", Recorder(clock=clock))
    monkeypatch.setattr(interleave.time, "monotonic", lambda: clock[0])
    # Each repeat "takes" 10 s, a round 20 s: 90 s fits 4 rounds, not a fifth.
    base, _ = run_interleaved(arms(tmp_path, "mlp"), "cpu", {}, rounds=10, budget_s=90)
    assert len(base[0].repeats) == 4
    clock[0] = 0.0
    tight, _ = run_interleaved(arms(tmp_path, "mlp"), "cpu", {}, rounds=10, budget_s=1)
    assert len(tight[0].repeats) == interleave.MIN_ROUNDS


def test_arms_must_be_comparable(tmp_path: Path) -> None:
    base, head = arms(tmp_path, "mlp")
    with pytest.raises(UsageError, match="can never show a significant change"):
        run_interleaved([base, head], "cpu", {}, rounds=3)
    with pytest.raises(UsageError, match="different steps"):
        run_interleaved(
            [base, replace(head, settings=replace(head.settings, steps=99))], "cpu", {}, rounds=4
        )
    other, _ = arms(tmp_path, "gpt")
    with pytest.raises(UsageError, match="select different workloads"):
        run_interleaved([base, replace(other, label="head")], "cpu", {}, rounds=4)
