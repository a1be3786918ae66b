"""The HTML report at scale: 20 workloads × 200 stored runs of history, timed and weighed.

The budget (from the report issue): "A report for a 20-workload × 200-point history is generated
in under 5 s on this machine and stays under 3 MB".

The input is synthetic but built from real parts, so that the page is what a real 20-workload
report would be:

* the workloads are the ones measured on an H200 (``tests/data/h200/gpu-*.json``: gpt, resnet,
  mlp, datapipe under bf16, fp16 and the smoke suite), cloned round-robin as ``w00`` … ``w19``,
  each with 8 repeats (copies of its first repeat with a seeded ±0.4 % jitter) that keep the
  repeat's real NVML/host telemetry, and summaries recomputed by perfgate's own summariser;
* the verdict is the real gate's (``compare_runs`` + ``verdict_document``) against a baseline
  built the same way with another seed, with two workloads made slower and one faster;
* the advice is the H200's ``advice-inefficient.json`` (gpt's and resnet's advice), given to four
  of the clones under their new names;
* each workload has a ``WorkloadHistory`` of 200 runs (step time and its headline rate,
  tokens/s or samples/s), 40-hex commits, a 10 % step change at run 100 recorded as a change
  point, and the 30 runs before head in the live baseline window; head is the last run.

Measured: ``build_page`` + ``render_html`` together (wall clock, ``time.perf_counter``), three
times in one process, best and median; the HTML's size in bytes (UTF-8) and how much of it is
inline SVG, per chart kind; in one more (untimed, serial) render, the time in each kind of chart.
The three renders must be byte-identical, and so must a render from inputs rebuilt from the
seed and one made by another interpreter with another ``PYTHONHASHSEED`` (all printed). Exit code
1 when the median time is over 5 s, the size is 3 MB (3,000,000 bytes) or more, or the bytes
differ, saying which. The machine (CPUs, load average) and the sha256 of ``charts.py`` and the
template are printed with the numbers, so that they can be told apart from later ones.

    python benchmarks/report_scale.py [--out report-scale.html]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from perfgate.compare.baseline_source import from_result
from perfgate.compare.gate import compare_runs
from perfgate.diagnose.session import diagnose_runs
from perfgate.documents.advice import ADVICE, AdviceReport
from perfgate.documents.history import HistoryRun, WorkloadHistory
from perfgate.documents.result import RunResult, WorkloadResult, load_result
from perfgate.documents.verdict import CompareVerdict
from perfgate.report import charts
from perfgate.report.html_report import render_html
from perfgate.report.page import build_page
from perfgate.runner.summary import summarize_workload

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "tests" / "data" / "h200"
SOURCES = ("gpu-bf16.json", "gpu-fp16.json", "gpu-datapipe.json", "gpu-smoke.json")

WORKLOADS = 20
HISTORY_RUNS = 200
REPEATS = 8
BASELINE_WINDOW = 30
CHANGE_AT = HISTORY_RUNS // 2
STEP_CHANGE = 1.10
"""Runs from ``CHANGE_AT`` on are this much slower: the step the live baseline moved with."""
SLOWER = {"w03": 1.08, "w11": 1.12}
FASTER = {"w07": 0.90}
ADVISED = {"w00": "gpt", "w01": "resnet", "w09": "gpt", "w10": "resnet"}
"""Clone → the H200 workload whose advice it is given."""

TIME_BUDGET_S = 5.0
SIZE_BUDGET_BYTES = 3_000_000
"""3 MB read strictly (SI); 3 MiB would be 3,145,728 bytes."""
TIMED_RUNS = 3
GENERATED_AT = "2026-11-30T12:00:00+00:00"
HISTORY_START = datetime(2026, 5, 14, 2, 0, tzinfo=timezone.utc)

_SVG_RE = re.compile(r"<svg\b.*?</svg>", re.DOTALL)
_SVG_ID_RE = re.compile(r"<svg\b[^>]*?\bid=\"([A-Za-z]+)-")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReportInputs:
    """Everything ``build_page`` is given."""

    results: list[RunResult]
    verdict: CompareVerdict
    advice: AdviceReport
    histories: dict[str, WorkloadHistory]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Measurement:
    times_s: list[float]
    html: str
    identical: bool

    @property
    def best_s(self) -> float:
        return min(self.times_s)

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    @property
    def size_bytes(self) -> int:
        return len(self.html.encode("utf-8"))


# --- inputs ------------------------------------------------------------------------------------


def template_workloads() -> tuple[RunResult, list[WorkloadResult]]:
    """The bf16 run (its environment and source) and every workload the H200 documents hold."""
    runs = [load_result(H200 / name) for name in SOURCES]
    return runs[0], [w for run in runs for w in run.workloads]


def _gpu_name(run: RunResult) -> str | None:
    gpu = run.environment.get("gpu") or {}
    return gpu.get("model") if isinstance(gpu, Mapping) else None


def clone_run(
    base: RunResult,
    templates: Sequence[WorkloadResult],
    *,
    run_id: str,
    seed: int,
    commit: str,
    started_at: str,
    factors: Mapping[str, float] | None = None,
) -> RunResult:
    """``WORKLOADS`` workloads ``w00``… cloned round-robin from ``templates``, each with
    ``REPEATS`` repeats (copies of the template's first repeat, telemetry included, steps scaled
    by the workload's factor and a seeded ±0.4 % jitter) and a recomputed summary."""
    rng = random.Random(seed)
    workloads = []
    for index in range(WORKLOADS):
        template = templates[index % len(templates)]
        name = f"w{index:02d}"
        first = template.repeats[0]
        scale = (factors or {}).get(name, 1.0)
        repeats = []
        for r in range(REPEATS):
            jitter = 1 + rng.uniform(-0.004, 0.004)
            repeats.append(
                dataclasses.replace(
                    first,
                    index=r,
                    step_times_s=[t * scale * jitter for t in first.step_times_s],
                )
            )
        summary = summarize_workload(
            repeats,
            samples_per_step=template.samples_per_step,
            tokens_per_step=template.tokens_per_step,
            flops=template.flops,
            compute_dtype=template.compute_dtype,
            device=template.device,
            gpu_name=_gpu_name(base),
        )
        workloads.append(dataclasses.replace(template, name=name, repeats=repeats, summary=summary))
    return dataclasses.replace(
        base,
        run_id=run_id,
        suite="scale",
        started_at=started_at,
        finished_at=started_at,
        source=dataclasses.replace(base.source, commit=commit, branch="main", dirty=False),
        settings=dataclasses.replace(base.settings, repeats=REPEATS),
        workloads=workloads,
    )


def advice_document() -> AdviceReport:
    """The H200's advice for gpt and resnet, given to the clones in ``ADVISED``."""
    source = json.loads((H200 / "advice-inefficient.json").read_text(encoding="utf-8"))
    by_name = {w["name"]: w for w in source["workloads"]}
    workloads = [{**by_name[original], "name": clone} for clone, original in ADVISED.items()]
    return ADVICE.read({**source, "workloads": workloads}, "advice-inefficient.json")


def _commit(rng: random.Random) -> str:
    return f"{rng.getrandbits(160):040x}"


def _rate_metric(workload: WorkloadResult) -> tuple[str, int] | None:
    if workload.tokens_per_step:
        return "tokens_per_s", workload.tokens_per_step
    if workload.samples_per_step:
        return "samples_per_s", workload.samples_per_step
    return None


def workload_history(
    workload: WorkloadResult, baseline_step_s: float, head_run_id: str, rng: random.Random
) -> WorkloadHistory:
    """``HISTORY_RUNS`` nightly runs ending with head: step time around the baseline median
    (``STEP_CHANGE`` faster before run ``CHANGE_AT``), 1 % noise with a rare outlier, the rate
    derived from the step time, the ``BASELINE_WINDOW`` runs before head in the window."""
    rate = _rate_metric(workload)
    runs = []
    change_commit = ""
    for index in range(HISTORY_RUNS):
        is_head = index == HISTORY_RUNS - 1
        level = baseline_step_s / (STEP_CHANGE if index < CHANGE_AT else 1.0)
        noise = 1 + 0.01 * rng.gauss(0, 1) + (0.06 if rng.random() < 0.02 else 0.0)
        step_s = (
            workload.summary.median_step_s
            if is_head and workload.summary and workload.summary.median_step_s
            else level * noise
        )
        medians: dict[str, float | None] = {"step_time_s": step_s}
        if rate is not None:
            medians[rate[0]] = rate[1] / step_s
        commit = _commit(rng)
        if index == CHANGE_AT:
            change_commit = commit
        started = HISTORY_START + timedelta(days=index, minutes=rng.randrange(0, 50))
        runs.append(
            HistoryRun(
                run_id=head_run_id if is_head else f"{workload.name}-run-{index:03d}",
                commit=commit,
                started_at=started.isoformat(timespec="seconds"),
                medians=medians,
                in_baseline=HISTORY_RUNS - 1 - BASELINE_WINDOW <= index < HISTORY_RUNS - 1,
                change_point_metrics=frozenset({"step_time_s"})
                if index == CHANGE_AT
                else frozenset(),
            )
        )
    return WorkloadHistory(
        runs=runs,
        baseline_reason=f"change point: step time {STEP_CHANGE - 1:+.1%} from commit "
        f"{runs[CHANGE_AT - 1].commit} to {change_commit}",
        baseline_created_at=runs[CHANGE_AT + BASELINE_WINDOW].started_at,
    )


def build_inputs(seed: int = 0) -> ReportInputs:
    """The 20-workload head run, its verdict, advice and 200-run histories, all from ``seed``."""
    base, templates = template_workloads()
    rng = random.Random(seed)
    head_started = (HISTORY_START + timedelta(days=HISTORY_RUNS - 1)).isoformat(timespec="seconds")
    baseline = clone_run(
        base,
        templates,
        run_id="scale-baseline",
        seed=seed + 1,
        commit=_commit(rng),
        started_at=head_started,
    )
    head = clone_run(
        base,
        templates,
        run_id="scale-head",
        seed=seed + 2,
        commit=_commit(rng),
        started_at=head_started,
        factors={**SLOWER, **FASTER},
    )
    verdict = compare_runs(head, from_result(baseline, "baseline.json"))
    baseline_steps = {
        w.name: c.baseline_median
        for w in verdict.workloads
        for c in w.comparisons
        if c.metric == "step_time_s"
    }
    histories = {
        w.name: workload_history(w, baseline_steps[w.name], head.run_id, rng)
        for w in head.workloads
    }
    return ReportInputs(
        results=[head], verdict=verdict, advice=advice_document(), histories=histories
    )


# --- measuring ---------------------------------------------------------------------------------


def render(inputs: ReportInputs, workers: int | None = None) -> str:
    """``build_page`` + ``render_html``: what is timed (charts drawn by ``workers`` processes,
    default one per available core, as ``perfgate report`` does), with the diagnoses the page
    shows (``perfgate report`` classifies them before building the page)."""
    page = build_page(
        inputs.results,
        verdict=inputs.verdict,
        advice=inputs.advice,
        diagnoses=diagnose_runs(inputs.results, inputs.advice),
        histories=inputs.histories,
        history_note="",
        generated_at=GENERATED_AT,
        inputs=["scale-head.json", "verdict.json", "advice.json"],
    )
    return render_html(page, workers)


def measure(inputs: ReportInputs, runs: int = TIMED_RUNS) -> Measurement:
    times = []
    pages = []
    for _ in range(runs):
        start = time.perf_counter()
        html = render(inputs)
        times.append(time.perf_counter() - start)
        pages.append(html)
    return Measurement(times_s=times, html=pages[0], identical=len(set(pages)) == 1)


CHART_FUNCTIONS = ("distribution_svg", "history_svg", "telemetry_svg")


@contextmanager
def _timed_charts(spent: dict[str, list[float]]) -> Iterator[None]:
    """``perfgate.report.charts``' chart functions, each call's wall time appended to
    ``spent[name]`` (``page`` calls them through the module, so patching it is enough)."""
    originals = {name: getattr(charts, name) for name in CHART_FUNCTIONS}

    def wrap(name: str, function: Callable[..., str]) -> Callable[..., str]:
        def timed(*args: Any, **kwargs: Any) -> str:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent.setdefault(name, []).append(time.perf_counter() - start)

        return timed

    try:
        for name, function in originals.items():
            setattr(charts, name, wrap(name, function))
        yield
    finally:
        for name, function in originals.items():
            setattr(charts, name, function)


def time_breakdown(inputs: ReportInputs) -> tuple[float, dict[str, list[float]]]:
    """One more render (not one of the timed ones), serial so every chart is timed here: its
    total and the time in each chart kind."""
    spent: dict[str, list[float]] = {}
    with _timed_charts(spent):
        start = time.perf_counter()
        render(inputs, workers=1)
        total = time.perf_counter() - start
    return total, spent


def size_breakdown(html: str) -> dict[str, tuple[int, int]]:
    """Part of the page → (count, UTF-8 bytes): inline SVG per chart kind (the id prefix:
    ``dist``, ``history``, ``telemetry``), the highlighted fix snippets, and the rest."""
    parts: dict[str, tuple[int, int]] = {}
    taken = 0
    for match in _SVG_RE.finditer(html):
        found = _SVG_ID_RE.match(match.group(0))
        kind = f"svg: {found.group(1) if found else 'other'}"
        size = len(match.group(0).encode("utf-8"))
        count, total = parts.get(kind, (0, 0))
        parts[kind] = (count + 1, total + size)
        taken += size
    snippets = re.findall(r'<div class="snippet">.*?</pre></div>', html, re.DOTALL)
    snippet_bytes = sum(len(s.encode("utf-8")) for s in snippets)
    parts["fix snippets"] = (len(snippets), snippet_bytes)
    rest = len(html.encode("utf-8")) - taken - snippet_bytes
    parts["everything else"] = (1, rest)
    return parts


def svg_count(html: str, kind: str) -> int:
    """How many inline charts of ``kind`` (``dist``, ``history``, ``telemetry``) the page has."""
    return sum(
        1
        for match in _SVG_RE.finditer(html)
        if (found := _SVG_ID_RE.match(match.group(0))) and found.group(1) == kind
    )


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha_in_another_process(seed: int) -> str:
    """The page's sha256 as rendered by a fresh interpreter with another string-hash seed (so
    that set and dict orders built from hashed strings differ if anything depends on them)."""
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    completed = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--sha-only", "--seed", str(seed)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return completed.stdout.strip().splitlines()[-1]


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.2f} MB = {size / 2**20:.2f} MiB"


