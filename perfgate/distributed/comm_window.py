"""The communication window of a distributed repeat: a few profiled steps after the timed ones.

Step times say how long a step took on each rank, not why. How much of it was collective
communication, and how much of that computation hid, is only visible on a timeline, so after its
measured steps every rank of the first repeat profiles a short window (the timed steps are over:
the profiler's overhead costs no measurement), reads its own trace
(``perfgate.distributed.comm_trace``) and reports the summary in its document. The trace itself
is deleted: ``perfgate advise`` keeps traces, a timed run only needs the numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfgate.runner.worker import BatchSource
from perfgate.workloads.protocol import TrainingSetup


def measure_communication(
    setup: TrainingSetup, source: BatchSource, device: str, steps: int, trace_path: Path
) -> dict[str, Any] | None:
    """The rank's communication summary over ``steps`` profiled steps; None without collectives."""
    from perfgate.advise.profile_window import profile_steps
    from perfgate.trace.communication import communication_summary
    from perfgate.trace.loader import load_trace

    profile_steps(setup, source, device, steps, trace_path)
    try:
        summary = communication_summary(load_trace(trace_path))
    finally:
        trace_path.unlink(missing_ok=True)
    return summary.to_dict() if summary is not None else None
