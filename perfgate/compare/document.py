"""The verdict document (``perfgate.verdict``): JSON for CI, the report and the PR comment."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from perfgate.compare.gate import CompareVerdict, InconclusivePolicy
from perfgate.result import json_ready

VERDICT_SCHEMA = "perfgate.verdict"
VERDICT_VERSION = 1


def verdict_document(
    verdict: CompareVerdict, inconclusive_policy: InconclusivePolicy
) -> dict[str, Any]:
    """JSON-ready verdict; an infinite minimum detectable change is written as null."""
    data = json_ready(asdict(verdict))
    data.update(
        schema=VERDICT_SCHEMA,
        schema_version=VERDICT_VERSION,
        exit_code=int(verdict.exit_code(inconclusive_policy)),
        inconclusive_policy=inconclusive_policy,
    )
    return data
