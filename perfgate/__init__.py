"""perfgate: a performance gate for ML training workloads.

The public surface is deliberately small: the two ways to make training code a workload — a
factory returning a :class:`TrainingSetup`, or an unchanged training script that marks its
steps with a :class:`Session` (``perfgate.workloads.session``) — and the version. Everything else is
reached through the ``perfgate`` CLI and, from a notebook, ``perfgate.api``.
"""

from importlib.metadata import PackageNotFoundError, version

from perfgate.workloads.protocol import DistributedContext, TrainingSetup, WorkloadContext
from perfgate.workloads.session import ScriptFinished, Session, Step, script_context

try:  # the installed distribution's version (setuptools-scm, from the git tag)
    __version__ = version("perfgate")
except PackageNotFoundError:  # a source tree on sys.path, not installed
    __version__ = "0+unknown"

__all__ = [
    "DistributedContext",
    "ScriptFinished",
    "Session",
    "Step",
    "TrainingSetup",
    "WorkloadContext",
    "__version__",
    "script_context",
]
