"""The categories step time is split into, and the names that sort kernels and ops into them.

A kernel is sorted by its name (:func:`kernel_family`: the first family whose pattern matches
wins, and a name no pattern knows is ``other``, never an error), an op by its own name
(:func:`op_category`, ``None`` leaving it to its ancestors). Both tables are data, checked
against real traces of five GPU generations in ``tests/test_advise_traces.py``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

MATMUL, CONV, ATTENTION, ELEMENTWISE, COPY, LAYOUT = (
    "matmul",
    "conv",
    "attention",
    "elementwise",
    "copy",
    "layout_conversion",
)
OPTIMIZER, DATALOADER, SYNC, H2D, COMM, OTHER = (
    "optimizer",
    "dataloader_wait",
    "host_sync",
    "h2d_copy",
    "communication",
    "other",
)

MATMUL_OPS = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "einsum", "addmv", "mv", "dot",
    "_scaled_mm", "_addmm_activation", "mkldnn_linear", "_int_mm",
})  # fmt: skip
BATCHED_MATMUL_OPS = frozenset({"bmm", "baddbmm", "matmul", "einsum"})
CONV_OPS = frozenset({
    "conv1d", "conv2d", "conv3d", "convolution", "_convolution", "cudnn_convolution",
    "mkldnn_convolution", "miopen_convolution", "convolution_overrideable",
    "_slow_conv2d_forward", "slow_conv3d", "thnn_conv2d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "convolution_backward", "cudnn_convolution_transpose",
    "miopen_convolution_transpose", "_nnpack_spatial_convolution", "slow_conv_dilated2d",
    "_slow_conv2d_backward",
})  # fmt: skip
COPY_OPS = frozenset({
    "copy_", "contiguous", "clone", "to", "_to_copy", "to_copy", "_copy_from",
    "_copy_from_and_resize", "copy",
})  # fmt: skip
SYNC_OPS = frozenset({"item", "_local_scalar_dense", "local_scalar_dense"})
SOFTMAX_OPS = frozenset({"softmax", "_softmax", "_safe_softmax", "safe_softmax"})
BOOKKEEPING_OPS = frozenset({
    "view", "_unsafe_view", "unsafe_view", "reshape", "_reshape_alias", "t", "transpose",
    "permute", "expand", "as_strided", "slice", "select", "narrow", "detach", "alias", "squeeze",
    "unsqueeze", "flatten", "unflatten", "split", "chunk", "unbind", "empty", "empty_strided",
    "empty_like", "new_empty", "resize_", "set_", "lift_fresh", "resolve_conj", "resolve_neg",
    "_has_compatible_shallow_copy_type", "is_nonzero", "size", "stride", "numel",
})  # fmt: skip
FUSED_ATTENTION = re.compile(
    r"scaled_?dot_?product|flash_?attention|efficient_?attention|cudnn_?attention|flash_attn",
    re.IGNORECASE,
)
"""An op that is itself fused attention (SDPA or one of its kernels' ops)."""
FLASH_OPS = re.compile(
    r"flash|efficient_attention|cudnn_attention|EfficientAttention|CudnnAttention", re.IGNORECASE
)
SYNC_CALLS = frozenset(
    f"{api}{what}Synchronize" for api in ("cuda", "hip") for what in ("Device", "Stream", "Event")
) | frozenset({"cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize"})
"""Runtime calls that block the host until the GPU catches up."""
FETCH_RANGE = "perfgate.batch_fetch"
"""The record_function name the profile window puts around each batch fetch."""
REGION_PREFIXES = (
    ("Optimizer.step", OPTIMIZER),
    ("enumerate(DataLoader)", DATALOADER),
    (FETCH_RANGE, DATALOADER),
)
"""Host ranges whose whole time (and everything below them) belongs to one category."""
STEP_NAME = re.compile(r"^ProfilerStep#\d+$")
MODULE_RANGE = "perfgate.module: "
"""Prefix of the ranges perfgate's profiling window opens around a model's modules
(``perfgate.trace.capture``): where an op ran, never what it is (no category, no pattern)."""
COLLECTIVE = re.compile(r"^(?:gloo|nccl|mpi|ucc):")
"""A collective as the process group records it on its communication thread."""
COMM_CALL = re.compile(
    r"^(?:_?c10d(?:_functional)?::|(?:gloo|nccl|mpi|ucc):|record_param_comms$|aten::wait$)"
)
"""Main-thread ops that issue or wait for a collective: communication, not computation."""

_BACKWARD_NODE = re.compile(r"^(?:autograd::engine::evaluate_function: )?(\w+?)Backward\d*$")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")

# Kernel names, checked in order: the first family whose pattern matches (lower-cased) wins.
_KERNEL_FAMILIES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (category, re.compile(pattern))
    for category, pattern in (
        (COMM, r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|multimem|all_?to_?all"
               r"|cross_device_reduce"),
        (LAYOUT, r"nchwtonhwc|nhwctonchw|nchw2nhwc|nhwc2nchw|batched_transpose|transpose_nchw"
                 r"|transpose_nhwc"),
        (ATTENTION, r"flash|fmha|attention|attn|sdpa"),
        (CONV, r"conv(?!ert)|fprop|dgrad|wgrad|winograd|implicit_gemm|implicit_convolve|igemm"
               r"|cudnn::cnn"),
        (MATMUL, r"gemm|gemv|nvjet|cijk_|matmul|cublas|splitkreduce|xmma|cutlass|^bmm_|_mm_"
                 r"|dot_kernel"),
        (COPY, r"copy|transpose"),
        (ELEMENTWISE, r"elementwise|vectorized|reduce|softmax|norm|pointwise|triton|activation"
                      r"|gelu|relu|silu|dropout|pool|index|scatter|gather|embedding|loss|fill"
                      r"|foreach|adam|sgd|rotary|quant|cast|convert|sum|mean|max|min|add|mul"),
    )
)  # fmt: skip

