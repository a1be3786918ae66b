"""Worker side of a distributed repeat: the process group a rank trains in.

A worker started by ``torchrun`` finds ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE`` and the
rendezvous address in its environment. It initialises the default process group *before* it
calls the workload factory, so built-in and user factories alike only wrap their model and shard
their data, and it destroys the group after the last step, so a rank never exits while its peers
still expect it in a collective.

The backend follows the device unless the workload's ``backend`` knob names one: NCCL on GPUs,
gloo on CPU (NCCL has no CPU path; gloo on GPUs works, slowly, which is what the
``non-nccl-backend-gpu`` rule is about).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

from perfgate.errors import UsageError
from perfgate.workloads.protocol import DistributedContext

COLLECTIVE_MARGIN_S = 30.0
"""Added to the repeat's timeout for the process group's: the parent's timeout fires first."""


def launched_rank() -> tuple[int, int, int] | None:
    """``(rank, local_rank, world_size)`` when torchrun started this process, else None."""
    if "WORLD_SIZE" not in os.environ or "RANK" not in os.environ:
        return None
    return (
        int(os.environ["RANK"]),
        int(os.environ.get("LOCAL_RANK", os.environ["RANK"])),
        int(os.environ["WORLD_SIZE"]),
    )


def resolve_backend(device: str, knobs: Mapping[str, Any]) -> str:
    """The ``backend`` knob when it names one, else NCCL for ``cuda`` and gloo for ``cpu``."""
    wanted = str(knobs.get("backend") or "auto")
    if wanted == "auto":
        return "nccl" if device == "cuda" else "gloo"
    if wanted == "nccl" and device != "cuda":
        raise UsageError("backend=nccl needs GPUs (NCCL has no CPU path)", "use backend=gloo")
    return wanted


@contextlib.contextmanager
def process_group(
    device: str, knobs: Mapping[str, Any], timeout_s: float
) -> Iterator[DistributedContext | None]:
    """The initialised default group for a torchrun-launched worker; None for a plain worker.

    ``timeout_s`` (the repeat's) plus a margin bounds every collective: a peer that died
    mid-step turns into an error on this rank instead of an endless wait. It is a backstop
    only: torchrun stops the other ranks as soon as one fails, and the parent kills the whole
    tree at the repeat's own timeout, which comes first.
    """
    launched = launched_rank()
    if launched is None:
        yield None
        return
    import torch
    import torch.distributed as dist

    rank, local_rank, world_size = launched
    backend = resolve_backend(device, knobs)
    if device == "cuda":
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s + COLLECTIVE_MARGIN_S))
    try:
        yield DistributedContext(
            rank=rank, local_rank=local_rank, world_size=world_size, backend=backend
        )
        dist.barrier()
    finally:
        dist.destroy_process_group()