def provenance() -> list[str]:
    """What the numbers depend on: the machine, matplotlib, the chart code and the template."""
    import matplotlib

    files = [
        Path(charts.__file__),
        ROOT / "perfgate" / "report" / "svg.py",
        ROOT / "perfgate" / "templates" / "report.html.j2",
    ]
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return [
        f"machine: {os.cpu_count()} CPUs, load average {load}; Python "
        f"{sys.version.split()[0]}, matplotlib {matplotlib.__version__}",
        *(
            f"{path.relative_to(ROOT)}: sha256 {hashlib.sha256(path.read_bytes()).hexdigest()[:12]}"
            for path in files
            if path.is_file()
        ),
    ]


def report(
    measurement: Measurement,
    inputs_s: float,
    rebuilt_identical: bool,
    other_process_identical: bool,
    breakdown: tuple[float, dict[str, list[float]]],
) -> list[str]:
    """The markdown lines printed."""
    m = measurement
    size = m.size_bytes
    lines = [
        f"## HTML report: {WORKLOADS} workloads × {HISTORY_RUNS} runs of history",
        "",
        *provenance(),
        "",
        "| measure | value | budget |",
        "| --- | --- | --- |",
        f"| build_page + render_html, best of {len(m.times_s)} | {m.best_s:.2f} s | |",
        f"| build_page + render_html, median of {len(m.times_s)} | {m.median_s:.2f} s "
        f"| < {TIME_BUDGET_S:g} s |",
        f"| all runs | {', '.join(f'{t:.2f} s' for t in m.times_s)} | |",
        f"| HTML size | {size:,} bytes ({_megabytes(size)}) | < {SIZE_BUDGET_BYTES:,} bytes |",
        f"| building the inputs (not timed in the budget) | {inputs_s:.2f} s | |",
        f"| renders byte-identical | {'yes' if m.identical else 'NO'} | |",
        f"| inputs rebuilt from the seed render the same bytes | "
        f"{'yes' if rebuilt_identical else 'NO'} | |",
        f"| another process (PYTHONHASHSEED=12345) renders the same bytes | "
        f"{'yes' if other_process_identical else 'NO'} | |",
        f"| sha256 | `{sha256(m.html)[:16]}…` | |",
        "",
        "| part | count | bytes | share |",
        "| --- | --- | --- | --- |",
    ]
    svg_total = 0
    for part, (count, part_bytes) in size_breakdown(m.html).items():
        if part.startswith("svg"):
            svg_total += part_bytes
        lines.append(f"| {part} | {count} | {part_bytes:,} | {part_bytes / size:.1%} |")
    lines.append(f"| **all SVG** | | {svg_total:,} | {svg_total / size:.1%} |")
    total, spent = breakdown
    lines += [
        "",
        f"Where the time goes (one more, untimed, serial render: {total:.2f} s):",
        "",
        "| part | calls | seconds | share |",
        "| --- | --- | --- | --- |",
    ]
    in_charts = 0.0
    for name in CHART_FUNCTIONS:
        calls = spent.get(name, [])
        in_charts += sum(calls)
        lines.append(
            f"| charts.{name} | {len(calls)} | {sum(calls):.2f} | {sum(calls) / total:.0%} |"
        )
    rest = total - in_charts
    lines.append(f"| everything else | | {rest:.2f} | {rest / total:.0%} |")
    lines.append("")
    return lines


