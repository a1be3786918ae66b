"""Microbenchmarks of fixes, at a workload's own shapes, on this machine.

A rule's constant speed-up is a claim about some machine: "SDPA is 2× faster" holds for
FlashAttention on a GPU, while on this CPU, with dropout, SDPA takes the math path and gains a
few percent. So before advice is ranked, the fixes that can be measured in isolation are
measured here, at the shapes the profile showed, and the advice's estimate uses that figure
and says so (``Advice.estimate_basis``):

- ``sdpa``: the explicit attention (matmul, scale, mask, softmax, dropout, matmul) against
  ``scaled_dot_product_attention``, forward and backward, at the chain's batch × heads,
  lengths, head width, dtype, mask and dropout;
- ``fused_optimizer``: the optimizer's step as configured (for-loop or foreach) against the
  same class with ``fused=True``, over as many tensors and elements as the model has.

Each benchmark alternates the two variants in ``SAMPLES`` pairs (the order flips each pair, so
a drifting machine loads both alike); a pair's ratio is unchanged time over fixed time, the
figure is their median and the spread their range. Every sample is long enough
(``SAMPLE_S``) that timer resolution is noise. Inputs are seeded. Results are kept in the
ceilings store per environment and signature (``perfgate.ceilings.store.save_fix``), so a
second ``perfgate advise`` does not measure again.

torch is imported inside the functions: ``import perfgate.ceilings`` stays cheap.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from perfgate.ceilings.bench import cuda_seconds, pinned_threads
from perfgate.documents.ceilings import FixSpeedup
from perfgate.trace.attention import AttentionShape

FIX_BENCHMARKS = ("sdpa", "fused_optimizer")
"""The fixes a rule can name in ``measured_speedup``."""

SAMPLES = 7
SAMPLE_S = 0.05
"""Target length of one sample of one variant."""

MAX_OPTIMIZER_ELEMENTS = 200_000_000
"""Above this the optimizer benchmark would need gigabytes; the rule's constant stands."""
MAX_SCORE_ELEMENTS = 2**28
"""Attention scores larger than this (1 GiB in fp32) are not materialised for a benchmark."""

_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


@dataclass(frozen=True, kw_only=True)
class OptimizerCase:
    """What the optimizer benchmark runs (from the evidence's ``optimizer_*`` facts)."""

    optimizer_class: str
    foreach: bool
    parameters: int
    tensors: int


Case = AttentionShape | OptimizerCase
"""What a fix benchmark runs: the explicit attention's shape as the trace gave it, or the
optimizer's configuration."""


def fix_case(benchmark: str, evidence: Mapping[str, Any]) -> Case | None:
    """The case ``benchmark`` would run for a workload's ``evidence``; None when the evidence
    lacks what it needs, or the case is too large to run as a microbenchmark."""
    if benchmark == "sdpa":
        numbers = [evidence.get(f"attention_{k}") for k in _ATTENTION_NUMBERS]
        if not all(isinstance(n, float) and n >= 1 for n in numbers):
            return None
        batch_heads, query, key, width = (int(n) for n in numbers)  # type: ignore[arg-type]
        if batch_heads * query * key > MAX_SCORE_ELEMENTS:
            return None
        dtype, dropout = evidence.get("attention_dtype"), evidence.get("attention_dropout")
        return AttentionShape(
            batch_heads=batch_heads,
            query_len=query,
            key_len=key,
            head_dim=width,
            dtype=dtype if dtype in _DTYPES else "fp32",
            causal=evidence.get("attention_causal") is True,
            dropout=float(dropout) if isinstance(dropout, float) else 0.0,
        )
    if benchmark == "fused_optimizer":
        name = evidence.get("optimizer_class")
        count, tensors = (
            evidence.get("optimizer_param_count"),
            evidence.get("optimizer_param_tensors"),
        )
        if (
            not isinstance(name, str)
            or not isinstance(count, float)
            or not isinstance(tensors, float)
        ):
            return None
        if not 1 <= tensors <= count <= MAX_OPTIMIZER_ELEMENTS:
            return None
        return OptimizerCase(
            optimizer_class=name,
            foreach=evidence.get("optimizer_foreach") is True,
            parameters=int(count),
            tensors=int(tensors),
        )
    raise ValueError(f"unknown fix benchmark {benchmark!r}")


_ATTENTION_NUMBERS = ("batch_heads", "query_len", "key_len", "head_dim")


def signature(case: Case, device: str) -> str:
    """The case in one line: the cache key and the advice's wording of what ran."""
    if isinstance(case, AttentionShape):
        mask = "causal" if case.causal else "no mask"
        return (
            f"sdpa {device} {case.dtype} {case.batch_heads}x{case.query_len}x{case.key_len}"
            f"x{case.head_dim} {mask} p={case.dropout:g}"
        )
    implementation = "foreach" if case.foreach else "for-loop"
    return (
        f"fused_optimizer {device} {case.optimizer_class} {implementation} "
        f"{case.tensors} tensors {case.parameters} elements"
    )


