"""Attention: whether SDPA and a fused kernel ran, and how often attention was hand-written.

The hand-written pattern itself (matmul → softmax → matmul among sibling ops, outside SDPA) is
found while the timeline is built (``perfgate.trace.timeline``), because the attention time it
marks is inherited down the call tree.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfgate.trace.categories import FLASH_OPS, FUSED_ATTENTION
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
