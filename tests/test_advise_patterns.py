"""Fixes for the pattern found (issue 18, item 3): which code produced a finding, and where.

Hand-made traces pin each pattern of ``perfgate.trace.sites`` exactly; a real H100 trace
recorded ``with_stack`` and real profiling windows here (the built-in GPT with explicit
attention, and a model written on ``nn.MultiheadAttention`` as public examples are) show the
advice naming the pattern, its own fix and the module and source line.
"""

from __future__ import annotations

import inspect
import itertools
from pathlib import Path
from typing import Any

import factories
import pytest
import torch
from torch import nn

from perfgate._rules_path import builtin_rules_folder
from perfgate.advise.catalogue import Evidence
from perfgate.advise.evidence import evidence_from_trace
from perfgate.advise.ranking import Advice, AdviceContext, evaluate_rule
from perfgate.advise.rules import lint, load_rules
from perfgate.advise.trace_evidence import trace_evidence
from perfgate.report.advice_table import advice_notes
from perfgate.report.compare_markdown import top_advice, verdict_markdown
from perfgate.report.html_report import render_html
from perfgate.report.page import build_page
from perfgate.trace.capture import profile_workload
from perfgate.trace.loader import load_trace, parse_trace
from perfgate.workloads.protocol import TrainingSetup

RULES = {rule.id: rule for rule in load_rules([builtin_rules_folder()])}
DATA = Path(__file__).resolve().parent / "data" / "advise"


def event(cat: str, name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1,
            "args": args}  # fmt: skip


def chain(at: float) -> list[dict[str, Any]]:
    """A matmul → softmax → matmul chain of 30 µs starting at ``at``."""
    return [
        event("cpu_op", "aten::bmm", at, 10),
        event("cpu_op", "aten::softmax", at + 10, 10),
        event("cpu_op", "aten::bmm", at + 20, 10),
    ]


def step(*events: dict[str, Any]) -> dict[str, Any]:
    return {"traceEvents": [event("user_annotation", "ProfilerStep#1", 0, 1000), *events]}


def found(document: dict[str, Any]) -> Evidence:
    evidence = trace_evidence(parse_trace(document))
    return {k: v for k, v in evidence.items() if k.endswith(("_pattern", "_site"))}


# --- attention ---------------------------------------------------------------------------------


def test_a_chain_inside_multihead_attention_is_that_module_returning_its_weights() -> None:
    document = step(
        event("user_annotation", "perfgate.module: blocks.0 (Block) model.py:21", 100, 200),
        event("user_annotation", "perfgate.module: blocks.0.attn (MultiheadAttention)", 110, 100),
        *chain(120),
    )
    assert found(document) == {
        "attention_pattern": "multihead_attention_weights",
        "attention_site": "blocks.0.attn (MultiheadAttention) · model.py:21",
    }


def test_python_frames_name_the_module_and_the_line() -> None:
    """A trace recorded with_stack: the innermost nn.Module frame and the innermost source
    line outside torch."""
    frames = [
        event("python_function", "train.py(88): train_step", 50, 500),
        event("python_function", "nn.Module: CausalSelfAttention_0", 100, 200),
        event("python_function", "torch/nn/modules/module.py(1736): _call_impl", 101, 198),
        event("python_function", "model.py(40): forward", 102, 196),
        event("python_function", "torch/nn/functional.py(2103): softmax", 129, 2),
    ]
    assert found(step(*frames, *chain(120))) == {
        "attention_pattern": "hand_written",
        "attention_site": "CausalSelfAttention · model.py:40 (forward)",
    }
    forward = "torch/nn/functional.py(5500): multi_head_attention_forward"
    functional = [event("python_function", forward, 110, 100)]
    assert found(step(*functional, *chain(120)))["attention_pattern"] == (
        "multihead_attention_weights"
    )


def test_without_modules_or_frames_the_pattern_stands_alone() -> None:
    assert found(step(*chain(120))) == {"attention_pattern": "hand_written"}


def test_on_a_real_trace_the_site_is_the_attention_module_and_its_line() -> None:
    """OWLv2 on an H100, recorded with_stack (``tests/data/advise/README.md``)."""
    evidence = trace_evidence(load_trace(DATA / "h100-owlv2-inference-bf16.json.gz"))
    advice = evaluate_rule(RULES["manual-attention"], evidence, AdviceContext())
    assert isinstance(advice, Advice)
    assert advice.pattern == "a hand-written matmul -> softmax -> matmul chain"
    assert advice.location == (
        "Owlv2Attention · transformers/models/owlv2/modeling_owlv2.py:410 (forward)"
    )


