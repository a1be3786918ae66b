"""Estimates from this device (issue 18, item 2): a fix's speed-up measured here, at the
workload's shapes, replaces the rule's constant, and the advice says what it rests on.

The arithmetic is pinned on fixed figures; the microbenchmarks themselves run for real on
small cases (their values are this machine's and are not asserted, only their shape), and the
ceilings store keeps them per environment so a second ``advise`` does not measure again.
"""

from __future__ import annotations

from pathlib import Path

import factories
import pytest

from perfgate._rules_path import builtin_rules_folder
from perfgate.advise.catalogue import Evidence
from perfgate.advise.ranking import Advice, AdviceContext, evaluate_rule
from perfgate.advise.rules import lint, load_rules
from perfgate.advise.session import measured_fixes
from perfgate.ceilings import fixes
from perfgate.ceilings.fixes import OptimizerCase, fix_case, measure_fix, signature
from perfgate.ceilings.store import ceilings_path, read_ceilings_file, stored_fix
from perfgate.documents.ceilings import FixSpeedup
from perfgate.trace.attention import AttentionShape

RULES = {rule.id: rule for rule in load_rules([builtin_rules_folder()])}
ATTENTION: Evidence = {
    "manual_attention_detected": True,
    "attention_share": 0.25,
    "attention_batch_heads": 8.0,
    "attention_query_len": 32.0,
    "attention_key_len": 32.0,
    "attention_head_dim": 16.0,
    "attention_dtype": "fp32",
    "attention_causal": True,
    "attention_dropout": 0.1,
}


def speedup(value: float) -> FixSpeedup:
    return FixSpeedup(
        benchmark="sdpa",
        signature="sdpa cpu fp32 8x32x32x16 causal p=0.1",
        speedup=value,
        low=value - 0.02,
        high=value + 0.03,
        ratios=(value,) * 7,
        basis="SDPA against the explicit chain at 8x32x32x16",
        measured_at="2026-12-04T00:00:00+00:00",
    )


def test_the_case_is_read_from_the_evidence() -> None:
    case = fix_case("sdpa", ATTENTION)
    assert case == AttentionShape(
        batch_heads=8, query_len=32, key_len=32, head_dim=16, dtype="fp32", causal=True,
        dropout=0.1,
    )  # fmt: skip
    assert signature(case, "cpu") == "sdpa cpu fp32 8x32x32x16 causal p=0.1"
    optimizer = fix_case(
        "fused_optimizer",
        {"optimizer_class": "AdamW", "optimizer_foreach": True,
         "optimizer_param_count": 1000.0, "optimizer_param_tensors": 4.0},
    )  # fmt: skip
    assert optimizer == OptimizerCase(
        optimizer_class="AdamW", foreach=True, parameters=1000, tensors=4
    )
    assert (
        fix_case("sdpa", {k: v for k, v in ATTENTION.items() if k != "attention_head_dim"}) is None
    )
    huge = {**ATTENTION, "attention_query_len": 65536.0, "attention_key_len": 65536.0}
    assert fix_case("sdpa", huge) is None  # 34 G scores: not a microbenchmark
    with pytest.raises(ValueError, match="unknown fix benchmark"):
        fix_case("teleport", ATTENTION)


def test_a_measured_speedup_replaces_the_constant_and_says_so() -> None:
    rule = RULES["manual-attention"]
    constant = evaluate_rule(rule, ATTENTION, AdviceContext())
    measured = evaluate_rule(rule, ATTENTION, AdviceContext(measured={"sdpa": speedup(1.08)}))
    assert isinstance(constant, Advice) and isinstance(measured, Advice)
    assert constant.saving == pytest.approx(0.25 * (1 - 1 / 2.0))
    assert constant.estimate_basis == (
        "the rule's constant speed-up 2x (the sdpa benchmark did not run here)"
    )
    assert measured.saving == pytest.approx(0.25 * (1 - 1 / 1.08))
    assert measured.estimate_basis is not None
    assert measured.estimate_basis.startswith("a microbenchmark on this machine, SDPA against")
    assert "1.08x (paired samples 1.06-1.11)" in measured.estimate_basis


