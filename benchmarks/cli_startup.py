"""How long ``perfgate --help`` takes, against a reference checkout, side by side in one run.

Each trial starts a fresh interpreter for ``perfgate --help`` from this checkout and from the
reference (``--reference DIR``: another checkout of perfgate, e.g. ``git worktree add /tmp/ref
HEAD~1``), in alternating order so the machine's drift lands on both, plus a bare ``python -c
pass`` as the floor. Reported: medians, the ratio reference ÷ this, and which heavy packages the
CLI's import loaded in each. The ratio is what to read on a shared machine; absolute times move
with its load.

Usage: ``python benchmarks/cli_startup.py --reference /tmp/ref [--trials 15] [--markdown FILE]``
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HEAVY = ("torch", "scipy", "sqlalchemy", "sqlmodel", "jinja2", "matplotlib")
LOADED_PROBE = (
    "import sys, perfgate.cli; "
    f"print(','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)) or 'none')"
)


def _timed(argv: list[str], pythonpath: Path | None) -> float:
    # ``python -m`` puts the working directory first on sys.path: run from the checkout itself.
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    start = time.perf_counter()
    subprocess.run(
        argv,
        env=env,
        cwd=pythonpath,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def _loaded(pythonpath: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    completed = subprocess.run(
        [sys.executable, "-c", LOADED_PROBE],
        env=env,
        cwd=pythonpath,
        check=True,
        capture_output=True,
        text=True,
    )
    return completed.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, required=True, help="another perfgate checkout")
    parser.add_argument("--trials", type=int, default=15)
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    sides = {"this checkout": here, "reference": args.reference.resolve()}
    help_argv = [sys.executable, "-m", "perfgate", "--help"]
    times: dict[str, list[float]] = {name: [] for name in (*sides, "python -c pass")}
    load_before = os.getloadavg()
    for trial in range(args.trials):
        order = list(sides) if trial % 2 == 0 else list(reversed(sides))
        for name in order:
            times[name].append(_timed(help_argv, sides[name]))
        times["python -c pass"].append(_timed([sys.executable, "-c", "pass"], None))
    load_after = os.getloadavg()
    now = datetime.datetime.now(datetime.timezone.utc)
    median = {name: statistics.median(values) for name, values in times.items()}
    lines = [
        f"`python benchmarks/cli_startup.py --reference {args.reference} --trials {args.trials}`",
        "",
        f"- date: {now:%Y-%m-%d %H:%M} UTC; {os.cpu_count()} CPUs,"
        f" Python {platform.python_version()}",
        "- load average (1, 5, 15 min) before: "
        + ", ".join(f"{v:.2f}" for v in load_before)
        + "; after: "
        + ", ".join(f"{v:.2f}" for v in load_after),
        "",
        "| `perfgate --help` from | median | min | max | heavy packages imported |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for name, values in times.items():
        loaded = _loaded(sides[name]) if name in sides else "-"
        lines.append(
            f"| {name} | {median[name]:.3f} s | {min(values):.3f} s | {max(values):.3f} s"
            f" | {loaded} |"
        )
    ratio = median["reference"] / median["this checkout"]
    lines += ["", f"reference ÷ this checkout: **{ratio:.2f}×** (medians of {args.trials})"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
