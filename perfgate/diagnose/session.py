"""``perfgate diagnose`` as a library call: measure (or read) each workload, profile a window,
and classify what bounds it.

Kept apart from the classifier (a pure function) and from the CLI, so the run summary, the
HTML report and the advisor's ranking use the very same diagnosis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from perfgate.diagnose.classify import Diagnosis, classify
from perfgate.diagnose.signals import combined, evidence_signals, run_signals
from perfgate.documents.base import json_ready
from perfgate.files import write_json_atomic
from perfgate.result import RunResult, WorkloadResult

DIAGNOSIS_SCHEMA = "perfgate.diagnosis"
DIAGNOSIS_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class WorkloadDiagnosis:
    """One workload's diagnosis, with where its signals came from."""

    name: str
    preset: str
    status: str
    diagnosis: Diagnosis | None
    """None when the workload did not run (its error says why)."""
    profiled: bool
    """A profiler window contributed the GPU timeline and kernel mix."""
    error: str | None = None


def diagnose_workload(
    workload: WorkloadResult,
    environment: Mapping[str, Any],
    evidence: Mapping[str, Any] | None = None,
) -> WorkloadDiagnosis:
    """The diagnosis of one measured workload, with a profile window's evidence when given."""
    if workload.status != "ok":
        return WorkloadDiagnosis(
            name=workload.name,
            preset=workload.preset,
            status=workload.status,
            diagnosis=None,
            profiled=False,
            error=workload.error,
        )
    signals = run_signals(workload, environment)
    if evidence:
        signals = combined(signals, evidence_signals(evidence))
    return WorkloadDiagnosis(
        name=workload.name,
        preset=workload.preset,
        status="ok",
        diagnosis=classify(signals),
        profiled=bool(evidence),
    )


def diagnose_result(
    result: RunResult, evidence: Mapping[str, Mapping[str, Any]] | None = None
) -> list[WorkloadDiagnosis]:
    """Every workload of a result document; ``evidence`` by workload name, where profiled."""
    return [
        diagnose_workload(w, result.environment, (evidence or {}).get(w.name))
        for w in result.workloads
    ]


def diagnosis_document(results: list[WorkloadDiagnosis], source: Path | None) -> dict[str, Any]:
    """JSON-ready diagnoses (``perfgate.diagnosis`` v1), with each label spelled out."""
    workloads = []
    for item in results:
        entry = json_ready(asdict(item))
        if item.diagnosis is not None:
            entry["diagnosis"]["label"] = item.diagnosis.label
        workloads.append(entry)
    return {
        "schema": DIAGNOSIS_SCHEMA,
        "schema_version": DIAGNOSIS_VERSION,
        "result": str(source) if source else None,
        "workloads": workloads,
    }


def write_diagnoses(path: Path, diagnosed: Sequence[tuple[Path, list[WorkloadDiagnosis]]]) -> None:
    """Write the diagnoses of each result document to ``path`` (``--json``): one document for
    one result, a list of them for several."""
    documents = [diagnosis_document(items, source) for source, items in diagnosed]
    document = documents[0] if len(documents) == 1 else documents
    write_json_atomic(path, document, option="--json")
