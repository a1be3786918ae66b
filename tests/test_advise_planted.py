"""Planted defects: the rules find every defect CPU evidence can show, and nothing else.

``benchmarks/planted.py`` gives each built-in workload an inefficient and a tuned variant
(knob settings) and names the rule each planted defect must draw. The slow tests profile both
sides of every pair on this CPU, through the real profiling workers, and score the rules:
precision and recall must both be 100 % over the rules that can apply on a CPU. Rules limited
to CUDA (bf16-autocast-missing, tf32-disabled, fp16-gradscaler-missing, pageable-h2d-copies,
host-sync-in-step, cudnn-benchmark-off, launch-bound-small-kernels, matmul-dims-misaligned,
memory-near-limit, batch-size-headroom) are excluded here; ``test_advise_gpu_rules.py`` tests
them on evidence recorded from real GPU traces, and ``benchmarks/gpu_check.sh`` on a GPU.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from perfgate._rules_path import builtin_rules_folder
from perfgate.advise.catalogue import Evidence
from perfgate.advise.evidence import profile_workloads
from perfgate.advise.ranking import Advice, AdviceContext, evaluate_rule
from perfgate.advise.rules import Rule, load_rules
from perfgate.errors import UsageError
from perfgate.runner.plan import Selection, make_plan
from perfgate.workloads.protocol import KnobValue, TrainingSetup, WorkloadContext

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from planted import (
    HOST_KNOBS,
    HOST_WORKLOAD,
    SIDES,
    Defect,
    Finding,
    Fired,
    Side,
    VariantPair,
    host_defects,
    knob_assignments,
    score,
    table_lines,
    variant_config,
    variant_pairs,
)

RULES = load_rules([builtin_rules_folder()])
RULE_IDS = {rule.id for rule in RULES}
ON_CPU = frozenset(r.id for r in RULES if not r.applies.devices or "cpu" in r.applies.devices)
MULTI_RANK = frozenset(r.id for r in RULES if "world_size" in r.evidence_names)
"""Rules about several ranks: no single-process variant can plant them; they are planted on the
ddp workload under torchrun in tests/test_distributed_advise.py."""


def fired_rules(rules: list[Rule], evidence: Evidence, applicable: frozenset[str]) -> set[str]:
    """Ids of the applicable rules that fire on ``evidence``."""
    return {
        rule.id
        for rule in rules
        if rule.id in applicable
        and isinstance(evaluate_rule(rule, evidence, AdviceContext()), Advice)
    }


# --- the catalogue -------------------------------------------------------------------------


def test_every_rule_that_can_fire_on_a_cpu_has_a_planted_defect() -> None:
    pairs = variant_pairs("cpu")
    expected = {
        rule for pair in pairs for side in SIDES for rule in pair.expected_rules(side, ON_CPU)
    }
    assert expected == ON_CPU - MULTI_RANK
    named = {rule for pair in pairs for defect in pair.defects for rule in defect.rules}
    assert named <= RULE_IDS
    # The GPU-only rules the catalogue plants for gpu_check.sh are really GPU-only.
    assert {"bf16-autocast-missing", "tf32-disabled", "host-sync-in-step"} <= named - ON_CPU


@pytest.mark.parametrize("side", SIDES)
def test_both_sides_resolve_to_runnable_plans(side: Side, tmp_path: Path) -> None:
    pairs = variant_pairs("cpu")
    selection = Selection(
        workloads=[pair.workload for pair in pairs], knobs=knob_assignments(pairs, side)
    )
    planned, _ = make_plan(variant_config(tmp_path), selection)
    by_name = {p.definition.name: p for p in planned}
    for pair in pairs:
        knobs = by_name[pair.workload].knobs
        assert {name: knobs[name] for name in pair.knobs(side)} == dict(pair.knobs(side))


def test_presence_follows_the_knobs_and_the_machine() -> None:
    datapipe = {p.workload: p for p in variant_pairs("cpu", 6)}["datapipe"]
    assert datapipe.tuned["num_workers"] == 6
    inefficient = {d.name for d in datapipe.present("inefficient")}
    tuned = {d.name for d in datapipe.present("tuned")}
    assert "heavy preprocessing in the main process (num_workers=0)" in inefficient
    # Workers filling the cores expose the preprocessing cost, which no knob removes.
    assert "preprocessing heavier than all the cores can feed" in tuned
    # Pinned memory is refused on a CPU run, so pageable copies stay on both sides there.
    assert "batches copied to the GPU from pageable memory" in inefficient & tuned
    on_gpu = {p.workload: p for p in variant_pairs("cuda", 6)}["datapipe"]
    assert on_gpu.tuned["pin_memory"] is True
    assert "pageable-h2d-copies" not in on_gpu.expected_rules("tuned", RULE_IDS)
    assert on_gpu.expected_rules("inefficient", RULE_IDS) == {
        "dataloader-starvation",
        "pageable-h2d-copies",
    }


def test_a_variant_must_honour_its_knobs_and_plant_its_defects() -> None:
    defect = Defect(name="manual", planted={"attention": "manual"}, rules=("manual-attention",))
    with pytest.raises(UsageError, match="does not honour: attention"):
        VariantPair(
            workload="mlp",
            inefficient={"attention": "manual"},
            tuned={},
            defects=(defect,),
            knob_names=frozenset({"optimizer"}),
        )
    with pytest.raises(UsageError, match="planted in neither variant"):
        VariantPair(
            workload="gpt",
            inefficient={"attention": "sdpa"},
            tuned={"attention": "sdpa"},
            defects=(defect,),
        )


def _pair(workload: str, *defects: Defect) -> VariantPair:
    return VariantPair(
        workload=workload,
        inefficient={name: True for d in defects for name in d.planted},
        tuned={name: False for d in defects for name in d.planted},
        defects=defects,
    )


def test_score_is_strict_about_firings_no_defect_explains() -> None:
    copies = Defect(name="copies", planted={"a": True}, rules=("non-contiguous-copies",))
    gpu = Defect(name="fp32", planted={"b": True}, rules=("tf32-disabled",))
    pairs = [_pair("one", copies, gpu), _pair("two", copies)]
    fired: Fired = {
        ("one", "inefficient"): {"non-contiguous-copies", "tf32-disabled"},
        ("one", "tuned"): {"gc-pauses"},
        ("two", "tuned"): {"non-contiguous-copies"},
    }
    result = score(pairs, fired, ON_CPU)
    assert result.hits == (Finding("one", "inefficient", "non-contiguous-copies"),)
    assert result.misses == (Finding("two", "inefficient", "non-contiguous-copies"),)
    assert result.false_alarms == (
        Finding("one", "tuned", "gc-pauses"),
        Finding("two", "tuned", "non-contiguous-copies"),
    )
    assert result.precision == pytest.approx(1 / 3)
    assert result.recall == pytest.approx(1 / 2)
    # tf32-disabled cannot apply on a CPU: neither expected nor counted there.
    assert "tf32-disabled" not in {f.rule for f in (*result.hits, *result.false_alarms)}
    lines = table_lines(pairs, fired, ON_CPU)
    assert any("tf32-disabled" in line and "n/a" in line for line in lines)
    assert "precision 33% (1 of 3 firings), recall 50% (1 of 2 expected)" in lines


def test_a_rule_a_defect_really_causes_is_allowed_but_not_required() -> None:
    attention = Defect(
        name="manual", planted={"a": True}, rules=("manual-attention",), also=("gc-pauses",)
    )
    pair = _pair("one", attention)
    allowed = score([pair], {("one", "inefficient"): {"manual-attention", "gc-pauses"}}, ON_CPU)
    assert allowed.false_alarms == () and allowed.misses == ()
    assert allowed.hits == (Finding("one", "inefficient", "manual-attention"),)
    # Where the defect is fixed, the same firing has nothing to explain it.
    unexplained = score([pair], {("one", "tuned"): {"gc-pauses"}}, ON_CPU)
    assert unexplained.false_alarms == (Finding("one", "tuned", "gc-pauses"),)
    lines = table_lines([pair], {("one", "inefficient"): {"gc-pauses"}}, ON_CPU)
    assert "  also drawn: gc-pauses on one (inefficient), explained by manual" in lines


# --- the host-defects workload, in this process --------------------------------------------


@pytest.fixture
def one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _host_workload(tmp_path: Path, **knobs: KnobValue) -> TrainingSetup:
    """A resnet-host set-up (smoke preset, batch 2) with ``knobs`` over the defaults."""
    spec = variant_config(tmp_path).workloads[HOST_WORKLOAD]
    resolved = {**spec.knobs, "batch_size": 2, **knobs}
    return host_defects(
        WorkloadContext(
            device="cpu", preset="smoke", params=spec.presets["smoke"], knobs=resolved, seed=0
        )
    )


def _items_and_full_collections(setup: TrainingSetup, steps: int) -> tuple[int, int]:
    """``aten::item`` calls and full collections during ``steps`` steps of ``setup``."""
    batch = next(iter(setup.batches))
    full: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["generation"] == 2:
            full.append(1)

    gc.callbacks.append(count)
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(steps):
                setup.step(batch)
    finally:
        gc.callbacks.remove(count)
    items = sum(e.count for e in prof.key_averages() if e.key == "aten::item")
    return items, len(full)


@pytest.mark.slow
def test_host_defects_collect_and_sync_in_every_step(tmp_path: Path, one_thread: None) -> None:
    planted = _host_workload(
        tmp_path, gc_collect_every_step=True, item_every_step=True, channels_last=True
    )
    assert planted.knobs["channels_last"] is True  # the base's own knobs pass through
    assert {k: planted.knobs[k] for k in HOST_KNOBS} == {
        "gc_collect_every_step": True,
        "gc_freeze": False,
        "item_every_step": True,
    }
    plain = _host_workload(tmp_path, channels_last=True)
    items, full = _items_and_full_collections(planted, 2)
    base_items, base_full = _items_and_full_collections(plain, 2)
    # The optimizer reads its step counters with .item() too: only the difference is planted.
    assert items - base_items == 2
    assert full >= 2 and full > base_full


def test_host_defects_freeze_the_heap_once_after_the_first_step(
    tmp_path: Path, one_thread: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = _host_workload(tmp_path, gc_collect_every_step=True, gc_freeze=True)
    batch = next(iter(setup.batches))
    freezes: list[int] = []
    freeze = gc.freeze

    def counted() -> None:
        freezes.append(1)
        freeze()

    monkeypatch.setattr(gc, "freeze", counted)
    try:
        assert gc.get_freeze_count() == 0
        setup.step(batch)
        assert gc.get_freeze_count() > 10_000  # torch, the model, the optimizer state
        setup.step(batch)
        setup.step(batch)
        assert len(freezes) == 1
    finally:
        gc.unfreeze()


# --- real profiles of both sides -------------------------------------------------------------


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, Side], Evidence]:
    """Evidence of every pair's two sides: one profiling worker per workload and side."""
    root = tmp_path_factory.mktemp("planted")
    pairs = variant_pairs("cpu")
    config = variant_config(root)
    evidence: dict[tuple[str, Side], Evidence] = {}
    for side in SIDES:
        selection = Selection(
            workloads=[pair.workload for pair in pairs],
            knobs=knob_assignments(pairs, side),
            warmup=2,
            threads=1,
            timeout_s=300,
        )
        # 10 profiled steps: a CPU share is the median over steps (trace/breakdown.py), and
        # with 5 an eager chain's share fell under the compile rule's 12 % once under two CPU
        # hogs; more steps leave the median less to chance.
        for outcome in profile_workloads(config, selection, device="cpu", steps=10):
            assert outcome.status == "ok", f"{outcome.name} ({side}): {outcome.error}"
            evidence[(outcome.name, side)] = outcome.evidence
    return evidence