def test_a_fix_measured_slower_saves_nothing_and_says_why() -> None:
    advice = evaluate_rule(
        RULES["manual-attention"], ATTENTION, AdviceContext(measured={"sdpa": speedup(0.9)})
    )
    assert isinstance(advice, Advice) and advice.saving == 0.0 and advice.tier == "low"
    assert "estimated speed-up 0.9 is below 1: no saving expected" in advice.notes


def test_a_rule_without_a_benchmark_keeps_its_constant() -> None:
    advice = evaluate_rule(RULES["non-contiguous-copies"], {"copy_share": 0.2}, AdviceContext())
    assert isinstance(advice, Advice) and advice.estimate_basis == "the rule's speed-up 4x"


def test_an_unknown_benchmark_is_a_lint_problem(tmp_path: Path) -> None:
    text = (builtin_rules_folder() / "manual-attention.toml").read_text()
    (tmp_path / "manual-attention.toml").write_text(
        text.replace('measured_speedup = "sdpa"', 'measured_speedup = "warp"')
    )
    (problem,) = lint([tmp_path])
    assert "measured_speedup 'warp' is not one of sdpa, fused_optimizer" in problem.message
    assert problem.line == 11


@pytest.mark.parametrize(
    "case",
    [
        AttentionShape(
            batch_heads=4,
            query_len=16,
            key_len=16,
            head_dim=8,
            dtype="fp32",
            causal=True,
            dropout=0.1,
        ),
        OptimizerCase(optimizer_class="AdamW", foreach=False, parameters=4096, tensors=8),
    ],
    ids=["sdpa", "fused_optimizer"],
)
def test_a_real_microbenchmark_gives_paired_ratios(
    case: AttentionShape | OptimizerCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fixes, "SAMPLE_S", 0.005)
    found = measure_fix(case, "cpu", threads=1)
    assert len(found.ratios) == fixes.SAMPLES and all(r > 0 for r in found.ratios)
    assert found.low <= found.speedup <= found.high
    assert found.signature == signature(case, "cpu") and "on this cpu" in found.basis


def test_measured_fixes_are_kept_per_environment_and_not_measured_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fixes, "SAMPLE_S", 0.005)
    rules = list(RULES.values())
    first = measured_fixes(
        rules, ATTENTION, device="cpu", threads=1, root=tmp_path, environment_key="ab" * 32
    )
    assert set(first) == {"sdpa"}  # the optimizer rule does not fire on this evidence
    assert stored_fix(tmp_path, "ab" * 32, first["sdpa"].signature) == first["sdpa"]

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("measured again")

    monkeypatch.setattr("perfgate.advise.session.measure_fix", refuse)
    again = measured_fixes(
        rules, ATTENTION, device="cpu", threads=1, root=tmp_path, environment_key="ab" * 32
    )
    assert again == first
    other = measured_fixes(
        rules, {**ATTENTION, "manual_attention_detected": False}, device="cpu", threads=1,
        root=tmp_path, environment_key="ab" * 32,
    )  # fmt: skip
    assert other == {}  # the rule does not fire: nothing to measure


def test_doctor_peak_keeps_the_measured_fixes(tmp_path: Path) -> None:
    from perfgate.ceilings.store import save_ceilings, save_fix

    save_fix(tmp_path, "cd" * 32, speedup(1.1))
    stored = factories.ceilings_store().entries["cd" * 32]

    class Fresh:
        measured_at = stored.measured_at
        device = stored.device
        fingerprint = stored.fingerprint
        fingerprint_key = "cd" * 32

        def values(self) -> object:
            return stored.values

    save_ceilings(tmp_path, Fresh())  # type: ignore[arg-type]
    store = read_ceilings_file(ceilings_path(tmp_path))
    assert set(store.entries) == {"cd" * 32}
    assert store.fixes["cd" * 32][speedup(1.1).signature].speedup == 1.1
