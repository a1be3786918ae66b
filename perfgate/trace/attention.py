"""Attention: whether SDPA and a fused kernel ran, and how often attention was hand-written.

The hand-written pattern itself (matmul → softmax → matmul among sibling ops, outside SDPA) is
found while the timeline is built (``perfgate.trace.timeline``), because the attention time it
marks is inherited down the call tree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfgate.trace.categories import BATCHED_MATMUL_OPS, FLASH_OPS, FUSED_ATTENTION, op_name
from perfgate.trace.timeline import Timeline


@dataclass(frozen=True, kw_only=True)
class AttentionUse:
    """What the trace shows of attention; None where it cannot tell (no ops recorded)."""

    sdpa_used: bool | None
    """An op of ``scaled_dot_product_attention`` ran."""
    flash_attention_used: bool | None
    """A flash/memory-efficient kernel or op ran (SDPA may dispatch to the plain math path)."""
    manual_attention_detected: bool | None
    manual_attention_count: float | None
    """Hand-written attention chains per step."""


def attention_use(timeline: Timeline) -> AttentionUse:
    """SDPA and fused-kernel use from op and kernel names; the manual pattern from the timeline."""
    ops = [e for e in timeline.host if e.kind == "op"]
    fused_kernel = any(
        "flash" in k.name.lower() or "fmha" in k.name.lower() for k in timeline.trace.kernels
    )
    if not ops:
        return AttentionUse(
            sdpa_used=None,
            flash_attention_used=True if fused_kernel else None,
            manual_attention_detected=None,
            manual_attention_count=None,
        )
    chains = [i for i in timeline.manual_softmax if timeline.host[i].step >= 0]
    return AttentionUse(
        sdpa_used=any("scaled_dot_product" in e.name for e in ops),
        flash_attention_used=fused_kernel
        or any(bool(FLASH_OPS.search(e.name) and FUSED_ATTENTION.search(e.name)) for e in ops),
        manual_attention_detected=bool(chains),
        manual_attention_count=len(chains) / len(timeline.steps),
    )


@dataclass(frozen=True, kw_only=True)
class AttentionShape:
    """The shape of the explicit attention a trace shows: what a microbenchmark of SDPA
    against the explicit path must run to stand for it (``perfgate.ceilings.fixes``)."""

    batch_heads: int
    """Batch times heads: the product of the query's leading dimensions."""
    query_len: int
    key_len: int
    head_dim: int
    dtype: str
    """``fp32``, ``bf16`` or ``fp16`` (the scores' dtype)."""
    causal: bool
    """A mask was applied to the scores (``masked_fill``/``where``/an added mask)."""
    dropout: float
    """Attention dropout probability (0 without a dropout op between softmax and matmul)."""


_MASK_OPS = frozenset({"masked_fill", "masked_fill_", "where", "add", "add_", "baddbmm"})
_DROPOUT_OPS = frozenset({"dropout", "native_dropout", "feature_dropout", "dropout_"})
_SCORE_DTYPES = {"float": "fp32", "c10::bfloat16": "bf16", "c10::half": "fp16"}


def attention_shape(timeline: Timeline) -> AttentionShape | None:
    """The first hand-written chain's shape in the steps (every layer of a model repeats it),
    from its ops' ``Input Dims`` (``record_shapes``); None without chains or shapes."""
    host = timeline.host
    chains = [i for i in timeline.manual_softmax if host[i].step >= 0]
    if not chains:
        return None
    softmax = host[chains[0]]
    siblings = sorted(
        (
            i
            for i, node in enumerate(host)
            if node.kind == "op"
            and node.parent == softmax.parent
            and node.event.thread == softmax.event.thread
        ),
        key=lambda i: host[i].ts,
    )
    at = siblings.index(chains[0])
    before = [host[i] for i in siblings[max(0, at - 8) : at]]
    after = [host[i] for i in siblings[at + 1 : at + 9]]
    first = next((n for n in reversed(before) if op_name(n.name) in BATCHED_MATMUL_OPS), None)
    if first is None:
        return None
    dims = [d for d in first.event.input_dims if isinstance(d, list) and len(d) >= 3]
    if op_name(first.name) == "baddbmm":
        dims = dims[1:]
    if len(dims) < 2 or not all(isinstance(x, int) and x > 0 for x in (*dims[0], *dims[1])):
        return None
    query, key = dims[0], dims[1]
    between = [n for n in before if n.ts >= first.ts and n is not first]
    masked = op_name(first.name) == "baddbmm" or any(op_name(n.name) in _MASK_OPS for n in between)
    second = next((i for i, n in enumerate(after) if op_name(n.name) in BATCHED_MATMUL_OPS), None)
    dropout = 0.0
    for node in after[: second if second is not None else 0]:
        if op_name(node.name) in _DROPOUT_OPS:
            dropout = _dropout_probability(node.event.concrete_inputs)
    types = [t.lower() for t in softmax.event.input_types]
    return AttentionShape(
        batch_heads=math.prod(query[:-2]),
        query_len=query[-2],
        key_len=key[-1],
        head_dim=query[-1],
        dtype=next((_SCORE_DTYPES[t] for t in types if t in _SCORE_DTYPES), "fp32"),
        causal=masked,
        dropout=dropout,
    )


def _dropout_probability(concrete: tuple[str, ...]) -> float:
    """``p`` of a dropout op from its ``Concrete Inputs`` (``['', '0.1', 'True']``); 0.1,
    the common default, when the trace does not record it."""
    for text in concrete[1:2]:
        try:
            value = float(text)
        except ValueError:
            continue
        if 0.0 <= value < 1.0:
            return value
    return 0.1
