"""perfgate: a performance gate for ML training workloads.

The public surface is deliberately small: the workload protocol a team implements to benchmark
its own training code, and the version. Everything else is reached through the ``perfgate`` CLI.
"""

from perfgate.workloads.protocol import DistributedContext, TrainingSetup, WorkloadContext

__version__ = "0.1.0"

__all__ = ["DistributedContext", "TrainingSetup", "WorkloadContext", "__version__"]
