"""Runs out to monitoring: the OpenMetrics text of a run, and its push to a Pushgateway.

A CI run is a batch job, so Prometheus cannot scrape it while it lives; the convention is to
push its series to a Pushgateway, which Prometheus scrapes. Each workload of a run is pushed
as its own group (``job="perfgate"`` plus the workload's labels but ``gpu``), replaced by the
next run of the same workload, suite, preset, branch and environment: the gateway holds the
newest value of every series and never a growing pile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prometheus_client import push_to_gateway
from prometheus_client.openmetrics.exposition import generate_latest

from perfgate.documents.diagnosis import Diagnosis
from perfgate.documents.result import RunResult
from perfgate.documents.verdict import CompareVerdict
from perfgate.errors import InfrastructureError, UsageError
from perfgate.monitoring.series import is_pushed_branch, run_labels, run_registry

JOB = "perfgate"
GROUPING = ("suite", "workload", "preset", "branch", "environment")
"""The labels that name a pushed group (``gpu`` follows from ``environment``)."""


def openmetrics_text(
    results: Sequence[RunResult],
    verdict: CompareVerdict | None = None,
    diagnoses: Mapping[str, Diagnosis] | None = None,
) -> str:
    """The OpenMetrics exposition of every result's series."""
    return generate_latest(run_registry(results, verdict, diagnoses)).decode()


def push_run(
    gateway: str,
    result: RunResult,
    verdict: CompareVerdict | None = None,
    diagnoses: Mapping[str, Diagnosis] | None = None,
    timeout_s: float = 10.0,
) -> list[dict[str, str]]:
    """Push each measured workload of ``result`` to the Pushgateway at ``gateway`` as its own
    group; the grouping keys pushed. A pull request's run is refused (its branch would be a
    new label value for ever: a usage error); an unreachable gateway is an infrastructure
    error."""
    if not is_pushed_branch(result.source.branch, result.source.pr_number):
        raise UsageError(
            f"run {result.run_id} is a pull request's or has no branch: its series are not "
            "pushed (each PR branch would add label values for ever)",
            "push the runs of main (or another long-lived branch), e.g. from the nightly job",
        )
    if result.settings.inject_slowdown:
        raise UsageError(
            f"run {result.run_id} is a canary (slowed by {result.settings.inject_slowdown:.0%} "
            "on purpose): its series would read as a regression of the branch",
            "push the measured runs, not the canary",
        )
    pushed = []
    for workload in result.workloads:
        if workload.status != "ok":
            continue
        labels = run_labels(result, workload)
        grouping = {key: labels[key] or "none" for key in GROUPING}
        registry = run_registry([result], verdict, diagnoses, workloads=[workload.name])
        try:
            push_to_gateway(
                gateway, job=JOB, grouping_key=grouping, registry=registry, timeout=timeout_s
            )
        except OSError as error:
            raise InfrastructureError(
                f"cannot push to the Pushgateway at {gateway}: {error}",
                "check the URL (e.g. http://127.0.0.1:9091) and that the gateway is up",
            ) from None
        pushed.append(grouping)
    return pushed
