"""``perfgate advise --trace``: advice and a diagnosis from profiler traces a team already has.

Teams profile with ``torch.profiler`` (``export_chrome_trace``, or
``tensorboard_trace_handler``, which writes ``<worker>.<time>.pt.trace.json[.gz]`` into a
folder). This session reads such files, with no workload to build: every fact comes from the
trace itself — device properties, world size, dtypes, autocast, compile, memory, step windows
from ``ProfilerStep#`` (or a named range, ``--step-annotation``) — through the same extractors
``perfgate advise`` runs on its own profiles (``perfgate.advise.trace_evidence``) and the
configuration facts a trace implies (``perfgate.trace.inference``), each kept with its reason.
Then the same rules, ranking and classifier as for a profiled workload. ``--before`` adds the
trace diff: what moved per step since an earlier trace of the same job.

A trace comes from wherever the user recorded it, so this machine's measured ceilings say
nothing about it, and nothing can be verified by re-running: the advice is ranked by its
estimates, and advice that rests on an assumed fact says so in its notes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from perfgate._rules_path import rule_folders
from perfgate.advise.catalogue import Evidence
from perfgate.advise.evidence import combine_evidence
from perfgate.advise.ranking import AdviceContext, advise
from perfgate.advise.rules import Rule, load_rules
from perfgate.advise.session import advice_report, select_rules, window_signals
from perfgate.advise.trace_evidence import trace_evidence
from perfgate.config import load_config
from perfgate.diagnose.classify import ADVICE_CATEGORIES, classify
from perfgate.documents.advice import ADVICE, Advice, InferredFact, WorkloadAdvice
from perfgate.documents.trace_diff import TraceDiff
from perfgate.errors import UsageError
from perfgate.files import check_writable, write_json_atomic
from perfgate.trace.diff import DEFAULT_TOP, diff_traces
from perfgate.trace.inference import infer_facts
from perfgate.trace.loader import TRACE_FIX, parse_trace, read_trace_file
from perfgate.trace.timeline import Timeline, build_timeline

TRACE_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json")
"""What a trace file's name ends in (``tensorboard_trace_handler`` writes the first two)."""

TRACE_PRESET = "trace"
"""The ``preset`` of a workload read from a trace: nothing was configured, only recorded."""


@dataclass(frozen=True, kw_only=True)
class TraceAdviseRequest:
    """``perfgate advise --trace``: which traces, and what to do with the advice."""

    traces: Sequence[Path]
    """Trace files, or folders of them (``tensorboard_trace_handler``'s)."""
    before: Path | None = None
    """An earlier trace of the same job: the one trace in ``traces`` is diffed against it."""
    step_annotation: str | None = None
    """For traces without ``ProfilerStep#`` marks: the range that spans one step."""
    config: Path | None = None
    """Where the rule folders are configured; None: the nearest configuration."""
    only_rules: Sequence[str] = ()
    json_out: Path | None = None
    top: int = DEFAULT_TOP
    """Movers the trace diff lists."""


@dataclass(frozen=True)
class ReadTrace:
    """One trace file, read and structured."""

    path: Path
    name: str
    timeline: Timeline


def advise_traces_session(request: TraceAdviseRequest) -> list[WorkloadAdvice]:
    """The advice of every trace in ``request`` (and the diff against ``before``), its
    document written to ``json_out``. Bad paths, unreadable traces and unknown rules fail
    before anything is analysed."""
    if request.json_out is not None:
        check_writable(request.json_out, "--json")
    if request.top < 1:
        raise UsageError(f"--top {request.top} must be at least 1", "list e.g. 15 movers")
    files = trace_files(request.traces)
    if request.before is not None and len(files) != 1:
        raise UsageError(
            f"--before compares one trace with another, but --trace gave {len(files)}",
            "give exactly one --trace file with --before",
        )
    settings = load_config(request.config)
    rules = select_rules(load_rules(rule_folders(settings)), request.only_rules)
    earlier = None
    if request.before is not None:
        (before,) = _one(trace_files([request.before]), "--before")
        earlier = read(before, request.step_annotation)
    results = []
    for path, name in zip(files, workload_names(files), strict=True):
        current = ReadTrace(path, name, read(path, request.step_annotation).timeline)
        changes = None
        if earlier is not None:
            changes = diff(earlier, current, request.top)
        results.append(replace(advise_trace(current, rules), changes=changes))
    if request.json_out is not None:
        write_json_atomic(
            request.json_out, ADVICE.dump(advice_report(results, _device(results))), option="--json"
        )
    return results


