"""The verdict document (``perfgate.verdict``): JSON for CI, the report and the PR comment."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any, TypeVar, get_args

from perfgate.compare.gate import (
    CompareVerdict,
    InconclusivePolicy,
    WorkloadStatus,
    WorkloadVerdict,
)
from perfgate.errors import ExitCode, InfrastructureError, PerfgateError, UsageError
from perfgate.result import json_ready
from perfgate.stats.compare import Direction, MetricComparison, SideQuality

ERROR_SCHEMA = "perfgate.error"
"""What the gate leaves when nothing could be judged: the problem, its fix and the exit code."""
ERROR_VERSION = 1
VERDICT_SCHEMA = "perfgate.verdict"
VERDICT_VERSION = 1
WORKLOAD_STATUSES: tuple[WorkloadStatus, ...] = get_args(WorkloadStatus)


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


def error_document(error: PerfgateError) -> dict[str, Any]:
    """The error that stopped the gate, as a document the comment job can render."""
    return {
        "schema": ERROR_SCHEMA,
        "schema_version": ERROR_VERSION,
        "exit_code": int(error.exit_code),
        "problem": error.problem,
        "fix": error.fix,
    }


def error_from_document(data: Any, origin: str = "error document") -> PerfgateError:
    """The error an error document records, as the typed error (usage or infrastructure); an
    exit code that is neither is refused (an error is never shown as a regression or a pass)."""
    document = _mapping(data, origin)
    if document.get("schema") != ERROR_SCHEMA:
        raise _bad(origin, "schema", f"is not {ERROR_SCHEMA!r}")
    try:
        problem, fix = _text(document, "problem"), _optional_text(document, "fix")
        code = _integer(document, "exit_code")
    except _FieldError as exc:
        raise _bad(origin, exc.field, exc.problem) from None
    kinds = {int(ExitCode.USAGE): UsageError, int(ExitCode.INFRASTRUCTURE): InfrastructureError}
    if code not in kinds:
        raise _bad(origin, "exit_code", f"is {code}, not a usage (2) or infrastructure (3) code")
    return kinds[code](problem, fix)


def verdict_from_document(data: Any, origin: str = "verdict document") -> CompareVerdict:
    """The verdict a ``perfgate.verdict`` document records, checked field by field.

    The PR comment is rendered from this object by a job that runs no code of the pull request
    (``perfgate.compare.comment``): whatever the document says can only reach the comment
    through these typed fields, escaped by the renderer. A document that does not fit is a
    usage error naming the field.
    """
    document = _mapping(data, origin)
    if document.get("schema") != VERDICT_SCHEMA:
        raise _bad(origin, "schema", f"is not {VERDICT_SCHEMA!r}")
    version = document.get("schema_version")
    if not isinstance(version, int) or version > VERDICT_VERSION:
        raise UsageError(
            f"{origin} has schema version {version!r}; this perfgate reads {VERDICT_VERSION}",
            "render it with the perfgate that wrote it, or upgrade perfgate",
        )
    try:
        workloads = [_workload(w) for w in _list(document, "workloads")]
        return CompareVerdict(
            overall=_choice(document, "overall", ("pass", "regression", "inconclusive")),
            head_run_id=_text(document, "head_run_id"),
            workloads=workloads,
            environment_differences=_texts(document, "environment_differences"),
            method=_choice(document, "method", ("baseline", "interleaved")),
            notes=_texts(document, "notes"),
            head_commit=_optional_text(document, "head_commit"),
            head_subject=_optional_text(document, "head_subject"),
        )
    except _FieldError as exc:
        raise _bad(origin, exc.field, exc.problem) from None


def policy_from_document(data: Any, origin: str = "verdict document") -> InconclusivePolicy:
    """The inconclusive policy the verdict was judged under."""
    document = _mapping(data, origin)
    try:
        return _choice(document, "inconclusive_policy", ("exit4", "pass", "fail"))
    except _FieldError as exc:
        raise _bad(origin, exc.field, exc.problem) from None


class _FieldError(Exception):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")
        self.field, self.problem = field, problem


def _bad(origin: str, field: str, problem: str) -> UsageError:
    return UsageError(
        f"{origin}: {field} {problem}", "pass the verdict.json written by perfgate compare"
    )


def _mapping(data: Any, origin: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise UsageError(f"{origin} is not a JSON object", "pass a perfgate verdict document")
    return data


def _workload(data: Any) -> WorkloadVerdict:
    item = _as_mapping(data, "workloads[]")
    return WorkloadVerdict(
        name=_text(item, "name"),
        status=_choice(item, "status", WORKLOAD_STATUSES),
        baseline_origin=_optional_text(item, "baseline_origin"),
        comparisons=[_comparison(c) for c in _list(item, "comparisons")],
        notes=_texts(item, "notes"),
    )


def _comparison(data: Any) -> MetricComparison:
    item = _as_mapping(data, "comparisons[]")
    quality = _list(item, "quality")
    if len(quality) != 2:
        raise _FieldError("quality", "does not have two sides")
    return MetricComparison(
        metric=_text(item, "metric"),
        direction=_choice(item, "direction", get_args(Direction)),
        baseline_median=_number(item, "baseline_median"),
        head_median=_number(item, "head_median"),
        ratio=_number(item, "ratio"),
        ci_low=_number(item, "ci_low"),
        ci_high=_number(item, "ci_high"),
        p_value=_number(item, "p_value"),
        threshold=_number(item, "threshold"),
        min_detectable=_number(item, "min_detectable", missing=math.inf),
        baseline_repeats=_integer(item, "baseline_repeats"),
        head_repeats=_integer(item, "head_repeats"),
        verdict=_choice(
            item, "verdict", ("regression", "improvement", "no_change", "inconclusive")
        ),
        reasons=tuple(_texts(item, "reasons")),
        p_adjusted=_optional_number(item, "p_adjusted"),
        quality=(_quality(quality[0]), _quality(quality[1])),
        baseline_values=tuple(_numbers(item, "baseline_values")),
        head_values=tuple(_numbers(item, "head_values")),
        method=_choice(item, "method", ("bootstrap", "sequential")),
        derived_from=_optional_text(item, "derived_from"),
        rounds_needed=_optional_integer(item, "rounds_needed"),
    )


def _quality(data: Any) -> SideQuality:
    item = _as_mapping(data, "quality[]")
    bimodal = item.get("bimodal", False)
    if not isinstance(bimodal, bool):
        raise _FieldError("quality.bimodal", "is not true or false")
    return SideQuality(
        bimodal=bimodal,
        cv=_optional_number(item, "cv"),
        throttled_share=_optional_number(item, "throttled_share"),
    )


def _as_mapping(data: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise _FieldError(field, "is not an object")
    return data


def _list(item: Mapping[str, Any], key: str) -> list[Any]:
    value = item.get(key, [])
    if not isinstance(value, list):
        raise _FieldError(key, "is not a list")
    return value


def _text(item: Mapping[str, Any], key: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise _FieldError(key, "is not text")
    return value


def _optional_text(item: Mapping[str, Any], key: str) -> str | None:
    return None if item.get(key) is None else _text(item, key)


def _texts(item: Mapping[str, Any], key: str) -> list[str]:
    values = _list(item, key)
    if not all(isinstance(v, str) for v in values):
        raise _FieldError(key, "holds something other than text")
    return values


T = TypeVar("T", bound=str)


def _choice(item: Mapping[str, Any], key: str, allowed: tuple[T, ...]) -> T:
    value = item.get(key)
    for choice in allowed:
        if value == choice:
            return choice
    raise _FieldError(key, f"is {value!r}, not one of {', '.join(allowed)}")


def _number(item: Mapping[str, Any], key: str, missing: float | None = None) -> float:
    value = item.get(key)
    if value is None and missing is not None:
        return missing
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _FieldError(key, "is not a finite number")
    return float(value)


def _optional_number(item: Mapping[str, Any], key: str) -> float | None:
    return None if item.get(key) is None else _number(item, key)


def _numbers(item: Mapping[str, Any], key: str) -> list[float]:
    return [_number({key: v}, key) for v in _list(item, key)]


def _integer(item: Mapping[str, Any], key: str) -> int:
    value = item.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _FieldError(key, "is not a non-negative integer")
    return value


def _optional_integer(item: Mapping[str, Any], key: str) -> int | None:
    return None if item.get(key) is None else _integer(item, key)
