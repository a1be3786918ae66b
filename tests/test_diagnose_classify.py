"""The classifier on its own: every bound from signals at and around its thresholds, the real
GPU traces (each judged from its own kernel and idle times), and properties over random
signals. Pure: no process, no clock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfgate.advise.ranking import Advice, rank
from perfgate.diagnose.classify import (
    ADVICE_CATEGORIES,
    COMMUNICATION_SHARE,
    HOST_FRACTION,
    INPUT_WAIT_SHARE,
    Diagnosis,
    Signals,
    classify,
)
from perfgate.diagnose.signals import evidence_signals

EVIDENCE = Path(__file__).parent / "data" / "advise" / "evidence"


def test_exposed_communication_wins_over_everything_else() -> None:
    found = classify(
        Signals(device="cuda", communication_exposed_share=0.45, dataloader_wait_share=0.35)
    )
    assert (found.bound, found.confidence) == ("communication", "high")
    assert found.evidence == {"communication_exposed_share": 0.45}
    assert "45%" in found.reason
    just_under = Signals(device="cpu", communication_exposed_share=COMMUNICATION_SHARE - 0.01)
    assert classify(just_under).bound != "communication"


def test_a_batch_wait_with_disk_reads_and_iowait_is_storage() -> None:
    storage = Signals(
        device="cpu", dataloader_wait_share=0.6, read_bytes_per_s=50e6, iowait_share=0.2,
        cpu_busy=0.1,
    )  # fmt: skip
    found = classify(storage)
    assert found.bound == "storage" and found.label == "storage-bound"
    assert found.evidence["read_bytes_per_s"] == 50e6
    # the same wait from a page-cache hit (no block reads) is the input pipeline
    cached = Signals(
        device="cpu", dataloader_wait_share=0.6, read_bytes_per_s=0.0, iowait_share=0.0
    )
    assert classify(cached).bound == "input-pipeline"


def test_io_pressure_shows_a_storage_stall_that_busy_cpus_hide_from_iowait() -> None:
    """I/O wait counts only idle CPU time: with other work on the CPUs it reads 0 while the
    reader still stalls (measured on this box: 0 % iowait, 23 % I/O pressure, 164 MB/s)."""
    busy_box = Signals(
        device="cpu", dataloader_wait_share=0.9, read_bytes_per_s=164e6, iowait_share=0.0,
        io_pressure_share=0.23,
    )  # fmt: skip
    found = classify(busy_box)
    assert found.bound == "storage" and "stall on I/O 23%" in found.reason
    assert found.evidence["io_pressure_share"] == 0.23


def test_the_input_pipeline_needs_thirty_percent_of_the_step() -> None:
    assert classify(Signals(device="cpu", dataloader_wait_share=INPUT_WAIT_SHARE)).bound == (
        "input-pipeline"
    )
    below = classify(Signals(device="cpu", dataloader_wait_share=INPUT_WAIT_SHARE - 0.01))
    assert below.bound == "undetermined"  # and no ceiling: the CPU cannot be told apart


@pytest.mark.parametrize(
    ("fraction", "bound", "confidence"),
    [
        (0.6, "compute", "high"),
        (0.35, "compute", "medium"),
        (0.2, "compute", "low"),  # the band between overhead and arithmetic
        (0.08, "host", "medium"),
        (0.001, "host", "high"),
    ],
)
def test_a_cpu_run_against_its_measured_ceiling(
    fraction: float, bound: str, confidence: str
) -> None:
    found = classify(Signals(device="cpu", ceiling_fraction=fraction, cpu_busy=0.95))
    assert (found.bound, found.confidence) == (bound, confidence)
    if bound == "compute":
        assert found.label == "CPU compute-bound"


def test_without_a_ceiling_a_busy_cpu_is_undetermined_and_says_how_to_fix_that() -> None:
    found = classify(Signals(device="cpu", cpu_busy=1.0))
    assert found.bound == "undetermined" and "doctor --peak" in found.reason


def test_a_gpu_idle_without_waits_is_host_bound() -> None:
    found = classify(Signals(device="cuda", gpu_busy=0.5, compute_kernel_share=0.4))
    assert found.bound == "host" and found.evidence["gpu_idle_share"] == pytest.approx(0.5)


def test_a_busy_gpu_is_compute_or_memory_bound_by_its_kernel_mix() -> None:
    compute = Signals(
        device="cuda", gpu_busy=0.95, compute_kernel_share=0.7, memory_kernel_share=0.2
    )
    memory = Signals(
        device="cuda", gpu_busy=0.95, compute_kernel_share=0.3, memory_kernel_share=0.6
    )
    assert classify(compute).label == "GPU compute-bound"
    assert classify(memory).label == "GPU memory-bound"


def test_a_gpu_run_without_a_trace_needs_a_high_mfu() -> None:
    assert classify(Signals(device="cuda", mfu=0.45)).bound == "compute"
    found = classify(Signals(device="cuda", mfu=0.1))
    assert found.bound == "undetermined" and "perfgate diagnose" in found.reason


# Each recorded trace, judged from its own timeline (numbers from its evidence document).
TRACES = {
    # idle 93 % of one host-bound forward
    "a100-alexnet-forward": ("host", "high"),
    # busy 84 %: elementwise + copies + host-to-device 49 % of the step against GEMMs 19 %
    "a100-train-control": ("memory", "high"),
    # idle 76 %: rank 0 of 2 launches too slowly to keep its A100 busy
    "a100-train-nccl": ("host", "high"),
    # busy 96 %: elementwise and copies 62 %, GEMMs 29 %
    "a100-train-test": ("memory", "high"),
    # idle 86 %: eager vLLM serving, 76 % of the kernels under 10 µs
    "b200-vllm-eager": ("host", "high"),
    # waits 51 % of the step in its data loading
    "h100-owlv2-inference-bf16": ("input-pipeline", "high"),
    # busy 92 %: elementwise and copies 58 % against GEMMs and attention 33 %
    "h100-qwen-0.5b-inference-sdpa": ("memory", "high"),
    # 66 % of the step in collectives nothing overlaps (8 ranks, activation checkpointing)
    "mi300-resnet-train-checkpointing": ("communication", "high"),
    # busy 98 %: cuDNN convolutions 62 % of the step
    "v100-train": ("compute", "high"),
}


@pytest.mark.parametrize("name", sorted(TRACES))
def test_each_real_trace_is_classified_by_its_own_timeline(name: str) -> None:
    evidence = json.loads((EVIDENCE / f"{name}.json").read_text())["evidence"]
    found = classify(evidence_signals(evidence))
    assert (found.bound, found.confidence) == TRACES[name], found.reason
    assert found.device == "cuda"
    assert found.evidence  # every label comes with its numbers


def test_every_recorded_trace_has_an_expected_bound() -> None:
    assert {p.stem for p in EVIDENCE.glob("*.json")} == set(TRACES)


share = st.one_of(st.none(), st.floats(min_value=0.0, max_value=1.0))
signals = st.builds(
    Signals,
    device=st.sampled_from(["cpu", "cuda"]),
    dataloader_wait_share=share,
    communication_exposed_share=share,
    read_bytes_per_s=st.one_of(st.none(), st.floats(min_value=0.0, max_value=1e10)),
    iowait_share=share,
    io_pressure_share=share,
    cpu_busy=share,
    ceiling_fraction=st.one_of(st.none(), st.floats(min_value=0.0, max_value=2.0)),
    mfu=share,
    gpu_busy=share,
    compute_kernel_share=share,
    memory_kernel_share=share,
)


@given(signals)
def test_every_signal_set_gets_one_explained_answer(found_signals: Signals) -> None:
    found = classify(found_signals)
    assert found == classify(found_signals)  # deterministic
    assert found.reason and found.confidence in {"high", "medium", "low"}
    assert all(value is not None for value in found.evidence.values())
    if found.bound == "memory":
        assert found_signals.device == "cuda"  # no memory-bound claim without a GPU timeline
    if found.bound == "undetermined":
        assert found.confidence == "low"
    exposed = found_signals.communication_exposed_share
    if exposed is not None and exposed >= COMMUNICATION_SHARE:
        assert found.bound == "communication"
    if found.bound == "host" and found_signals.device == "cpu":
        assert found_signals.ceiling_fraction is not None
        assert found_signals.ceiling_fraction < HOST_FRACTION


def _advice(rule_id: str, category: str, saving: float) -> Advice:
    return Advice(
        rule_id=rule_id, title=rule_id, category=category, confidence="high", saving=saving,
        tier="high", evidence={}, fix="", snippet="", references=(), verify_knobs={},
    )  # fmt: skip


def test_advice_acting_on_the_binding_resource_ranks_first() -> None:
    compile_advice = _advice("compile-elementwise-fusion", "fusion", 0.2)
    workers = _advice("dataloader-starvation", "input-pipeline", 0.05)
    found = Diagnosis(bound="input-pipeline", device="cpu", confidence="high", reason="")
    ranked = rank([compile_advice, workers], ADVICE_CATEGORIES[found.bound])
    assert [a.rule_id for a in ranked] == ["dataloader-starvation", "compile-elementwise-fusion"]
    unranked = rank([compile_advice, workers])
    assert unranked[0].rule_id == "compile-elementwise-fusion"  # by saving alone
