"""Parent side of a distributed repeat: the ``torchrun`` command line.

perfgate does not build its own launcher: a distributed repeat is one ``torchrun`` (the torch of
the same interpreter, run by ``python -m perfgate.distributed.torchrun`` so that it dies with
perfgate) with ``--standalone`` rendezvous on a free local port, and the usual worker module as
its entry point; each rank writes next to the parent's paths (``perfgate.files.rank_output_path``).
torchrun owns the ranks' life cycle: when one rank fails it stops the others, so a crash on rank
1 does not leave rank 0 waiting in an all-reduce forever. The parent still enforces its own
timeout on the whole tree (see ``perfgate.runner.process``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.distributed.process_group import resolve_backend
from perfgate.runner.pycommand import module_command

if TYPE_CHECKING:
    from perfgate.runner.plan import PlannedWorkload

MONITOR_INTERVAL_S = 0.1
"""How often torchrun checks its ranks: a failed rank stops the others within this long."""


def torchrun_command(nproc_per_node: int, spec_path: Path, out_path: Path) -> list[str]:
    """The command that runs one repeat on ``nproc_per_node`` ranks of this machine."""
    return module_command(
        "perfgate.distributed.torchrun",
        "--standalone",
        f"--nproc-per-node={nproc_per_node}",
        "--max-restarts=0",
        f"--monitor-interval={MONITOR_INTERVAL_S}",
        "--no-python",  # each rank's own command line, also kept off the working directory
        *module_command("perfgate.runner.worker", str(spec_path), str(out_path)),
    )


def run_world(
    plan: Sequence[PlannedWorkload], nproc_per_node: int, device: str
) -> tuple[int, str] | None:
    """``(world size, backend)`` of a run with distributed workloads, for its fingerprint.

    Baselines are keyed by the fingerprint, and a step on 2 ranks is not a step on 4, nor one
    over gloo one over NCCL. None when the run has no distributed workload.
    """
    distributed = [p for p in plan if p.definition.distributed]
    if not distributed:
        return None
    backends = sorted({resolve_backend(device, p.knobs) for p in distributed})
    return nproc_per_node, "+".join(backends)
