"""The verdict document (``perfgate.verdict``): JSON for CI, the report and the PR comment."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from perfgate.compare.gate import CompareVerdict, InconclusivePolicy

VERDICT_SCHEMA = "perfgate.verdict"
VERDICT_VERSION = 1


def verdict_document(
    verdict: CompareVerdict, inconclusive_policy: InconclusivePolicy
) -> dict[str, Any]:
    """JSON-ready verdict; an infinite minimum detectable change is written as null."""
    data = _finite(asdict(verdict))
    data.update(
        schema=VERDICT_SCHEMA,
        schema_version=VERDICT_VERSION,
        exit_code=int(verdict.exit_code(inconclusive_policy)),
        inconclusive_policy=inconclusive_policy,
    )
    return data


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
