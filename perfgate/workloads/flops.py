"""FLOPs of one training step, counted by ``torch.utils.flop_counter.FlopCounterMode``.

FlopCounterMode intercepts aten operators and sums closed-form counts for the ones it knows
(matmuls, convolutions, attention kernels: 2·m·n·k per matmul, so one multiply-add = 2 FLOPs).
Elementwise work, normalisation and the optimizer are not counted, which is the convention MFU
uses.

One gap is filled here. On the CPU, ``F.scaled_dot_product_attention`` runs the operator
``aten._scaled_dot_product_flash_attention_for_cpu`` (and its ``_backward``), for which torch
(checked up to 2.13) registers no formula, so the attention of an SDPA model on the CPU would
count as zero. We register the formulas torch uses for its CUDA flash/efficient kernels: forward
= q·kᵀ and p·v over the full TxT square, backward = the score recomputation plus four gradient
matmuls. An SDPA model therefore counts the same on CPU and GPU, and one backward matmul more per
attention layer than the same model written with explicit matmuls (which keeps the scores
instead of recomputing them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

Shape = Sequence[int]


def _attention_matmul_flops(query: Shape, key: Shape, value: Shape) -> tuple[int, int]:
    """FLOPs of one ``(B·H, Tq, D) x (B·H, D, Tk)`` score matmul and one value matmul."""
    batch, heads, q_len, head_dim = query
    k_len, v_dim = key[-2], value[-1]
    scores = 2 * batch * heads * q_len * k_len * head_dim
    values = 2 * batch * heads * q_len * k_len * v_dim
    return scores, values


def cpu_sdpa_flops(query: Shape, key: Shape, value: Shape, *args: Any, **kwargs: Any) -> int:
    """Forward: ``q·kᵀ`` plus ``p·v``; the causal mask is not discounted (as torch does on CUDA)."""
    scores, values = _attention_matmul_flops(query, key, value)
    return scores + values


def cpu_sdpa_backward_flops(
    grad_out: Shape, query: Shape, key: Shape, value: Shape, *args: Any, **kwargs: Any
) -> int:
    """Backward: recompute ``q·kᵀ``; ``dP = dO·vᵀ``, ``dV = Pᵀ·dO``; ``dQ = dS·k``, ``dK = dSᵀ·q``.

    Three score-sized matmuls (``q·kᵀ``, ``dQ``, ``dK``: inner dimension D) and two value-sized
    ones (``dP``, ``dV``: inner dimension Dv).
    """
    scores, values = _attention_matmul_flops(query, key, value)
    return 3 * scores + 2 * values


CPU_ATTENTION_FORMULAS: dict[Any, Callable[..., int]] = {
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: cpu_sdpa_flops,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: cpu_sdpa_backward_flops,
}
"""Formulas for the CPU SDPA kernels that FlopCounterMode's own registry lacks."""


class FlopCount:
    """What :func:`counting_flops` counted, readable once its block has closed."""

    def __init__(self) -> None:
        self.mode = FlopCounterMode(display=False, custom_mapping=CPU_ATTENTION_FORMULAS)

    @property
    def total(self) -> int:
        return int(self.mode.get_total_flops())

    @property
    def by_operator(self) -> dict[str, int]:
        """FLOPs per aten overload packet (``aten.mm``, ``aten.convolution``), sorted by name."""
        counts = self.mode.get_flop_counts().get("Global", {})
        return dict(sorted((str(operator), flops) for operator, flops in counts.items()))


@contextlib.contextmanager
def counting_flops() -> Iterator[FlopCount]:
    """Count the FLOPs of everything run in the block, in this thread (FlopCounterMode is a
    dispatch mode, kept per thread): a factory's step function, or the body of a script's
    ``with session.step():`` (``perfgate.workloads.setup.counted_step``)."""
    count = FlopCount()
    with count.mode:
        yield count


def count_flops(step_fn: Callable[[Any], object], batch: Any) -> tuple[int, dict[str, int]]:
    """Run ``step_fn(batch)`` once under FlopCounterMode: ``(total FLOPs, FLOPs per operator)``.

    ``step_fn`` must be eager (``TrainingSetup.flop_step`` when the timed step is compiled):
    the counter sees aten operators only as eager mode dispatches them. The call is a real
    training step, so it updates the weights; the runner makes it outside the timed steps.
    Operator names are aten overload packets such as ``aten.mm`` or ``aten.convolution``.
    """
    with counting_flops() as count:
        step_fn(batch)
    return count.total, count.by_operator
