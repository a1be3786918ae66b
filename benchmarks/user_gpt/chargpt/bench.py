"""The perfgate workload: the user's GPT on random characters, one AdamW step per batch."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from chargpt.model import GPT
from perfgate import TrainingSetup, WorkloadContext

VOCAB = 65


def make_chargpt(ctx: WorkloadContext) -> TrainingSetup:
    p = ctx.params
    torch.manual_seed(ctx.seed)
    model = GPT(VOCAB, p["block_size"], p["n_layer"], p["n_head"], p["n_embd"]).to(ctx.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    generator = torch.Generator().manual_seed(ctx.seed)
    data = torch.randint(0, VOCAB, (10_000,), generator=generator)

    def batches() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            starts = torch.randint(len(data) - p["block_size"] - 1, (p["batch_size"],),
                                   generator=generator)  # fmt: skip
            x = torch.stack([data[i : i + p["block_size"]] for i in starts])
            y = torch.stack([data[i + 1 : i + 1 + p["block_size"]] for i in starts])
            yield x.to(ctx.device), y.to(ctx.device)

    def step(batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        loss = model(*batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    return TrainingSetup(
        model=model,
        optimizer=optimizer,
        batches=batches(),
        step=step,
        samples_per_step=p["batch_size"],
        tokens_per_step=p["batch_size"] * p["block_size"],
    )
