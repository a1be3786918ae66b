"""Attribution of a regression: which operators and kernels moved, profiled on both sides.

When an interleaved A/B confirms a regression (or the caller asks), each flagged workload is
profiled in :data:`WINDOWS` windows per side, alternated base, head, base, … — each window the
profiling worker of ``perfgate advise`` (a fresh process, the same warm-up, a few profiled
steps; all the windows forked by one fork server, which imports torch once), on that side's
own checkout and configuration — and the traces are reduced to the
movers of ``perfgate.trace.attribution``. The windows are taken after the timed rounds, so
the profiler never touches a measured step; an attribution that cannot be made (a window that
failed, a distributed workload whose ranks trace apart) leaves a note, never a changed verdict.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from perfgate.advise.evidence import DEFAULT_PROFILE_STEPS, profile_plan
from perfgate.config import Config
from perfgate.documents.result import RunResult
from perfgate.documents.verdict import CompareVerdict, WorkloadVerdict
from perfgate.errors import PerfgateError
from perfgate.runner.device import resolve_device
from perfgate.runner.forkserver import worker_launcher
from perfgate.runner.plan import Selection, prepare
from perfgate.trace.attribution import attribute
from perfgate.trace.loader import load_trace
from perfgate.trace.timeline import Timeline, build_timeline

WINDOWS = 3
"""Profiled windows per side: enough for the spread between processes to show, few enough
that attributing costs a few seconds a side on a CPU."""


def regressed(workload: WorkloadVerdict) -> bool:
    """The workload's primary timing regressed (what attribution explains)."""
    return any(
        c.verdict == "regression" and c.derived_from is None and c.metric == "step_time_s"
        for c in workload.comparisons
    )


def with_attribution(
    verdict: CompareVerdict,
    configs: tuple[Config, Config],
    runs: tuple[RunResult, RunResult],
    selection: Selection,
    *,
    device: str,
    names: Sequence[str] | None = None,
) -> CompareVerdict:
    """``verdict`` with an attribution for each of ``names`` (default: every workload whose
    step time regressed), profiled with the base's and the head's configuration (``configs``,
    each that side's checkout) as the A/B measured them (``runs``)."""
    wanted = (
        set(names) if names is not None else {w.name for w in verdict.workloads if regressed(w)}
    )
    if not wanted:
        return verdict
    presets = {w.name: w.preset for w in runs[1].workloads}
    settings = runs[0].settings
    workloads = []
    for workload in verdict.workloads:
        if workload.name not in wanted or workload.name not in presets:
            workloads.append(workload)
            continue
        if (settings.nproc_per_node or 1) > 1:
            note = "no attribution: each rank of a distributed workload traces apart"
            workloads.append(replace(workload, notes=[*workload.notes, note]))
            continue
        chosen = Selection(
            workloads=[f"{workload.name}@{presets[workload.name]}"],
            knobs=selection.knobs,
            warmup=selection.warmup,
            threads=settings.threads,
        )
        try:
            timelines = _windows(configs, chosen, device)
        except (PerfgateError, OSError, ValueError) as problem:
            note = f"no attribution: {problem}"
            workloads.append(replace(workload, notes=[*workload.notes, note]))
            continue
        workloads.append(replace(workload, attribution=attribute(*timelines)))
    return replace(verdict, workloads=workloads)


def _windows(
    configs: tuple[Config, Config], selection: Selection, device: str
) -> tuple[list[Timeline], list[Timeline]]:
    """:data:`WINDOWS` profiled windows of each side, alternated base, head, base, …"""
    sides: tuple[list[Timeline], list[Timeline]] = ([], [])
    prepared = [prepare(config, selection) for config in configs]
    device = resolve_device(device)
    with (
        tempfile.TemporaryDirectory(prefix="perfgate-attribution-") as scratch,
        worker_launcher() as launcher,
    ):
        for window in range(WINDOWS):
            for index, (plan, settings) in enumerate(prepared):
                folder = Path(scratch) / f"{index}-{window}"
                (profiled,) = profile_plan(
                    plan, settings, device=device, steps=DEFAULT_PROFILE_STEPS,
                    trace_dir=folder, launcher=launcher,
                )  # fmt: skip
                if profiled.status != "ok" or profiled.trace_path is None:
                    raise ValueError(
                        f"the {('base', 'head')[index]} side's profiling window {window + 1} "
                        f"ended {profiled.status}: {profiled.error}"
                    )
                sides[index].append(build_timeline(load_trace(profiled.trace_path)))
    return sides
