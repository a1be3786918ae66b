"""The GPU-only rules on evidence recorded from real GPU profiles.

No GPU is needed: ``benchmarks/record_gpu_evidence.py`` turned real traces (A100, H100, B200,
V100, MI300X, and a 2-rank NCCL job on A100s; ``tests/data/advise/README.md``) into the
documents in
``tests/data/advise/evidence/``, with every fact a trace cannot record either inferred from what
it does record (``_inferred``) or assumed (``_assumed``), each with its reason. Each test names
the exact set of rules that must fire on a document and, for the rules that must stay silent,
why: a rule silent for lack of evidence is not the same as one whose trigger was measured false.
The documents are re-recorded from their traces when the traces are present and must match.

The same holds for live evidence: ``tests/data/h200/advice-inefficient.json`` is what
``perfgate advise --device cuda`` measured on an H200 for the planted inefficient variants of
``gpt`` and ``resnet`` (``benchmarks/gpu_check.sh``, ``tests/data/h200/README.md``).
"""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from perfgate._rules_path import builtin_rules_folder
from perfgate.advise.catalogue import EVIDENCE
from perfgate.advise.ranking import Advice, AdviceContext, NotFired, evaluate_rule
from perfgate.advise.rules import load_rules

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import record_gpu_evidence as recorder

RULES = {rule.id: rule for rule in load_rules([builtin_rules_folder()])}
GPU_ONLY = frozenset(rule.id for rule in RULES.values() if rule.applies.devices == ("cuda",))
DOCUMENTS = recorder.OUT
MEASURED_FALSE = "when is false"
ALREADY_ON = "the fix is already on"

