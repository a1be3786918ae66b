"""``--verify``: how a measured A/B becomes verified, refuted, inconclusive, unverifiable or failed.

The judging logic is tested on hand-made workload results, with the interleaved runner replaced
by a fake that hands them back (it also checks the arms it was given). The slow tests run the
real ``perfgate advise --verify`` on this CPU: more DataLoader workers on ``datapipe`` must be
faster (verified when the interval clears the ±2 % band) with its speed-up and interval in the
JSON, and torch.compile on ``mlp`` slower (refuted when it clears the band). Both effects are
real but need the machine: two parallel loaders need two idle cores, and a 6-13 % slowdown
needs a quiet one to be told from noise, so on a busy machine either may stay inconclusive —
never the wrong way round. The CPU other processes took meanwhile is printed with the outcome.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil
import pytest

from perfgate.advise import verify
from perfgate.advise.ranking import Advice
from perfgate.advise.verify import VERIFY_THRESHOLD, WorkloadUnderTest, verify_advice
from perfgate.config import Config
from perfgate.documents.result import RepeatResult, WorkloadResult, WorkloadStatus, WorkloadSummary
from perfgate.runner.interleave import Arm
from perfgate.runner.plan import Selection
from perfgate.trace.facts import cpu_cores_available

MLP = WorkloadUnderTest(name="mlp", preset="smoke", knobs={"optimizer": "foreach"})
NOISE = (1.00, 1.012, 0.991, 1.021, 0.995, 0.983)
"""Relative spread of six repeats (±2 %), as on a quiet machine."""


def advice(rule_id: str = "optimizer-not-fused", **knobs: Any) -> Advice:
    return Advice(
        rule_id=rule_id,
        title=rule_id,
        category="test",
        confidence="high",
        saving=0.1,
        tier="high",
        evidence={},
        fix="",
        snippet="",
        references=(),
        verify_knobs=knobs,
    )


def result(
    steps_s: Sequence[float],
    *,
    loss: float = 2.0,
    status: WorkloadStatus = "ok",
    error: str | None = None,
) -> WorkloadResult:
    """One side of an A/B: a repeat per step time (each repeat's steps all equal to it)."""
    repeats = [
        RepeatResult(index=i, status="ok", step_times_s=[step] * 5)
        for i, step in enumerate(steps_s)
    ]
    return WorkloadResult(
        name="mlp",
        version=1,
        kind="builtin",
        factory="perfgate.workloads.mlp:build",
        preset="smoke",
        definition_hash="0" * 64,
        knobs={},
        params={},
        device="cpu",
        status=status,
        error=error,
        repeats=repeats if status == "ok" else [],
        summary=WorkloadSummary(ok_repeats=len(steps_s), final_loss=loss)
        if status == "ok"
        else None,
    )


Fake = Callable[..., list[list[WorkloadResult]]]


def fake_runner(
    before: WorkloadResult, after: WorkloadResult, seen: list[Mapping[str, Any]]
) -> Fake:
    """A stand-in for ``run_interleaved`` that returns the two sides and records the arms."""

    def run(
        arms: Sequence[Arm], device: str, environment: dict[str, Any], *, rounds: int, **_: Any
    ) -> list[list[WorkloadResult]]:
        assert [arm.label for arm in arms] == ["unchanged", "changed"]
        assert device == "cpu" and rounds == 6
        for arm in arms:
            (planned,) = arm.plan
            assert arm.settings.repeats == rounds
            seen.append({"label": arm.label, **planned.knobs})
        return [[before], [after]]

    return run


def judge(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    item: Advice,
    before: WorkloadResult,
    after: WorkloadResult,
) -> tuple[list[Advice], list[verify.Verification], list[Mapping[str, Any]]]:
    seen: list[Mapping[str, Any]] = []
    monkeypatch.setattr(verify, "run_interleaved", fake_runner(before, after, seen))
    ranked, measured = verify_advice(
        Config(root=tmp_path),
        MLP,
        [item],
        Selection(steps=5, warmup=1, threads=1),
        device="cpu",
        environment={},
        rounds=6,
    )
    return ranked, measured, seen


TIGHT = (1.000, 1.002, 0.999, 1.003, 0.998, 1.001)
"""±0.3 %: narrow enough for an interval to fit inside the ±2 % band."""


def scaled(factor: float, base: float = 0.010, noise: Sequence[float] = NOISE) -> list[float]:
    return [base * factor * n for n in noise]


def test_a_clear_gain_is_verified_with_its_interval(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ranked, (proof,), seen = judge(
        monkeypatch, tmp_path, advice(optimizer="fused"), result(scaled(1.0)), result(scaled(0.8))
    )
    assert [s["optimizer"] for s in seen] == ["foreach", "fused"]
    assert proof.outcome == "verified"
    assert proof.speedup == pytest.approx(1.25, rel=0.02)
    assert proof.speedup_ci is not None
    low, high = proof.speedup_ci
    assert 1.02 < low <= proof.speedup <= high  # type: ignore[operator]
    assert proof.rounds == 6
    assert proof.knobs == {"optimizer": "fused"}
    assert proof.loss_parity is True
    assert ranked[0].status == "verified"
    assert "measured on this machine: 1.25× faster" in ranked[0].notes[-1]


def test_a_slowdown_is_refuted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ranked, (proof,), _ = judge(
        monkeypatch, tmp_path, advice(compile=True), result(scaled(1.0)), result(scaled(1.15))
    )
    assert proof.outcome == "refuted"
    assert "slower with the change" in proof.reason
    assert proof.speedup is not None and proof.speedup < 1
    assert ranked[0].status == "refuted"


def test_no_gain_beyond_the_band_is_refuted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _, (proof,), _ = judge(
        monkeypatch,
        tmp_path,
        advice(compile=True),
        result(scaled(1.0, noise=TIGHT)),
        result(scaled(1.003, noise=TIGHT)),
    )
    assert proof.outcome == "refuted"
    assert "no gain beyond ±2%" in proof.reason


def test_an_interval_across_the_band_is_inconclusive_and_stays_unverified(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    before = [0.0100, 0.0110, 0.0095, 0.0105, 0.0102, 0.0098]
    after = [0.0096, 0.0104, 0.0099, 0.0108, 0.0093, 0.0101]
    ranked, (proof,), _ = judge(
        monkeypatch, tmp_path, advice(compile=True), result(before), result(after)
    )
    assert proof.outcome == "inconclusive"
    assert "straddles" in proof.reason
    assert ranked[0].status == "unverified"


def test_a_side_that_did_not_run_fails_the_measurement(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    crashed = result([], status="error", error="RuntimeError: out of memory")
    ranked, (proof,), _ = judge(
        monkeypatch, tmp_path, advice(compile=True), result(scaled(1.0)), crashed
    )
    assert proof.outcome == "failed"
    assert proof.reason == "the changed workload did not run (error: RuntimeError: out of memory)"
    assert proof.speedup is None
    assert ranked[0].status == "unverified"


def test_a_change_of_the_maths_is_reported_beside_the_speed_up(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ranked, (proof,), _ = judge(
        monkeypatch,
        tmp_path,
        advice("bf16-autocast-missing", precision="bf16"),
        result(scaled(1.0), loss=2.0),
        result(scaled(0.5), loss=2.1),
    )
    assert proof.outcome == "verified"
    assert proof.loss_parity is False
    assert "the final loss changed by more than 1 %" in ranked[0].notes[-1]


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        (advice("cudnn-benchmark-off"), "the advice names no knob to change"),
        (advice("manual-attention", attention="sdpa"), "workload mlp has no knob attention"),
        (advice(optimizer="foreach"), "the workload already runs so"),
    ],
)
def test_advice_that_cannot_be_measured_is_unverifiable(
    item: Advice, reason: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("nothing should have been measured")

    monkeypatch.setattr(verify, "run_interleaved", never)
    ranked, (proof,) = verify_advice(
        Config(root=tmp_path), MLP, [item], Selection(), device="cpu", environment={}, rounds=6
    )
    assert (proof.outcome, proof.reason) == ("unverifiable", reason)
    assert ranked[0].status == "unverifiable"


# --- the real command on this CPU -----------------------------------------------------------


def _cpu_busy_s() -> float:
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.fixture(scope="module")
def verified_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], float, str]:
    """``perfgate advise --verify`` on datapipe and mlp (optimizer already fused), once, and the
    cores other processes used meanwhile (system CPU time minus this run's own, over wall time).
    ``--rule`` keeps it to the two pieces of advice under test, so no other one is re-run.
    """
    root = tmp_path_factory.mktemp("verify")
    out = root / "advice.json"
    command = [
        sys.executable, "-m", "perfgate", "advise", "-w", "datapipe", "-w", "mlp",
        "--knob", "mlp.optimizer=fused", "--device", "cpu", "--threads", "1", "--verify",
        "--rounds", "6", "--steps", "8", "--warmup", "2", "--json", str(out),
        "--rule", "dataloader-starvation", "--rule", "compile-elementwise-fusion",
    ]  # fmt: skip
    environment = {**os.environ, "COLUMNS": "200"}
    environment.pop("PERFGATE_DATABASE_URL", None)
    busy, ours, started = _cpu_busy_s(), _children_cpu_s(), time.monotonic()
    completed = subprocess.run(
        command, cwd=root, capture_output=True, text=True, timeout=600, env=environment
    )
    wall = time.monotonic() - started
    others = max(0.0, (_cpu_busy_s() - busy) - (_children_cpu_s() - ours)) / wall
    print(completed.stdout[-6000:])
    assert completed.returncode == 0, completed.stderr[-3000:]
    document = json.loads(out.read_text())
    fired = {a["rule_id"] for w in document["workloads"] for a in w["advice"]}
    assert fired <= {"dataloader-starvation", "compile-elementwise-fusion"}, fired
    return document, others, completed.stdout


@pytest.mark.slow
def test_a_piped_verify_says_what_it_is_doing_as_it_goes(
    verified_run: tuple[dict[str, Any], float, str],
) -> None:
    """In a CI log a live display shows nothing until it ends: each stage gets a line as it
    starts, and each A/B round of the verification one line (flushed as it happens; the
    mechanism is tested on a piped run in test_terminal_layout)."""
    lines = verified_run[2].splitlines()
    assert lines[0] == "profiling datapipe@smoke, mlp@smoke: 5 steps each, in its own process"
    stages = [line for line in lines if ": verifying " in line]
    assert stages and all(
        re.fullmatch(r"(datapipe|mlp): verifying 1 advice, each by an interleaved A/B of at "
                     r"most 6 rounds", line)
        for line in stages
    ), stages  # fmt: skip
    first_round = next(i for i, line in enumerate(lines) if line.endswith("(at most 6 rounds)"))
    assert lines.index(stages[0]) < first_round


def test_rule_selection_keeps_the_named_rules_and_rejects_unknown_ids() -> None:
    from perfgate._rules_path import builtin_rules_folder
    from perfgate.advise.rules import load_rules
    from perfgate.advise.session import select_rules
    from perfgate.errors import UsageError

    rules = load_rules([builtin_rules_folder()])
    assert select_rules(rules, ()) == rules
    chosen = select_rules(rules, ["gc-pauses", "manual-attention"])
    assert [rule.id for rule in chosen] == ["gc-pauses", "manual-attention"]
    with pytest.raises(UsageError, match="unknown rule id: no-such-rule"):
        select_rules(rules, ["manual-attention", "no-such-rule"])


def _proof(document: dict[str, Any], workload: str, rule_id: str) -> dict[str, Any]:
    (found,) = [w for w in document["workloads"] if w["name"] == workload]
    (proof,) = [v for v in found["verifications"] if v["rule_id"] == rule_id]
    (item,) = [a for a in found["advice"] if a["rule_id"] == rule_id]
    return {**proof, "status": item["status"]}


@pytest.mark.slow
def test_more_dataloader_workers_are_proven_faster(
    verified_run: tuple[dict[str, Any], float, str],
) -> None:
    """Parallel loading needs idle cores: when other jobs took the box's second core during the
    run, no gain was there to measure, and the test says so instead of failing on it."""
    document, others, _ = verified_run
    proof = _proof(document, "datapipe", "dataloader-starvation")
    print(f"datapipe {proof['knobs']}: {proof['reason']}; others used {others:.1f} cores")
    # The rule's formula: one more worker, else twice as many, up to the cores available.
    assert proof["knobs"] == {"num_workers": max(1, min(2, cpu_cores_available()))}
    assert proof["rounds"] == 6
    assert proof["loss_parity"] is True  # more workers, same batches, same maths
    low, high = proof["speedup_ci"]
    assert low <= proof["speedup"] <= high
    # More workers are faster here in every measurement so far (1.01-1.20×), but whether the
    # interval clears the ±2 % band depends on the second core being free: on a busy box the
    # advice stays unverified, and its point estimate means little; it is never refuted.
    assert proof["outcome"] in ("verified", "inconclusive"), (proof, others)
    if proof["outcome"] == "verified":
        assert proof["status"] == "verified" and low > 1 and proof["speedup"] > 1


@pytest.mark.slow
def test_compile_on_a_millisecond_mlp_step_follows_its_interval(
    verified_run: tuple[dict[str, Any], float, str],
) -> None:
    """On this CPU the compiled ~1 ms mlp step is slower than the eager one: 0.87-0.94× in
    five measurements (refuted twice, inconclusive three times while other jobs held one of
    the two cores). Channels-last on resnet, the other candidate, was verified (1.29×)."""
    document, others, _ = verified_run
    proof = _proof(document, "mlp", "compile-elementwise-fusion")
    print(f"mlp {proof['knobs']}: {proof['reason']}; others used {others:.1f} cores")
    assert proof["knobs"] == {"compile": True}
    low, high = proof["speedup_ci"]
    assert low <= proof["speedup"] <= high
    # Slower in most measurements (0.85-0.94×); refuted when the interval clears the band. Once,
    # at 4 rounds on a busy CI box, it read 1.06× with an interval of 0.66-1.31: inconclusive, and
    # then its point estimate is no claim. This test asserted "never verified" until a
    # clean-clone CI run failed it: whether compile pays on a 1 ms step is the machine's answer,
    # not perfgate's. What perfgate owes is an outcome that follows its own interval.
    band = 1 + VERIFY_THRESHOLD
    if proof["outcome"] == "verified":
        assert low > band and proof["status"] == "verified", proof
    elif proof["outcome"] == "refuted":
        assert proof["status"] == "refuted", proof
        assert proof["speedup"] < 1 or "no gain" in proof["reason"], proof
    else:  # undecided: the interval still allows a gain worth having (else it is "no gain")
        assert proof["outcome"] == "inconclusive" and high > band, proof
