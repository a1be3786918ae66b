"""The registry of built-in workloads and the suites that run them.

Each built-in lives in its own module exposing ``DEFINITION`` and ``build(ctx)``; this module
only collects them. Importing it imports torch, because the workload modules define their
models at import time.
"""

from __future__ import annotations

from perfgate.workloads import datapipe, gpt, mlp, resnet
from perfgate.workloads.definition import WorkloadDefinition

BUILTIN_WORKLOADS: dict[str, WorkloadDefinition] = {
    module.DEFINITION.name: module.DEFINITION for module in (gpt, resnet, mlp, datapipe)
}
"""Built-in workload name → definition (``gpt``, ``resnet``, ``mlp``, ``datapipe``)."""

SUITES: dict[str, tuple[tuple[str, str], ...]] = {
    preset: tuple((name, preset) for name in BUILTIN_WORKLOADS) for preset in ("smoke", "full")
}
"""Suite name → ``(workload, preset)`` pairs: ``smoke`` is seconds on a CPU (CI, plumbing
checks), ``full`` is sized for a datacenter GPU."""
