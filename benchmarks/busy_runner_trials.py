"""The gate on a user workload, on this machine, with a CPU-heavy neighbour part of the time.

What it answers, by repeated tries of the real command line (``python -m perfgate``) on a
scratch git copy of ``benchmarks/user_gpt`` (a character-level GPT written like public training
scripts; not a built-in):

1. ``compare --ab HEAD HEAD --inject-slowdown 25%``: how often the 25 % slower head is called a
   regression (the target: at least 19 of 20), and never a pass or an improvement;
2. ``compare --ab HEAD HEAD`` (A/A): never a regression;
3. stored-baseline comparisons across a load change — a baseline measured quiet and a head
   measured with the neighbour running, and the reverse, for identical code and for the 25 %
   canary: never a confident verdict (regression, improvement, or a pass that hides the canary).

The neighbour is real: processes spinning on the CPU, switched on and off on a fixed schedule
(``--hog-on``/``--hog-off`` seconds, ``--hogs`` processes), so the load changes in the middle of
A/B runs, as other jobs do on a shared runner. Each try's verdict, rounds and wall time are
written to ``--out`` (JSON) and summarised on stdout.

Usage::

    python benchmarks/busy_runner_trials.py [--tries 20] [--hogs 1] [--hog-on 20 --hog-off 20]
        [--out busy_runner_trials.json] [--parts canary,aa,stored] [--stored-tries 3]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent / "user_gpt"


class Neighbour:
    """CPU-spinning processes switched on and off on a schedule, in a background thread."""

    def __init__(self, hogs: int, on_s: float, off_s: float) -> None:
        self.hogs, self.on_s, self.off_s = hogs, on_s, off_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._running: list[subprocess.Popen[bytes]] = []
        self.switches: list[tuple[float, bool]] = []

    def __enter__(self) -> Neighbour:
        if self.hogs:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():  # the stored trials switch the load themselves, unstarted
            self._thread.join()
        self._kill()

    def busy(self, on: bool) -> None:
        """Switch the neighbour now (the stored-baseline trials choose the load themselves)."""
        self._kill()
        if on:
            self._spawn()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._spawn()
            if self._stop.wait(self.on_s):
                break
            self._kill()
            self._stop.wait(self.off_s)

    def _spawn(self) -> None:
        self.switches.append((time.time(), True))
        self._running = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.hogs)
        ]

    def _kill(self) -> None:
        if self._running:
            self.switches.append((time.time(), False))
        for process in self._running:
            process.kill()
            process.wait()
        self._running = []


def scratch_repository() -> Path:
    """A git repository holding a copy of the user project, one commit."""
    repo = Path(tempfile.mkdtemp(prefix="perfgate-busy-")) / "repo"
    shutil.copytree(PROJECT, repo, ignore=shutil.ignore_patterns(".perfgate", "__pycache__"))
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "user"]):
        subprocess.run([*git, *args], cwd=repo, check=True)
    return repo


def perfgate(repo: Path, *args: str) -> tuple[int, float]:
    environment = {**os.environ, "COLUMNS": "200"}
    environment.pop("PERFGATE_TEST_STEP_CLOCK", None)
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-m", "perfgate", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        env=environment,
    )
    if completed.returncode not in (0, 1, 4):
        print(completed.stdout[-2000:], completed.stderr[-2000:], file=sys.stderr)
    return completed.returncode, time.monotonic() - started


def step_verdict(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text())
    (step,) = [c for c in document["workloads"][0]["comparisons"] if c["metric"] == "step_time_s"]
    return {
        "overall": document["overall"],
        "verdict": step["verdict"],
        "ratio": step["ratio"],
        "ci": [step["ci_low"], step["ci_high"]],
        "rounds": step["head_repeats"],
        "reasons": step["reasons"][:1],
    }


def ab_tries(repo: Path, tries: int, canary: str | None) -> list[dict[str, Any]]:
    results = []
    for index in range(tries):
        verdict = repo / f"ab-{canary or 'aa'}-{index}.json"
        extra = ("--inject-slowdown", canary) if canary else ()
        code, wall = perfgate(
            repo, "compare", "--ab", "HEAD", "HEAD", *extra, "--device", "cpu", "--json",
            str(verdict),
        )  # fmt: skip
        result = {"try": index, "exit": code, "wall_s": round(wall, 1)}
        if verdict.exists():
            result |= step_verdict(verdict)
        results.append(result)
        print(f"{canary or 'A/A'} try {index + 1}/{tries}: {result}", flush=True)
    return results


def stored_tries(repo: Path, neighbour: Neighbour, tries: int) -> list[dict[str, Any]]:
    """Baseline on one load, head on the other, for identical code and for the canary."""
    results = []
    for index in range(tries):
        for base_busy, canary in ((False, None), (True, None), (False, "25%"), (True, "25%")):
            sides = {}
            for side, busy in (("base", base_busy), ("head", not base_busy)):
                neighbour.busy(busy)
                sides[side] = repo / f"stored-{index}-{side}.json"
                extra = ("--inject-slowdown", canary) if canary and side == "head" else ()
                perfgate(repo, "run", "--device", "cpu", *extra, "--no-store", "--out",
                         str(sides[side]))  # fmt: skip
            neighbour.busy(False)
            verdict = repo / f"stored-{index}-verdict.json"
            code, _ = perfgate(
                repo, "compare", str(sides["head"]), "--baseline", str(sides["base"]),
                "--json", str(verdict),
            )  # fmt: skip
            result = {
                "try": index,
                "baseline": "busy" if base_busy else "quiet",
                "head": ("quiet" if base_busy else "busy")
                + (f", canary {canary}" if canary else ""),
                "exit": code,
            }
            if verdict.exists():
                result |= step_verdict(verdict)
            results.append(result)
            print(f"stored: {result}", flush=True)
    return results


def tally(results: Sequence[dict[str, Any]]) -> str:
    counts = collections.Counter(r.get("verdict", f"exit {r['exit']}") for r in results)
    rounds = sorted(r["rounds"] for r in results if "rounds" in r)
    walls = sorted(r["wall_s"] for r in results if "wall_s" in r)
    text = ", ".join(f"{verdict} {n}" for verdict, n in sorted(counts.items()))
    if rounds:
        text += f"; median rounds {rounds[len(rounds) // 2]}"
    if walls:
        text += f", median wall {walls[len(walls) // 2]:.0f} s"
    return text


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--stored-tries", type=int, default=3)
    parser.add_argument("--hogs", type=int, default=1)
    parser.add_argument("--hog-on", type=float, default=20.0)
    parser.add_argument("--hog-off", type=float, default=20.0)
    parser.add_argument("--out", type=Path, default=Path("busy_runner_trials.json"))
    parser.add_argument(
        "--parts", default="canary,aa,stored", help="which trials, comma-separated (all three)"
    )
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    repo = scratch_repository()
    report: dict[str, Any] = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "load_before": os.getloadavg()},
        "neighbour": {"hogs": args.hogs, "on_s": args.hog_on, "off_s": args.hog_off},
    }
    if parts & {"canary", "aa"}:
        with Neighbour(args.hogs, args.hog_on, args.hog_off):
            if "canary" in parts:
                report["canary_25"] = ab_tries(repo, args.tries, "25%")
                args.out.write_text(json.dumps(report, indent=1) + "\n")
            if "aa" in parts:
                report["a_a"] = ab_tries(repo, args.tries, None)
                args.out.write_text(json.dumps(report, indent=1) + "\n")
    if "stored" in parts:
        with Neighbour(0, 0, 0) as neighbour:
            neighbour.hogs = max(args.hogs, 1)
            report["stored"] = stored_tries(repo, neighbour, args.stored_tries)
    report["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    for key in ("canary_25", "a_a", "stored"):
        if key in report:
            print(f"{key}: {tally(report[key])}")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
