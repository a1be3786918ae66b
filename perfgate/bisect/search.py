"""The search of ``perfgate bisect``: which commit of a range made the step slower, by as few
interleaved A/B probes as the noise allows.

The range is indexed ``0`` (GOOD) to ``n - 1`` (BAD); a probe ``(i, j)`` measures commit ``i``
against commit ``j`` and says ``regressed`` (j is slower beyond the threshold), ``unchanged``
(within it, or faster) or ``inconclusive`` (its sequential test ran out of rounds). One step
change is assumed, as Chromium's Pinpoint does, and nothing is trusted that a probe did not
show:

1. GOOD against BAD first: no regression there, and the search stops at once (``no_regression``).
2. Halve the suspect range ``(good, bad]`` by probing its first half: ``good`` against the
   middle commit. Regressed: the culprit is in the first half; unchanged: in the second.
3. An inconclusive probe is not guessed at: the other half is probed (the middle against
   ``bad``), whose answer says the same thing from the other side. When both halves are
   inconclusive the change is too close to the threshold to place any closer, and the search
   reports the narrowest range it proved (``narrowed``).
4. Two adjacent commits left: their own A/B is the culprit's effect. It must show the
   regression for ``found``; otherwise the range is reported as ``narrowed`` to that pair.

So a range of ``n`` commits costs about ``log2(n) + 2`` probes when every probe decides,
against up to ``n - 1`` for a linear scan (``benchmarks/bisect_cost.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar

from perfgate.documents.bisect import ProbeState


class ProbeOutcome(Protocol):
    @property
    def state(self) -> ProbeState: ...


Outcome = TypeVar("Outcome", bound=ProbeOutcome)


@dataclass(frozen=True, kw_only=True)
class Search(Generic[Outcome]):
    """Where the search ended: the proven range ``(last_good, first_bad]`` by index, and the
    probes it took in order; ``effect`` the final adjacent probe when there was one."""

    conclusion: Literal["found", "narrowed", "no_regression"]
    last_good: int
    first_bad: int
    probes: list[tuple[int, int, Outcome]] = field(default_factory=list)
    effect: Outcome | None = None


def bisect_range(count: int, probe: Callable[[int, int], Outcome]) -> Search[Outcome]:
    """Search commits ``0 .. count - 1`` (see the module docstring); ``probe(i, j)`` runs one
    interleaved A/B of commit ``i`` (base) against commit ``j`` (head)."""
    if count < 2:
        raise ValueError(f"a range needs two commits, not {count}")
    probes: list[tuple[int, int, Outcome]] = []

    def ask(base: int, head: int) -> ProbeState:
        outcome = probe(base, head)
        probes.append((base, head, outcome))
        return outcome.state

    good, bad = 0, count - 1
    if count > 2:
        whole = ask(good, bad)
        if whole == "unchanged":
            return Search(conclusion="no_regression", last_good=good, first_bad=bad, probes=probes)
    while bad - good > 1:
        middle = (good + bad) // 2
        first_half = ask(good, middle)
        if first_half != "inconclusive":
            good, bad = (good, middle) if first_half == "regressed" else (middle, bad)
            continue
        second_half = ask(middle, bad)
        if second_half == "inconclusive":
            return Search(conclusion="narrowed", last_good=good, first_bad=bad, probes=probes)
        good, bad = (middle, bad) if second_half == "regressed" else (good, middle)
    if probes and probes[-1][:2] == (good, bad):  # the last halving already measured this pair
        outcome = probes[-1][2]
    else:
        outcome = probe(good, bad)
        probes.append((good, bad, outcome))
    if outcome.state == "regressed":
        conclusion: Literal["found", "narrowed", "no_regression"] = "found"
    elif count == 2 and outcome.state == "unchanged":
        conclusion = "no_regression"
    else:
        conclusion = "narrowed"
    return Search(
        conclusion=conclusion, last_good=good, first_bad=bad, probes=probes, effect=outcome
    )
