"""``perfgate diagnose`` as one library call: read result documents, or measure the selection
(never stored) and profile a window of each workload; then classify what bounds each.

A module of its own rather than part of ``perfgate.diagnose``: measuring and profiling need
``perfgate.run`` and ``perfgate.advise.evidence``, and the advisor itself classifies with
``perfgate.diagnose``, so ``perfgate.diagnose`` importing them would make a circle.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate.advise.evidence import profile_workloads
from perfgate.config import load_config
from perfgate.diagnose.session import WorkloadDiagnosis, diagnose_result
from perfgate.documents.result import load_result
from perfgate.files import check_writable
from perfgate.run import RunWatch, execute_run
from perfgate.runner.plan import Selection

Diagnosed = list[tuple[Path, list[WorkloadDiagnosis]]]
"""Each result document (read, or written by the measuring) with its workloads' diagnoses."""


@dataclass(frozen=True, kw_only=True)
class DiagnoseRequest:
    """What ``perfgate diagnose`` is asked: documents to read, or a selection to measure."""

    results: Sequence[Path] = ()
    """Result documents to diagnose; none: measure the selection now."""
    config: Path | None = None
    """The configuration file; None: the nearest perfgate.toml or pyproject.toml upwards."""
    selection: Selection = field(default_factory=Selection)
    device: str | None = None
    """cpu, cuda or auto; None: the configuration's."""
    out: Path | None = None
    """Where the measured run's result document goes (None: under .perfgate/results)."""
    profile: bool = True
    """Also profile a window per measured workload (the GPU timeline and kernel mix)."""
    json_out: Path | None = None
    """Where the diagnoses will be written: checked before anything is measured."""


def diagnose_session(request: DiagnoseRequest, progress: RunWatch = nullcontext) -> Diagnosed:
    """The diagnoses of the documents, or of the selection measured under ``progress``."""
    if request.json_out is not None:
        check_writable(request.json_out, "--json")  # before the measuring, not after
    if request.results:
        return [(path, diagnose_result(load_result(path))) for path in request.results]
    return [measure_and_diagnose(request, progress)]


def measure_and_diagnose(
    request: DiagnoseRequest, progress: RunWatch = nullcontext
) -> tuple[Path, list[WorkloadDiagnosis]]:
    """Run the selection (no store), profile each workload that ran, and classify."""
    config = load_config(request.config)
    with progress() as observer:
        outcome = execute_run(
            config,
            request.selection,
            device=request.device or config.device,
            out=request.out,
            store=False,
            observer=observer,
        )
    evidence: dict[str, Any] = {}
    if request.profile:
        for profiled in profile_workloads(config, request.selection, device=outcome.result.device):
            if profiled.status == "ok":
                evidence[profiled.name] = profiled.evidence
    return outcome.path, diagnose_result(outcome.result, evidence)
