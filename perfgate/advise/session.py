"""``perfgate advise`` as a library call: profile, apply the rules, rank, optionally verify.

Kept apart from the CLI so ``perfgate run --profile`` and the HTML report use the very same
steps, and from the rule engine so that stays a pure function of evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from perfgate.advise.evidence import profile_workloads
from perfgate.advise.ranking import AdviceContext, advise
from perfgate.advise.rules import Rule, load_rules
from perfgate.advise.verify import Verification, WorkloadUnderTest, verify_advice
from perfgate.config import Config
from perfgate.diagnose.classify import ADVICE_CATEGORIES, classify
from perfgate.diagnose.signals import evidence_signals
from perfgate.documents.advice import AdviceReport, WorkloadAdvice
from perfgate.errors import UsageError
from perfgate.run import prepare, resolve_device
from perfgate.runner.interleave import InterleaveObserver
from perfgate.runner.plan import Selection
from perfgate.telemetry.fingerprint import collect_fingerprint


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
    observer: InterleaveObserver | None = None,
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
    profiled = {
        p.name: p
        for p in profile_workloads(
            config, selection, device=device, steps=profile_steps, trace_dir=trace_dir
        )
    }
    environment: dict[str, Any] | None = None
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
        diagnosis = classify(evidence_signals(profile.evidence))
        binding = ADVICE_CATEGORIES[diagnosis.bound]
        outcome = replace(outcome, diagnosis=diagnosis)
        advice = advise(rules, profile.evidence, AdviceContext(), binding)
        verifications: list[Verification] = []
        if verify and advice:
            if environment is None:
                environment = collect_fingerprint(device, settings.threads)
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