def trace_files(paths: Sequence[Path]) -> list[Path]:
    """The trace files ``paths`` name: a file as it is, a folder's trace files (by name)."""
    if not paths:
        raise UsageError("no trace given", "pass --trace FILE or --trace FOLDER")
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and _is_trace_name(p.name))
            if not found:
                raise UsageError(
                    f"folder {path} holds no trace file (*.json, *.json.gz)", TRACE_FIX
                )
            files.extend(found)
        else:
            files.append(path)
    return files


def _one(files: list[Path], option: str) -> list[Path]:
    if len(files) != 1:
        raise UsageError(
            f"{option} names {len(files)} traces",
            f"give {option} one trace file (or a folder of one)",
        )
    return files


def workload_names(files: Sequence[Path]) -> list[str]:
    """A name for each trace: its file name without the trace suffix, or the whole file name
    where two would share one."""
    stems = [_stem(path.name) for path in files]
    return [
        stem if stems.count(stem) == 1 else path.name
        for stem, path in zip(stems, files, strict=True)
    ]


def read(path: Path, step_annotation: str | None) -> ReadTrace:
    """A trace file, parsed and structured; a malformed one is a usage error."""
    document = read_trace_file(path)
    try:
        timeline = build_timeline(parse_trace(document, step_annotation))
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        raise UsageError(f"trace {path} has a malformed event ({exc})", TRACE_FIX) from None
    if step_annotation is not None and not timeline.marked_steps:
        raise UsageError(
            f"trace {path} has no range named {step_annotation!r}",
            "give the exact name of the record_function range that spans one step",
        )
    return ReadTrace(path, _stem(path.name), timeline)


def advise_trace(trace: ReadTrace, rules: Sequence[Rule]) -> WorkloadAdvice:
    """Evidence, the configuration it implies, the diagnosis and the ranked advice of one
    trace."""
    evidence, inferred = trace_evidence_and_facts(trace.timeline)
    diagnosis = classify(window_signals(evidence, None))
    advice = advise(rules, evidence, AdviceContext(), ADVICE_CATEGORIES[diagnosis.bound])
    return WorkloadAdvice(
        name=trace.name,
        preset=TRACE_PRESET,
        knobs={},
        status="ok",
        evidence=evidence,
        advice=[with_assumptions(item, inferred) for item in advice],
        diagnosis=diagnosis,
        source=str(trace.path),
        inferred=list(inferred),
    )


def trace_evidence_and_facts(timeline: Timeline) -> tuple[Evidence, tuple[InferredFact, ...]]:
    """The trace's evidence with the configuration facts it implies laid over it, and those
    facts (only the ones the evidence kept: a CPU trace keeps no GPU facts)."""
    measured = trace_evidence(timeline)
    inferred = infer_facts(timeline, measured)
    evidence = combine_evidence(measured, {fact.name: fact.value for fact in inferred})
    return evidence, tuple(fact for fact in inferred if fact.name in evidence)


def with_assumptions(item: Advice, inferred: Sequence[InferredFact]) -> Advice:
    """``item`` with a note for every assumed fact its rule read."""
    assumed = {fact.name: fact for fact in inferred if fact.assumed}
    notes = [
        f"assumes {name} = {_shown(assumed[name].value)}: {assumed[name].reason}"
        for name in item.evidence
        if name in assumed
    ]
    return replace(item, notes=(*item.notes, *notes)) if notes else item


def diff(before: ReadTrace, after: ReadTrace, top: int) -> TraceDiff:
    """What moved from ``before`` to ``after``."""
    return diff_traces(
        before.timeline,
        after.timeline,
        before_path=str(before.path),
        after_path=str(after.path),
        top=top,
    )


def _is_trace_name(name: str) -> bool:
    return any(name.endswith(suffix) for suffix in TRACE_SUFFIXES)


def _stem(name: str) -> str:
    for suffix in TRACE_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name.removesuffix(suffix)
    return name


def _device(results: Sequence[WorkloadAdvice]) -> str:
    devices = {str(r.evidence.get("device", "cpu")) for r in results}
    return devices.pop() if len(devices) == 1 else "mixed"


def _shown(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