@pytest.mark.slow
def test_cpu_rules_find_every_planted_defect_and_nothing_else(
    profiled: dict[tuple[str, Side], Evidence],
) -> None:
    pairs = variant_pairs("cpu")
    fired = {key: fired_rules(RULES, evidence, ON_CPU) for key, evidence in profiled.items()}
    lines = table_lines(pairs, fired, ON_CPU)
    print("\n" + "\n".join(lines))
    result = score(pairs, fired, ON_CPU)
    assert result.precision == 1.0 and result.recall == 1.0, "\n".join(lines)
    assert {finding.rule for finding in result.hits} == ON_CPU - MULTI_RANK


@pytest.mark.slow
def test_gpu_only_defects_still_show_in_cpu_evidence(
    profiled: dict[tuple[str, Side], Evidence],
) -> None:
    """The rules for them cannot apply on a CPU, but the evidence they read is there."""
    assert profiled[("gpt", "inefficient")]["fp32_matmul_fraction"] == 1.0
    assert float(profiled[("gpt", "tuned")]["fp32_matmul_fraction"]) < 0.5
    assert profiled[(HOST_WORKLOAD, "inefficient")]["item_call_count"] == 1
    assert profiled[(HOST_WORKLOAD, "inefficient")]["host_sync_count"] == 1
    assert profiled[(HOST_WORKLOAD, "tuned")]["item_call_count"] == 0
    # The tuned side applies gc-pauses' own fix and keeps collecting: the collections stay
    # (the rule's silence there is about their cost, not their absence).
    assert profiled[(HOST_WORKLOAD, "inefficient")]["gc_collections"] == 1
    assert profiled[(HOST_WORKLOAD, "tuned")]["gc_collections"] == 1
