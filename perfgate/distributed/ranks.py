"""One repeat from its ranks' reports: the slowest rank decides, the spread is kept.

Every rank of a distributed repeat times its own steps. A data-parallel step is over only when
the last rank is done, so the repeat's step times are those of the **slowest rank** (the rank
with the highest steady median) and compare's verdict is on that rank. The other ranks stay in
the result: their step times, their communication window, and the spread of the rank medians.

A failed rank fails the repeat with its own error text. The order of precedence says what to
show when several ranks ended badly, because one failure usually causes the others: torchrun
stops the healthy ranks once one fails, so they never write a report, or their collective
fails first ("connection closed by peer") and they report that. So a report that cannot be
trusted (malformed: the repeat cannot be judged at all) beats bad input (usage error), which
beats a rank's own error, which beats a rank that wrote nothing (a crash), which beats an error
that only reports a vanished peer; among ranks that failed alike the first to fail (by the time
it wrote down) is the cause.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path

from perfgate.documents.result import RankResult
from perfgate.documents.worker import (
    Measurement,
    RepeatReport,
    WorkerReport,
    WorkerSpec,
    load_report,
)
from perfgate.errors import UsageError
from perfgate.files import rank_output_path


def read_rank_reports(
    out_path: Path, spec: WorkerSpec, world_size: int
) -> tuple[dict[int, WorkerReport], dict[int, str]]:
    """The reports the ranks wrote (a rank that wrote none is absent), and why each report
    that could not be trusted could not (``perfgate.documents.worker.load_report``)."""
    reports: dict[int, WorkerReport] = {}
    malformed: dict[int, str] = {}
    for rank in range(world_size):
        try:
            report = load_report(
                rank_output_path(out_path, rank), spec, f"rank {rank}'s report", rank
            )
        except UsageError as exc:
            malformed[rank] = exc.problem
            continue
        if report is not None:
            reports[rank] = report
    return reports, malformed


def combine_ranks(
    reports: Mapping[int, WorkerReport],
    world_size: int,
    malformed: Mapping[int, str] | None = None,
) -> RepeatReport:
    """The repeat's report: merged when every rank is ok, else the deciding rank's failure.

    A rank's report that could not be trusted (``malformed``: rank → why) decides first: the
    repeat cannot be judged. Otherwise a failure's text names the rank that caused it and,
    briefly, the ranks that failed because of it.
    """
    if malformed:
        return RepeatReport(status="malformed", error=malformed[min(malformed)])
    usage = _first_failed(reports, lambda r: r.status == "usage_error")
    if usage is not None:
        return RepeatReport(status="usage_error", error=_failure_text(reports, usage))
    errored = [rank for rank, report in reports.items() if report.status == "error"]
    own = _first_failed(reports, lambda r: r.status == "error" and not _peer_failure(r.error or ""))
    if own is not None:
        return RepeatReport(status="error", error=_failure_text(reports, own))
    missing = [rank for rank in range(world_size) if rank not in reports]
    if missing:
        text = f"rank {', '.join(map(str, missing))} wrote no result (crashed or was killed)"
        if errored:
            first = min(errored, key=lambda rank: _failed_at(reports[rank]))
            text += f"; rank {first} then failed: {_last_line(reports[first].error or '')}"
        return RepeatReport(status="crashed", error=text)
    if errored:
        first = min(errored, key=lambda rank: _failed_at(reports[rank]))
        return RepeatReport(status="error", error=_failure_text(reports, first))
    return merge_ok_ranks([reports[rank] for rank in range(world_size)])


_PEER_FAILURE = re.compile(
    r"connection (?:reset|closed) by peer|remote worker|DistBackendError|communicator was aborted"
    r"|NCCL (?:error|communicator)|process group .* (?:aborted|timed out)",
    re.IGNORECASE,
)


def _peer_failure(error: str) -> bool:
    """A rank's error that is another rank's failure seen from here (its peer went away)."""
    return bool(_PEER_FAILURE.search(error))


def _first_failed(
    reports: Mapping[int, WorkerReport], matches: Callable[[WorkerReport], bool]
) -> int | None:
    """The rank that failed first (by the time it wrote down) among those that ``match``."""
    ranks = [rank for rank, report in reports.items() if matches(report)]
    return min(ranks, key=lambda rank: _failed_at(reports[rank])) if ranks else None


def _failed_at(report: WorkerReport) -> float:
    return report.failed_at or 0.0


def _failure_text(reports: Mapping[int, WorkerReport], rank: int) -> str:
    others = sorted(r for r, report in reports.items() if r != rank and report.status != "ok")
    then = f" (then rank {', '.join(map(str, others))} failed too)" if others else ""
    return f"rank {rank}{then}: {reports[rank].error}"


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def merge_ok_ranks(reports: list[WorkerReport]) -> RepeatReport:
    """The slowest rank's report, with every rank's samples and the slowest rank's index.

    Ranks that profiled instead of timing (``perfgate advise``) have no steps to compare:
    rank 0's report speaks for them (its facts; every rank's trace lies beside its own).
    """
    timed = [report.measurement for report in reports if report.measurement is not None]
    if len(timed) < len(reports):
        return RepeatReport(status="ok", report=reports[0])
    medians = [steady_median(m) for m in timed]
    slowest = max(range(len(reports)), key=lambda rank: medians[rank])
    ranks = [
        RankResult(
            rank=rank,
            median_step_s=medians[rank],
            step_times_s=list(m.step_times_s),
            steady_start=m.steady_start,
            dataloader_wait_s=list(m.dataloader_wait_s),
            peak_memory=dict(m.peak_memory),
            first_step_s=m.first_step_s,
            communication=asdict(m.communication) if m.communication is not None else None,
        )
        for rank, m in enumerate(timed)
    ]
    return RepeatReport(status="ok", report=reports[slowest], slowest_rank=slowest, ranks=ranks)


def steady_median(measurement: Measurement) -> float:
    """Median of a rank's steady steps (all measured steps when none were judged steady)."""
    steps = measurement.step_times_s or [0.0]
    steady = steps[measurement.steady_start :] or steps
    return statistics.median(steady)
