"""Which device a run measures on: ``auto``, ``cpu`` or ``cuda`` resolved against what torch sees.

Below the sessions, so the measuring engines (the advisor's profiling, calibration, the A/B)
resolve a device the same way ``perfgate run`` does.
"""

from __future__ import annotations

from perfgate.errors import UsageError


def resolve_device(requested: str) -> str:
    """``auto`` picks CUDA when torch sees a GPU; ``cuda`` without one is a usage error."""
    if requested not in {"auto", "cpu", "cuda"}:
        raise UsageError(f"unknown device {requested!r}", "use cpu, cuda or auto")
    if requested == "cpu":
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if requested == "cuda":
        raise UsageError(
            "--device cuda was requested but torch sees no CUDA GPU "
            f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'})",
            "run on a GPU machine with a CUDA build of torch, or use --device cpu",
        )
    return "cpu"
