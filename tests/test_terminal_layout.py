"""The terminal output at a laptop's 80 columns and in a CI log: nothing cut, every value with
its unit, a derived metric under its primary with its own change, and progress lines that
arrive while the run is still going (issue 19)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import factories
import pytest
from rich.console import Console

from perfgate.documents.result import RESULT
from perfgate.documents.verdict import WorkloadVerdict
from perfgate.files import write_json_atomic
from perfgate.report.compare_table import VerdictView
from perfgate.report.formatting import change_with_interval, own_change
from perfgate.report.run_summary import RunSummaryView
from perfgate.report.terminal import PlainTable

LONG_NAME = "a-workload-name-far-longer-than-any-column-of-an-80-column-table-could-hold"


def rendered(renderable: object, width: int) -> list[str]:
    with open(os.devnull, "w") as sink:
        console = Console(width=width, record=True, color_system=None, file=sink)
        console.print(renderable)
    return console.export_text().splitlines()


def test_a_rate_is_shown_as_its_own_change() -> None:
    assert own_change(1.25, "lower") == pytest.approx(0.25)  # the step is 25 % longer
    assert own_change(1.25, "higher") == pytest.approx(-0.2)  # so throughput is 20 % lower
    assert change_with_interval(1.25, 1.2, 1.3, "higher") == "-20.0 % (-23.1 … -16.7 %)"
    assert change_with_interval(1.25, 1.2, 1.3, "lower") == "+25.0 % (+20.0 … +30.0 %)"


def _verdict() -> object:
    verdict = factories.verdict()
    long = WorkloadVerdict(
        name=LONG_NAME,
        status="compared",
        comparisons=[factories.comparison(reasons=("a reason " * 20,))],
    )
    return replace(verdict, workloads=[*verdict.workloads, long])


def test_the_verdict_at_80_columns_is_blocks_with_every_number_whole() -> None:
    lines = rendered(VerdictView(_verdict()), 80)  # type: ignore[arg-type]
    assert all(len(line) <= 80 for line in lines) and all(line == line.rstrip() for line in lines)
    text = "\n".join(lines)
    assert "step time: regression · 10.10 ms → 12.50 ms, +24.0 % (+20.0 … +28.0 %)" in text
    derived = next(line for line in lines if "samples/s" in line)
    assert derived.startswith("    └ samples/s: regression") and "-19.4 %" in derived
    assert "mlp: missing" in text and "bert: definition changed" in text
    assert LONG_NAME in text  # a name longer than the line stays whole
    assert "threshold ±5%, detectable never, p (BH) 0.002" in text


def test_the_verdict_on_a_wide_console_is_the_table_with_derived_rows_under_their_primary() -> None:
    lines = rendered(VerdictView(factories.verdict()), 200)
    header = next(line for line in lines if "workload" in line)
    assert "change (90% CI)" in header and "p (BH)" in header
    rows = [line for line in lines if line.startswith("│ gpt")]
    assert "step time" in rows[0] and "└ samples/s" in rows[1]
    assert "+24.0 % (+20.0 … +28.0 %)" in rows[0] and "-19.4 %" in rows[1]


def test_the_run_summary_at_80_columns_labels_every_figure() -> None:
    lines = rendered(RunSummaryView(factories.run()), 80)
    assert all(len(line) <= 80 for line in lines)
    text = " ".join(line.strip() for line in lines)
    assert "gpt@full: ok" in text
    for figure in ("step (median) 10.10 ms", "811,000 tok/s", "MFU 10.0%", "peak mem 1.0 GiB"):
        assert figure in text
    assert "perfgate run 0f1e2d3c · cuda" in lines[0]


def test_a_squeezed_table_folds_its_cells_instead_of_cutting_them() -> None:
    table = PlainTable("name", "value")
    table.add_row(LONG_NAME, "123456789.123456789")
    lines = rendered(table, 40)
    cells = [line.split("│")[1:3] for line in lines if line.startswith("│")]
    assert "".join(name.strip() for name, _ in cells) == LONG_NAME
    assert "".join(value.strip() for _, value in cells) == "123456789.123456789"
    assert not any("…" in line for line in lines)


@pytest.mark.slow
def test_compare_at_80_columns_in_a_pipe(tmp_path: Path) -> None:
    head = tmp_path / "head.json"
    write_json_atomic(head, RESULT.dump(factories.run()))
    completed = subprocess.run(
        [sys.executable, "-m", "perfgate", "compare", str(head), "--baseline", str(head)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "80"},
        timeout=300,
    )
    lines = completed.stdout.splitlines()
    assert lines and all(len(line) <= 80 for line in lines), completed.stdout
    assert any(line.startswith("perfgate compare · ") for line in lines), completed.stdout
    assert "step time: " in completed.stdout and " ms → " in completed.stdout


@pytest.mark.slow
def test_a_piped_run_prints_progress_lines_before_it_ends(tmp_path: Path) -> None:
    """The first repeat's line is read while the process is still measuring the others."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "perfgate",
            "run",
            "-w",
            "mlp",
            "--repeats",
            "3",
            "--steps",
            "3",
            "--warmup",
            "1",
            "--no-store",
            "--device",
            "cpu",
            "--out",
            str(tmp_path / "r.json"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PERFGATE_TEST_STEP_CLOCK": "virtual"},
    )
    assert process.stdout is not None
    seen: list[tuple[str, bool]] = []
    deadline = time.monotonic() + 300
    for line in process.stdout:
        seen.append((line.rstrip("\n"), process.poll() is None))
        if time.monotonic() > deadline:
            break
    process.wait(timeout=60)
    assert process.returncode == 0, process.stderr.read() if process.stderr else ""
    lines = [line for line, _ in seen]
    assert lines[0] == "mlp@smoke: 3 repeats"
    repeats = [line for line in lines if line.startswith("mlp@smoke: repeat ")]
    assert [line.split(" (")[0] for line in repeats] == [
        f"mlp@smoke: repeat {i}/3 ok" for i in (1, 2, 3)
    ]
    assert all(re.fullmatch(r".* \(\d+\.\d s\)", line) for line in repeats)
    first = next(alive for line, alive in seen if line.startswith("mlp@smoke: repeat 1/3"))
    assert first, "the first repeat's line arrived only after the run had ended"


