"""What a trace implies about how its workload was configured, each fact with its reason.

A workload perfgate profiles itself comes with facts read from its live objects
(``perfgate.trace.facts``): whether autocast, TF32, channels_last or ``torch.compile`` is on.
A trace a user brings (``perfgate advise --trace``) has only itself, and advice that guesses
a setting fires when the fix is already on (DLProf recommending AMP with AMP enabled). So
each fact here is inferred only from what the trace *records*, and carries the sentence that
says from what:

- autocast: every timed matmul and convolution with fp32 inputs means it was off; a matmul
  whose op took fp32 inputs and whose inner GEMM ran in bf16/fp16 means it was on;
- TF32 (Ampere and newer): fp32 matmuls on ``sgemm`` kernels mean off, on TF32 tensor-op
  kernels (``s1688``, ``tf32``) on;
- convolutions per step, and NCHW from the library's layout-conversion kernels;
- ``torch.compile``: its compiled regions in the trace, or none among its ops;
- GPU memory: the allocator's peak reserved bytes (``profile_memory``) against the device's
  ``totalGlobalMem``;
- the process group (``distributedInfo``), the data-parallel wrapper (its ``nn.Module``
  frame, with ``with_stack``), the GPUs the header lists, the batch (the leading dimension most
  ops' first input shares).

One fact no trace records, ``cudnn.benchmark``, is *assumed* at PyTorch's default (off) where
convolutions ran on a GPU, marked ``assumed`` so the advice that reads it says so. A fact the
trace cannot support is left out, and the rules that need it stay silent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from perfgate.documents.advice import InferredFact
from perfgate.trace.categories import CONV_OPS, MATMUL, compute_dtype, op_category, op_name
from perfgate.trace.compute import compute_ops
from perfgate.trace.facts import device_backend
from perfgate.trace.gpu import compiled_regions, kernel_device
from perfgate.trace.model import Kernel, Trace
from perfgate.trace.timeline import Timeline

FactValue = bool | int | float | str

LAYOUT_KERNELS = ("nchwtonhwc", "nhwctonchw", "batched_transpose")
"""Kernel names (lower-cased) of cuDNN/MIOpen converting NCHW tensors for NHWC kernels."""

WRAPPERS = ("DistributedDataParallel", "FullyShardedDataParallel", "DataParallel")
"""Data-parallel wrappers, as their ``nn.Module: <class>_N`` frame names them."""

AUTOCAST_OFF_FRACTION = 0.99
"""fp32 share of matmul and convolution time from which autocast is read as off."""

_LOW_PRECISION = ("bf16", "fp16")


def infer_facts(timeline: Timeline, found: Mapping[str, FactValue]) -> tuple[InferredFact, ...]:
    """Every configuration fact ``timeline`` implies; ``found`` is the trace's evidence
    (``perfgate.advise.trace_evidence``: dtypes, device, compute capability, steps)."""
    trace = timeline.trace
    steps = max(len(timeline.steps), 1)
    facts = [
        *_autocast(timeline, found),
        *_tf32(found),
        *_convolutions(timeline, steps),
        *_compiled(trace),
        *_memory(trace),
        *_process_group(trace),
        *_wrapper(trace),
        *_gpus(trace, bool(timeline.gpu)),
        *_batch(timeline),
    ]
    return tuple(facts)


def _autocast(timeline: Timeline, found: Mapping[str, FactValue]) -> list[InferredFact]:
    fraction = found.get("fp32_matmul_fraction")
    if isinstance(fraction, float) and fraction >= AUTOCAST_OFF_FRACTION:
        return [
            InferredFact(
                name="autocast_enabled",
                value=False,
                reason="every timed matmul and convolution had fp32 inputs; under autocast "
                "they would have run in bf16 or fp16",
            )
        ]
    host = timeline.host
    for index, (_, kernels) in compute_ops(timeline).items():
        inner = host[index]
        dtype = compute_dtype(inner.event.input_types, [k.dtype for k in kernels])
        outer = inner.parent
        if dtype not in _LOW_PRECISION or outer < 0 or op_category(host[outer].name) != MATMUL:
            continue
        if compute_dtype(host[outer].event.input_types, []) in ("fp32", "tf32"):
            return [
                InferredFact(
                    name="autocast_enabled",
                    value=True,
                    reason=f"{op_name(host[outer].name)} took fp32 inputs and its "
                    f"{op_name(inner.name)} ran in {dtype}: autocast cast them",
                )
            ]
    return []


def _tf32(found: Mapping[str, FactValue]) -> list[InferredFact]:
    capability = found.get("compute_capability")
    dtype = found.get("matmul_dtype")
    if not isinstance(capability, str) or dtype not in ("fp32", "tf32"):
        return []
    try:
        ampere = float(capability) >= 8.0  # TF32 exists from compute capability 8.0
    except ValueError:
        return []
    if not ampere:
        return []
    on = dtype == "tf32"
    return [
        InferredFact(
            name="tf32_matmul",
            value=on,
            reason="fp32 matmuls ran on TF32 tensor-op kernels (s1688/tf32 in their names)"
            if on
            else "fp32 matmuls ran on plain SGEMM kernels: TF32 was off for matmuls",
        )
    ]


def _convolutions(timeline: Timeline, steps: int) -> list[InferredFact]:
    """Forward convolutions per step, NCHW from layout conversions, cuDNN's autotuner assumed."""
    forward = [
        node
        for node in timeline.host
        if node.kind == "op"
        and node.step >= 0
        and op_name(node.name) in CONV_OPS
        and node.parent >= 0
        and op_name(timeline.host[node.parent].name) not in CONV_OPS
        and "backward" not in node.name
    ]
    if not forward:
        return []
    per_step = max(1.0, float(round(len(forward) / steps)))
    facts = [
        InferredFact(
            name="conv_layer_count",
            value=per_step,
            reason=f"{len(forward)} outermost convolution calls in {steps} profiled "
            f"step{'s' if steps != 1 else ''} (recomputed ones included)",
        )
    ]
    layout = [k.name for k in timeline.trace.kernels if _is_layout(k)]
    if layout:
        facts.append(
            InferredFact(
                name="channels_last",
                value=False,
                reason=f"{len(layout)} layout-conversion kernels ({layout[0][:40]}…): the "
                "library transposed NCHW tensors for its NHWC kernels",
            )
        )
    if timeline.gpu:
        facts.append(
            InferredFact(
                name="cudnn_benchmark",
                value=False,
                reason="a trace does not record torch.backends.cudnn.benchmark: assumed off, "
                "PyTorch's default; if you turned it on, this advice does not apply",
                assumed=True,
            )
        )
    return facts


