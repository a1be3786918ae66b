"""Whether two sides of a stored-baseline comparison ran under the same conditions.

A baseline measured last night and a head measured now differ in more than their code: a
neighbour's job, a throttled clock, another process on the GPU. On this project's 2-core CI
machine a 25 % slower head was judged a 26 % *improvement* because the load dropped between the
two runs. The interleaved A/B cancels such drift; a stored-baseline comparison cannot, so it
may only conclude when the recorded conditions of the two sides
(``perfgate.documents.result.RepeatConditions``) agree. Otherwise its verdict is
*inconclusive*, with the difference named, and the PR gate settles it by an interleaved A/B
(``compare --confirm``).

Each condition is compared on the medians over repeats, against a tolerance tied to the
threshold being judged: a difference that could by itself move the step time by half the
band is too much. The figures and why:

- **run-queue wait** (share of wall time the worker's threads waited for a CPU): a thread kept
  from running 10 % of the time takes about 10 % longer; tolerance half the threshold.
- **steal** (a hypervisor running other guests): the same reading, the same tolerance.
- **other processes' CPU** (cores used outside the worker): a neighbour on its own core still
  shares caches, memory bandwidth and turbo headroom; half a core more on one side is too much.
- **CPU and GPU SM clock**: the step scales with the clock; relative tolerance half the threshold.
- **other processes on the GPU**: present on one side only.

A canary run (an injected slowdown) on either side is never a fair reference. A side that
recorded no conditions (documents and baselines from before perfgate kept them) is noted, not
blocked: the check can only use what was measured.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

OTHER_CPU_TOLERANCE_CORES = 0.5
"""Most extra CPU used by other processes on one side, in cores (see the module docstring)."""


@dataclass(frozen=True)
class _Rule:
    name: str
    label: str
    kind: Literal["share", "cores", "relative", "presence"]


_RULES = (
    _Rule("runqueue_wait_share", "CPU run-queue wait of the worker", "share"),
    _Rule("steal_share", "CPU steal", "share"),
    _Rule("other_cpu_cores", "CPU used by other processes", "cores"),
    _Rule("cpu_mhz", "CPU clock", "relative"),
    _Rule("gpu_sm_mhz", "GPU SM clock", "relative"),
    _Rule("gpu_other_processes", "other processes on the GPU", "presence"),
)


def differing_conditions(
    baseline: Mapping[str, Sequence[float]],
    head: Mapping[str, Sequence[float]],
    threshold: float,
) -> list[str]:
    """One sentence per condition that differs beyond its tolerance (baseline → head)."""
    differences = []
    for rule in _RULES:
        before, after = baseline.get(rule.name), head.get(rule.name)
        if not before or not after:
            continue
        b, h = statistics.median(before), statistics.median(after)
        if rule.kind == "share" and abs(h - b) > threshold / 2:
            differences.append(
                f"{rule.label} {b:.1%} (baseline) vs {h:.1%} (head) of the measured time"
            )
        elif rule.kind == "cores" and abs(h - b) > OTHER_CPU_TOLERANCE_CORES:
            differences.append(f"{rule.label} {b:.2f} (baseline) vs {h:.2f} (head) cores")
        elif rule.kind == "relative" and b > 0 and abs(h / b - 1) > threshold / 2:
            differences.append(f"{rule.label} {b:.0f} MHz (baseline) vs {h:.0f} MHz (head)")
        elif rule.kind == "presence" and (max(before) > 0) != (max(after) > 0):
            differences.append(
                f"{rule.label}: {max(before):.0f} (baseline) vs {max(after):.0f} (head)"
            )
    return differences


def condition_blocks(
    baseline: Mapping[str, Sequence[float]],
    head: Mapping[str, Sequence[float]],
    threshold: float,
    *,
    baseline_canary: bool,
    head_canary: bool,
) -> tuple[list[str], list[str]]:
    """(reasons that make a timing verdict unsafe, notes that do not): a canary side, or
    conditions that differ; a side without recorded conditions is only noted."""
    blocks = [
        f"the {side} is a canary run (an injected slowdown), not a fair reference"
        for side, canary in (("baseline", baseline_canary), ("head", head_canary))
        if canary
    ]
    differences = differing_conditions(baseline, head, threshold)
    if differences:
        blocks.append(
            "the sides ran under different conditions ("
            + "; ".join(differences)
            + "): the difference may be the machine's, not the code's; an interleaved A/B "
            "(compare --confirm) decides"
        )
    notes = [
        f"the {side} recorded no measurement conditions (older perfgate): drift between the "
        "sides cannot be ruled out"
        for side, recorded in (("baseline", baseline), ("head", head))
        if not recorded
    ]
    return blocks, notes
