"""The registry of built-in workloads and the suites that run them.

Each built-in lives in its own module exposing ``DEFINITION`` and ``build(ctx)``; this module
only collects them. Importing it imports torch, because the workload modules define their
models at import time.
"""

from __future__ import annotations

from perfgate.workloads import datapipe, ddp, gpt, mlp, resnet
from perfgate.workloads.definition import WorkloadDefinition

BUILTIN_WORKLOADS: dict[str, WorkloadDefinition] = {
    module.DEFINITION.name: module.DEFINITION for module in (gpt, resnet, mlp, datapipe, ddp)
}
"""Built-in workload name → definition (``gpt``, ``resnet``, ``mlp``, ``datapipe``, ``ddp``)."""

SINGLE_PROCESS = tuple(name for name, d in BUILTIN_WORKLOADS.items() if not d.distributed)

SUITES: dict[str, tuple[tuple[str, str], ...]] = {
    **{preset: tuple((name, preset) for name in SINGLE_PROCESS) for preset in ("smoke", "full")},
    "distributed": (("ddp", "smoke"), ("ddp", "resnet-smoke")),
}
"""Suite name → ``(workload, preset)`` pairs: ``smoke`` is seconds on a CPU (CI, plumbing
checks), ``full`` is sized for a datacenter GPU; both single-process. ``distributed`` runs the
``ddp`` workload over both models (with ``--nproc-per-node``, one process group per repeat)."""
