"""``perfgate diagnose`` as a library call: measure (or read) each workload, profile a window,
and classify what bounds it.

Kept apart from the classifier (a pure function) and from the CLI, so the run summary, the
HTML report and the advisor's ranking use the very same diagnosis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfgate.diagnose.classify import classify
from perfgate.diagnose.signals import combined, evidence_signals, run_signals
from perfgate.documents.advice import AdviceReport
from perfgate.documents.diagnosis import DIAGNOSIS, Diagnosis, DiagnosisReport, WorkloadDiagnosis
from perfgate.documents.result import RunResult, WorkloadResult
from perfgate.files import write_json_atomic


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


def diagnose_runs(
    results: Sequence[RunResult], advice: AdviceReport | None = None
) -> dict[str, Diagnosis]:
    """What bounds each workload that ran in ``results`` (shards of one run), by name, for the
    HTML report: from its timed run and, where ``advice`` profiled it, the profiled window."""
    evidence = {w.name: w.evidence for w in advice.workloads} if advice is not None else {}
    return {
        item.name: item.diagnosis
        for result in results
        for item in diagnose_result(result, evidence)
        if item.diagnosis is not None
    }


def diagnosis_report(results: list[WorkloadDiagnosis], source: Path | None) -> DiagnosisReport:
    """The diagnoses of the result document at ``source`` as a ``perfgate.diagnosis``
    document's model (written through :data:`perfgate.documents.diagnosis.DIAGNOSIS`)."""
    return DiagnosisReport(result=str(source) if source else None, workloads=list(results))


def write_diagnoses(path: Path, diagnosed: Sequence[tuple[Path, list[WorkloadDiagnosis]]]) -> None:
    """Write the diagnoses of each result document to ``path`` (``--json``): one document for
    one result, a list of them for several."""
    documents = [DIAGNOSIS.dump(diagnosis_report(items, source)) for source, items in diagnosed]
    document = documents[0] if len(documents) == 1 else documents
    write_json_atomic(path, document, option="--json")
