"""Where a repeat's time goes before its first timed step: spawned workers against forked ones.

Each "run" is what ``perfgate run -w mlp --preset smoke --steps 5 --repeats 5 --no-store
--device cpu`` measures: the same plan and settings, repeats 0–4 through
``perfgate.runner.orchestrator.run_repeat`` (FLOPs counted in repeat 0, as in a real run).
Spawn runs and fork runs go side by side in one process, interleaved repeat by repeat with the
order alternating (spawn fork, fork spawn, …), so the machine's drift lands on both; every fork
run gets a fresh fork server (its start-up is part of that run's repeat 0, as in a real run).

Per repeat, from the phases of the result document (``RepeatResult.phases``):

- interpreter + imports: ``spawned`` → ``imports_done`` (the fork server's child: fork and
  hand-over only);
- setup: → ``setup_done`` (the factory; it imports ``torch._dynamo`` through the optimizer);
- FLOPs: → ``flops_done`` (repeat 0 only);
- warm-up: → ``measure_start``;
- measured: → ``measure_end``;
- after the measured steps: → the parent's end of the repeat (``spawned`` + ``wall_s``: the
  document, the process's exit, the kill of its group);
- total: ``wall_s``.

Medians over the repeats, the first repeat of a run (cold: FLOPs, and the fork server's own
start-up) apart from the others; the per-run total (the sum of its repeats' wall times), the
measured step (which must not move: each repeat's median steady step, and the Hodges–Lehmann
ratio fork ÷ spawn over all pairs of repeats, as compare estimates it) and peak RSS.

``--cli-pairs N`` also times the whole ``perfgate run`` command, N times per start method
(``PERFGATE_WORKER_START``), alternating.

Usage: ``python benchmarks/startup.py [--runs 4] [--repeats 5] [--steps 5] [--threads T]
[--warmup W] [--cli-pairs N] [--markdown FILE]``
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from perfgate.config import load_config
from perfgate.documents.result import RepeatResult, RunSettings
from perfgate.runner.forkserver import START_ENV, worker_launcher
from perfgate.runner.orchestrator import run_repeat
from perfgate.runner.plan import PlannedWorkload, Selection, make_plan

METHODS = ("spawn", "fork")
Phase = Callable[[RepeatResult], float | None]


def _between(start: str, end: str) -> Phase:
    def span(repeat: RepeatResult) -> float | None:
        phases = repeat.phases
        return phases[end] - phases[start] if start in phases and end in phases else None

    return span


def _setup(repeat: RepeatResult) -> float:
    phases = repeat.phases
    return phases["setup_done"] - phases.get("cuda_ready", phases["imports_done"])


def _warmup(repeat: RepeatResult) -> float:
    phases = repeat.phases
    return phases["measure_start"] - phases.get("flops_done", phases["setup_done"])


def _after(repeat: RepeatResult) -> float:
    return repeat.phases["spawned"] + repeat.wall_s - repeat.phases["measure_end"]


PHASES: list[tuple[str, Phase]] = [
    ("interpreter + imports", _between("spawned", "imports_done")),
    ("CUDA context (device cuda)", _between("imports_done", "cuda_ready")),
    ("setup (factory)", _setup),
    ("FLOP count", _between("setup_done", "flops_done")),
    ("warm-up", _warmup),
    ("measured steps", _between("measure_start", "measure_end")),
    ("after the measured steps", _after),
    ("total wall per repeat", lambda repeat: repeat.wall_s),
]


def measure(
    planned: PlannedWorkload, settings: RunSettings, runs: int, scratch: Path, device: str = "cpu"
) -> dict[str, list[list[RepeatResult]]]:
    """``runs`` runs per start method, interleaved repeat by repeat."""
    measured: dict[str, list[list[RepeatResult]]] = {method: [] for method in METHODS}
    turn = 0
    for run in range(runs):
        for method in METHODS:
            measured[method].append([])
        with worker_launcher({START_ENV: "fork"}) as launcher:
            for index in range(settings.repeats):
                order = METHODS if turn % 2 == 0 else METHODS[::-1]
                turn += 1
                for method in order:
                    repeat, _ = run_repeat(
                        planned,
                        settings,
                        device,
                        {},
                        scratch,
                        index,
                        tag=f"{method}{run}-",
                        launcher=launcher if method == "fork" else None,
                    )
                    if repeat.status != "ok":
                        raise SystemExit(f"{method} repeat {index} failed: {repeat.error}")
                    measured[method][-1].append(repeat)
                    print(f"run {run} repeat {index} {method}: {repeat.wall_s:.2f} s", flush=True)
    return measured


def cli_walls(pairs: int, argv: Sequence[str]) -> dict[str, list[float]]:
    """Wall time of the whole ``perfgate run`` command (``argv``), ``pairs`` times per start
    method, the order alternating."""
    walls: dict[str, list[float]] = {method: [] for method in METHODS}
    for pair in range(pairs):
        for method in METHODS if pair % 2 == 0 else METHODS[::-1]:
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "perfgate", *argv],
                env={**os.environ, START_ENV: method},
                check=True,
                capture_output=True,
            )
            walls[method].append(time.perf_counter() - started)
            print(f"cli {pair} {method}: {walls[method][-1]:.2f} s", flush=True)
    return walls


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _seconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.3f} s" if value >= 0.1 else f"{value * 1000:.1f} ms"


def _ratio(spawned: float | None, forked: float | None) -> str:
    if spawned is None or forked is None or forked <= 0:
        return "–"
    ratio = spawned / forked
    return f"{ratio:.1f}×" if ratio >= 10 else f"{ratio:.2f}×"


def report(measured: dict[str, list[list[RepeatResult]]], header: Sequence[str]) -> list[str]:
    """The markdown page: the conditions, then one table per group of repeats."""
    lines = [*header, ""]
    groups = [
        ("First repeat of a run (cold: FLOPs counted; the fork server starts)", slice(0, 1)),
        ("Later repeats", slice(1, None)),
    ]
    for title, part in groups:
        repeats = {m: [r for run in measured[m] for r in run[part]] for m in METHODS}
        lines += [
            f"### {title} (median of {len(repeats['fork'])} per method)",
            "",
            "| phase | spawn | fork server | spawn ÷ fork |",
            "| --- | ---: | ---: | ---: |",
        ]
        for name, phase in PHASES:
            spawned, forked = (_median([phase(r) for r in repeats[m]]) for m in METHODS)
            if spawned is None and forked is None:
                continue
            lines.append(
                f"| {name} | {_seconds(spawned)} | {_seconds(forked)} | {_ratio(spawned, forked)} |"
            )
        lines.append("")
    totals = {m: _median([sum(r.wall_s for r in run) for run in measured[m]]) for m in METHODS}
    values = {
        m: [statistics.median(r.step_times_s[r.steady_start :]) for run in measured[m] for r in run]
        for m in METHODS
    }
    steps = {m: _median(values[m]) for m in METHODS}
    shift = statistics.median([f / s for f in values["fork"] for s in values["spawn"]])
    rss = {
        m: (_median([r.peak_memory.get("rss_bytes") for run in measured[m] for r in run]) or 0)
        / 2**20
        for m in METHODS
    }
    lines += [
        "### Whole runs",
        "",
        "| | spawn | fork server | spawn ÷ fork |",
        "| --- | ---: | ---: | ---: |",
        f"| wall of all repeats of a run (median of {len(measured['fork'])}) | "
        f"{_seconds(totals['spawn'])} | {_seconds(totals['fork'])} | "
        f"{_ratio(totals['spawn'], totals['fork'])} |",
        f"| measured step (median of the repeats' steady medians) | {_seconds(steps['spawn'])} | "
        f"{_seconds(steps['fork'])} | {_ratio(steps['spawn'], steps['fork'])} |",
        f"| measured step, fork ÷ spawn (Hodges–Lehmann over repeat pairs) | | | {shift:.3f} |",
        f"| median peak RSS | {rss['spawn']:.0f} MiB | {rss['fork']:.0f} MiB | "
        f"{_ratio(rss['spawn'], rss['fork'])} |",
    ]
    return lines


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4, help="runs per start method")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--workload", default="mlp")
    parser.add_argument("--preset", default="smoke")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (CUDA: its context too)")
    parser.add_argument("--threads", type=int, help="intra-op threads (default: perfgate's)")
    parser.add_argument("--warmup", type=int, help="warm-up steps (default: perfgate's)")
    parser.add_argument(
        "--cli-pairs", type=int, default=0, help="also time the whole command this many times"
    )
    parser.add_argument("--markdown", type=Path, help="also write the page here")
    args = parser.parse_args(argv)
    selection = Selection(
        workloads=[args.workload],
        preset=args.preset,
        steps=args.steps,
        repeats=args.repeats,
        threads=args.threads,
        warmup=args.warmup,
    )
    plan, settings = make_plan(load_config(), selection)
    load_before = os.getloadavg()
    started = datetime.datetime.now(datetime.timezone.utc)
    with tempfile.TemporaryDirectory(prefix="perfgate-startup-") as scratch:
        measured = measure(plan[0], settings, args.runs, Path(scratch), args.device)
    load_after = os.getloadavg()
    shown = [a for a, b in zip(argv, ["", *argv][:-1], strict=True) if "--markdown" not in (a, b)]
    header = [
        "# Start-up of a repeat: spawned worker against the fork server",
        "",
        f"`python benchmarks/startup.py {' '.join(shown)}`".replace(" `", "`"),
        "",
        f"- date: {started:%Y-%m-%d %H:%M} UTC; {platform.node()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, torch {importlib.metadata.version('torch')}",
        f"- load average (1, 5, 15 min) before: {', '.join(f'{x:.2f}' for x in load_before)}; "
        f"after: {', '.join(f'{x:.2f}' for x in load_after)}",
        f"- {args.workload}@{args.preset}, {settings.repeats} repeats of {settings.warmup} "
        f"warm-up + {settings.steps} steps per run, threads {settings.threads or 'default'}, "
        f"{args.runs} runs per start method, interleaved repeat by repeat",
    ]
    lines = report(measured, header)
    if args.cli_pairs:
        command = [
            *("run", "-w", args.workload, "--preset", args.preset, "--no-store"),
            *("--device", args.device, "--steps", str(args.steps)),
            *("--repeats", str(args.repeats)),
            *(("--threads", str(args.threads)) if args.threads else ()),
            *(("--warmup", str(args.warmup)) if args.warmup else ()),
        ]
        with tempfile.TemporaryDirectory(prefix="perfgate-startup-") as scratch:
            walls = cli_walls(args.cli_pairs, [*command, "--out", f"{scratch}/out.json"])
        spawned, forked = (statistics.median(walls[m]) for m in METHODS)
        lines += [
            "",
            f"### The whole command (median of {args.cli_pairs} per method, interleaved)",
            "",
            f"`perfgate {' '.join(command)}`, the wall time of the process:",
            "",
            "| | spawn | fork server | spawn ÷ fork |",
            "| --- | ---: | ---: | ---: |",
            f"| perfgate run | {_seconds(spawned)} | {_seconds(forked)} | "
            f"{_ratio(spawned, forked)} |",
        ]
    print("\n".join(lines))
    if args.markdown is not None:
        args.markdown.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
