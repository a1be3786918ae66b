"""Open the HTML report in headless Chromium: screenshot it, catch console errors, check the DOM.

    python benchmarks/report_browser_check.py [REPORT.html] [--out-dir DIR] [--height 4000]

Without a path, a real report is rendered first, the way ``tests/test_report_html.py`` builds
them: the bf16 result measured on an H200 (``tests/data/h200/gpu-bf16.json``: gpt, resnet, mlp)
as sixteen seeded nightly runs (8 repeats each) with a 10 % step at the seventh, stored in a
throw-away SQLite database whose baselines the real refresh sets (it finds the step and moves the
baseline past it); a head run with gpt 8 % slower, judged by the real gate against that live
baseline (a regression verdict); the H200's advice for gpt and resnet
(``advice-inefficient.json``); and the stored history of each workload, head included.

Chromium (Debian's ``chromium`` package, ``/usr/bin/chromium``) is run twice, each time with a
fresh profile and ``--headless=new --no-sandbox --disable-gpu --enable-logging=stderr --v=0``:

1. ``--screenshot=DIR/report.png --window-size=W,H``: the top W × H pixels of the page;
2. ``--dump-dom``: the DOM after parsing. Its ids are compared with the ids of the HTML source
   (``html.parser``): an id missing from the DOM means the browser parsed the page differently
   (an unclosed element swallowing a section, an SVG it rejected); the verdict banner
   (``id="verdict"``) must be there, with its ``data-verdict``.

Both runs' stderr is searched for Chromium's console log lines (``INFO:CONSOLE``), ``Uncaught``
exceptions and CSP violations (``Refused to …`` in older versions, ``… violates the following
Content Security Policy directive …`` in newer ones). The page has no script, so any console line
at all counts as an error. Exit code 1 on any console line, a missing banner or id, or no
screenshot; 0 otherwise, and 0 with a message when Chromium is not installed.

Limits of the stderr approach (no DevTools Protocol, which needs a websocket client this project
does not depend on):

* the log format is Chromium's, not a stable interface: a future version may word or route
  console messages differently, and this script would then see none (the ``--self-test`` option
  renders a page with a planted script error and CSP violation and fails if they are not seen);
* a console message's level (log, warning, error) is not in the line, hence "any line is an
  error";
* only what happens until the load event and the screenshot is seen; there is no interaction
  (no hover titles, no ``<details>`` opened), and layout problems (overlapping text, clipped or
  unreadable charts) are not detected: look at the screenshot;
* the screenshot is the top of the page at the window size, not the full page: pass a larger
  ``--height`` to see more.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "tests" / "data" / "h200"
GENERATED_AT = "2026-11-30T12:00:00+00:00"
REPEATS = 8
NIGHTLIES = 16
STEP_AT = 6
"""Nightlies from this one on are 10 % slower; ten runs after it, the refresh moves the baseline."""
CONSOLE_RE = re.compile(
    r"INFO:CONSOLE|:CONSOLE\(|Uncaught|Refused to|Content Security Policy", re.IGNORECASE
)
INSTALL_HINT = "install it with: apt-get install chromium (Debian/Ubuntu), then re-run"
SELF_TEST_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:">
<title>self-test</title></head><body><div id="verdict" data-verdict="run">x</div>
<script>undefinedFunction()</script></body></html>
"""


# --- the demo report ---------------------------------------------------------------------------


def _variant(
    base: Any,
    *,
    run_id: str,
    seed: int,
    commit: str,
    started_at: str,
    factors: dict[str, float] | None = None,
) -> Any:
    """``base`` with ``REPEATS`` repeats per workload (copies of its first, steps scaled by the
    workload's factor and a seeded ±0.4 % jitter, as ``tests/test_report_html.py``'s ``variant``)
    and each summary recomputed from them by perfgate's own summariser."""
    from perfgate.runner.summary import summarize_workload

    rng = random.Random(seed)
    workloads = []
    for workload in base.workloads:
        template = workload.repeats[0]
        scale = (factors or {}).get(workload.name, 1.0)
        repeats = [
            dataclasses.replace(
                template,
                index=index,
                step_times_s=[
                    t * scale * (1 + rng.uniform(-0.004, 0.004)) for t in template.step_times_s
                ],
            )
            for index in range(REPEATS)
        ]
        summary = summarize_workload(
            repeats,
            samples_per_step=workload.samples_per_step,
            tokens_per_step=workload.tokens_per_step,
            flops=workload.flops,
            compute_dtype=workload.compute_dtype,
            device=workload.device,
            gpu_name=(base.environment.get("gpu") or {}).get("model"),
        )
        workloads.append(dataclasses.replace(workload, repeats=repeats, summary=summary))
    return dataclasses.replace(
        base,
        run_id=run_id,
        started_at=started_at,
        finished_at=started_at,
        source=dataclasses.replace(base.source, commit=commit, branch="main", dirty=False),
        settings=dataclasses.replace(base.settings, repeats=REPEATS),
        workloads=workloads,
    )


