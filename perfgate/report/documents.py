"""Reading the JSON documents a report is made from: verdicts and advice.

Light on purpose (no charts, no templates): ``perfgate compare --advice`` reads advice through
here before it measures anything, so a wrong file fails in a second.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfgate.errors import UsageError
from perfgate.files import read_json


def read_document(path: Path, schema: str, produced_by: str) -> dict[str, Any]:
    """A JSON document whose ``schema`` field is ``schema``; a one-line usage error otherwise
    (:func:`perfgate.files.read_json`: a folder, not UTF-8, not JSON, too deep, NaN, …)."""
    fix = f"pass a file written by {produced_by}"
    what = f"{schema.removeprefix('perfgate.')} file"
    data = read_json(Path(path), what=what, fix=fix, path_fix=fix)
    if not isinstance(data, dict) or data.get("schema") != schema:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise UsageError(f"{path} is not a {schema} document (schema: {found!r})", fix)
    return data


def merged_advice(documents: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Several advice documents (one per result, or shards) as one; the first document that
    has a workload wins. None when there are none."""
    if not documents:
        return None
    seen: dict[str, Any] = {}
    for document in documents:
        for workload in document.get("workloads", []):
            seen.setdefault(workload["name"], workload)
    return {**documents[0], "workloads": list(seen.values())}


def advice_beside(result_path: Path) -> Path | None:
    """``<result>.advice.json``, which ``perfgate run --profile`` writes next to its result."""
    candidate = result_path.with_name(result_path.stem + ".advice.json")
    return candidate if candidate.is_file() else None
