"""The diagnosis document (``perfgate.diagnosis``): what bounds each workload of a run, how
sure, and the numbers that decided it (``perfgate diagnose --json``).

The classifier (:func:`perfgate.diagnose.classify.classify`) makes a :class:`Diagnosis`; the
run summary, the HTML report and the advisor's ranking show or use it; the document records
one per workload with where its signals came from.

Format history:

- 1.0 (perfgate 0.1, 2026-12-01): first version.
- 1.1 (2026-12-02): the header's ``schema_minor``.

Each diagnosis is written with its ``label`` spelled out for people (``GPU compute-bound``):
derived from the bound and the device, not read back.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from perfgate.documents.base import DocumentKind, json_ready

Bound = Literal[
    "compute", "memory", "host", "input-pipeline", "storage", "communication", "undetermined"
]
Confidence = Literal["high", "medium", "low"]

_DEVICE_WORDS = {"cuda": "GPU", "cpu": "CPU"}
_LABELS: dict[str, str] = {
    "compute": "{device} compute-bound",
    "memory": "GPU memory-bound",
    "host": "host-bound",
    "input-pipeline": "input-pipeline-bound",
    "storage": "storage-bound",
    "communication": "communication-bound",
    "undetermined": "undetermined",
}


@dataclass(frozen=True, kw_only=True)
class Diagnosis:
    """What bounds the workload, how sure, and the values that decided it."""

    bound: Bound
    device: str
    confidence: Confidence
    reason: str
    """One sentence with the deciding numbers and thresholds."""
    evidence: dict[str, float] = field(default_factory=dict)
    """The signals the decision read, by name."""

    @property
    def label(self) -> str:
        """``GPU compute-bound``, ``input-pipeline-bound``, … for people."""
        return _LABELS[self.bound].format(device=_DEVICE_WORDS.get(self.device, self.device))


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


@dataclass(frozen=True, kw_only=True)
class DiagnosisReport:
    """What one ``perfgate diagnose`` found for one result: a diagnosis per workload."""

    result: str | None
    """The path of the result document diagnosed, when there is one."""
    workloads: list[WorkloadDiagnosis]


def _dump_report(report: DiagnosisReport) -> dict[str, Any]:
    """The report's fields, each diagnosis with its label spelled out."""
    data: dict[str, Any] = json_ready(asdict(report))
    for entry, item in zip(data["workloads"], report.workloads, strict=True):
        if item.diagnosis is not None:
            entry["diagnosis"]["label"] = item.diagnosis.label
    return data


DIAGNOSIS: DocumentKind[DiagnosisReport] = DocumentKind(
    name="perfgate.diagnosis",
    major=1,
    minor=1,
    model=DiagnosisReport,
    produced_by="perfgate diagnose --json",
    dump_model=_dump_report,
)
