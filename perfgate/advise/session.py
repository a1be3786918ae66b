"""``perfgate advise`` as a library call: profile, apply the rules, rank, optionally verify.

Kept apart from the CLI so ``perfgate run --profile`` and the HTML report use the very same
steps, and from the rule engine so that stays a pure function of evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from perfgate._rules_path import rule_folders
from perfgate.advise.evidence import DEFAULT_PROFILE_STEPS, Evidence, profile_workloads
from perfgate.advise.ranking import AdviceContext, advise, evaluate_rule
from perfgate.advise.rules import Rule, load_rules
from perfgate.advise.verify import Verification, WorkloadUnderTest, verify_advice
from perfgate.ceilings.fixes import fix_case, measure_fix, signature
from perfgate.ceilings.store import (
    StoredCeilings,
    environment_key,
    lookup_ceilings,
    save_fix,
    stored_fix,
)
from perfgate.config import Config, load_config
from perfgate.diagnose.classify import ADVICE_CATEGORIES, classify
from perfgate.diagnose.signals import Signals, evidence_signals
from perfgate.documents.advice import ADVICE, Advice, AdviceReport, WorkloadAdvice
from perfgate.documents.ceilings import FixSpeedup
from perfgate.errors import UsageError
from perfgate.files import check_writable, write_json_atomic
from perfgate.run import RunOutcome, RunRequest
from perfgate.runner.device import resolve_device
from perfgate.runner.interleave import InterleaveObserver
from perfgate.runner.plan import Selection, prepare
from perfgate.runner.summary import ceiling_figures
from perfgate.telemetry.fingerprint import collect_fingerprint


class AdviseObserver(InterleaveObserver, Protocol):
    """Progress of ``perfgate advise``: each stage as it starts (profiling, verifying), then
    the A/B rounds of the verification."""

    def stage(self, text: str) -> None: ...


AdviseWatch = Callable[[], AbstractContextManager[AdviseObserver | None]]
"""Opens the watcher of an advise run (a progress display) for as long as it profiles and
verifies."""


@dataclass(frozen=True, kw_only=True)
class AdviseRequest:
    """``perfgate advise``: what to profile, where, and what to do with the advice."""

    config: Path | None = None
    """The configuration file; None: the nearest perfgate.toml or pyproject.toml upwards."""
    selection: Selection = field(default_factory=Selection)
    device: str | None = None
    """cpu, cuda or auto; None: the configuration's."""
    profile_steps: int = DEFAULT_PROFILE_STEPS
    verify: bool = False
    rounds: int = 6
    trace_dir: Path | None = None
    only_rules: Sequence[str] = ()
    json_out: Path | None = None
    """Where the advice document goes (checked before the profiling, written after it)."""


def advise_session(
    request: AdviseRequest, progress: AdviseWatch = nullcontext
) -> list[WorkloadAdvice]:
    """``perfgate advise``: the advice for every selected workload, and its document written
    to ``json_out``; an unwritable ``json_out`` or a ``trace_dir`` that is no folder fails
    before anything is profiled. ``progress`` watches the profiling and the verification."""
    settings = load_config(request.config)
    chosen = resolve_device(request.device or settings.device)
    if request.json_out is not None:
        check_writable(request.json_out, "--json")  # before the profiling, not after
    trace_dir = request.trace_dir
    if trace_dir is not None and trace_dir.exists() and not trace_dir.is_dir():
        raise UsageError(f"--trace-dir {trace_dir} is not a folder", "give a folder path")
    with progress() as observer:
        results = advise_workloads(
            settings,
            request.selection,
            rule_folders(settings),
            device=chosen,
            profile_steps=request.profile_steps,
            verify=request.verify,
            rounds=request.rounds,
            trace_dir=trace_dir,
            observer=observer,
            only_rules=request.only_rules,
        )
    if request.json_out is not None:
        write_json_atomic(
            request.json_out, ADVICE.dump(advice_report(results, chosen)), option="--json"
        )
    return results


def advise_run(request: RunRequest, outcome: RunOutcome) -> list[WorkloadAdvice]:
    """``perfgate run --profile``: the advice for the run just measured. Each workload is
    profiled after the timed repeats, in its own worker process, so the profiling never
    touches the measured steps."""
    config = load_config(request.config)
    return advise_workloads(
        config,
        request.selection,
        rule_folders(config),
        device=outcome.result.device,
        profile_steps=DEFAULT_PROFILE_STEPS,
    )


def write_advice_beside(outcome: RunOutcome, results: list[WorkloadAdvice]) -> Path:
    """The advice of ``perfgate run --profile``, written beside its result document as
    ``<result>.advice.json`` (where the HTML report finds it); the path."""
    path = outcome.path.with_name(outcome.path.stem + ".advice.json")
    write_json_atomic(path, ADVICE.dump(advice_report(results, outcome.result.device)))
    return path


