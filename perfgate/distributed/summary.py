"""The distributed headline numbers of a workload: rank spread, communication, imbalance.

Two different questions, kept apart on purpose. *Rank spread* compares the ranks' step times,
and under DistributedDataParallel it is small even when the work is badly split, because every
step ends in an all-reduce that makes the fast ranks wait for the slow one. *Rank imbalance*
compares how long each rank actually computed in the profiled window (each rank's
``perfgate.trace.communication`` summary), which is where uneven work shows: the waiting is
inside the collective, not in the computation.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from perfgate.documents.result import RankResult, RepeatResult


def distributed_summary(repeats: Sequence[RepeatResult]) -> dict[str, Any]:
    """Summary fields for the ok repeats of a distributed workload; ``{}`` for any other."""
    ranked = [r.ranks for r in repeats if r.ranks]
    if not ranked:
        return {}
    spreads = [rank_imbalance([rank.median_step_s for rank in ranks]) for ranks in ranked]
    present = [s for s in spreads if s is not None]
    return {
        "world_size": len(ranked[0]),
        "rank_spread": statistics.median(present) if present else None,
        **communication_fields(next((r for r in ranked if _windows(r)), [])),
    }


def communication_fields(ranks: Sequence[RankResult]) -> dict[str, float | None]:
    """Mean over ranks of the communication window's shares, and the ranks' compute imbalance."""
    windows = _windows(ranks)
    if not windows:
        return {}

    def mean(key: str) -> float | None:
        values = [float(w[key]) for w in windows if w.get(key) is not None]
        return statistics.fmean(values) if values else None

    return {
        "communication_share": mean("share"),
        "communication_exposed_share": mean("exposed_share"),
        "communication_overlap": mean("overlap"),
        "rank_imbalance": step_imbalance([w.get("compute_us_per_step") or () for w in windows])
        if len(windows) == len(ranks)
        else None,
    }


def _windows(ranks: Sequence[RankResult]) -> list[dict[str, Any]]:
    return [rank.communication for rank in ranks if rank.communication]


def step_imbalance(per_rank_steps: Sequence[Sequence[float]]) -> float | None:
    """:func:`rank_imbalance` of each rank's least computing step.

    Ranks share the machine with the collectives' own threads and with each other, so a step's
    compute time stretches for reasons that are not the work (on a 2-core box single steps of
    the same work vary 2x). Interference only ever adds time: a rank's quickest step is the best
    estimate of the work it was given, as timeit and pyperf take the minimum for the same
    reason. None for fewer than two ranks or a rank without steps.
    """
    if len(per_rank_steps) < 2 or not all(per_rank_steps):
        return None
    return rank_imbalance([min(steps) for steps in per_rank_steps])


def rank_imbalance(compute_us: Sequence[float]) -> float | None:
    """(max - min) / max of per-rank compute time; None for fewer than 2 ranks or max == 0.

    Ranks wait for each other at every collective, so the rank with the least computation
    spends the difference waiting: this is the share of the busiest rank's work the others idle.
    """
    if len(compute_us) < 2 or max(compute_us) <= 0:
        return None
    return (max(compute_us) - min(compute_us)) / max(compute_us)