def _is_layout(kernel: Kernel) -> bool:
    lowered = kernel.name.lower()
    return any(name in lowered for name in LAYOUT_KERNELS)


def _compiled(trace: Trace) -> list[InferredFact]:
    regions = compiled_regions(trace)
    if regions:
        return [
            InferredFact(
                name="compiled",
                value=True,
                reason=f"{len(regions)} compiled-region events ({regions[0][:40]})",
            )
        ]
    ops = sum(1 for event in trace.host if event.kind == "op")
    if not ops:
        return []
    return [
        InferredFact(
            name="compiled", value=False, reason=f"no compiled region among the trace's {ops} ops"
        )
    ]


def _memory(trace: Trace) -> list[InferredFact]:
    """Peak reserved CUDA memory of the busiest GPU against its total."""
    if not trace.memory_samples:
        return []
    device = kernel_device(trace)
    samples = [
        s.reserved_bytes
        for s in trace.memory_samples
        if device is None or s.device is None or s.device == device.id
    ]
    total = device.total_memory if device is not None else None
    if not samples or total is None:
        return []
    peak = max(samples)
    where = f"GPU {device.id}" if device is not None else "the GPU"
    return [
        InferredFact(
            name="memory_peak_bytes",
            value=peak,
            reason=f"largest 'Total Reserved' of the [memory] events on {where}",
        ),
        InferredFact(
            name="memory_total_bytes",
            value=total,
            reason=f"totalGlobalMem of {where} in deviceProperties",
        ),
        InferredFact(
            name="memory_headroom_fraction",
            value=max(0.0, 1.0 - peak / total),
            reason="1 - peak reserved / total memory",
        ),
    ]


def _process_group(trace: Trace) -> list[InferredFact]:
    """World size and backend from ``distributedInfo`` (Kineto writes the default process
    group's there when one is initialised)."""
    info = trace.distributed
    if info is None:
        return []
    facts = []
    size = info.world_size
    if isinstance(size, int) and not isinstance(size, bool) and size >= 1:
        facts.append(
            InferredFact(
                name="world_size",
                value=float(size),
                reason=f"distributedInfo in the trace header: world_size {size}",
            )
        )
    if info.backend:
        backend = device_backend(info.backend, "cuda" if trace.kernels else "cpu")
        facts.append(
            InferredFact(
                name="dist_backend",
                value=backend,
                reason=f"distributedInfo in the trace header: backend {info.backend!r}",
            )
        )
    return facts


def _wrapper(trace: Trace) -> list[InferredFact]:
    """The data-parallel wrapper from its module frame; nothing without Python frames."""
    if not trace.python:
        return []
    for frame in trace.python:
        if not frame.name.startswith("nn.Module: "):
            continue
        module = frame.name.removeprefix("nn.Module: ").rsplit("_", 1)[0]
        if module in WRAPPERS:
            return [
                InferredFact(
                    name="model_wrapper",
                    value=module,
                    reason=f"the {frame.name!r} frame (recorded with_stack)",
                )
            ]
    return [
        InferredFact(
            name="model_wrapper",
            value="none",
            reason="no data-parallel module among the trace's nn.Module frames",
        )
    ]


def _gpus(trace: Trace, gpu: bool) -> list[InferredFact]:
    if not gpu or not trace.devices:
        return []
    count = len(trace.devices)
    return [
        InferredFact(
            name="gpu_count",
            value=float(count),
            reason=f"{count} GPU{'s' if count != 1 else ''} in the header's deviceProperties "
            "(every GPU the process could see)",
        )
    ]


def _batch(timeline: Timeline) -> list[InferredFact]:
    """The leading dimension most ops' first input shares (activations are batch-major; a
    weight's leading dimension varies from layer to layer, so it rarely wins)."""
    leading: Counter[int] = Counter()
    for node in timeline.host:
        if node.kind != "op" or node.step < 0 or not node.event.input_dims:
            continue
        first = node.event.input_dims[0]
        if isinstance(first, list) and len(first) >= 3 and isinstance(first[0], int):
            leading[first[0]] += 1
    if not leading:
        return []
    (batch, count), total = leading.most_common(1)[0], sum(leading.values())
    if batch < 1:
        return []
    return [
        InferredFact(
            name="batch_size",
            value=float(batch),
            reason=f"the leading dimension of {count} of the {total} ops whose first input has "
            "3 or more dimensions",
        )
    ]