def demo_report(directory: Path) -> str:
    """The demo page (see the module docstring), rendered from real documents."""
    from perfgate.baseline.refresh import refresh_baselines
    from perfgate.compare.database_source import from_database
    from perfgate.compare.gate import compare_runs
    from perfgate.diagnose.session import diagnose_runs
    from perfgate.documents.advice import ADVICE
    from perfgate.documents.result import load_result
    from perfgate.report.html_report import render_html
    from perfgate.report.page import build_page
    from perfgate.store.engine import make_engine
    from perfgate.store.ingest import store_run
    from perfgate.store.report_history import load_histories

    base = load_result(H200 / "gpu-bf16.json")
    names = [w.name for w in base.workloads]
    nightlies = [
        _variant(
            base,
            run_id=f"nightly-{day:02d}",
            seed=day,
            commit=f"{day:02d}" + "ab" * 19,
            started_at=f"2026-11-{day + 1:02d}T02:00:00+00:00",
            factors=dict.fromkeys(names, 1.0 if day < STEP_AT else 1.10),
        )
        for day in range(NIGHTLIES)
    ]
    head = _variant(
        base,
        run_id="head",
        seed=100,
        commit="c0ffee" + "00" * 17,
        started_at=f"2026-11-{NIGHTLIES:02d}T10:00:00+00:00",
        factors={**dict.fromkeys(names, 1.10), "gpt": 1.10 * 1.08},
    )
    url = f"sqlite:///{directory / 'perfgate.db'}"
    for run in nightlies:
        store_run(url, run, directory)
    engine = make_engine(url, directory)
    try:
        refresh_baselines(engine, "main")
    finally:
        engine.dispose()
    store_run(url, head, directory)
    histories = load_histories(url, directory, [head], max_runs=100)
    verdict = compare_runs(head, from_database(url, directory, head, "main"))
    advice = ADVICE.load(H200 / "advice-inefficient.json")
    page = build_page(
        [head],
        verdict=verdict,
        advice=advice,
        diagnoses=diagnose_runs([head], advice),
        histories=histories,
        generated_at=GENERATED_AT,
        inputs=["head.json", "verdict.json", "advice-inefficient.json"],
    )
    return render_html(page)


# --- the browser -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class BrowserRun:
    returncode: int
    stdout: str
    console: list[str]


def run_chromium(chromium: str, args: Sequence[str], url: str, timeout_s: float) -> BrowserRun:
    """Chromium headless with ``args`` on ``url``, in a fresh profile; its console lines."""
    with tempfile.TemporaryDirectory(prefix="perfgate-chromium-") as profile:
        command = [
            chromium,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            *args,
            url,
        ]
        completed = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    console = [line for line in completed.stderr.splitlines() if CONSOLE_RE.search(line)]
    return BrowserRun(returncode=completed.returncode, stdout=completed.stdout, console=console)


