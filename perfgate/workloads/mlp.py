"""``mlp``: a wide multi-layer perceptron classifier on synthetic feature vectors.

Nearly all of its time is in large GEMMs, which makes it the cleanest probe of matmul
throughput, mixed precision and optimizer overhead (the ``full`` preset has 218M parameters in
8192-wide layers, so the optimizer step is a real share of the step).

Labels come from a fixed random linear "teacher" (``argmax(x·W)``), so the task is learnable
and the loss falls within a few steps.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import nn

from perfgate.workloads.builtin import BUILTIN_WORKLOADS
from perfgate.workloads.common import (
    SYNTHETIC_BATCHES,
    Batch,
    batch_size,
    check_device,
    effective_knobs,
    make_training,
    parameter_count,
    resident_batches,
    seed_everything,
)
from perfgate.workloads.protocol import TrainingSetup, WorkloadContext

DEFINITION = BUILTIN_WORKLOADS["mlp"]
"""This workload's entry in the torch-free catalog (:mod:`perfgate.workloads.builtin`)."""


def column_major(x: torch.Tensor) -> torch.Tensor:
    """The same ``(B, F)`` values stored column-major: a transposed view over a real copy.

    Used by ``non_contiguous`` between layers, so every layer pays a full activation copy
    (``aten::clone``/``copy_`` in a profile) that a contiguous layout would not.
    """
    return x.t().contiguous().t()


class MLP(nn.Module):
    """``depth`` hidden Linear+GELU layers of width ``hidden``, then a linear classifier."""

    def __init__(
        self,
        in_features: int,
        hidden: int,
        depth: int,
        num_classes: int,
        non_contiguous: bool = False,
    ) -> None:
        super().__init__()
        self.non_contiguous = non_contiguous
        widths = [in_features] + [hidden] * depth
        self.hidden = nn.ModuleList(
            nn.Linear(fan_in, fan_out) for fan_in, fan_out in itertools.pairwise(widths)
        )
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.hidden:
            x = F.gelu(layer(x))
            if self.non_contiguous:
                x = column_major(x)
        return self.head(x)


def synthetic_features(
    generator: torch.Generator, in_features: int, num_classes: int, batch: int, count: int
) -> list[Batch]:
    """``count`` batches of Gaussian features labelled by a fixed random linear teacher."""
    teacher = torch.randn(in_features, num_classes, generator=generator)
    features = torch.randn(count * batch, in_features, generator=generator)
    labels = (features @ teacher).argmax(dim=1)
    return list(zip(features.split(batch), labels.split(batch), strict=True))


def build(ctx: WorkloadContext) -> TrainingSetup:
    """The factory: an MLP, its synthetic batches and one training step."""
    knobs = effective_knobs(DEFINITION, ctx)
    device = check_device(ctx.device)
    params = ctx.params
    in_features, num_classes = int(params["in_features"]), int(params["num_classes"])
    batch = batch_size(knobs, params)
    data_generator = seed_everything(ctx.seed)
    model = MLP(
        in_features,
        int(params["hidden"]),
        int(params["depth"]),
        num_classes,
        non_contiguous=bool(knobs["non_contiguous"]),
    ).to(device)
    batches = resident_batches(
        synthetic_features(data_generator, in_features, num_classes, batch, SYNTHETIC_BATCHES),
        device,
    )
    training = make_training(model, F.cross_entropy, knobs, ctx.device, lr=float(params["lr"]))
    return training.setup(
        batches=batches,
        samples_per_step=batch,
        knobs=knobs,
        info={
            "model": {
                "in_features": in_features,
                "hidden": int(params["hidden"]),
                "depth": int(params["depth"]),
                "num_classes": num_classes,
                "parameters": parameter_count(model),
            },
            "batch_shape": [batch, in_features],
        },
    )
