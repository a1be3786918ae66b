"""``perfgate export --openmetrics [--push URL]`` and ``perfgate ingest``'s push as library
calls: read the documents, diagnose each run's workloads (the ``perfgate_bottleneck`` series),
write the exposition text, and push runs to a Pushgateway."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfgate.config import load_config
from perfgate.diagnose.session import diagnose_runs
from perfgate.errors import PerfgateError, UsageError
from perfgate.monitoring.push import openmetrics_text, push_run
from perfgate.report.documents import read_runs_and_verdicts
from perfgate.store.session import IngestOutcome, ingest_session


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


@dataclass(frozen=True, kw_only=True)
class IngestAndPush:
    """What ``perfgate ingest`` stored, and one line per document on its push (empty when no
    Pushgateway is configured)."""

    stored: IngestOutcome
    pushed: list[str]


def ingest_and_push(config_path: Path | None, files: Sequence[Path]) -> IngestAndPush:
    """Store the documents, then push each run to the configured ``pushgateway_url``. The runs
    are stored whatever happens to the push: a gateway that is down, or a run that may not be
    pushed (a pull request's, a canary), is a line of the outcome, not a failed ingest."""
    stored = ingest_session(config_path, files)
    gateway = load_config(config_path).pushgateway_url
    if not gateway:
        return IngestAndPush(stored=stored, pushed=[])
    pushed = []
    for item in stored.documents:
        try:
            groups = push_run(gateway, item.result)
        except PerfgateError as error:
            pushed.append(f"{item.path}: not pushed to {gateway}: {error.problem}")
        else:
            pushed.append(f"{item.path}: pushed to {gateway} ({len(groups)} workload group(s))")
    return IngestAndPush(stored=stored, pushed=pushed)
