"""The evidence catalogue: every metric a rule may read, with its kind, unit and devices.

Rules name evidence by these keys, so the catalogue is the contract between the profiling side
(``perfgate.advise.trace_evidence``, ``perfgate.trace.facts``) and the rule files. A metric is
*absent* from an evidence dict when it cannot be measured on the device or in the trace at hand
(never ``0`` or ``False`` as a stand-in), and a rule that requires it does not fire: that is how
a CPU run avoids "GPU idle 0 %" advice and a trace without shapes avoids "dims misaligned".

Conventions: a ``share`` is a fraction (0–1) of the profiled step time, so a rule's saving is
``share × (1 − 1/speed-up)`` (Amdahl). On CUDA the device categories (matmul … other) are GPU
timeline time and ``dataloader_wait_share``/``host_sync_share`` host time, so shares of one step
may overlap and need not sum to 1; on CPU they are op self time, the median over the steps
(one preempted step does not move them). A ``fraction`` is 0–1 of something else, named in the
description; a ``count`` is per profiled step unless the description says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Evidence = dict[str, float | bool | str]
"""Evidence of one workload: catalogue name → value; a metric not measured is absent."""

EvidenceKind = Literal["number", "bool", "text"]
Device = Literal["cpu", "cuda"]
Source = Literal["trace", "facts", "context"]

BOTH: tuple[Device, ...] = ("cpu", "cuda")
CUDA: tuple[Device, ...] = ("cuda",)


@dataclass(frozen=True, kw_only=True)
class EvidenceSpec:
    """One evidence metric, as rule authors and report readers see it."""

    name: str
    """snake_case key in the evidence dict."""
    kind: EvidenceKind
    """``number`` (float), ``bool`` or ``text``."""
    unit: str
    """``share`` (of step time), ``fraction``, ``count``, ``ms``, ``us``, ``bytes``, ``tflops`` or
    ``""``."""
    description: str
    """What it means, in one sentence a report can show next to the value."""
    devices: tuple[Device, ...]
    """Devices on which it can be measured; on any other it is absent."""
    source: Source
    """``trace`` (the profiler window), ``facts`` (live objects in the worker) or ``context``."""


def _spec(
    name: str, kind: EvidenceKind, unit: str, devices: tuple[Device, ...], source: Source, text: str
) -> EvidenceSpec:
    return EvidenceSpec(
        name=name, kind=kind, unit=unit, description=text, devices=devices, source=source
    )


_SPECS: tuple[EvidenceSpec, ...] = (
    # --- context: what was profiled --------------------------------------------------------
    _spec("device", "text", "", BOTH, "context", "torch device the window ran on: cpu or cuda"),
    _spec(
        "workload_kind",
        "text",
        "",
        BOTH,
        "context",
        "transformer, convnet, mlp, datapipe, distributed (ddp) for built-ins; user otherwise",
    ),
    _spec(
        "compute_capability",
        "text",
        "",
        CUDA,
        "facts",
        "CUDA compute capability, e.g. 8.0 (A100), 9.0 (H100); absent on ROCm and CPU",
    ),
    _spec("gpu_name", "text", "", CUDA, "facts", "GPU model as torch or the trace names it"),
    _spec("gpu_vendor", "text", "", CUDA, "trace", "nvidia or amd, from the trace's devices"),
    _spec("profiled_steps", "number", "count", BOTH, "trace", "ProfilerStep#N windows analysed"),
    _spec(
        "step_time_ms",
        "number",
        "ms",
        BOTH,
        "trace",
        "mean profiled step duration (profiler overhead included; timing belongs to perfgate run)",
    ),
    # --- where step time goes (shares of step time) ------------------------------------------
    _spec(
        "matmul_share",
        "number",
        "share",
        BOTH,
        "trace",
        "matrix multiplications (mm, addmm, bmm, linear, GEMM kernels), attention excluded",
    ),
    _spec("conv_share", "number", "share", BOTH, "trace", "convolutions, forward and backward"),
    _spec(
        "attention_share",
        "number",
        "share",
        BOTH,
        "trace",
        "attention: fused SDPA/flash kernels, or the matmuls and softmax of a manual pattern",
    ),
    _spec(
        "elementwise_share",
        "number",
        "share",
        BOTH,
        "trace",
        "pointwise and reduction work: activations, add/mul, norms, softmax, losses",
    ),
    _spec(
        "copy_share",
        "number",
        "share",
        BOTH,
        "trace",
        "device-local copies: copy_, contiguous, clone, to/_to_copy (host transfers excluded)",
    ),
    _spec(
        "layout_conversion_share",
        "number",
        "share",
        CUDA,
        "trace",
        "memory-format conversion kernels (nchwToNhwc, nhwcToNchw, MIOpen batched transposes)",
    ),
    _spec(
        "optimizer_share",
        "number",
        "share",
        BOTH,
        "trace",
        "the optimizer step: Optimizer.step regions (on CUDA the longer of host and kernel time)",
    ),
    _spec(
        "dataloader_wait_share",
        "number",
        "share",
        BOTH,
        "trace",
        "host time blocked fetching the next batch (DataLoader __next__, the batch fetch)",
    ),
    _spec(
        "host_sync_share",
        "number",
        "share",
        BOTH,
        "trace",
        "host blocked on the device: synchronize calls (CUDA); .item() outside the optimizer (CPU)",
    ),
    _spec(
        "h2d_copy_share",
        "number",
        "share",
        CUDA,
        "trace",
        "host-to-device memcpy time (Memcpy HtoD on the GPU timeline)",
    ),
    _spec(
        "communication_share",
        "number",
        "share",
        BOTH,
        "trace",
        "collectives: NCCL/RCCL kernels on the GPU timeline; gloo collectives on their CPU thread",
    ),
    _spec(
        "communication_exposed_share",
        "number",
        "share",
        BOTH,
        "trace",
        "collective communication not overlapped by computation (the part a step waits for)",
    ),
    _spec(
        "communication_overlap",
        "number",
        "fraction",
        BOTH,
        "trace",
        "fraction of collective time hidden behind computation",
    ),
    _spec(
        "other_share",
        "number",
        "share",
        BOTH,
        "trace",
        "device work in no category above (unknown kernel names land here, never crash)",
    ),
    _spec(
        "gpu_idle_share",
        "number",
        "share",
        CUDA,
        "trace",
        "step time in which no kernel or memcpy ran on the GPU (host-bound or waiting)",
    ),
    _spec(
        "gpu_utilisation",
        "number",
        "fraction",
        CUDA,
        "trace",
        "fraction of step time with any GPU activity, from the kernel timeline (1 − idle share)",
    ),
    # --- host syncs and transfers -----------------------------------------------------------
    _spec(
        "host_sync_count",
        "number",
        "count",
        BOTH,
        "trace",
        "host syncs per step: CUDA synchronize calls; on CPU .item() outside the optimizer",
    ),
    _spec(
        "item_call_count",
        "number",
        "count",
        BOTH,
        "trace",
        "aten::item calls per step outside the optimizer step (loss logging, data-dependent code)",
    ),
    _spec("h2d_copy_count", "number", "count", CUDA, "trace", "host-to-device memcpys per step"),
    _spec("h2d_bytes", "number", "bytes", CUDA, "trace", "host-to-device bytes per step"),
    _spec(
        "h2d_pageable_fraction",
        "number",
        "fraction",
        CUDA,
        "trace",
        "fraction of host-to-device bytes copied from pageable (not pinned) memory",
    ),
    _spec(
        "h2d_from_pageable",
        "bool",
        "",
        CUDA,
        "trace",
        "some host-to-device copy came from pageable memory (Pageable -> Device)",
    ),
    # --- precision --------------------------------------------------------------------------
    _spec(
        "matmul_dtype",
        "text",
        "",
        BOTH,
        "trace",
        "dtype carrying most matmul time: fp32, tf32, bf16, fp16, fp8 (op inputs or kernel names)",
    ),
    _spec("conv_dtype", "text", "", BOTH, "trace", "dtype carrying most convolution time"),
    _spec(
        "fp32_matmul_fraction",
        "number",
        "fraction",
        BOTH,
        "trace",
        "fraction of matmul+conv time (dtype known) running in fp32 (TF32 counted as fp32)",
    ),
    _spec(
        "compute_dtype",
        "text",
        "",
        BOTH,
        "facts",
        "dtype the workload declares for its hot matmuls (fp32, tf32, bf16, fp16)",
    ),
    _spec(
        "autocast_enabled",
        "bool",
        "",
        BOTH,
        "facts",
        "the workload trains under autocast (its precision knob is bf16 or fp16)",
    ),
    _spec(
        "tf32_matmul",
        "bool",
        "",
        CUDA,
        "facts",
        "fp32 matmuls may use TF32 (allow_tf32, or float32_matmul_precision high/medium)",
    ),
    _spec("tf32_cudnn", "bool", "", CUDA, "facts", "cuDNN convolutions may use TF32"),
    _spec(
        "float32_matmul_precision",
        "text",
        "",
        BOTH,
        "facts",
        "torch.get_float32_matmul_precision(): highest, high or medium",
    ),
    # --- attention ---------------------------------------------------------------------------
    _spec(
        "sdpa_used",
        "bool",
        "",
        BOTH,
        "trace",
        "scaled_dot_product_attention ran (any backend)",
    ),
    _spec(
        "flash_attention_used",
        "bool",
        "",
        BOTH,
        "trace",
        "a fused attention backend ran (flash, memory-efficient, cuDNN, or flash/fmha kernels)",
    ),
    _spec(
        "manual_attention_detected",
        "bool",
        "",
        BOTH,
        "trace",
        "a matmul → softmax → matmul chain ran outside SDPA (hand-written attention)",
    ),
    _spec(
        "manual_attention_count",
        "number",
        "count",
        BOTH,
        "trace",
        "hand-written attention blocks per step (forward softmaxes inside such chains)",
    ),
    # --- the code behind a finding (perfgate.trace.sites) ----------------------------------------
    _spec(
        "attention_pattern",
        "text",
        "",
        BOTH,
        "trace",
        "what the explicit attention is: multihead_attention_weights (nn.MultiheadAttention "
        "returning its weights) or hand_written",
    ),
    _spec(
        "attention_site",
        "text",
        "",
        BOTH,
        "trace",
        "module and source line of the explicit attention, as far as the profile tells",
    ),
    _spec(
        "copy_pattern",
        "text",
        "",
        BOTH,
        "trace",
        "what carries most copy time: contiguous, cast (.to/.float), clone, reshape (of a "
        "non-contiguous tensor), copy_ or other",
    ),
    _spec("copy_site", "text", "", BOTH, "trace", "module and source line of the heaviest copy"),
    # --- the explicit attention's shape (an SDPA microbenchmark runs at it) -------------------
    _spec(
        "attention_batch_heads",
        "number",
        "count",
        BOTH,
        "trace",
        "batch × heads of the explicit attention's query (its leading dimensions)",
    ),
    _spec("attention_query_len", "number", "count", BOTH, "trace", "query sequence length"),
    _spec("attention_key_len", "number", "count", BOTH, "trace", "key sequence length"),
    _spec("attention_head_dim", "number", "count", BOTH, "trace", "width of one attention head"),
    _spec("attention_dtype", "text", "", BOTH, "trace", "dtype of the attention scores"),
    _spec("attention_causal", "bool", "", BOTH, "trace", "a mask was applied to the scores"),
    _spec(
        "attention_dropout",
        "number",
        "fraction",
        BOTH,
        "trace",
        "dropout probability between the softmax and the second matmul (0: none)",
    ),
    _spec(
        "sync_pattern",
        "text",
        "",
        BOTH,
        "trace",
        "what makes the host wait: item (.item()), device_to_host_copy (.cpu(), .tolist()) or "
        "synchronize (an explicit torch.cuda.synchronize())",
    ),
    _spec("sync_site", "text", "", BOTH, "trace", "module and source line of the heaviest sync"),
    # --- shapes and kernels --------------------------------------------------------------------
    _spec(
        "matmul_dims_aligned",
        "bool",
        "",
        BOTH,
        "trace",
        "every dimension of the hot matmuls is a multiple of 8 (tensor-core friendly)",
    ),
    _spec(
        "misaligned_matmul_fraction",
        "number",
        "fraction",
        BOTH,
        "trace",
        "fraction of matmul time (shapes known) with some dimension not a multiple of 8",
    ),
    _spec(
        "hot_matmul_dims",
        "text",
        "",
        BOTH,
        "trace",
        "input shapes of the matmul op carrying the most time, e.g. [64, 512]x[512, 2048]",
    ),
    _spec("kernel_count", "number", "count", CUDA, "trace", "GPU kernels launched per step"),
    _spec(
        "short_kernel_count",
        "number",
        "count",
        CUDA,
        "trace",
        "GPU kernels per step shorter than 10 µs (launch-overhead bound)",
    ),
    _spec(
        "short_kernel_fraction",
        "number",
        "fraction",
        CUDA,
        "trace",
        "fraction of kernels (by count) shorter than 10 µs",
    ),
    _spec(
        "short_kernel_mean_us",
        "number",
        "us",
        CUDA,
        "trace",
        "mean duration of the short kernels",
    ),
    _spec("op_count", "number", "count", BOTH, "trace", "top-level aten ops dispatched per step"),
    # --- optimizer ---------------------------------------------------------------------------
    _spec("optimizer_class", "text", "", BOTH, "facts", "optimizer class name, e.g. AdamW"),
    _spec(
        "optimizer_fused",
        "bool",
        "",
        BOTH,
        "facts",
        "the optimizer runs its fused implementation (fused=True)",
    ),
    _spec(
        "optimizer_foreach",
        "bool",
        "",
        BOTH,
        "facts",
        "the optimizer runs multi-tensor foreach kernels (explicit, or torch's CUDA default)",
    ),
    _spec(
        "optimizer_supports_fused",
        "bool",
        "",
        BOTH,
        "facts",
        "the optimizer class accepts fused=True (so the advice can be applied)",
    ),
    _spec(
        "optimizer_param_count",
        "number",
        "count",
        BOTH,
        "facts",
        "elements of the parameters the optimizer updates (the fused-step benchmark's size)",
    ),
    _spec(
        "optimizer_param_tensors",
        "number",
        "count",
        BOTH,
        "facts",
        "parameter tensors the optimizer updates (per-tensor launches a fused step saves)",
    ),
    # --- data loading ------------------------------------------------------------------------
    _spec(
        "dataloader_present",
        "bool",
        "",
        BOTH,
        "facts",
        "the workload exposes a torch DataLoader (the settings below exist only then)",
    ),
    _spec("dataloader_num_workers", "number", "count", BOTH, "facts", "DataLoader num_workers"),
    _spec("dataloader_pin_memory", "bool", "", BOTH, "facts", "DataLoader pin_memory"),
    _spec(
        "dataloader_prefetch_factor",
        "number",
        "count",
        BOTH,
        "facts",
        "batches prefetched per worker (absent when num_workers is 0)",
    ),
    _spec(
        "dataloader_persistent_workers",
        "bool",
        "",
        BOTH,
        "facts",
        "DataLoader workers survive between epochs",
    ),
    _spec(
        "cpu_cores_available",
        "number",
        "count",
        BOTH,
        "facts",
        "CPU cores this process may run on (sched_getaffinity), the ceiling for num_workers",
    ),
    _spec("batch_size", "number", "count", BOTH, "facts", "samples per training step"),
    # --- model state -------------------------------------------------------------------------
    _spec(
        "conv_layer_count",
        "number",
        "count",
        BOTH,
        "facts",
        "2-D convolution modules in the model (count of the whole model, not per step)",
    ),
    _spec(
        "channels_last",
        "bool",
        "",
        BOTH,
        "facts",
        "the conv weights are in channels_last memory format (absent without convolutions)",
    ),
    _spec(
        "compiled",
        "bool",
        "",
        BOTH,
        "facts",
        "the model runs under torch.compile (or compiled regions appear in the trace)",
    ),
    _spec(
        "cudnn_benchmark",
        "bool",
        "",
        CUDA,
        "facts",
        "torch.backends.cudnn.benchmark (autotuned convolution algorithms)",
    ),
    # --- memory and utilisation ----------------------------------------------------------------
    _spec(
        "memory_peak_bytes",
        "number",
        "bytes",
        BOTH,
        "facts",
        "peak memory: CUDA caching allocator reserved bytes, or process RSS on CPU",
    ),
    _spec(
        "memory_total_bytes",
        "number",
        "bytes",
        BOTH,
        "facts",
        "memory the workload could use: GPU total, or RSS plus available host memory on CPU",
    ),
    _spec(
        "memory_headroom_fraction",
        "number",
        "fraction",
        BOTH,
        "facts",
        "1 − peak/total: room left for a larger batch",
    ),
    _spec(
        "achieved_tflops",
        "number",
        "tflops",
        BOTH,
        "facts",
        "FLOP rate of the profiled window (FLOPs per step / step time): against the machine's "
        "measured matmul ceiling it tells compute from framework overhead on a CPU",
    ),
    _spec(
        "mfu",
        "number",
        "fraction",
        CUDA,
        "facts",
        "model FLOPs utilisation in the profiled window (FLOPs per step / step time / peak)",
    ),
    _spec(
        "gc_pause_share",
        "number",
        "share",
        BOTH,
        "facts",
        "step time spent in Python garbage collection during the window",
    ),
    _spec(
        "gc_collections",
        "number",
        "count",
        BOTH,
        "facts",
        "garbage collections per step during the window",
    ),
    # --- distributed training (facts only inside a process group or a wrapped model) ----------
    _spec(
        "world_size",
        "number",
        "count",
        BOTH,
        "facts",
        "processes training together (torch.distributed world size); absent outside a group",
    ),
    _spec(
        "dist_backend",
        "text",
        "",
        BOTH,
        "facts",
        "torch.distributed backend for the run's device: nccl (RCCL on ROCm too), gloo, mpi, ucc",
    ),
    _spec(
        "model_wrapper",
        "text",
        "",
        BOTH,
        "facts",
        "data-parallel wrapper: DistributedDataParallel, DataParallel, FullyShardedDataParallel "
        "or none",
    ),
    _spec(
        "ddp_bucket_cap_mb",
        "number",
        "",
        BOTH,
        "facts",
        "DistributedDataParallel gradient bucket cap in MiB (bucket_cap_mb; torch's default 25)",
    ),
    _spec(
        "ddp_gradient_as_bucket_view",
        "bool",
        "",
        BOTH,
        "facts",
        "DistributedDataParallel gradients are views into the all-reduce buckets (no copy)",
    ),
    _spec(
        "grad_accumulation_steps",
        "number",
        "count",
        BOTH,
        "facts",
        "micro-batches per optimizer step (the grad_accumulation knob; absent without one)",
    ),
    _spec(
        "gpu_count",
        "number",
        "count",
        CUDA,
        "facts",
        "GPUs visible to the process (torch.cuda.device_count())",
    ),
    _spec(
        "rank_imbalance",
        "number",
        "fraction",
        BOTH,
        "trace",
        "(slowest − fastest) / slowest per-rank compute time in the profiled window: the share "
        "the fast ranks wait at each collective",
    ),
)

EVIDENCE: dict[str, EvidenceSpec] = {spec.name: spec for spec in _SPECS}
"""Evidence name → its specification; the names rule files may reference."""

SHARE_NAMES: tuple[str, ...] = tuple(s.name for s in _SPECS if s.unit == "share")
"""Every share of step time, for reports that draw the breakdown."""
