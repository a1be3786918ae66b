"""The ddp workload built in-process inside a real one-rank gloo group, and the gradient
accumulation step it relies on (no subprocess: torchrun's part is tested in
tests/test_distributed_run.py)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist
from torch import nn

from perfgate.errors import UsageError
from perfgate.workloads import common, ddp
from perfgate.workloads.protocol import DistributedContext, KnobValue, WorkloadContext


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def one_rank() -> Iterator[DistributedContext]:
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", world_size=1, rank=0
    )
    try:
        yield DistributedContext(rank=0, local_rank=0, world_size=1, backend="gloo")
    finally:
        dist.destroy_process_group()


def _context(
    group: DistributedContext | None, preset: str = "smoke", **knobs: KnobValue
) -> WorkloadContext:
    return WorkloadContext(
        device="cpu",
        preset=preset,
        params=ddp.DEFINITION.presets[preset],
        knobs=knobs,
        seed=0,
        distributed=group,
    )


@pytest.mark.slow
def test_gpt_under_ddp_trains_one_rank_shard(one_rank: DistributedContext) -> None:
    setup = ddp.build(_context(one_rank))
    assert isinstance(setup.model, nn.parallel.DistributedDataParallel)
    assert setup.samples_per_step == ddp.DEFINITION.presets["smoke"]["batch_size"]
    assert setup.info["distributed"]["world_size"] == 1
    assert setup.info["distributed"]["wrapper"] == "DistributedDataParallel"
    batches = iter(setup.batches)
    losses = [float(setup.step(next(batches))) for _ in range(12)]
    assert losses[-1] < losses[0]  # the permutation task is learnable


def test_resnet_preset_and_accumulation(one_rank: DistributedContext) -> None:
    setup = ddp.build(_context(one_rank, "resnet-smoke", grad_accumulation=3))
    batch = ddp.DEFINITION.presets["resnet-smoke"]["batch_size"]
    assert setup.samples_per_step == 3 * batch
    group = next(iter(setup.batches))
    assert isinstance(group, common.MicroBatches) and len(group) == 3
    assert torch.isfinite(setup.step(group))


def test_without_a_process_group_it_says_how_to_run_it() -> None:
    with pytest.raises(UsageError, match="--nproc-per-node"):
        ddp.build(_context(None))


def test_zero_micro_batches_is_refused(one_rank: DistributedContext) -> None:
    with pytest.raises(UsageError, match="grad_accumulation=0"):
        ddp.build(_context(one_rank, grad_accumulation=0))


def test_shards_are_disjoint_rows_of_one_global_batch() -> None:
    rows = torch.arange(10).reshape(10, 1)
    batches = [(rows, rows)]
    sizes = [2, 8]  # an uneven split: the last rank four times the first
    first, last = ddp.shard(batches, sizes, 0), ddp.shard(batches, sizes, 1)
    assert first[0][0].flatten().tolist() == [0, 1]
    assert last[0][0].flatten().tolist() == list(range(2, 10))


def test_accumulated_micro_batches_give_the_full_batch_gradient() -> None:
    """k micro-batches with the loss scaled by 1/k update the weights as one batch of k times
    the rows does (a mean loss): the accumulation knob changes how, not what, is trained."""

    def trained(split: bool) -> torch.Tensor:
        torch.manual_seed(0)
        model = nn.Linear(4, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        step = common.train_step(
            model, optimizer, nn.functional.mse_loss, "cpu", common.autocast_factory("off", "cpu"),
            None,
        )  # fmt: skip
        generator = torch.Generator().manual_seed(1)
        inputs, targets = (
            torch.randn(8, 4, generator=generator),
            torch.randn(8, 2, generator=generator),
        )
        if split:
            step(common.MicroBatches([(inputs[:4], targets[:4]), (inputs[4:], targets[4:])]))
        else:
            step((inputs, targets))
        return model.weight.detach().clone()

    torch.testing.assert_close(trained(split=True), trained(split=False))
