"""Estimate against measurement for every advice ``--verify`` can prove on this machine.

Each planted inefficient variant (``planted.variant_pairs``: hand-written attention, an unfused
optimizer loop, eager elementwise chains, needless copies, a DataLoader without workers, …)
is advised with ``--verify`` through the library (``perfgate.advise.session.advise_workloads``,
what ``perfgate advise --verify`` runs): for every advice with a knob to verify it, the
estimated step speed-up ``1 / (1 − saving)`` (from the rule's constant or from the fix
microbenchmark measured here, as the advice says) beside the interleaved A/B's measured
speed-up and its 90 % interval, and whether the estimate lies inside it.

Usage (from the repository root)::

    python benchmarks/estimates.py [--rounds 12] [--out benchmarks/estimates.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from planted import knob_assignments, variant_config, variant_pairs

from perfgate._rules_path import builtin_rules_folder
from perfgate.advise.session import advise_workloads
from perfgate.runner.plan import Selection


def rows(rounds: int, root: Path) -> list[str]:
    """One markdown row per verified piece of advice."""
    config = variant_config(root)
    lines = []
    for pair in variant_pairs("cpu"):
        selection = Selection(
            workloads=[pair.workload], knobs=knob_assignments([pair], "inefficient"), threads=1
        )
        (result,) = advise_workloads(
            config,
            selection,
            [builtin_rules_folder()],
            device="cpu",
            profile_steps=10,
            verify=True,
            rounds=rounds,
        )
        proofs = {v.rule_id: v for v in result.verifications}
        for item in result.advice:
            proof = proofs.get(item.rule_id)
            if proof is None or proof.speedup is None or proof.speedup_ci is None:
                continue
            estimate = 1.0 / (1.0 - item.saving) if item.saving < 1 else float("inf")
            low, high = proof.speedup_ci
            inside = "yes" if low <= estimate <= high else "no"
            basis = (
                "measured here" if (item.estimate_basis or "").startswith("a micro") else "constant"
            )
            lines.append(
                f"| {pair.workload} | {item.rule_id} | {estimate:.3f}× ({basis}) | "
                f"{proof.speedup:.3f}× ({low:.3f}–{high:.3f}) | {proof.outcome} | {inside} |"
            )
            print(lines[-1], flush=True)
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/estimates.md"))
    args = parser.parse_args(argv)
    started = time.monotonic()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="perfgate-estimates-") as scratch:
        table = rows(args.rounds, Path(scratch))
    header = [
        "## Estimated against measured speed-up, per verifiable advice (CPU)",
        "",
        f"`python benchmarks/estimates.py --rounds {args.rounds}`: "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{os.cpu_count()} CPUs, one thread, load average before {load[0]:.2f}; "
        f"{time.monotonic() - started:.0f} s.",
        "",
        "| workload | advice | estimated step speed-up (basis) | measured (90 % interval) | "
        "verdict | estimate inside |",
        "|---|---|---|---|---|---|",
    ]
    args.out.write_text("\n".join([*header, *table]) + "\n")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
