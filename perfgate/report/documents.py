"""Reading the advice documents a report is made from (through their kind,
:data:`perfgate.documents.advice.ADVICE`), and finding the one ``run --profile`` left.

Light on purpose (no charts, no templates): ``perfgate compare --advice`` reads advice through
here before it measures anything, so a wrong file fails in a second.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from perfgate.documents.advice import ADVICE, AdviceReport, WorkloadAdvice


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
