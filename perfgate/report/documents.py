"""Reading the advice documents a report is made from (through their kind,
:data:`perfgate.documents.advice.ADVICE`), finding the one ``run --profile`` left, and reading
the runs and verdicts ``perfgate export`` converts.

Light on purpose (no charts, no templates): ``perfgate compare --advice`` reads advice through
here before it measures anything, so a wrong file fails in a second.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from perfgate.documents.advice import ADVICE, AdviceReport, WorkloadAdvice
from perfgate.documents.result import RESULT, RunResult, result_from_dict
from perfgate.documents.verdict import VERDICT, CompareVerdict
from perfgate.errors import UsageError
from perfgate.files import read_json


def read_advice(paths: Sequence[Path]) -> AdviceReport | None:
    """The advice documents at ``paths`` as one (:func:`merged_advice`); None when there are
    none. Every way a file can be wrong is a one-line usage error naming it
    (:meth:`perfgate.documents.base.DocumentKind.load`)."""
    return merged_advice([ADVICE.load(Path(path)) for path in paths])


def merged_advice(documents: Sequence[AdviceReport]) -> AdviceReport | None:
    """Several advice documents (one per result, or shards) as one; the first document that
    has a workload wins. None when there are none."""
    if not documents:
        return None
    seen: dict[str, WorkloadAdvice] = {}
    for document in documents:
        for workload in document.workloads:
            seen.setdefault(workload.name, workload)
    return replace(documents[0], workloads=list(seen.values()))


def advice_beside(result_path: Path) -> Path | None:
    """``<result>.advice.json``, which ``perfgate run --profile`` writes next to its result."""
    candidate = result_path.with_name(result_path.stem + ".advice.json")
    return candidate if candidate.is_file() else None


def read_runs_and_verdicts(paths: Sequence[Path]) -> tuple[list[RunResult], list[CompareVerdict]]:
    """Result and verdict documents, told apart by their ``schema``, in the order given; any
    other file is a one-line usage error naming it."""
    fix = "pass result documents (perfgate run --out) or verdicts (perfgate compare --json)"
    results: list[RunResult] = []
    verdicts: list[CompareVerdict] = []
    for path in paths:
        data = read_json(Path(path), what="document", fix=fix)
        schema = data.get("schema") if isinstance(data, dict) else None
        if schema == RESULT.name:
            results.append(result_from_dict(data, origin=f"result file {path}"))
        elif schema == VERDICT.name:
            verdicts.append(VERDICT.read(data, f"verdict file {path}"))
        else:
            raise UsageError(f"{path} is neither a result nor a verdict document", fix)
    return results, verdicts
