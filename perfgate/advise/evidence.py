"""Evidence for advice: one profiling worker per workload, its trace and facts combined.

The parent side of ``perfgate advise`` (and ``perfgate run --profile``). Each selected workload
is built in a fresh worker process through the same machinery as a timed repeat
(``perfgate.runner.process.run_worker`` on ``perfgate.runner.orchestrator.worker_spec``, forked
by one fork server for all of them where it can be), with a ``profile`` window in the spec
(``ProfilerWindow(steps=5, trace_path=…/gpt.trace.json)``) that switches the worker to its
profiling mode.

The worker writes the trace and reports the live facts; the parent reads the trace once
(``perfgate.trace.loader``), names what it measures (``trace_evidence``), lays the facts over
it and derives what needs both (MFU and the GC share need the trace's step time). A worker
that fails, hangs or crashes becomes a ``ProfiledWorkload`` with its status and error, never an
exception that stops the others.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from perfgate.advise.catalogue import EVIDENCE, Evidence
from perfgate.advise.trace_evidence import trace_evidence
from perfgate.config import Config
from perfgate.distributed.summary import step_imbalance
from perfgate.documents.result import RunSettings
from perfgate.documents.worker import ProfilerWindow, WorkerSpec
from perfgate.errors import PerfgateError, UsageError
from perfgate.files import rank_trace_path
from perfgate.runner.device import resolve_device
from perfgate.runner.forkserver import ForkServer, worker_launcher
from perfgate.runner.orchestrator import SAMPLE_INTERVAL_S, worker_spec
from perfgate.runner.plan import PlannedWorkload, Selection, prepare
from perfgate.runner.process import run_worker
from perfgate.trace.communication import communication_summary
from perfgate.trace.facts import DERIVATION_INPUTS
from perfgate.trace.loader import load_document, parse_trace
from perfgate.trace.model import Trace

DEFAULT_PROFILE_STEPS = 5
"""Active profiler steps: enough to see a steady step, few enough to keep the trace small."""

BUILTIN_KINDS = {
    "gpt": "transformer",
    "resnet": "convnet",
    "mlp": "mlp",
    "datapipe": "datapipe",
    "ddp": "distributed",
}
"""``workload_kind`` of the built-ins; every user workload is ``user``."""


@dataclass(frozen=True, kw_only=True)
class ProfiledWorkload:
    """How one workload's profiling worker ended, with its evidence when it succeeded."""

    name: str
    status: str
    """``ok``, ``error``, ``timeout`` or ``crashed`` (as for a timed repeat)."""
    error: str | None
    evidence: Evidence
    """Empty unless ``status`` is ``ok``."""
    trace_path: Path | None
    """Where the trace was kept (``trace_dir``), else None: it went with the scratch folder."""


class ProfilingFailed(PerfgateError):
    """Some workloads could not be profiled; ``outcomes`` holds every workload's result."""

    def __init__(self, outcomes: list[ProfiledWorkload]) -> None:
        self.outcomes = outcomes
        failed = [o for o in outcomes if o.status != "ok"]
        detail = "; ".join(f"{o.name}: {o.status} ({o.error})" for o in failed)
        super().__init__(
            f"{len(failed)} of {len(outcomes)} workloads could not be profiled: {detail}",
            "fix the workload or raise --timeout, then run perfgate advise again",
        )


def collect_evidence(
    config: Config,
    selection: Selection,
    *,
    device: str,
    steps: int = DEFAULT_PROFILE_STEPS,
    trace_dir: Path | None = None,
) -> dict[str, Evidence]:
    """Evidence of every selected workload; ``ProfilingFailed`` if any could not be profiled."""
    outcomes = profile_workloads(config, selection, device=device, steps=steps, trace_dir=trace_dir)
    if any(o.status != "ok" for o in outcomes):
        raise ProfilingFailed(outcomes)
    return {o.name: o.evidence for o in outcomes}


def profile_workloads(
    config: Config,
    selection: Selection,
    *,
    device: str,
    steps: int = DEFAULT_PROFILE_STEPS,
    trace_dir: Path | None = None,
) -> list[ProfiledWorkload]:
    """Profile each selected workload in its own worker; failures are results, not exceptions.

    ``device`` is ``cpu``, ``cuda`` or ``auto``. Plan, knobs, warm-up, threads and timeout come
    from the selection and configuration exactly as for ``perfgate run``.
    """
    if steps < 1:
        raise UsageError(f"profile steps {steps} must be at least 1", "use e.g. 5 steps")
    plan, settings = prepare(config, selection)
    device = resolve_device(device)
    with worker_launcher() as launcher:
        return profile_plan(
            plan, settings, device=device, steps=steps, trace_dir=trace_dir, launcher=launcher
        )


def profile_plan(
    plan: list[PlannedWorkload],
    settings: RunSettings,
    *,
    device: str,
    steps: int,
    trace_dir: Path | None,
    launcher: ForkServer | None,
) -> list[ProfiledWorkload]:
    """:func:`profile_workloads` on a prepared plan and a resolved ``device`` (cpu or cuda), each
    worker forked by ``launcher`` (None: spawned). A caller that profiles several windows
    passes one launcher to all of them, so the fork server (and its ``import torch``, seconds
    on a CPU) starts once, not per window; every window is still a fresh process."""
    with tempfile.TemporaryDirectory(prefix="perfgate-advise-") as scratch:
        return [
            _profile_one(planned, settings, device, steps, Path(scratch), trace_dir, launcher)
            for planned in plan
        ]