# name → (rules that fire, {rule that stays silent: the start of its reason})
EXPECTED: dict[str, tuple[set[str], dict[str, str]]] = {
    "a100-train-control": (
        # fp32-input GEMMs (TF32 kernels) on an A100; misaligned bmm [1024, 647, 96]; 6 % copies;
        # elementwise kernels 32 % of the step with nothing compiled. Rank 3 of 8 (NCCL, from
        # distributedInfo): all-reduces 35 % of the step, 46 % of that overlapped, 19 % exposed.
        {
            "bf16-autocast-missing",
            "communication-exposed",
            "compile-elementwise-fusion",
            "matmul-dims-misaligned",
            "non-contiguous-copies",
        },
        {
            "non-nccl-backend-gpu": MEASURED_FALSE,  # the backend is nccl
            "rank-imbalance": "no evidence rank_imbalance",  # one rank's trace
            "tf32-disabled": ALREADY_ON,  # cutlass s1688 kernels: TF32 is on
            "host-sync-in-step": MEASURED_FALSE,  # 10 syncs a step, 0.04 % of it
            "pageable-h2d-copies": MEASURED_FALSE,  # batches come from pinned memory
            "launch-bound-small-kernels": MEASURED_FALSE,  # GPU idle 16 %, under 20 %
            "fp16-gradscaler-missing": "compute capability 8",
            "memory-near-limit": "no evidence memory_headroom_fraction",
        },
    ),
    "a100-train-test": (
        # The deviceProperties of this trace declare V100s (cc 7.0): fp16 + GradScaler, not bf16.
        {"fp16-gradscaler-missing", "matmul-dims-misaligned", "non-contiguous-copies"},
        {
            "bf16-autocast-missing": "compute capability 7",
            "tf32-disabled": "compute capability 7",
            "compile-elementwise-fusion": ALREADY_ON,  # CompiledFunction regions
            "launch-bound-small-kernels": ALREADY_ON,
            # 2 ranks: all-reduces 34 % of the step, 71 % of that overlapped; 9.8 % exposed,
            # just under the rule's 10 %.
            "communication-exposed": MEASURED_FALSE,
        },
    ),
    "v100-train": (
        # fp32 NCHW convolutions (cuDNN converts to NHWC) are 62 % of a V100 step.
        {
            "channels-last-conv",
            "compile-elementwise-fusion",
            "cudnn-benchmark-off",
            "fp16-gradscaler-missing",
        },
        {
            "bf16-autocast-missing": "compute capability 7",
            "tf32-disabled": "compute capability 7",
            "launch-bound-small-kernels": MEASURED_FALSE,  # GPU busy 98 %
            "optimizer-not-fused": "no evidence optimizer_fused",
        },
    ),
    "a100-alexnet-forward": (
        # One measured forward, host-bound: the GPU idles 93 % of it. It is NCHW and its linear
        # layers run plain SGEMM, but convolutions (3 %) and matmuls (2 %) are too small a share
        # for any rule; its pageable copies (the weights) happen before the measured forward.
        set(),
        {
            "channels-last-conv": MEASURED_FALSE,
            "cudnn-benchmark-off": MEASURED_FALSE,
            "tf32-disabled": MEASURED_FALSE,
            "bf16-autocast-missing": MEASURED_FALSE,
            "host-sync-in-step": MEASURED_FALSE,  # 2 syncs, 1.1 % of the step
            "pageable-h2d-copies": "no evidence h2d_pageable_fraction",
            "batch-size-headroom": "no evidence memory_headroom_fraction",
        },
    ),
    "h100-owlv2-inference-bf16": (
        # 180 hand-written attention blocks (41 % of the step); 81 syncs (30 %); the GPU idle
        # half the time with 96 % of its memory free.
        {"batch-size-headroom", "host-sync-in-step", "manual-attention"},
        {
            "memory-near-limit": MEASURED_FALSE,
            "bf16-autocast-missing": MEASURED_FALSE,  # bf16 already
            "launch-bound-small-kernels": MEASURED_FALSE,  # 48 % short kernels, under 50 %
            "pageable-h2d-copies": MEASURED_FALSE,  # pageable, but 0.1 % of the step
            "matmul-dims-misaligned": MEASURED_FALSE,  # misaligned scores are attention time
            "channels-last-conv": MEASURED_FALSE,  # one patch-embedding convolution
        },
    ),
    "h100-qwen-0.5b-inference-sdpa": (
        {"compile-elementwise-fusion", "host-sync-in-step", "non-contiguous-copies"},
        {
            "manual-attention": MEASURED_FALSE,  # SDPA flash attention
            "batch-size-headroom": MEASURED_FALSE,  # GPU busy 92 %
            "memory-near-limit": MEASURED_FALSE,  # 3 % of the memory reserved
            "bf16-autocast-missing": MEASURED_FALSE,
            "matmul-dims-misaligned": ALREADY_ON,
        },
    ),
    "b200-vllm-eager": (
        # 76 % of the kernels are under 10 µs and the GPU idles 86 %, but compiled regions are
        # in the trace: the rule's fix counts as applied (CUDA graphs are what "eager" left out).
        set(),
        {
            "launch-bound-small-kernels": ALREADY_ON,
            "bf16-autocast-missing": MEASURED_FALSE,
            "host-sync-in-step": MEASURED_FALSE,
            "communication-exposed": MEASURED_FALSE,  # 8 ranks, collectives 2.6 % of the step
        },
    ),
    "a100-train-nccl": (
        # Rank 0 of a 2-rank NCCL DistributedDataParallel job (world size and backend from
        # distributedInfo): all-reduces 7.0 % of the step, 16 % of that behind the backward, so
        # 5.9 % exposed. An fp32 NCHW convolution net (cuDNN on TF32, the one linear on plain
        # SGEMM) whose GPU idles 76 % of a 222 ms step, yet no share is large enough for a rule:
        # convolutions 6 %, elementwise 9 %, matmuls 0.03 %, 43 % short kernels.
        set(),
        {
            "communication-exposed": MEASURED_FALSE,  # 5.9 % exposed, under the rule's 10 %
            "non-nccl-backend-gpu": MEASURED_FALSE,  # the backend is nccl
            # The trace cannot tell the wrapper reliably: it is not inferred.
            "dataparallel-not-ddp": "no evidence model_wrapper",
            "rank-imbalance": "no evidence rank_imbalance",  # one rank's trace
            "launch-bound-small-kernels": MEASURED_FALSE,  # 43 % short kernels, under 50 %
            "channels-last-conv": MEASURED_FALSE,  # NCHW, but convolutions 6 % of the step
            "cudnn-benchmark-off": MEASURED_FALSE,
            "tf32-disabled": MEASURED_FALSE,  # matmuls 0.03 % of the step
            "bf16-autocast-missing": MEASURED_FALSE,
            "compile-elementwise-fusion": MEASURED_FALSE,  # elementwise 9 %, under 12 %
            "fp16-gradscaler-missing": "compute capability 8",
        },
    ),
    "mi300-resnet-train-checkpointing": (
        # ROCm reports no CUDA compute capability: rules bounded by one cannot apply. Nothing is
        # compiled and elementwise kernels are 15 % of the step: over the compile rule's 12 %.
        # 8 ranks (NCCL, i.e. RCCL): collectives 83 % of the step, 20 % of that overlapped, 66 %
        # exposed.
        {"communication-exposed", "compile-elementwise-fusion"},
        {
            "non-nccl-backend-gpu": MEASURED_FALSE,
            "bf16-autocast-missing": "the compute capability is unknown",
            "tf32-disabled": "the compute capability is unknown",
            "channels-last-conv": MEASURED_FALSE,  # convolutions 8 % of a comms-bound step
            "cudnn-benchmark-off": MEASURED_FALSE,
            "launch-bound-small-kernels": MEASURED_FALSE,  # GPU busy 97 %
        },
    ),
}


H200_ADVICE = Path(__file__).resolve().parent / "data" / "h200" / "advice-inefficient.json"

