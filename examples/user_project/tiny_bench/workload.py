"""The factory perfgate calls: build the model, the data and one training step.

perfgate imports this module in a fresh process per repeat, calls ``make_regressor(ctx)``,
and times ``setup.step(batch)`` for each batch it draws from ``setup.batches``.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator

import torch
from torch import nn

from perfgate import TrainingSetup, WorkloadContext


class SequenceRegressor(nn.Module):
    """A GRU encoder and an MLP head predicting one value per sequence."""

    def __init__(self, features: int, hidden: int, normalize: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(features) if normalize else nn.Identity()
        self.encoder = nn.GRU(features, hidden, batch_first=True)
        self.head = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, last = self.encoder(self.norm(x))
        return self.head(last[-1]).squeeze(-1)


def synthetic_batches(
    count: int, batch: int, seq_len: int, features: int, seed: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """A fixed, seeded set of batches, cycled forever (no data is generated while timed)."""
    generator = torch.Generator().manual_seed(seed)
    data = [
        (
            torch.randn(batch, seq_len, features, generator=generator),
            torch.randn(batch, generator=generator),
        )
        for _ in range(count)
    ]
    return itertools.cycle(data)


def make_regressor(ctx: WorkloadContext) -> TrainingSetup:
    """perfgate's workload protocol: return a TrainingSetup for ctx.device and ctx.params."""
    torch.manual_seed(ctx.seed)
    features = 8
    params = ctx.params
    model = SequenceRegressor(features, params["hidden"], bool(ctx.knobs["normalize_inputs"]))
    model = model.to(ctx.device)
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=1e-3,
        foreach=ctx.knobs["optimizer"] == "foreach",
        fused=ctx.knobs["optimizer"] == "fused",
    )
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(str(ctx.knobs["precision"]))
    loss_fn = nn.MSELoss()

    def step(batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        inputs, targets = (t.to(ctx.device, non_blocking=True) for t in batch)
        optimizer.zero_grad(set_to_none=True)
        autocast = torch.autocast(ctx.device, dtype=dtype) if dtype else contextlib.nullcontext()
        with autocast:
            loss = loss_fn(model(inputs).float(), targets)
        loss.backward()
        optimizer.step()
        return loss

    return TrainingSetup(
        model=model,
        optimizer=optimizer,
        batches=synthetic_batches(4, params["batch_size"], params["seq_len"], features, ctx.seed),
        step=step,
        samples_per_step=params["batch_size"],
        compute_dtype=str(ctx.knobs["precision"]) if dtype is not None else "fp32",
        knobs=dict(ctx.knobs),
        info={"features": features, "hidden": params["hidden"]},
    )