def measure_fix(case: Case, device: str, *, threads: int, seed: int = 0) -> FixSpeedup:
    """Time the case's unchanged and fixed variants in alternating pairs (module docstring)."""
    import torch

    with pinned_threads(threads):
        torch.manual_seed(seed)
        if isinstance(case, AttentionShape):
            unchanged, fixed, what = _attention(torch, case, device)
        else:
            unchanged, fixed, what = _optimizer(torch, case, device)
        ratios = paired_ratios(torch, unchanged, fixed, device)
    return FixSpeedup(
        benchmark="sdpa" if isinstance(case, AttentionShape) else "fused_optimizer",
        signature=signature(case, device),
        speedup=statistics.median(ratios),
        low=min(ratios),
        high=max(ratios),
        ratios=tuple(ratios),
        basis=what,
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def paired_ratios(
    torch: Any, unchanged: Callable[[], object], fixed: Callable[[], object], device: str
) -> list[float]:
    """``SAMPLES`` ratios of unchanged over fixed time, the two timed back to back in each pair
    and their order flipped from pair to pair."""
    timer = _cuda_timer(torch) if device == "cuda" else _host_timer
    for action in (unchanged, fixed):  # first calls: allocations, kernel choice, thread pools
        action()
        action()
    calls = {
        id(action): max(1, math.ceil(SAMPLE_S / max(timer(action, 1), 1e-9)))
        for action in (unchanged, fixed)
    }
    ratios = []
    for pair in range(SAMPLES):
        order = (unchanged, fixed) if pair % 2 == 0 else (fixed, unchanged)
        seconds = {id(a): timer(a, calls[id(a)]) / calls[id(a)] for a in order}
        ratios.append(seconds[id(unchanged)] / seconds[id(fixed)])
    return ratios


def _host_timer(action: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        action()
    return time.perf_counter() - start


def _cuda_timer(torch: Any) -> Callable[[Callable[[], object], int], float]:
    def timer(action: Callable[[], object], calls: int) -> float:
        return cuda_seconds(torch, action, calls)

    return timer


def _attention(torch: Any, case: AttentionShape, device: str) -> tuple[Any, Any, str]:
    dtype = getattr(torch, _DTYPES[case.dtype])
    shape = (case.batch_heads, case.query_len, case.head_dim)
    q = torch.randn(*shape, device=device, dtype=dtype, requires_grad=True)
    k = torch.randn(case.batch_heads, case.key_len, case.head_dim, device=device, dtype=dtype,
                    requires_grad=True)  # fmt: skip
    v = torch.randn_like(k, requires_grad=True)
    grad = torch.randn(*shape, device=device, dtype=dtype)
    scale = 1.0 / math.sqrt(case.head_dim)
    blocked = None
    if case.causal:
        blocked = ~torch.ones(case.query_len, case.key_len, dtype=torch.bool, device=device).tril()
    functional = torch.nn.functional

    def explicit() -> None:
        scores = (q @ k.transpose(-2, -1)) * scale
        if blocked is not None:
            scores = scores.masked_fill(blocked, float("-inf"))
        weights = functional.dropout(scores.softmax(-1), p=case.dropout, training=True)
        (weights @ v).backward(grad)

    def fused() -> None:
        out = functional.scaled_dot_product_attention(
            q, k, v, is_causal=case.causal, dropout_p=case.dropout
        )
        out.backward(grad)

    what = (
        f"scaled_dot_product_attention against the explicit chain, forward and backward, at "
        f"{case.batch_heads}x{case.query_len}x{case.key_len}x{case.head_dim} {case.dtype}"
        f"{', causal' if case.causal else ''}, dropout {case.dropout:g}, on this {device}"
    )
    return explicit, fused, what


def _optimizer(torch: Any, case: OptimizerCase, device: str) -> tuple[Any, Any, str]:
    cls = getattr(torch.optim, case.optimizer_class, None)
    if not isinstance(cls, type):
        raise ValueError(f"torch.optim has no {case.optimizer_class}")
    size = max(1, case.parameters // case.tensors)

    def build(**implementation: bool) -> Any:
        tensors = [
            torch.randn(size, device=device, requires_grad=True) for _ in range(case.tensors)
        ]
        for tensor in tensors:
            tensor.grad = torch.randn_like(tensor)
        return cls(tensors, lr=1e-3, **implementation)

    current = build(foreach=case.foreach)
    fused = build(fused=True)
    what = (
        f"{case.optimizer_class}(fused=True) against its "
        f"{'foreach' if case.foreach else 'for-loop'} step over {case.tensors} tensors of "
        f"{size} elements, on this {device}"
    )
    return current.step, fused.step, what