# --- copies and syncs --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ops", "pattern"),
    [
        ([("aten::contiguous", 50), ("aten::clone", 48), ("aten::copy_", 45)], "contiguous"),
        ([("aten::to", 50), ("aten::_to_copy", 48), ("aten::copy_", 45)], "cast"),
        ([("aten::reshape", 50), ("aten::clone", 48), ("aten::copy_", 45)], "reshape"),
        ([("aten::clone", 50), ("aten::copy_", 45)], "clone"),
    ],
)
def test_copy_time_is_named_by_the_call_that_made_it(
    ops: list[tuple[str, float]], pattern: str
) -> None:
    nested = [event("cpu_op", name, 100 + i, dur) for i, (name, dur) in enumerate(ops)]
    small = event("cpu_op", "aten::copy_", 300, 5)  # a smaller copy of another kind
    assert found(step(*nested, small))["copy_pattern"] == pattern


def gpu_sync(under: str | None) -> dict[str, Any]:
    """A GPU step: one kernel, then a stream synchronize made under ``under`` (or bare)."""
    kernel = {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 100, "dur": 100, "pid": 0,
              "tid": 7, "args": {"correlation": 1}}  # fmt: skip
    events = [
        event("cuda_runtime", "cudaLaunchKernel", 50, 5, correlation=1),
        kernel,
        event("cuda_runtime", "cudaStreamSynchronize", 210, 30),
    ]
    if under is not None:
        events.append(event("cpu_op", under, 200, 50))
    return step(*events)


@pytest.mark.parametrize(
    ("under", "pattern"),
    [("aten::item", "item"), ("aten::_to_copy", "device_to_host_copy"), (None, "synchronize")],
)
def test_a_gpu_wait_is_named_by_the_op_that_made_it(under: str | None, pattern: str) -> None:
    assert found(gpu_sync(under))["sync_pattern"] == pattern


# --- the rule engine and the rule files ----------------------------------------------------------


def test_the_pattern_gives_the_advice_its_fix_and_location() -> None:
    rule = RULES["non-contiguous-copies"]
    plain = evaluate_rule(rule, {"copy_share": 0.2}, AdviceContext())
    cast = evaluate_rule(
        rule,
        {"copy_share": 0.2, "copy_pattern": "cast", "copy_site": "Net · net.py:9 (forward)"},
        AdviceContext(),
    )
    assert isinstance(plain, Advice) and isinstance(cast, Advice)
    assert plain.pattern is None and plain.location is None and plain.fix == rule.fix
    assert cast.pattern is not None and cast.pattern.startswith("dtype or device conversions")
    assert cast.location == "Net · net.py:9 (forward)"
    assert cast.fix != rule.fix and "aten::to" in cast.fix
    assert cast.saving == plain.saving  # the pattern picks the fix, never the estimate
    other = evaluate_rule(rule, {"copy_share": 0.2, "copy_pattern": "other"}, AdviceContext())
    assert isinstance(other, Advice) and other.pattern is None and other.fix == rule.fix


BASE_RULE = """id = "x-rule"
title = "t"
category = "c"
confidence = "low"
requires = ["copy_share"]
when = "copy_share > 0.1"
affected = "copy_share"
speedup = 2
already_on = "false"
fix = "f"

[verify]
knobs = {}
"""


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ('when = "copy_pattern == \\"cast\\""\nname = "n"\nfix = "f"', "not in requires"),
        ('when = "true"\nname = "n"\nfix = "f"\nsite = "copy_share"', "not a text evidence"),
        ('when = "true"\nfix = "f"', "missing field [patterns.0] 'name'"),
        ('when = "true"\nname = "n"\nfix = "f"\ncolour = 1', "unknown field [patterns.0]"),
    ],
)
def test_a_broken_pattern_is_a_lint_problem_on_its_line(
    tmp_path: Path, pattern: str, says: str
) -> None:
    path = tmp_path / "x-rule.toml"
    path.write_text(BASE_RULE + "\n[[patterns]]\n" + pattern + "\n")
    problems = lint([tmp_path])
    assert len(problems) == 1 and says in problems[0].message, problems
    assert problems[0].line > BASE_RULE.count("\n"), problems  # inside the [[patterns]] table