def advise_workloads(
    config: Config,
    selection: Selection,
    rule_folders: list[Path],
    *,
    device: str,
    profile_steps: int,
    verify: bool = False,
    rounds: int = 6,
    trace_dir: Path | None = None,
    observer: AdviseObserver | None = None,
    only_rules: Sequence[str] = (),
) -> list[WorkloadAdvice]:
    """Evidence, advice and (optionally) proof for every selected workload.

    Rules are loaded (and linted) before anything is measured: a broken rule file is a usage
    error in a second, not after minutes of profiling; so is an unknown id in ``only_rules``
    (the rules to consider, all when empty: proving one piece of advice need not re-run the rest).
    """
    rules = select_rules(load_rules(rule_folders), only_rules)
    device = resolve_device(device)
    plan, settings = prepare(config, selection)
    environment = collect_fingerprint(device, settings.threads)
    # As perfgate run does, and before profiling: a corrupt ceilings file is a usage error.
    ceilings = lookup_ceilings(config.root, environment)
    labels = ", ".join(f"{p.definition.name}@{p.preset}" for p in plan)
    _stage(observer, f"profiling {labels}: {profile_steps} steps each, in its own process")
    profiled = {
        p.name: p
        for p in profile_workloads(
            config, selection, device=device, steps=profile_steps, trace_dir=trace_dir
        )
    }
    results = []
    for planned in plan:
        name = planned.definition.name
        profile = profiled[name]
        outcome = WorkloadAdvice(
            name=name,
            preset=planned.preset,
            knobs=dict(planned.knobs),
            status=profile.status,
            error=profile.error,
            evidence=profile.evidence,
            trace_path=profile.trace_path,
        )
        if profile.status != "ok":
            results.append(outcome)
            continue
        diagnosis = classify(window_signals(profile.evidence, ceilings))
        binding = ADVICE_CATEGORIES[diagnosis.bound]
        outcome = replace(outcome, diagnosis=diagnosis)
        measured = measured_fixes(
            rules, profile.evidence, device=device, threads=settings.threads,
            root=config.root, environment_key=environment_key(environment),
        )  # fmt: skip
        advice = advise(rules, profile.evidence, AdviceContext(measured=measured), binding)
        verifications: list[Verification] = []
        if verify and advice:
            _stage(
                observer,
                f"{name}: verifying {len(advice)} advice, each by an interleaved A/B of at "
                f"most {rounds} rounds",
            )
            advice, verifications = verify_advice(
                config,
                WorkloadUnderTest(name=name, preset=planned.preset, knobs=planned.knobs),
                advice,
                selection,
                device=device,
                environment=environment,
                rounds=rounds,
                observer=observer,
                binding=binding,
            )
        results.append(replace(outcome, advice=advice, verifications=verifications))
    return results


def _stage(observer: AdviseObserver | None, text: str) -> None:
    if observer is not None:
        observer.stage(text)


def measured_fixes(
    rules: Sequence[Rule],
    evidence: Evidence,
    *,
    device: str,
    threads: int | None,
    root: Path,
    environment_key: str,
) -> dict[str, FixSpeedup]:
    """The fix microbenchmarks of the rules that fire on ``evidence``, at its shapes, on this
    machine (``perfgate.ceilings.fixes``): read from the ceilings store when this environment
    measured the same case before, else measured now and stored."""
    measured: dict[str, FixSpeedup] = {}
    for rule in rules:
        benchmark = rule.measured_speedup
        if benchmark is None or benchmark in measured:
            continue
        if not isinstance(evaluate_rule(rule, evidence, AdviceContext()), Advice):
            continue
        case = fix_case(benchmark, evidence)
        if case is None:
            continue
        key = signature(case, device)
        found = stored_fix(root, environment_key, key)
        if found is None:
            found = measure_fix(case, device, threads=threads or 1)
            save_fix(root, environment_key, found)
        measured[benchmark] = found
    return measured


def window_signals(evidence: Evidence, ceilings: StoredCeilings | None) -> Signals:
    """The profiled window's signals, with its FLOP rate against this environment's measured
    matmul ceiling (``perfgate doctor --peak``) when one is stored: read as ``perfgate run``
    reads it (``perfgate.runner.summary.ceiling_figures``), so advise's diagnosis of a CPU
    workload can tell compute from framework overhead exactly when run's can."""
    signals = evidence_signals(evidence)
    achieved = evidence.get("achieved_tflops")
    dtype = evidence.get("compute_dtype")
    world_size = evidence.get("world_size")
    figures = ceiling_figures(
        achieved if isinstance(achieved, float) else None,
        ceilings,
        dtype if isinstance(dtype, str) else None,
        signals.device,
        {"world_size": world_size if isinstance(world_size, int | float) else None},
    )
    return replace(signals, ceiling_fraction=figures.get("ceiling_fraction"))


def select_rules(rules: list[Rule], only: Sequence[str]) -> list[Rule]:
    """The rules whose ids are in ``only`` (all when it is empty); unknown ids are a usage error."""
    if not only:
        return rules
    known = {rule.id for rule in rules}
    unknown = sorted(set(only) - known)
    if unknown:
        raise UsageError(
            f"unknown rule id{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}",
            "perfgate rules list shows the ids",
        )
    return [rule for rule in rules if rule.id in only]


def advice_report(results: list[WorkloadAdvice], device: str) -> AdviceReport:
    """The advice of ``results`` as a ``perfgate.advice`` document's model (written through
    :data:`perfgate.documents.advice.ADVICE`), the input of the HTML report and PR comment."""
    return AdviceReport(device=device, workloads=list(results))
