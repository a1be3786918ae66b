"""The report's inline SVG charts: valid, self-contained, hoverable, unique ids, deterministic."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET

import matplotlib
import pytest

from perfgate.report.charts import (
    SeriesPoint,
    TelemetrySeries,
    distribution_svg,
    history_svg,
    telemetry_svg,
)

SVG_NS = "http://www.w3.org/2000/svg"
SVG = "{" + SVG_NS + "}"
HOSTILE = "<script>alert(1)</script> & \"quoted\" 'single'"

_REF_RE = re.compile(r'url\(#([^)]+)\)|href="#([^"]+)"')
_ID_RE = re.compile(r'\sid="([^"]+)"')


def _points(n: int = 12) -> list[SeriesPoint]:
    return [
        SeriesPoint(
            value=10.0 + math.sin(i / 3) + (1.5 if i >= n // 2 else 0.0),
            label=f"c{i:06x} · 2026-11-20 14:{i % 60:02d} · {10 + i / 10:.1f} ms",
            in_baseline=n // 3 <= i < n - 1,
            change_point=i == n // 2,
            is_head=i == n - 1,
        )
        for i in range(n)
    ]


def _telemetry(n_series: int = 3, n: int = 60) -> tuple[list[float], list[TelemetrySeries]]:
    t = [0.5 * j for j in range(n)]
    series = [
        TelemetrySeries(
            name=f"signal {k}",
            unit="%",
            values=[None if j % 17 == 5 else 50 + 10 * math.sin(j / 5 + k) for j in range(n)],
        )
        for k in range(n_series)
    ]
    return t, series


def _parse(svg: str) -> ET.Element:
    """The chart parsed as XML, after the checks every chart must pass to be inlined."""
    assert svg.startswith("<svg ")
    assert "<?xml" not in svg
    assert "<!DOCTYPE" not in svg
    assert "ns0:" not in svg
    root = ET.fromstring(svg)
    assert root.tag == SVG + "svg"
    assert "viewBox" in root.attrib
    assert "width" not in root.attrib and "height" not in root.attrib
    assert "max-width:100%" in root.get("style", "")
    return root


def _titles(root: ET.Element) -> list[str]:
    return [el.text or "" for el in root.iter(SVG + "title")]


def _texts(root: ET.Element) -> list[str]:
    return [el.text or "" for el in root.iter(SVG + "text")]


def _ids(svg: str) -> list[str]:
    return _ID_RE.findall(svg)


def _refs(svg: str) -> set[str]:
    return {a or b for a, b in _REF_RE.findall(svg)}


def test_history_is_inline_svg_with_the_element_id() -> None:
    svg = history_svg(_points(), ylabel="step time (ms)", element_id="hist-a")
    root = _parse(svg)
    assert root.get("id") == "hist-a"
    assert root.attrib.get("xmlns") is None  # a namespace declaration, not an attribute
    assert svg.startswith(f'<svg xmlns="{SVG_NS}"')
    assert "step time (ms)" in _texts(root)


def test_every_history_point_has_its_label_as_title() -> None:
    points = _points(20)
    root = _parse(history_svg(points, ylabel="ms", element_id="h", baseline_band=(10.0, 11.5)))
    by_id = {el.get("id"): el for el in root.iter(SVG + "g")}
    for i, point in enumerate(points):
        group = by_id[f"h-pt{i}"]
        title = group.find(SVG + "title")
        assert title is not None and title.text == point.label
        # The title's sibling is the marker itself, so hovering the marker shows it.
        assert any(child.tag in (SVG + "use", SVG + "path") for child in group)
    assert len(_titles(root)) == len(points)


def test_hostile_labels_are_escaped_text() -> None:
    points = [
        SeriesPoint(value=1.0, label=HOSTILE),
        SeriesPoint(value=2.0, label="ok", is_head=True),
    ]
    svg = history_svg(points, ylabel=HOSTILE, element_id="h")
    root = _parse(svg)
    assert not any(el.tag.endswith("script") for el in root.iter())
    assert "<script" not in svg
    assert "&lt;script&gt;" in svg
    assert HOSTILE in _titles(root)
    assert HOSTILE in _texts(root)
    assert root.get("aria-label", "").endswith("over the last 2 runs")


def test_characters_xml_cannot_hold_and_mathtext_do_not_break_the_chart() -> None:
    points = [
        SeriesPoint(value=1.0, label="nul\x00 and \x1b escape"),
        SeriesPoint(value=2.0, label="$x"),
    ]
    root = _parse(history_svg(points, ylabel="cost $/h $\\frac{", element_id="h"))
    assert "nul and  escape" in _titles(root)
    t, series = _telemetry(1, 5)
    series = [TelemetrySeries(name="$unbalanced{", unit="\x07%", values=series[0].values)]
    root = _parse(telemetry_svg(t, series, element_id="t"))
    assert "$unbalanced{ (%)" in _texts(root)


def test_ids_are_disjoint_across_charts_and_references_resolve() -> None:
    t, series = _telemetry()
    charts = {
        "hist": history_svg(_points(), ylabel="ms", element_id="hist", baseline_band=(9.5, 11)),
        "hist2": history_svg(_points(), ylabel="ms", element_id="hist2"),
        "dist": distribution_svg(
            [("baseline", [1.0, 1.1, 1.2, 0.9]), ("head", [1.3, 1.25])],
            xlabel="ms",
            element_id="dist",
        ),
        "tel": telemetry_svg(t, series, element_id="tel", shaded=[(3, 5)], measured=(1, 20)),
    }
    seen: set[str] = set()
    for element_id, svg in charts.items():
        _parse(svg)
        ids = _ids(svg)
        assert len(ids) == len(set(ids)), f"duplicate id inside {element_id}"
        assert ids[0] == element_id
        assert all(i.startswith(element_id + "-") for i in ids[1:])
        assert not seen & set(ids)
        seen |= set(ids)
        refs = _refs(svg)
        assert refs, "matplotlib always writes clip paths or marker definitions"
        assert refs <= set(ids), f"dangling references in {element_id}: {refs - set(ids)}"
        # matplotlib's "*{...}" style rule must not restyle the rest of the page
        style = ET.fromstring(svg).find(SVG + "style")
        assert style is not None and style.text
        assert all(rule.startswith(f"#{element_id} ") for rule in style.text.split("}") if rule)


@pytest.mark.parametrize("bad", ["", "1abc", "a b", 'a"b', "a.b", "-a", "é"])
def test_element_id_is_validated(bad: str) -> None:
    t, series = _telemetry(1, 3)
    with pytest.raises(ValueError, match="element_id"):
        history_svg(_points(), ylabel="ms", element_id=bad)
    with pytest.raises(ValueError, match="element_id"):
        distribution_svg([("a", [1.0])], xlabel="ms", element_id=bad)
    with pytest.raises(ValueError, match="element_id"):
        telemetry_svg(t, series, element_id=bad)


def test_output_is_deterministic() -> None:
    t, series = _telemetry()
    sides = [("baseline", [1.0, 1.1, 1.2, 0.9, 1.05]), ("head", [1.3, 1.25, 1.27])]
    for render in (
        lambda: history_svg(_points(), ylabel="ms", element_id="h", baseline_band=(9, 11)),
        lambda: distribution_svg(sides, xlabel="ms", element_id="d"),
        lambda: telemetry_svg(t, series, element_id="t", shaded=[(3, 5)], measured=(1, 20)),
        lambda: history_svg([], ylabel="ms", element_id="e"),
    ):
        assert render() == render()


@pytest.mark.slow
def test_output_is_identical_in_a_fresh_process_and_never_imports_pyplot() -> None:
    code = textwrap.dedent(
        """
        import math, sys
        from perfgate.report.charts import SeriesPoint, history_svg
        points = [
            SeriesPoint(value=math.sin(i), label=f"run {i}", is_head=i == 9) for i in range(10)
        ]
        sys.stdout.write(history_svg(points, ylabel="ms", element_id="h", baseline_band=(0, 1)))
        sys.stdout.write("\\n" + str("matplotlib.pyplot" in sys.modules))
        """
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "MPLBACKEND": "Agg"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    svg, pyplot_imported = done.stdout.rsplit("\n", 1)
    assert pyplot_imported == "False"
    points = [SeriesPoint(value=math.sin(i), label=f"run {i}", is_head=i == 9) for i in range(10)]
    assert svg == history_svg(points, ylabel="ms", element_id="h", baseline_band=(0, 1))


def test_rc_params_do_not_leak() -> None:
    before = dict(matplotlib.rcParams)
    t, series = _telemetry()
    history_svg(_points(), ylabel="ms", element_id="h")
    telemetry_svg(t, series, element_id="t")
    distribution_svg([("a", [1.0, 2.0])], xlabel="ms", element_id="d")
    assert dict(matplotlib.rcParams) == before


def test_empty_inputs_render_a_message() -> None:
    assert "no history" in _texts(_parse(history_svg([], ylabel="ms", element_id="h")))
    assert "no telemetry samples" in _texts(_parse(telemetry_svg([], [], element_id="t")))
    assert "no telemetry samples" in _texts(_parse(telemetry_svg([1.0, 2.0], [], element_id="t")))
    assert "no values" in _texts(_parse(distribution_svg([], xlabel="ms", element_id="d")))


def test_non_finite_values_are_skipped() -> None:
    points = _points(10)
    points[2] = SeriesPoint(value=math.nan, label="nan run", in_baseline=True)
    points[5] = SeriesPoint(value=math.inf, label="inf run", change_point=True)
    points[9] = SeriesPoint(value=-math.inf, label="head run", is_head=True)
    root = _parse(history_svg(points, ylabel="ms", element_id="h", baseline_band=(math.nan, 1.0)))
    titles = _titles(root)
    assert len(titles) == 7
    assert not {"nan run", "inf run", "head run"} & set(titles)
    all_bad = [SeriesPoint(value=math.nan, label="x"), SeriesPoint(value=math.inf, label="y")]
    assert "no finite values in history" in _texts(
        _parse(history_svg(all_bad, ylabel="ms", element_id="h"))
    )


def test_distribution_has_one_title_per_value_and_empty_rows() -> None:
    baseline = [10.0, 10.2, 9.9, 10.1, 10.05, 30.0]
    head = [11.0, math.nan, 11.2, math.inf]
    sides = [("baseline", baseline), ("head", head), ("other", [])]
    root = _parse(distribution_svg(sides, xlabel="step time (ms)", element_id="d"))
    titles = _titles(root)
    assert len(titles) == len(baseline) + 2
    assert "baseline · repeat 6 · 30" in titles
    assert "head · repeat 3 · 11.2" in titles
    by_id = {el.get("id"): el for el in root.iter(SVG + "g")}
    assert by_id["d-v1-2"].find(SVG + "title") is not None  # side 1, repeat index 2
    texts = _texts(root)
    assert "no values" in texts
    assert "other (n=0)" in texts and "head (n=2)" in texts
    only_empty = distribution_svg([("a", []), ("b", [math.nan])], xlabel="ms", element_id="d")
    assert _texts(_parse(only_empty)).count("no values") == 2


def test_telemetry_with_gaps_and_shaded_spans_renders() -> None:
    t, series = _telemetry(3, 40)
    series.append(TelemetrySeries(name="power", unit="W", values=[None] * 40))
    t[7] = math.nan
    series[0] = TelemetrySeries(name="signal 0", unit="%", values=[math.inf, *series[0].values[1:]])
    svg = telemetry_svg(
        t,
        series,
        element_id="tel",
        shaded=[(2.0, 4.0), (10.0, 11.0), (math.nan, 3.0)],
        measured=(1.0, 15.0),
    )
    root = _parse(svg)
    texts = _texts(root)
    assert {"throttled", "measured steps", "seconds since start"} <= set(texts)
    assert {"signal 0 (%)", "signal 1 (%)", "signal 2 (%)", "power (W)"} <= set(texts)
    assert "no samples" in texts
    one = telemetry_svg([0.0], [TelemetrySeries(name="x", unit="", values=[1.0])], element_id="o")
    assert "x" in _texts(_parse(one))


def test_telemetry_rejects_misaligned_series() -> None:
    with pytest.raises(ValueError, match="2 values for 3 times"):
        telemetry_svg(
            [0.0, 1.0, 2.0], [TelemetrySeries(name="x", unit="", values=[1, 2])], element_id="t"
        )


def test_large_history_size_and_time_are_reported() -> None:
    """Prints render time and size (run with -s); times are never asserted, sizes are."""
    points = _points(200)
    history_svg(points, ylabel="step time (ms)", element_id="warm")  # fonts, caches
    start = time.perf_counter()
    svg = history_svg(
        points, ylabel="step time (ms)", element_id="hist", baseline_band=(10.0, 12.0)
    )
    elapsed = time.perf_counter() - start
    print(f"\nhistory, 200 points: {elapsed * 1000:.1f} ms, {len(svg) / 1000:.1f} kB")
    assert len(_titles(_parse(svg))) == 200
    assert len(svg) < 40_000

    t, series = _telemetry(5, 60)
    start = time.perf_counter()
    svg = telemetry_svg(t, series, element_id="tel", shaded=[(3, 5), (12, 14)], measured=(2, 25))
    elapsed = time.perf_counter() - start
    print(f"telemetry, 5 series x 60 samples: {elapsed * 1000:.1f} ms, {len(svg) / 1000:.1f} kB")
    _parse(svg)


def test_a_one_run_history_has_integer_run_ticks() -> None:
    from perfgate.report.charts import SeriesPoint, history_svg

    svg = history_svg(
        [SeriesPoint(value=6.8, label="abc · 2026-11-30 · 6.8 ms", is_head=True)],
        ylabel="step time (ms)",
        element_id="one",
    )
    assert "0.25" not in svg and "0.50" not in svg  # no fractional run numbers
