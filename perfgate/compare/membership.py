"""Every workload of the base's suite is judged: none can leave the gate through the head.

A pull request that made a workload slower used to pass by making it disappear from the
comparison: dropping or renaming it in its own suite, or rewording a docstring in the factory's
file (the definition hash changed, the head was looked up under a new key and counted as "no
baseline", which never affected the verdict). The set of gated workloads is therefore the base
ref's (:func:`base_plan`), and :func:`with_membership` holds the head to it:

- a base workload the head did not measure, or measured at another preset, is ``missing``: the
  gate fails, naming it (a workload leaves a suite by a change to the base branch, reviewed on
  its own, not inside the pull request it would exempt);
- a base workload whose definition hash differs at head (its code changed) is
  ``definition_changed``: no stored baseline describes that code, so it is judged by an
  interleaved A/B against the base, and is inconclusive until it has been;
- a head workload the base does not gate is left as it was (it may add information, never
  remove any).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from perfgate.compare.gate import overall_verdict
from perfgate.config import Config
from perfgate.documents.result import RunResult
from perfgate.documents.verdict import CompareVerdict, WorkloadVerdict
from perfgate.errors import UsageError
from perfgate.runner.plan import Selection, make_plan


@dataclass(frozen=True, kw_only=True)
class GatedWorkload:
    """One workload the base gates: its name, preset and the base's definition hash."""

    name: str
    preset: str
    definition_hash: str


def base_plan(
    base: Config, suite: str | None = None, workloads: Sequence[str] = ()
) -> list[GatedWorkload]:
    """The workloads the base configuration gates: ``workloads`` when the trusted caller names
    them, else the suite ``suite`` (default: the base's configured suite), planned in the base
    checkout (its own code, for the definition hashes)."""
    selection = Selection(suite=suite, workloads=list(workloads))
    try:
        planned, _ = make_plan(base, selection)
    except UsageError as exc:
        raise UsageError(
            f"the base ref's configuration cannot be planned: {exc.problem}",
            "fix the suite on the base branch (its configuration decides what is gated)",
        ) from None
    return [
        GatedWorkload(name=p.definition.name, preset=p.preset, definition_hash=p.definition_hash)
        for p in planned
    ]


def with_membership(
    verdict: CompareVerdict,
    head: RunResult,
    gated: Sequence[GatedWorkload],
    base_ref: str,
    unmeasurable: dict[str, str] | None = None,
) -> CompareVerdict:
    """The verdict with every gated workload present: missing ones added as ``missing`` (with
    the reason from ``unmeasurable`` when the head could not even plan it), changed ones
    turned into ``definition_changed``."""
    unmeasurable = unmeasurable or {}
    measured = {w.name: w for w in head.workloads}
    judged = {w.name: w for w in verdict.workloads}
    workloads: list[WorkloadVerdict] = []
    for expected in gated:
        workload = measured.get(expected.name)
        if workload is None or workload.preset != expected.preset:
            workloads.append(_missing(expected, workload is not None, base_ref, unmeasurable))
        elif workload.definition_hash != expected.definition_hash:
            workloads.append(
                WorkloadVerdict(
                    name=expected.name,
                    status="definition_changed",
                    notes=[
                        f"its definition differs from {base_ref}'s (the factory's module or its "
                        "source files changed), so no stored baseline describes it: only an "
                        "interleaved A/B against the base can judge it"
                    ],
                )
            )
        else:
            workloads.append(judged[expected.name])
    gated_names = {g.name for g in gated}
    workloads += [w for w in verdict.workloads if w.name not in gated_names]
    missing = [w.name for w in workloads if w.status == "missing"]
    notes = list(verdict.notes)
    if missing:
        notes.insert(
            0,
            f"the gate fails: {', '.join(missing)} of {base_ref}'s suite "
            f"{'was' if len(missing) == 1 else 'were'} not measured at head; a workload leaves "
            "the suite by a change to the base branch, not inside the pull request it exempts",
        )
    return replace(verdict, workloads=workloads, overall=overall_verdict(workloads), notes=notes)


def _missing(
    expected: GatedWorkload, other_preset: bool, base_ref: str, unmeasurable: dict[str, str]
) -> WorkloadVerdict:
    if expected.name in unmeasurable:
        why = f"cannot be measured at head: {unmeasurable[expected.name]}"
    elif other_preset:
        why = f"was measured at head with another preset than {base_ref}'s {expected.preset}"
    else:
        why = f"is in {base_ref}'s suite but was not measured at head (dropped or renamed)"
    return WorkloadVerdict(name=expected.name, status="missing", notes=[f"{expected.name} {why}"])