def profile_spec(
    planned: PlannedWorkload, settings: RunSettings, device: str, steps: int, trace_path: Path
) -> WorkerSpec:
    """A timed repeat's worker spec plus the ``profile`` window (no FLOP count, no canary)."""
    spec = worker_spec(planned, settings, device, count_flops=False)
    window = ProfilerWindow(steps=steps, trace_path=trace_path)
    return replace(spec, inject_slowdown=None, profile=window)


def _profile_one(
    planned: PlannedWorkload,
    settings: RunSettings,
    device: str,
    steps: int,
    scratch: Path,
    trace_dir: Path | None,
    launcher: ForkServer | None,
) -> ProfiledWorkload:
    name = planned.definition.name
    label = "profile-" + re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    trace_path = scratch / f"{label}.trace.json"
    spec = profile_spec(planned, settings, device, steps, trace_path)
    outcome = run_worker(
        spec,
        scratch,
        label,
        settings.timeout_s,
        None,
        SAMPLE_INTERVAL_S,
        launcher=launcher,
    )
    profiled = outcome.profile
    if profiled is None:
        return ProfiledWorkload(
            name=name, status=outcome.status, error=outcome.error, evidence={}, trace_path=None
        )
    try:
        document = load_document(trace_path)
    except (OSError, ValueError) as exc:
        return ProfiledWorkload(
            name=name,
            status="error",
            error=f"the profiler trace could not be read ({type(exc).__name__}: {exc})",
            evidence={},
            trace_path=None,
        )
    trace = parse_trace(document)
    evidence = evidence_from_trace(trace, profiled.facts)
    evidence["workload_kind"] = workload_kind(planned)
    imbalance = ranks_imbalance(trace, trace_path, spec.nproc_per_node or 0)
    if imbalance is not None:
        evidence["rank_imbalance"] = imbalance
    kept = None
    if trace_dir is not None:
        trace_dir.mkdir(parents=True, exist_ok=True)
        kept = trace_dir / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.trace.json"
        shutil.copyfile(trace_path, kept)
    return ProfiledWorkload(name=name, status="ok", error=None, evidence=evidence, trace_path=kept)


def ranks_imbalance(trace: Trace, trace_path: Path, world_size: int) -> float | None:
    """Compute-time imbalance across the ranks' traces of a distributed window, step by step
    (None for one rank, or when a rank's trace is unreadable or holds no collective).
    ``trace`` is rank 0's, already loaded from ``trace_path``; the others lie beside it."""
    if world_size < 2:
        return None
    computes: list[tuple[float, ...]] = []
    for rank in range(world_size):
        try:
            loaded = trace if rank == 0 else load_document(rank_trace_path(trace_path, rank))
        except (OSError, ValueError):
            return None
        summary = communication_summary(loaded)
        if summary is None:
            return None
        computes.append(summary.compute_us_per_step)
    return step_imbalance(computes)


def workload_kind(planned: PlannedWorkload) -> str:
    """``transformer``/``convnet``/``mlp``/``datapipe`` for a built-in, ``user`` otherwise."""
    definition = planned.definition
    if definition.kind == "builtin":
        return BUILTIN_KINDS.get(definition.name, "user")
    return "user"


def evidence_from_trace(trace: Trace | Mapping[str, Any], facts: Mapping[str, Any]) -> Evidence:
    """The evidence of ``trace`` (a model or a trace document) with the worker's facts laid
    over it.

    Facts win where both speak (the live device knows its compute capability better than a
    trace header), except ``compiled``, which either may prove (a compiled step function leaves
    the model uncompiled but the trace full of compiled regions). ``achieved_tflops``, ``mfu``
    and ``gc_pause_share`` are derived from the facts' inputs and the trace's step time; only
    catalogue names remain.
    """
    return combine_evidence(trace_evidence(trace), facts)


def combine_evidence(measured: Evidence, facts: Mapping[str, Any]) -> Evidence:
    """A trace's ``measured`` evidence with ``facts`` laid over it (see
    :func:`evidence_from_trace`)."""
    evidence = dict(measured)
    compiled = bool(evidence.get("compiled")) or bool(facts.get("compiled"))
    for name, value in facts.items():
        if name in EVIDENCE and isinstance(value, bool | int | float | str):
            evidence[name] = float(value) if _is_number(name, value) else value
    if "compiled" in evidence or compiled:
        evidence["compiled"] = compiled
    step_ms = evidence.get("step_time_ms")
    if isinstance(step_ms, float) and step_ms > 0:
        evidence.update(_derived(facts, step_ms))
    if evidence.get("device") != "cuda":
        evidence = {k: v for k, v in evidence.items() if "cpu" in EVIDENCE[k].devices}
    return {k: v for k, v in evidence.items() if k not in DERIVATION_INPUTS}


def _is_number(name: str, value: Any) -> bool:
    return EVIDENCE[name].kind == "number" and not isinstance(value, bool)


def _derived(facts: Mapping[str, Any], step_ms: float) -> Evidence:
    """The FLOP rate, MFU and the GC share, which need the trace's step time."""
    derived: Evidence = {}
    flops, peak = facts.get("flops_per_step"), facts.get("peak_tflops")
    if isinstance(flops, int | float) and not isinstance(flops, bool):
        derived["achieved_tflops"] = flops / (step_ms / 1000.0) / 1e12
        if isinstance(peak, int | float) and peak > 0:
            derived["mfu"] = flops / (step_ms / 1000.0) / (peak * 1e12)
    pause = facts.get("gc_pause_ms_per_step")
    if isinstance(pause, int | float):
        derived["gc_pause_share"] = min(1.0, pause / step_ms)
    return derived