def test_every_rendering_names_the_pattern_and_where() -> None:
    report = factories.advice_report()
    (line, *_) = top_advice(report)
    assert line.found == "a per-parameter optimizer loop in Trainer · train.py(88): step"
    markdown = verdict_markdown(factories.verdict(), advice=[line])
    assert "(found: a per-parameter optimizer loop in Trainer · train.py(88): step)" in markdown
    workload = report.workloads[0]
    notes = advice_notes(workload)
    assert "#1 optimizer-not-fused: found a per-parameter optimizer loop in Trainer" in notes[0]
    assert "#1 optimizer-not-fused: estimate from the rule's constant 2x" in notes
    html = render_html(build_page([factories.run()], advice=report, generated_at="now"))
    assert "found: a per-parameter optimizer loop in Trainer · train.py(88): step" in html
    assert "estimate from the rule&#39;s constant 2x" in html


# --- real profiling windows ----------------------------------------------------------------------


class AttentionBlock(nn.Module):
    """A block on nn.MultiheadAttention, called the way most examples call it."""

    def __init__(self, width: int, need_weights: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, 4, batch_first=True)
        self.need_weights = need_weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        y, _ = self.attn(h, h, h, need_weights=self.need_weights)
        return x + y


def multihead_setup(need_weights: bool) -> TrainingSetup:
    torch.manual_seed(0)
    model = nn.Sequential(*[AttentionBlock(64, need_weights) for _ in range(2)])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = [torch.randn(8, 128, 64) for _ in range(2)]

    def train(x: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        return loss

    return TrainingSetup(
        model=model,
        optimizer=optimizer,
        batches=itertools.cycle(batches),
        step=train,
        samples_per_step=8,
    )


def profiled(setup: TrainingSetup, tmp_path: Path, knobs: dict[str, Any]) -> Evidence:
    trace = tmp_path / f"window-{len(list(tmp_path.iterdir()))}.json"
    facts = profile_workload(setup, device="cpu", knobs=knobs, warmup=1, steps=3, trace_path=trace)
    return evidence_from_trace(load_trace(trace), facts)


@pytest.mark.slow
def test_multihead_attention_returning_its_weights_is_named_with_its_module(
    tmp_path: Path,
) -> None:
    evidence = profiled(multihead_setup(need_weights=True), tmp_path, {})
    assert evidence["attention_pattern"] == "multihead_attention_weights"
    line = inspect.getsourcelines(AttentionBlock.forward)[1]
    site = str(evidence["attention_site"])
    assert site.startswith("0.attn (MultiheadAttention) · ") or site.startswith(
        "1.attn (MultiheadAttention) · "
    ), site
    assert site.endswith(f"test_advise_patterns.py:{line}"), site
    advice = evaluate_rule(RULES["manual-attention"], evidence, AdviceContext())
    if isinstance(advice, Advice):  # its share is small on a CPU: the pattern is the point
        assert advice.pattern is not None and "need_weights" in advice.fix
    # need_weights=False: the module calls SDPA, and no explicit chain is left.
    fixed = profiled(multihead_setup(need_weights=False), tmp_path, {})
    assert fixed["manual_attention_detected"] is False and "attention_pattern" not in fixed


@pytest.mark.slow
def test_the_gpt_with_explicit_attention_is_hand_written_in_its_attention_module(
    tmp_path: Path,
) -> None:
    from perfgate.workloads import gpt
    from perfgate.workloads.knobs import resolve_knobs
    from perfgate.workloads.protocol import WorkloadContext

    knobs = resolve_knobs("gpt", gpt.DEFINITION.knobs, {"attention": "manual"})
    context = WorkloadContext(
        device="cpu", preset="smoke", params=gpt.DEFINITION.presets["smoke"], knobs=knobs, seed=0
    )
    evidence = profiled(gpt.build(context), tmp_path, knobs)
    assert evidence["attention_pattern"] == "hand_written"
    line = inspect.getsourcelines(gpt.CausalSelfAttention.forward)[1]
    assert str(evidence["attention_site"]).endswith(
        f"(CausalSelfAttention) · {_source(gpt)}:{line}"
    )
    advice = evaluate_rule(RULES["manual-attention"], evidence, AdviceContext())
    assert isinstance(advice, Advice) and advice.pattern == (
        "a hand-written matmul -> softmax -> matmul chain"
    )


def _source(module: Any) -> str:
    path = Path(inspect.getsourcefile(module) or "")
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
