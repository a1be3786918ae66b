"""``ddp``: data-parallel training of the ``gpt`` or ``resnet`` model with DistributedDataParallel.

Runs under ``torchrun`` (``perfgate run -w ddp --nproc-per-node N``): the runner initialises the
process group before calling :func:`build`, which wraps the model in DDP, gives every rank its
own shard of one synthetic dataset, and returns the usual TrainingSetup. Each rank's step is
forward, backward (DDP all-reduces gradient buckets while backward runs) and the optimizer step.

The knobs are the communication levers the advisor proves: ``bucket_cap_mb`` and
``gradient_as_bucket_view`` (how DDP buckets gradients), ``grad_accumulation`` (micro-batches per
optimizer step, all but the last under ``no_sync()``: one all-reduce per k micro-batches),
``backend`` (gloo or NCCL) and ``uneven_batches`` (a planted load imbalance: the last rank gets
``UNEVEN_FACTOR`` times the batch, and every other rank waits for it in the all-reduce).

Throughput counts every rank's samples (``samples_per_step`` is the global batch); FLOPs are
per rank, so TFLOP/s and MFU describe one GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from perfgate.errors import UsageError
from perfgate.workloads import gpt, resnet
from perfgate.workloads.builtin import BUILTIN_WORKLOADS
from perfgate.workloads.common import (
    DATA_SEED_OFFSET,
    SYNTHETIC_BATCHES,
    Batch,
    CyclingBatches,
    MicroBatches,
    batch_size,
    check_device,
    effective_knobs,
    make_training,
    parameter_count,
    seed_everything,
)
from perfgate.workloads.protocol import (
    DistributedContext,
    KnobValue,
    TrainingSetup,
    WorkloadContext,
)

UNEVEN_FACTOR = 4
"""``uneven_batches``: the last rank's batch is this many times the others'. Large enough that
the imbalance stands above what ranks sharing a small CPU measure of each other anyway (up to
0.23 of compute on a loaded 2-core box; 0.47-0.71 planted): a tiny model's step does not grow in
proportion to its batch, so twice the batch read under 0.2."""

DEFINITION = BUILTIN_WORKLOADS["ddp"]
"""This workload's entry in the torch-free catalog (:mod:`perfgate.workloads.builtin`)."""


def process_group_of(ctx: WorkloadContext) -> DistributedContext:
    """The context's process group, or an already initialised default group (a test, a
    notebook); a usage error when there is none."""
    if ctx.distributed is not None:
        return ctx.distributed
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        rank = dist.get_rank()
        return DistributedContext(
            rank=rank,
            local_rank=rank,
            world_size=dist.get_world_size(),
            backend=str(dist.get_backend()),
        )
    raise UsageError(
        "the ddp workload trains under torch.distributed and no process group is initialised",
        "run it with perfgate run -w ddp --nproc-per-node N (torchrun starts the ranks)",
    )


def rank_batches(sizes: Sequence[int], rank: int) -> tuple[int, int]:
    """``(start, size)`` of this rank's rows in a global batch made of every rank's share."""
    return sum(sizes[:rank]), sizes[rank]


def shard(batches: Sequence[Batch], sizes: Sequence[int], rank: int) -> list[Batch]:
    """This rank's rows of each global batch: every rank trains on its own data."""
    start, size = rank_batches(sizes, rank)
    return [(x[start : start + size], y[start : start + size]) for x, y in batches]


def step_groups(micro: Sequence[Batch], accumulation: int) -> CyclingBatches:
    """Batches for the runner: single micro-batches, or groups of ``accumulation`` of them."""
    if accumulation == 1:
        return CyclingBatches(micro)
    groups = [
        MicroBatches(micro[(index * accumulation + j) % len(micro)] for j in range(accumulation))
        for index in range(len(micro))
    ]
    return CyclingBatches(cast(Sequence[Batch], groups))


