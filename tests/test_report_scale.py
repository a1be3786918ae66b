"""The HTML report at scale: 20 workloads × 200 runs of history stay under 3 MB.

Built by ``benchmarks/report_scale.py``'s own functions (real H200 workloads cloned, a real
verdict, real advice, seeded 200-run histories), so the test and the benchmark weigh the same
page. Only the size budget is asserted: the render time is printed, never asserted, because the
CPU is shared and noisy (``python benchmarks/report_scale.py`` checks the time budget).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import report_scale

from perfgate.report.page import HISTORY_METRICS, anchor


@pytest.fixture(scope="module")
def scale_page() -> tuple[report_scale.ReportInputs, str]:
    inputs = report_scale.build_inputs(seed=0)
    start = time.perf_counter()
    html = report_scale.render(inputs)
    print(f"\n20 × 200 report rendered in {time.perf_counter() - start:.2f} s (not asserted)")
    return inputs, html


@pytest.mark.slow
def test_a_20_workload_200_run_report_stays_under_3_mb(
    scale_page: tuple[report_scale.ReportInputs, str],
) -> None:
    inputs, html = scale_page
    size = len(html.encode("utf-8"))
    print(f"size: {size:,} bytes")
    assert len(inputs.results[0].workloads) == report_scale.WORKLOADS == 20
    for history in inputs.histories.values():
        assert len(history.runs) == report_scale.HISTORY_RUNS == 200
    assert size < report_scale.SIZE_BUDGET_BYTES == 3_000_000


@pytest.mark.slow
def test_every_workload_has_its_section_and_all_its_charts(
    scale_page: tuple[report_scale.ReportInputs, str],
) -> None:
    inputs, html = scale_page
    names = [f"w{i:02d}" for i in range(20)]
    assert [w.name for w in inputs.results[0].workloads] == names
    for name in names:
        assert html.count(f'id="{anchor("workload", name)}"') == 1
        assert f'id="{anchor("dist", name)}"' in html
        assert f'id="{anchor("telemetry", name)}"' in html
        history = inputs.histories[name]
        drawn = [m for m in HISTORY_METRICS if history.runs[0].medians.get(m) is not None]
        assert len(drawn) == 2 and drawn[0] == "step_time_s"  # step time and one rate
        for metric in drawn:
            assert f'id="{anchor("history", name, metric)}"' in html, (name, metric)
    # 20 × (distribution, two history charts, telemetry), and nothing else drawn.
    assert report_scale.svg_count(html, "dist") == 20
    assert report_scale.svg_count(html, "history") == 40
    assert report_scale.svg_count(html, "telemetry") == 20
    assert html.count("<svg") == 80
    # Advice reached the four clones it was given to, under their new names.
    for clone in report_scale.ADVISED:
        assert f'id="{anchor("advice", clone, "")}' in html