def test_the_pr_comment_shows_a_rate_as_its_own_change() -> None:
    from perfgate.report.compare_markdown import verdict_markdown

    rate = factories.comparison(
        "samples_per_s", direction="higher", ratio=1.25, ci_low=1.2, ci_high=1.3
    )
    verdict = replace(
        factories.verdict(),
        workloads=[WorkloadVerdict(name="gpt", status="compared", comparisons=[rate])],
    )
    markdown = verdict_markdown(verdict)
    assert "-20.0 % (-23.1 … -16.7)" in markdown
    assert "+25.0 %" not in markdown


def test_the_pr_comment_names_both_compared_commits() -> None:
    from perfgate.report.compare_markdown import verdict_markdown

    markdown = verdict_markdown(factories.verdict())
    (line,) = [line for line in markdown.splitlines() if line.startswith("- method:")]
    assert "at c0ffeec0ffee (Make attention faster); against base ba5eba5eba5e" in line


def test_the_pr_comment_shows_no_local_paths() -> None:
    from perfgate.report.compare_markdown import escape_text, without_local_paths

    text = "result file /home/runner/work/proj/proj/perfgate-out/head.json is not valid JSON"
    assert without_local_paths(text) == "result file …/perfgate-out/head.json is not valid JSON"
    assert "/home/runner" not in escape_text(text)
    url = "see https://github.com/team/model/actions/runs/1/artifacts/2 and ./baselines/pr/x.json"
    assert without_local_paths(url) == url