_TYPE_NAMES = {
    "float": "fp32",
    "double": "fp64",
    "c10::half": "fp16",
    "c10::bfloat16": "bf16",
    "c10::float8_e4m3fn": "fp8",
    "c10::float8_e5m2": "fp8",
    "c10::float8_e4m3fnuz": "fp8",
    "c10::float8_e5m2fnuz": "fp8",
    "signed char": "int8",
}
_KERNEL_DTYPES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("fp8", ("fp8", "e4m3", "e5m2")),
    ("bf16", ("bf16", "bfloat16")),
    ("fp16", ("fp16", "f16f16", "h1688", "h884", "h16816", "hgemm", "half")),
    ("tf32", ("tf32", "s1688", "s16816")),
    ("fp32", ("sgemm", "f32f32_f32")),
)


@functools.lru_cache(maxsize=8192)
def kernel_family(name: str) -> str:
    """The category a kernel's name implies (``other`` for a family no table knows)."""
    lowered = name.lower()
    for category, pattern in _KERNEL_FAMILIES:
        if pattern.search(lowered):
            return category
    return OTHER


@functools.lru_cache(maxsize=8192)
def kernel_dtype(name: str) -> str | None:
    """The dtype a GEMM/conv kernel name spells (``…bf16…``, ``…s1688gemm…`` = TF32), or None."""
    lowered = name.lower()
    for dtype, needles in _KERNEL_DTYPES:
        if any(needle in lowered for needle in needles):
            return dtype
    return None


@functools.lru_cache(maxsize=8192)
def op_name(name: str) -> str:
    """``aten::addmm`` → ``addmm``; an autograd node ``AddmmBackward0`` → ``addmm``."""
    if "::" in name and not name.startswith("autograd::"):
        return name.split("::", 1)[1]
    match = _BACKWARD_NODE.match(name)
    return _CAMEL.sub("_", match.group(1)).lower() if match else ""


@functools.lru_cache(maxsize=8192)
def op_category(name: str) -> str | None:
    """The category an op's own name implies; None leaves it to its ancestors."""
    if FUSED_ATTENTION.search(name):
        return ATTENTION
    base = op_name(name)
    if not base:
        return None
    for names, category in (
        (MATMUL_OPS, MATMUL),
        (CONV_OPS, CONV),
        (COPY_OPS, COPY),
        (SYNC_OPS, SYNC),
        (BOOKKEEPING_OPS, OTHER),
    ):
        if base in names:
            return category
    return ELEMENTWISE if name.startswith("aten::") or _BACKWARD_NODE.match(name) else None


def is_forward_op(name: str) -> bool:
    """A dispatched op (``aten::…``), not an autograd node named after one."""
    return "::" in name and "Backward" not in name


def op_dtype(event_args: dict[str, Any], kernel_names: Sequence[str] = ()) -> str | None:
    """The compute dtype of a matmul/conv from its event's ``args`` and its kernels' names:
    see :func:`compute_dtype`."""
    types = event_args.get("Input type") or []
    return compute_dtype(types, [kernel_dtype(name) for name in kernel_names])


def compute_dtype(
    input_types: Sequence[str], kernel_dtypes: Sequence[str | None] = ()
) -> str | None:
    """The compute dtype of a matmul/conv: its first tensor input type (``record_shapes``), fp32
    refined to tf32 when its kernel says so, else the first dtype its kernels' names spell
    (:func:`kernel_dtype`); None if unknown."""
    declared = next((_TYPE_NAMES[t.lower()] for t in input_types if t.lower() in _TYPE_NAMES), None)
    from_kernel = next((dtype for dtype in kernel_dtypes if dtype is not None), None)
    if declared == "fp32" and from_kernel == "tf32":
        return "tf32"
    return declared or from_kernel


def matmul_operands(name: str, dims: Sequence[Any]) -> list[list[int]]:
    """The two matrix operands' shapes of a matmul op (a bias or accumulator input skipped)."""
    base = op_name(name)
    skip = 1 if base in ("addmm", "baddbmm", "addbmm", "addmv", "_addmm_activation") else 0
    operands = [d for d in dims[skip : skip + 2] if isinstance(d, list) and d]
    return operands if len(operands) == 2 else []
