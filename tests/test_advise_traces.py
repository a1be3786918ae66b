"""Kernel-level evidence from real GPU profiler traces (A100, H100, B200, MI300, V100, CPU-only).

The traces were recorded by others on real hardware; they live in ``tests/data/advise/`` (see
its README).
Expected values are counted from the raw JSON in the test where a count is possible, so a test
does not just repeat what the parser computes.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from perfgate.advise.catalogue import EVIDENCE, SHARE_NAMES, Evidence
from perfgate.advise.evidence import evidence_from_trace
from perfgate.advise.trace_evidence import trace_evidence
from perfgate.trace.categories import kernel_dtype, kernel_family, matmul_operands, op_dtype
from perfgate.trace.loader import load_document as load_trace

DATA = Path(__file__).resolve().parent / "data" / "advise"
LOCAL = ("a100-alexnet-forward", "cpu-only", "h100-qwen-0.5b-inference-sdpa")
LARGE = (
    "a100-train-control",
    "a100-train-test",
    "a100-train-nccl",
    "h100-owlv2-inference-bf16",
    "b200-vllm-eager",
    "mi300-resnet-train-checkpointing",
    "v100-train",
)


def _path(name: str) -> Path:
    return DATA / f"{name}.json.gz"


@cache
def raw(name: str) -> dict[str, Any]:
    """The trace as JSON, for counting expected values independently of the parser."""
    return load_trace(_path(name))


@cache
def evidence(name: str) -> Evidence:
    return trace_evidence(raw(name))


def count(name: str, keep: Callable[[dict[str, Any]], bool]) -> int:
    return sum(1 for event in raw(name)["traceEvents"] if keep(event))


@pytest.mark.parametrize("name", [*LOCAL, *LARGE])
@pytest.mark.slow
def test_every_metric_is_in_the_catalogue_with_its_kind(name: str) -> None:
    found = evidence(name)
    kinds = {"number": float, "bool": bool, "text": str}
    for key, value in found.items():
        assert key in EVIDENCE, key
        assert type(value) is kinds[EVIDENCE[key].kind], (key, value)
    for key in SHARE_NAMES:
        if key in found:
            assert 0.0 <= float(found[key]) <= 1.0, (key, found[key])


def test_a100_training_is_segmented_into_its_profiler_steps() -> None:
    found = evidence("a100-train-control")
    steps = [
        e["dur"]
        for e in raw("a100-train-control")["traceEvents"]
        if e.get("cat") == "user_annotation" and str(e["name"]).startswith("ProfilerStep#")
    ]
    assert found["profiled_steps"] == len(steps) == 6
    mean_ms = sum(steps) / len(steps) / 1000
    # The GPU may finish the last step's kernels after its host marker closes: at most a few %.
    assert mean_ms <= float(found["step_time_ms"]) < mean_ms * 1.05
    assert found["compute_capability"] == "8.0"
    assert found["gpu_vendor"] == "nvidia"


def test_a100_training_breakdown_names_its_costs() -> None:
    found = evidence("a100-train-control")
    # All-to-all and all-reduce NCCL kernels, cuBLAS/CUTLASS GEMMs, an Adagrad step, a DataLoader.
    assert float(found["communication_share"]) > 0.1
    assert float(found["matmul_share"]) > 0.05
    assert float(found["optimizer_share"]) > 0
    assert float(found["dataloader_wait_share"]) > 0
    assert float(found["other_share"]) < 0.05
    assert found["gpu_utilisation"] == pytest.approx(1 - float(found["gpu_idle_share"]))
    # fp32 inputs on cutlass ``s1688gemm`` tensor-op kernels: TF32.
    assert found["matmul_dtype"] == "tf32"
    # Batch copies come from pinned memory; the ten syncs per step are .item()/DtoH reads.
    assert found["h2d_from_pageable"] is False
    syncs = count("a100-train-control", lambda e: e.get("name") == "cudaStreamSynchronize")
    assert found["host_sync_count"] == pytest.approx(syncs / 6)


def test_two_runs_of_one_job_differ_where_the_change_is() -> None:
    control, changed = evidence("a100-train-control"), evidence("a100-train-test")
    assert float(changed["copy_share"]) > 2 * float(control["copy_share"])
    assert changed["compiled"] is True
    assert "compiled" not in control  # no compiled regions: absent, not False


def test_alexnet_layout_conversions_and_host_syncs() -> None:
    name = "a100-alexnet-forward"
    found = evidence(name)
    assert "profiled_steps" not in found  # no ProfilerStep markers: one window, no step time
    assert float(found["layout_conversion_share"]) > 0
    syncs = count(
        name, lambda e: e.get("name") in ("cudaDeviceSynchronize", "cudaStreamSynchronize")
    )
    assert syncs == 21
    assert found["host_sync_count"] == syncs
    assert found["conv_dtype"] == "tf32"  # sm80_xmma_fprop_implicit_gemm_…tf32…
    assert found["h2d_from_pageable"] is True
    assert found["h2d_pageable_fraction"] == 1.0
    copies = count(name, lambda e: str(e.get("name", "")).startswith("Memcpy HtoD"))
    assert found["h2d_copy_count"] == copies


def test_layout_kernels_are_their_own_category_not_convolution() -> None:
    name = "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelData"
    assert kernel_family(name) == "layout_conversion"


def test_qwen_sdpa_flash_is_not_taken_for_manual_attention() -> None:
    found = evidence("h100-qwen-0.5b-inference-sdpa")
    assert found["sdpa_used"] is True
    assert found["flash_attention_used"] is True
    assert found["manual_attention_detected"] is False
    assert float(found["attention_share"]) > 0
    assert found["matmul_dtype"] == "bf16"
    assert found["compute_capability"] == "9.0"


def test_owlv2_hopper_gemms_and_attention_without_sdpa() -> None:
    found = evidence("h100-owlv2-inference-bf16")
    assert found["sdpa_used"] is False
    assert found["manual_attention_detected"] is True
    softmaxes = count(
        "h100-owlv2-inference-bf16",
        lambda e: e.get("cat") == "cpu_op" and e.get("name") == "aten::softmax",
    )
    assert found["manual_attention_count"] == softmaxes == 180  # one per layer and image
    assert found["matmul_dtype"] == "bf16"
    assert float(found["matmul_share"]) > 0.01
    assert float(found["other_share"]) < 0.02  # Hopper GEMMs are recognised, not "other"
    # The scores are (5185 x 64) x (64 x 5185): 5185 is no multiple of 8.
    assert found["matmul_dims_aligned"] is False
    assert "5185" in str(found["hot_matmul_dims"])


def test_hopper_and_blackwell_gemm_names() -> None:
    hopper = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"
    assert kernel_family(hopper) == "matmul"
    assert kernel_dtype(hopper) == "bf16"
    assert kernel_family("nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT") == "matmul"
    assert kernel_family("bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3") == "matmul"
    assert kernel_family("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6>") == (
        "matmul"
    )
    assert kernel_dtype("cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4") == "tf32"
    assert kernel_dtype("ampere_sgemm_32x32_sliced1x4_tn") == "fp32"
    # "Convert" is a type cast, not a convolution.
    assert kernel_family("vllm::_typeConvert<c10::BFloat16>") == "elementwise"
    assert kernel_family("a_kernel_from_a_gpu_not_yet_released") == "other"


def test_b200_newer_kernel_names_are_sorted_or_other_never_a_crash() -> None:
    found = evidence("b200-vllm-eager")
    assert found["compute_capability"] == "10.0"
    assert float(found["matmul_share"]) > 0  # nvjet_* and bmm_* FP4/FP8 GEMMs
    assert float(found["communication_share"]) > 0  # multimem all-reduce
    assert found["flash_attention_used"] is True  # fmhaSm100a kernels
    assert found["matmul_dtype"] == "bf16"


def test_mi300_rocm_trace_degrades_clearly() -> None:
    found = evidence("mi300-resnet-train-checkpointing")
    assert found["gpu_vendor"] == "amd"
    assert found["gpu_name"] == "AMD Instinct MI300X"
    # ROCm reports gfx9.4 as "9.4": not a CUDA compute capability, so it is absent.
    assert "compute_capability" not in found
    assert float(found["conv_share"]) > 0  # MIOpen igemm / composable-kernel convolutions
    assert float(found["layout_conversion_share"]) > 0  # MIOpen batched_transpose kernels
    assert found["profiled_steps"] == 3


def test_v100_convnet_training_is_convolution_bound_in_fp32() -> None:
    found = evidence("v100-train")
    assert found["compute_capability"] == "7.0"
    assert float(found["conv_share"]) > 0.3
    assert float(found["conv_share"]) > float(found["matmul_share"])
    assert found["conv_dtype"] == "fp32"


def test_cpu_only_trace_has_no_gpu_metrics() -> None:
    found = evidence("cpu-only")
    assert found["device"] == "cpu"
    assert found["profiled_steps"] == 1
    cuda_only = {name for name, spec in EVIDENCE.items() if spec.devices == ("cuda",)}
    assert not cuda_only & set(found)


def test_facts_override_the_trace_and_cpu_runs_drop_cuda_facts() -> None:
    trace = load_trace(_path("cpu-only"))
    facts = {"device": "cpu", "tf32_matmul": False, "optimizer_class": "AdamW", "compiled": True}
    found = evidence_from_trace(trace, facts)
    assert found["optimizer_class"] == "AdamW"
    assert found["compiled"] is True
    assert "tf32_matmul" not in found  # a CUDA-only fact on a CPU run is absent


def test_mfu_and_gc_share_come_from_facts_and_the_trace_step_time() -> None:
    trace = load_trace(_path("h100-qwen-0.5b-inference-sdpa"))
    step_ms = float(trace_evidence(trace)["step_time_ms"])
    facts = {"flops_per_step": 1e13, "peak_tflops": 989.4, "gc_pause_ms_per_step": step_ms / 10}
    found = evidence_from_trace(trace, facts)
    assert found["mfu"] == pytest.approx(1e13 / (step_ms / 1000) / 989.4e12)
    assert found["gc_pause_share"] == pytest.approx(0.1)
    assert not {"flops_per_step", "peak_tflops", "gc_pause_ms_per_step"} & set(found)


def test_op_dtype_reads_inputs_and_refines_fp32_by_kernel() -> None:
    assert op_dtype({"Input type": ["c10::BFloat16", "c10::BFloat16"]}) == "bf16"
    assert op_dtype({"Input type": ["float", "float"]}, ["ampere_sgemm_64x64_nn"]) == "fp32"
    assert op_dtype({"Input type": ["float", "float"]}, ["sm80_xmma_gemm_tf32f32"]) == "tf32"
    assert op_dtype({}, ["sm90_xmma_gemm_bf16bf16_bf16f32"]) == "bf16"
    assert op_dtype({"Input type": ["", "Scalar"]}) is None


def test_matmul_operands_skip_the_bias() -> None:
    assert matmul_operands("aten::addmm", [[10], [64, 128], [128, 10], [], []]) == [
        [64, 128],
        [128, 10],
    ]
    assert matmul_operands("aten::bmm", [[4, 7, 8], [4, 8, 16]]) == [[4, 7, 8], [4, 8, 16]]
    assert matmul_operands("aten::mm", [[64, 128]]) == []
