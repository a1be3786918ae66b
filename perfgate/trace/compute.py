"""The matmuls and convolutions: which dtype carries their time, and whether the hot matmuls'
dimensions suit tensor cores (from ``Input type``/``Input Dims``: absent without shapes)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from perfgate.trace.categories import (
    CONV,
    MATMUL,
    compute_dtype,
    matmul_operands,
    op_category,
    op_name,
)
from perfgate.trace.model import Kernel
from perfgate.trace.timeline import Timeline

ALIGNMENT = 8
"""Tensor cores want matmul dimensions in multiples of 8 (fp16/bf16; TF32 needs 4)."""

HOT_MATMUL_COVERAGE = 0.9
"""The "hot" matmuls are the biggest ops that together carry this fraction of matmul time."""


@dataclass(frozen=True, kw_only=True)
class Precision:
    """The dtype carrying the most matmul and convolution time; None where unknown."""

    matmul_dtype: str | None
    conv_dtype: str | None
    fp32_matmul_fraction: float | None
    """Share of matmul and convolution time in fp32 or TF32."""


@dataclass(frozen=True, kw_only=True)
class MatmulAlignment:
    """Tensor-core alignment of the matmuls that carry most of the matmul time."""

    aligned: bool
    """Every dimension of every hot matmul a multiple of :data:`ALIGNMENT` (or 1)."""
    misaligned_fraction: float
    """Share of matmul time in ops with a misaligned dimension."""
    hot_dims: str
    """The hottest matmul: ``op [shape]x[shape]``."""


def compute_ops(timeline: Timeline) -> dict[int, tuple[float, list[Kernel]]]:
    """Innermost matmul/conv ops in steps → (time, kernels): kernel time on a GPU trace (a
    kernel belongs to the innermost compute op above its launch), op duration on CPU."""
    host = timeline.host
    result: dict[int, tuple[float, list[Kernel]]] = {}
    if timeline.gpu:
        for node in timeline.gpu:
            kernel = node.activity
            if node.step < 0 or node.launcher < 0 or not isinstance(kernel, Kernel):
                continue
            op = host[node.launcher].compute_op
            if op >= 0:
                time, kernels = result.get(op, (0.0, []))
                kernels.append(kernel)
                result[op] = (time + node.end - node.ts, kernels)
        return result
    enclosing = {
        host[event.parent].compute_op
        for index, event in enumerate(host)
        if event.compute_op == index and event.parent >= 0
    }
    for index, event in enumerate(host):
        if event.step >= 0 and event.compute_op == index and index not in enclosing:
            result[index] = (event.end - event.ts, [])
    return result


def precision(timeline: Timeline) -> Precision:
    """Which dtype carries the matmul and convolution time."""
    by_category: dict[str, defaultdict[str, float]] = {
        MATMUL: defaultdict(float),
        CONV: defaultdict(float),
    }
    for index, (time, kernels) in compute_ops(timeline).items():
        event = timeline.host[index].event
        shortest_first = sorted(kernels, key=lambda kernel: len(kernel.name))
        dtype = compute_dtype(event.input_types, [kernel.dtype for kernel in shortest_first])
        category = op_category(event.name)
        if dtype and category in by_category:
            by_category[category][dtype] += time

    def heaviest(times: defaultdict[str, float]) -> str | None:
        return max(times, key=lambda dtype: times[dtype]) if times else None

    total = sum(sum(times.values()) for times in by_category.values())
    fp32 = sum(times.get("fp32", 0.0) + times.get("tf32", 0.0) for times in by_category.values())
    return Precision(
        matmul_dtype=heaviest(by_category[MATMUL]),
        conv_dtype=heaviest(by_category[CONV]),
        fp32_matmul_fraction=fp32 / total if total > 0 else None,
    )


def matmul_alignment(timeline: Timeline) -> MatmulAlignment | None:
    """Alignment of the hot matmuls; None without matmul shapes."""
    groups: defaultdict[tuple[str, str], float] = defaultdict(float)
    aligned: dict[tuple[str, str], bool] = {}
    for index, (time, _) in compute_ops(timeline).items():
        event = timeline.host[index].event
        if op_category(event.name) != MATMUL or time <= 0:
            continue
        operands = matmul_operands(event.name, event.input_dims)
        if not operands:
            continue
        key = (op_name(event.name), "x".join(str(shape) for shape in operands))
        groups[key] += time
        aligned[key] = _aligned(operands)
    total = sum(groups.values())
    if total <= 0:
        return None
    hot, covered = [], 0.0
    for key, time in sorted(groups.items(), key=lambda item: -item[1]):
        if covered >= HOT_MATMUL_COVERAGE * total:
            break
        hot.append(key)
        covered += time
    name, shapes = hot[0]
    return MatmulAlignment(
        aligned=all(aligned[key] for key in hot),
        misaligned_fraction=sum(t for k, t in groups.items() if not aligned[k]) / total,
        hot_dims=f"{name} {shapes}",
    )


def _aligned(operands: Sequence[Sequence[int]]) -> bool:
    """Every matrix dimension (the last two of each operand) a multiple of 8; size 1 is exempt."""
    return all(d == 1 or d % ALIGNMENT == 0 for shape in operands for d in shape[-2:])