def _model_and_data(
    params: Mapping[str, Any], sizes: Sequence[int], device: torch.device
) -> tuple[nn.Module, list[Batch], Any, dict[str, Any]]:
    """The model, global synthetic batches, the loss and facts, for ``params["model"]``.

    Every rank draws the same global batches from the same seed and keeps its own rows, so the
    ranks' shards are disjoint parts of one dataset (and of one permutation task for gpt).
    """
    generator = torch.Generator().manual_seed(int(params["seed"]) + DATA_SEED_OFFSET)
    total = sum(sizes)
    if params["model"] == "gpt":
        config = gpt.GPTConfig(
            vocab_size=int(params["vocab_size"]),
            seq_len=int(params["seq_len"]),
            n_layer=int(params["n_layer"]),
            n_head=int(params["n_head"]),
            n_embd=int(params["n_embd"]),
        )
        language_model = gpt.GPT(config)
        data = gpt.synthetic_sequences(generator, config, total, SYNTHETIC_BATCHES)
        facts = {"seq_len": config.seq_len, "flop_parameters": language_model.flop_parameters()}
        return language_model.to(device), data, gpt.lm_loss, facts
    if params["model"] == "resnet":
        model = resnet.ResNet(
            [int(w) for w in params["widths"]],
            [int(b) for b in params["blocks"]],
            str(params["stem"]),
            int(params["num_classes"]),
        )
        data = resnet.synthetic_images(
            generator,
            int(params["image_size"]),
            int(params["num_classes"]),
            total,
            SYNTHETIC_BATCHES,
        )
        return model.to(device), data, F.cross_entropy, {}
    raise UsageError(f"ddp model {params['model']!r} is not gpt or resnet", "use a ddp preset")


def build(ctx: WorkloadContext) -> TrainingSetup:
    """The factory: a DDP-wrapped model, this rank's shard of the batches, one training step."""
    knobs = effective_knobs(DEFINITION, ctx)
    device = check_device(ctx.device)
    group = process_group_of(ctx)
    accumulation = int(cast(int, knobs["grad_accumulation"]))
    if accumulation < 1:
        raise UsageError("grad_accumulation=0 is not a number of micro-batches", "use 1 or more")
    batch = batch_size(knobs, ctx.params)
    sizes = [
        batch * (UNEVEN_FACTOR if knobs["uneven_batches"] and rank == group.world_size - 1 else 1)
        for rank in range(group.world_size)
    ]
    seed_everything(ctx.seed)
    model, data, loss_fn, facts = _model_and_data({**ctx.params, "seed": ctx.seed}, sizes, device)
    wrapped = nn.parallel.DistributedDataParallel(
        model,
        device_ids=[group.local_rank] if ctx.device == "cuda" else None,
        bucket_cap_mb=int(cast(int, knobs["bucket_cap_mb"])),
        gradient_as_bucket_view=bool(knobs["gradient_as_bucket_view"]),
    )
    mine = [(x.to(device), y.to(device)) for x, y in shard(data, sizes, group.rank)]
    training = make_training(
        wrapped,
        loss_fn,
        knobs,
        ctx.device,
        lr=float(ctx.params["lr"]),
        convolutions=ctx.params["model"] == "resnet",
    )
    samples = sum(sizes) * accumulation
    extra: dict[str, Any] = {}
    if ctx.params["model"] == "gpt":
        seq_len = int(facts["seq_len"])
        config = cast(gpt.GPT, model).config
        flops, formula = gpt.palm_flops(
            config, int(facts["flop_parameters"]), sizes[group.rank] * accumulation * seq_len
        )
        extra = {
            "tokens_per_step": samples * seq_len,
            "analytic_flops_per_step": flops,
            "analytic_formula": f"{formula} (this rank's tokens)",
        }
    return training.setup(
        batches=step_groups(mine, accumulation),
        samples_per_step=samples,
        knobs=knobs,
        info=_info(ctx, group, model, sizes, knobs),
        **extra,
    )


def _info(
    ctx: WorkloadContext,
    group: DistributedContext,
    model: nn.Module,
    sizes: Sequence[int],
    knobs: Mapping[str, KnobValue],
) -> dict[str, Any]:
    return {
        "model": {"kind": ctx.params["model"], "parameters": parameter_count(model)},
        "distributed": {
            "rank": group.rank,
            "world_size": group.world_size,
            "backend": group.backend,
            "rank_batch_sizes": list(sizes),
            "wrapper": "DistributedDataParallel",
            "bucket_cap_mb": knobs["bucket_cap_mb"],
            "gradient_as_bucket_view": knobs["gradient_as_bucket_view"],
            "grad_accumulation": knobs["grad_accumulation"],
        },
    }
