"""``perfgate export --openmetrics [--push URL]`` as a library call: read the documents,
diagnose each run's workloads (the ``perfgate_bottleneck`` series), write the exposition text
and push each run to a Pushgateway."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfgate.diagnose.session import diagnose_runs
from perfgate.errors import UsageError
from perfgate.monitoring.push import openmetrics_text, push_run
from perfgate.report.documents import read_runs_and_verdicts


@dataclass(frozen=True, kw_only=True)
class OpenMetricsOutcome:
    """The exposition text, and the groups pushed (empty without a gateway)."""

    text: str
    pushed: list[dict[str, str]]


def openmetrics_session(documents: Sequence[Path], push: str | None = None) -> OpenMetricsOutcome:
    """Result documents, and at most one verdict of them, as OpenMetrics text; each result
    pushed to the Pushgateway at ``push`` when given."""
    results, verdicts = read_runs_and_verdicts(documents)
    if not results:
        raise UsageError(
            "nothing to export as OpenMetrics", "pass result documents (and a verdict)"
        )
    if len(verdicts) > 1:
        raise UsageError(
            f"{len(verdicts)} verdicts given: the series carry one verdict state",
            "pass the verdict of these results only",
        )
    verdict = verdicts[0] if verdicts else None
    diagnoses = diagnose_runs(results)
    pushed = []
    if push is not None:
        for result in results:
            pushed.extend(push_run(push, result, verdict, diagnoses))
    return OpenMetricsOutcome(text=openmetrics_text(results, verdict, diagnoses), pushed=pushed)
