"""What each real trace in ``tests/data/advise/`` must give: the rules that fire and, for the
rules that stay silent, why. Read by the recorded-evidence tests (``test_advise_gpu_rules``)
and by ``perfgate advise --trace`` on the traces themselves (``test_advise_trace_files``)."""

from __future__ import annotations

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