class _Ids(HTMLParser):
    """Every element id of a page, and the attributes of the verdict banner."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: list[str] = []
        self.verdict: dict[str, str | None] | None = None
        self.svgs = 0
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "svg":
            self.svgs += 1
        element_id = found.get("id")
        if element_id:
            self.ids.append(element_id)
            if element_id == "verdict":
                self.verdict = found


def png_size(path: Path) -> tuple[int, int] | None:
    """A PNG's width and height from its IHDR chunk; None if ``path`` is not a PNG."""
    try:
        head = path.read_bytes()[:24]
    except OSError:
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def check(
    chromium: str, html_path: Path, out_dir: Path, width: int, height: int, timeout_s: float
) -> tuple[list[str], list[str]]:
    """Screenshot and DOM check of ``html_path``: (console lines, other problems)."""
    url = html_path.resolve().as_uri()
    screenshot = out_dir / f"{html_path.stem}.png"
    screenshot.unlink(missing_ok=True)
    shot = run_chromium(
        chromium, [f"--screenshot={screenshot}", f"--window-size={width},{height}"], url, timeout_s
    )
    dom = run_chromium(chromium, ["--dump-dom"], url, timeout_s)
    problems = []
    size = png_size(screenshot)
    if shot.returncode != 0 or size is None:
        problems.append(f"no screenshot (chromium exited {shot.returncode})")
    else:
        print(f"screenshot: {screenshot} ({size[0]} × {size[1]} px)")
    if dom.returncode != 0 or not dom.stdout.strip():
        problems.append(f"no DOM dumped (chromium exited {dom.returncode})")
    source = _Ids(html_path.read_text(encoding="utf-8"))
    parsed = _Ids(dom.stdout)
    (out_dir / f"{html_path.stem}.dom.html").write_text(dom.stdout, encoding="utf-8")
    if parsed.verdict is None:
        problems.append('the DOM has no verdict banner (id="verdict")')
    else:
        print(
            f"banner: id=verdict data-verdict={parsed.verdict.get('data-verdict')!r} "
            f"class={parsed.verdict.get('class')!r}"
        )
    missing = sorted(set(source.ids) - set(parsed.ids))
    if missing:
        shown = ", ".join(missing[:10]) + (
            f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        )
        problems.append(f"{len(missing)} ids of the source are not in the DOM: {shown}")
    print(
        f"DOM: {len(parsed.ids)} ids ({len(source.ids)} in the source), "
        f"{parsed.svgs} <svg> ({source.svgs} in the source)"
    )
    if parsed.svgs != source.svgs:
        problems.append(f"the DOM has {parsed.svgs} <svg>, the source {source.svgs}")
    return shot.console + dom.console, problems


def self_test(chromium: str, out_dir: Path, timeout_s: float) -> bool:
    """Whether this Chromium's stderr still shows a planted script error (see Limits)."""
    page = out_dir / "self-test.html"
    page.write_text(SELF_TEST_PAGE, encoding="utf-8")
    seen = run_chromium(chromium, ["--dump-dom"], page.resolve().as_uri(), timeout_s).console
    for line in seen:
        print(f"  self-test saw: {line}")
    return any("undefinedFunction" in line or "Content Security Policy" in line for line in seen)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("html", nargs="?", type=Path, help="a report to check (default: render)")
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "perfgate-browser-check",
        help="where the report, screenshot and DOM dump go",
    )
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=4000)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per Chromium run")
    parser.add_argument("--chromium", help="the browser binary (default: chromium on PATH)")
    parser.add_argument(
        "--self-test", action="store_true", help="first check that console errors are seen"
    )
    args = parser.parse_args(argv)

    chromium = args.chromium or shutil.which("chromium")
    if chromium is None:
        print(f"skipped: chromium is not installed; {INSTALL_HINT}")
        return 0
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if args.self_test and not self_test(chromium, args.out_dir, args.timeout):
        print("self-test FAILED: a planted script error was not seen in Chromium's log")
        return 1
    html_path = args.html
    if html_path is None:
        html_path = args.out_dir / "perfgate-report.html"
        with tempfile.TemporaryDirectory(prefix="perfgate-demo-") as store:
            html_path.write_text(demo_report(Path(store)), encoding="utf-8")
        print(f"report: {html_path} ({html_path.stat().st_size:,} bytes)")
    elif not html_path.is_file():
        print(f"{html_path} does not exist")
        return 2

    console, problems = check(
        chromium, html_path, args.out_dir, args.width, args.height, args.timeout
    )
    print(f"console lines: {len(console)}")
    for line in console:
        print(f"  {line}")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    if console:
        print("FAILED: the browser logged console messages (the page has no script: none expected)")
    ok = not console and not problems
    print("ok: parsed, banner present, no console messages" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
