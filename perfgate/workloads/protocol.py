"""The workload protocol: what a factory receives and what it must return.

A factory is a plain function ``make(ctx: WorkloadContext) -> TrainingSetup``. Built-in
workloads and a team's own training code use the same protocol, so the runner measures both
the same way. The runner owns everything around the step (timing, warm-up, FLOP counting,
batch fetching, telemetry); the factory owns the model, the data and one training step.

This module imports torch only for type checking, so ``import perfgate`` stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

KnobValue = bool | int | float | str | None


@dataclass(frozen=True, kw_only=True)
class DistributedContext:
    """The process group a factory runs in, when the runner launched it under ``torchrun``.

    The runner initialises the default process group before it calls the factory (and destroys
    it after the last step), so a factory only wraps its model (``DistributedDataParallel``) and
    shards its data by ``rank``; on a GPU the current CUDA device is already ``local_rank``.
    """

    rank: int
    """Global rank of this process (0 … world_size − 1)."""
    local_rank: int
    """Rank on this node: the GPU this process uses."""
    world_size: int
    """Number of processes training together."""
    backend: str
    """``gloo`` or ``nccl``: the backend the process group was initialised with."""


@dataclass(frozen=True, kw_only=True)
class WorkloadContext:
    """What the runner hands to a factory."""

    device: str
    """``"cpu"`` or ``"cuda"``: where the model and its batches must live."""
    preset: str
    """The preset name (``smoke`` or ``full`` for built-ins; any name a user workload defines)."""
    params: Mapping[str, Any]
    """The preset's parameters (model sizes, batch size, sequence length …)."""
    knobs: Mapping[str, KnobValue]
    """Resolved knob values (defaults merged with config and ``--knob`` overrides)."""
    seed: int
    """Seed for every random procedure of the workload (weights and synthetic data)."""
    distributed: DistributedContext | None = None
    """The process group, for a run launched with ``--nproc-per-node``; None otherwise."""


@dataclass(kw_only=True)
class TrainingSetup:
    """What a factory returns: one ready-to-train model and the way to take one step."""

    model: torch.nn.Module
    """The model (after ``torch.compile`` if the workload compiles it)."""
    optimizer: torch.optim.Optimizer
    """The optimizer the step uses; recorded for the advisor (class, fused/foreach flags)."""
    batches: Iterable[Any]
    """The batch source. Iterated by the runner, which times each ``next()`` as DataLoader
    wait; restarted with ``iter()`` when exhausted (a new epoch)."""
    step: Callable[[Any], torch.Tensor]
    """One full training step on one batch (move to device, forward, backward, optimizer
    step); returns the loss tensor. Must not call ``.item()``: the runner collects losses
    without forcing a device synchronisation per step."""
    samples_per_step: int
    """Samples (sequences, images, rows) consumed by one step: the throughput unit."""
    tokens_per_step: int | None = None
    """Tokens per step, for language models (tokens/s is reported when set)."""
    flop_step: Callable[[Any], torch.Tensor] | None = None
    """An eager version of ``step`` for FLOP counting when ``step`` is compiled (FlopCounterMode
    must see the real aten ops). ``None``: count on ``step`` itself."""
    analytic_flops_per_step: float | None = None
    """A closed-form FLOP estimate per step (e.g. PaLM's 6N + 12·L·H·Q·T per token)."""
    analytic_formula: str | None = None
    """Which formula produced ``analytic_flops_per_step``, written out for the reader."""
    compute_dtype: str = "fp32"
    """dtype of the hot matmuls (``fp32``, ``tf32``, ``bf16``, ``fp16``): picks the MFU peak."""
    dataloader: Any = None
    """The ``torch.utils.data.DataLoader`` behind ``batches``, if any, for introspection."""
    knobs: Mapping[str, KnobValue] = field(default_factory=dict)
    """The knob values the factory actually applied (recorded in the result)."""
    info: Mapping[str, Any] = field(default_factory=dict)
    """Free-form facts worth recording (parameter counts, shapes)."""