# workload → (rules that fire, {rule that stays silent: the start of its reason}) on the H200
H200_EXPECTED: dict[str, tuple[set[str], dict[str, str]]] = {
    "gpt": (
        # fp32 without TF32, a per-parameter optimizer loop (85 % of the wall time: the host
        # launches while the GPU drains the backward), hand-written attention (24 %).
        {"bf16-autocast-missing", "tf32-disabled", "optimizer-not-fused", "manual-attention"},
        {
            "compile-elementwise-fusion": MEASURED_FALSE,  # elementwise 5 % on the GPU
            "launch-bound-small-kernels": MEASURED_FALSE,
            "fp16-gradscaler-missing": "compute capability 9",
            "matmul-dims-misaligned": ALREADY_ON,
        },
    ),
    "resnet": (
        # Batch 48 on a 141 GB GPU: idle 47 % of the step between 410 mostly tiny kernels.
        {
            "launch-bound-small-kernels",
            "batch-size-headroom",
            "compile-elementwise-fusion",
            "bf16-autocast-missing",
            "cudnn-benchmark-off",
        },
        {
            # The planted NCHW layout and .contiguous() copies cost little on a launch-bound
            # step: convolutions 19 %, copies under the rule's share.
            "channels-last-conv": MEASURED_FALSE,
            "non-contiguous-copies": MEASURED_FALSE,
            "tf32-disabled": MEASURED_FALSE,  # cuDNN convolutions run TF32 by default
            "optimizer-not-fused": ALREADY_ON,
        },
    ),
}


@cache
def h200_evidence() -> dict[str, dict[str, Any]]:
    loaded = json.loads(H200_ADVICE.read_text())
    return {workload["name"]: workload["evidence"] for workload in loaded["workloads"]}


@pytest.mark.parametrize("workload", sorted(H200_EXPECTED))
def test_rules_on_evidence_measured_live_on_an_h200(workload: str) -> None:
    evidence = h200_evidence()[workload]
    assert evidence["gpu_name"] == "NVIDIA H200" and evidence["compute_capability"] == "9.0"
    results = {
        rule_id: evaluate_rule(rule, evidence, AdviceContext()) for rule_id, rule in RULES.items()
    }
    fires, silent = H200_EXPECTED[workload]
    assert {rule for rule, o in results.items() if isinstance(o, Advice)} == fires
    for rule_id, reason in silent.items():
        outcome = results[rule_id]
        assert isinstance(outcome, NotFired) and outcome.reason.startswith(reason), outcome


@cache
def document(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DOCUMENTS / f"{name}.json").read_text())
    return loaded


def outcomes(name: str) -> dict[str, Advice | NotFired]:
    evidence = document(name)["evidence"]
    return {
        rule_id: evaluate_rule(rule, evidence, AdviceContext()) for rule_id, rule in RULES.items()
    }


def test_every_recording_has_a_document_and_expectations() -> None:
    names = {recording.trace for recording in recorder.RECORDINGS}
    assert names == set(EXPECTED)
    assert {path.stem for path in DOCUMENTS.glob("*.json")} == names


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_rules_fire_where_the_trace_shows_the_defect(name: str) -> None:
    fired, silent = EXPECTED[name]
    found = outcomes(name)
    assert {rule for rule, outcome in found.items() if isinstance(outcome, Advice)} == fired
    for rule, reason in silent.items():
        outcome = found[rule]
        assert isinstance(outcome, NotFired) and outcome.reason.startswith(reason), outcome


def test_every_gpu_only_rule_is_tested_on_real_evidence() -> None:
    expected = [*EXPECTED.values(), *H200_EXPECTED.values()]
    fired = {rule for rules, _ in expected for rule in rules}
    silent = {rule for _, reasons in expected for rule in reasons}
    assert fired | silent >= GPU_ONLY
    # Most must be seen firing; these no recorded trace or H200 run has the defect for: no
    # per-step pageable copies, no GPU near its memory limit, and no multi-GPU job driven by
    # DataParallel or one all-reducing GPU tensors over gloo (every distributed trace is NCCL).
    assert GPU_ONLY - fired == {
        "pageable-h2d-copies",
        "memory-near-limit",
        "dataparallel-not-ddp",
        "non-nccl-backend-gpu",
    }


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_fact_a_trace_cannot_record_is_inferred_or_assumed_with_its_reason(
    name: str,
) -> None:
    recorded = document(name)
    explained = set(recorded["_inferred"]) | set(recorded["_assumed"])
    from_device = {"gpu_name", "compute_capability"}  # the trace's deviceProperties
    facts = {key for key in recorded["evidence"] if EVIDENCE[key].source == "facts"}
    assert facts - from_device == explained
    assert all(recorded["_inferred"].values()) and all(recorded["_assumed"].values())
    assert recorded["recorded_with"] == "python benchmarks/record_gpu_evidence.py"


def test_the_v100_declared_trace_is_judged_as_a_v100() -> None:
    evidence = document("a100-train-test")["evidence"]
    assert str(evidence["gpu_name"]).startswith("Tesla V100")
    assert evidence["compute_capability"] == "7.0"
    assert evidence["autocast_enabled"] is False  # fp32 inputs to every matmul


@pytest.mark.parametrize("recording", recorder.RECORDINGS, ids=lambda r: r.trace)
@pytest.mark.slow
def test_documents_are_what_the_recorder_makes_of_their_traces(
    recording: recorder.Recording,
) -> None:
    path = recorder.trace_path(recording.trace)
    if not path.exists():
        pytest.skip(f"{path} not present (the large traces live in ../shared/traces)")
    committed = recorder.document_path(recording).read_text()
    assert recorder.render(recorder.record(recording, path)) == committed
