"""The report's charts, collected while the page is built and drawn together at the end.

matplotlib costs 40-100 ms a chart, nearly all of it fixed (axes, ticks, SVG writing), and a
20-workload report has 80 charts. Collecting them lets the renderer draw them in worker processes
(one per available core, forked so nothing is imported twice) when there are enough to pay for
the pool. Each chart is a pure function of its inputs, so the page's bytes do not depend on how
many processes drew it.

The page holds a placeholder comment for each chart; :meth:`ChartBatch.fill` swaps in the SVG
after the template has rendered. A user string cannot forge a placeholder: the template escapes
every ``<`` it did not write itself.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from markupsafe import Markup

from perfgate.report import charts

ChartKind = Literal["history", "distribution", "telemetry"]
PARALLEL_FROM = 12
"""Fewest charts worth a process pool (starting one costs about as much as drawing two)."""
_PLACEHOLDER = re.compile(r"<!--perfgate-chart-(\d+)-->")


@dataclass(frozen=True)
class _Job:
    kind: ChartKind
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass
class ChartBatch:
    """Charts to draw: each ``add`` returns the placeholder the template shows."""

    jobs: list[_Job] = field(default_factory=list)

    def add(self, kind: ChartKind, *args: Any, **kwargs: Any) -> Markup:
        self.jobs.append(_Job(kind, args, kwargs))
        return Markup(f"<!--perfgate-chart-{len(self.jobs) - 1}-->")

    def fill(self, html: str, workers: int | None = None) -> str:
        """``html`` with every placeholder replaced by its chart's SVG."""
        drawn = draw_all(self.jobs, workers)
        return _PLACEHOLDER.sub(lambda match: drawn[int(match.group(1))], html)


def draw_all(jobs: Sequence[_Job], workers: int | None = None) -> list[str]:
    """Every job's SVG, in order; in forked worker processes when that pays."""
    workers = available_cores() if workers is None else workers
    if workers < 2 or len(jobs) < PARALLEL_FROM or not _can_fork():
        return [_draw(job) for job in jobs]
    context = multiprocessing.get_context("fork")
    chunk = max(1, len(jobs) // (workers * 4))
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        return list(pool.map(_draw, jobs, chunksize=chunk))


def available_cores() -> int:
    """Cores this process may run on (its affinity mask, not the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _can_fork() -> bool:
    # fork is the default and safe on Linux for this (no threads hold locks the charts need);
    # macOS and Windows draw serially rather than pay a spawn per worker.
    return sys.platform.startswith("linux")


def _draw(job: _Job) -> str:
    if job.kind == "history":
        return charts.history_svg(*job.args, **job.kwargs)
    if job.kind == "distribution":
        return charts.distribution_svg(*job.args, **job.kwargs)
    return charts.telemetry_svg(*job.args, **job.kwargs)