def failures(measurement: Measurement, *identical: bool) -> list[str]:
    out = []
    if measurement.median_s > TIME_BUDGET_S:
        out.append(f"TIME over budget: median {measurement.median_s:.2f} s > {TIME_BUDGET_S:g} s")
    if measurement.size_bytes >= SIZE_BUDGET_BYTES:
        out.append(f"SIZE over budget: {measurement.size_bytes:,} bytes >= {SIZE_BUDGET_BYTES:,}")
    if not measurement.identical or not all(identical):
        out.append("NOT DETERMINISTIC: the same inputs rendered different bytes")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, help="write the generated HTML here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sha-only", action="store_true", help="print one render's sha256")
    args = parser.parse_args(argv)
    if args.sha_only:
        print(sha256(render(build_inputs(args.seed))))
        return 0

    start = time.perf_counter()
    inputs = build_inputs(args.seed)
    inputs_s = time.perf_counter() - start
    measurement = measure(inputs)
    rebuilt_identical = render(build_inputs(args.seed)) == measurement.html
    other_identical = sha_in_another_process(args.seed) == sha256(measurement.html)
    breakdown = time_breakdown(inputs)
    print("\n".join(report(measurement, inputs_s, rebuilt_identical, other_identical, breakdown)))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(measurement.html, encoding="utf-8")
        print(f"written: {args.out}")
    problems = failures(measurement, rebuilt_identical, other_identical)
    for problem in problems:
        print(problem)
    if not problems:
        print("within budget: median time and size")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
