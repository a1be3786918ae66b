"""Charts for the self-contained HTML report, rendered by matplotlib to inline SVG strings.

Why matplotlib: it is already a dependency, well kept and stable, and needs no JavaScript. Its
SVG output is a static vector image that is inlined straight into the page, so the report opens
on an air-gapped machine and in a CI artifact viewer with nothing to fetch. Why these settings:

* ``svg.fonttype = "none"`` keeps text as ``<text>`` elements instead of glyph outlines, which
  makes a chart several times smaller and its labels selectable and searchable;
* ``svg.hashsalt`` is fixed and the ``Date`` metadata is dropped, so the same inputs give
  byte-identical output, which keeps reports diffable and cacheable;
* everything is set inside ``matplotlib.rc_context`` (from matplotlib's defaults, so a local
  ``matplotlibrc`` or style cannot change the output) and drawn on a bare ``Figure`` with the
  SVG canvas, never through ``pyplot``, so no backend is selected and no global state leaks
  into the caller (``rc_context`` is not thread-safe, as with any matplotlib rendering).

After matplotlib has written the SVG, it is parsed and rewritten so that several charts can share
one HTML page: the ids that something refers to (clip paths, marker definitions) are renamed
``{element_id}-d0``, ``-d1``... and ours (point groups such as ``{element_id}-pt7``) prefixed the
same way, matplotlib's unused ones (``axes_1``...) are dropped, and every ``url(#...)`` and
``href="#..."`` follows; the root gets ``id=element_id`` and scales with the page (``viewBox``
kept, no fixed size). Since a ``<style>`` inside inline SVG applies to the whole page, the one
written is scoped to ``#element_id``, and it also holds the font list and the repeated style
attributes as classes, which with coordinates rounded to 0.01 pt keeps a 200-run history under
40 kB. Each data point gets an SVG ``<title>`` child, so that a browser shows its hover text with
no script. The result is serialised by hand, so ``xml.etree.ElementTree``'s process-wide
namespace registry is never touched. On one page, no element id should be another one followed by
``-`` and more (``h`` and ``h-pt1``), as the prefixed ids could then meet.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator, NullLocator

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

__all__ = [
    "SeriesPoint",
    "TelemetrySeries",
    "distribution_svg",
    "history_svg",
    "telemetry_svg",
]


@dataclass(frozen=True, kw_only=True)
class SeriesPoint:
    """One run's value of a metric in the history chart.

    ``label`` is the hover text, because the chart itself has no room to name each run (e.g.
    ``"a1b2c3d · 2026-11-20 14:02 · 12.3 ms"``). The flags decide how the point is drawn:
    ``in_baseline`` for runs in the live baseline window (filled rather than hollow, so the
    reader sees what head is compared against), ``change_point`` for the first run after a
    recorded step change (a dashed vertical line before it, so a shift in the baseline is not
    mistaken for noise) and ``is_head`` for the run being reported.
    """

    value: float
    label: str
    in_baseline: bool = False
    change_point: bool = False
    is_head: bool = False


@dataclass(frozen=True, kw_only=True)
class TelemetrySeries:
    """One telemetry signal, sampled on the time axis shared by all series of a chart.

    ``values`` is aligned with that time axis; ``None`` means no sample at that time, and is
    drawn as a gap rather than interpolated, so that a sampler outage does not look like data.
    """

    name: str
    unit: str
    values: Sequence[float | None]


# ---------------------------------------------------------------------------------------------
# Look and settings

_SVG_NS = "http://www.w3.org/2000/svg"
_XLINK_NS = "http://www.w3.org/1999/xlink"
_SVG = "{" + _SVG_NS + "}"
_XLINK_HREF = "{" + _XLINK_NS + "}href"

_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_URL_REF_RE = re.compile(r"url\(#([^)\s]+)\)")
_LONG_FLOAT_RE = re.compile(r"-?\d+\.\d{3,}")
_PATH_SPACE_RE = re.compile(r" ?([A-Za-z]) ?")
_FONT_FAMILY_RE = re.compile(r"font-family: ?([^;]*)(?:;|$) ?")
_NO_ROTATION_RE = re.compile(r"rotate\(-?0 [^)]*\)")
# Characters XML 1.0 cannot carry at all: a label holding one would make the page unparsable.
_XML_INVALID_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# Attributes whose numbers are coordinates: rounding them to 0.01 pt is invisible and saves ~20%.
_GEOMETRY_ATTRS = frozenset({"d", "x", "y", "x1", "x2", "y1", "y2", "width", "height", "transform"})
_TEXT_TAGS = frozenset({_SVG + "text", _SVG + "tspan", _SVG + "title", _SVG + "style"})

_WIDTH_IN = 7.0
_PX_PER_PT = 4.0 / 3.0  # CSS px per pt: the chart's natural size on screen

_INK = "#333333"
_GRID = "#e6e6e6"
_LINE = "#8c9aa8"
_POINT = "#1f5f9e"
_HEAD = "#e8710a"
_HEAD_EDGE = "#7a3500"
_BAND = "#2ca02c"
_WINDOW = "#1f5f9e"
_CHANGE = "#6b6b6b"
_THROTTLED = "#d62728"
_MEASURED = "#1f77b4"
_SIDE_COLORS = ("#1f5f9e", "#e8710a", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")

_RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",
    "svg.hashsalt": "perfgate-report",
    "path.simplify": True,
    "text.parse_math": False,  # a "$" in a run label or series name is text, not mathtext
    "text.usetex": False,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Verdana"],  # the metrics used; Verdana is its look-alike
    "font.size": 7.0,
    "axes.titlesize": 7.0,
    "axes.labelsize": 7.0,
    "legend.fontsize": 6.5,
    "xtick.labelsize": 6.5,
    "ytick.labelsize": 6.5,
    "axes.formatter.useoffset": False,  # "+1.234e3" offsets are unreadable on a small chart
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.linewidth": 0.6,
    "axes.edgecolor": _INK,
    "axes.labelcolor": _INK,
    "text.color": _INK,
    "xtick.color": _INK,
    "ytick.color": _INK,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "xtick.major.size": 2.5,
    "ytick.major.size": 2.5,
    "xtick.major.pad": 2.0,
    "ytick.major.pad": 2.0,
    "axes.labelpad": 2.0,
    "axes.titlepad": 3.0,
    "grid.color": _GRID,
    "grid.linewidth": 0.6,
    "figure.facecolor": "none",
    "axes.facecolor": "none",
    "savefig.facecolor": "none",
    "savefig.edgecolor": "none",
}


# ---------------------------------------------------------------------------------------------
# Public charts


def history_svg(
    points: Sequence[SeriesPoint],
    *,
    ylabel: str,
    element_id: str,
    baseline_band: tuple[float, float] | None = None,
) -> str:
    """A metric over the last runs, oldest left, as an inline ``<svg>`` string.

    The line shows the trend; filled markers are the runs in the live baseline window (shaded as
    an x span too), hollow ones the rest, the head run is larger and orange, a dashed vertical
    line precedes each change point, and ``baseline_band`` (e.g. the baseline median ± the
    threshold) is a horizontal band, so that the reader sees at a glance whether head left the
    range that counts as no change. Every point carries its ``label`` as hover text. Non-finite
    values are skipped (they keep their x position, so the run count stays honest).

    Raises ``ValueError`` if ``element_id`` is not a valid id (``^[A-Za-z][A-Za-z0-9_-]*$``).
    """
    _check_id(element_id)
    aria = f"History of {_clean(ylabel)} over the last {len(points)} runs"
    finite = [i for i, p in enumerate(points) if _is_finite(p.value)]
    if not finite:
        return _placeholder(
            "no history" if not points else "no finite values in history",
            element_id=element_id,
            aria=aria,
        )

    with _settings():
        fig = Figure(frameon=False, figsize=(_WIDTH_IN, 2.2))
        ax = fig.add_axes(_axes_rect(fig, left=0.62, right=0.12, top=0.22, bottom=0.34))
        ax.grid(True, axis="y")
        ax.set_axisbelow(True)
        n = len(points)
        handles: list[Line2D | Patch] = []

        band = _finite_pair(baseline_band)
        if band is not None:
            ax.axhspan(band[0], band[1], color=_BAND, alpha=0.13, lw=0, zorder=0.5)
            handles.append(Patch(color=_BAND, alpha=0.13, lw=0, label="baseline ± threshold"))

        in_window = [i for i, p in enumerate(points) if p.in_baseline]
        if in_window:
            ax.axvspan(
                min(in_window) - 0.5,
                max(in_window) + 0.5,
                color=_WINDOW,
                alpha=0.06,
                lw=0,
                zorder=0.4,
            )

        changes = [i for i, p in enumerate(points) if p.change_point]
        for i in changes:
            ax.axvline(i - 0.5, color=_CHANGE, lw=0.8, ls=(0, (3, 2)), zorder=1)

        xs = np.asarray(finite, dtype=float)
        ys = np.asarray([_to_float(points[i].value) for i in finite], dtype=float)
        ax.plot(xs, ys, color=_LINE, lw=1.0, zorder=2, solid_joinstyle="round")

        # One marker-only line per look (hollow, filled, head): matplotlib writes one marker path
        # and a cheap <use> per point, several times faster than a scatter's per-point styles.
        # The head comes last so that it is drawn on top.
        titles: dict[str, list[tuple[str, str]]] = {}
        looks = (
            ("runs", lambda p: not p.in_baseline and not p.is_head, "white", _POINT, 3.7),
            ("base", lambda p: p.in_baseline and not p.is_head, _POINT, _POINT, 3.7),
            ("head", lambda p: p.is_head, _HEAD, _HEAD_EDGE, 6.3),
        )
        for gid, wanted, face, edge, size in looks:
            chosen = [k for k, i in enumerate(finite) if wanted(points[i])]
            if not chosen:
                continue
            (dots,) = ax.plot(
                xs[chosen],
                ys[chosen],
                ls="",
                marker="o",
                ms=size,
                mfc=face,
                mec=edge,
                mew=0.9,
                zorder=3,
                clip_on=False,
            )
            dots.set_gid(gid)
            titles[gid] = [(f"pt{finite[k]}", points[finite[k]].label) for k in chosen]

        if in_window:
            handles.append(
                Line2D(
                    [],
                    [],
                    ls="",
                    marker="o",
                    ms=3.7,
                    mfc=_POINT,
                    mec=_POINT,
                    label="baseline window",
                )
            )
        if "head" in titles:  # a head with no finite value is not drawn, so not in the legend
            handles.append(
                Line2D(
                    [],
                    [],
                    ls="",
                    marker="o",
                    ms=6.3,
                    mfc=_HEAD,
                    mec=_HEAD_EDGE,
                    mew=0.9,
                    label="head",
                )
            )
        if changes:
            handles.append(
                Line2D([], [], color=_CHANGE, lw=0.8, ls=(0, (3, 2)), label="step change")
            )
        if handles:
            ax.legend(
                handles=handles,
                loc="lower right",
                bbox_to_anchor=(1.0, 1.0),
                ncols=len(handles),
                frameon=False,
                borderaxespad=0.2,
                handlelength=1.6,
                columnspacing=1.2,
                handletextpad=0.5,
            )

        ax.set_xlim(-0.7, n - 0.3)
        # Few ticks: each costs about a millisecond to lay out and draw.
        # min_n_ticks=1: a one-run history still gets integer ticks (only run 0 is in view).
        ax.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True, min_n_ticks=1))
        ax.yaxis.set_major_locator(MaxNLocator(nbins=4))
        ax.set_xlabel("run (oldest → newest)")
        ax.set_ylabel(_clean(ylabel))
        return _render(fig, element_id=element_id, titles=titles, aria=aria)


def distribution_svg(
    sides: Sequence[tuple[str, Sequence[float]]],
    *,
    xlabel: str,
    element_id: str,
) -> str:
    """The per-repeat values of each side (e.g. baseline and head), one horizontal row each.

    Each row is a box plot (quartiles, median, whiskers to the furthest value within 1.5 IQR)
    with every value drawn on top as a point, jittered vertically by a seeded generator so the
    chart is deterministic: with few repeats the points say more than the box, and a reader can
    hover any of them to see its exact value. A side with no (finite) values is shown as an empty
    row labelled "no values" rather than left out, so a missing side is visible.

    Raises ``ValueError`` if ``element_id`` is not a valid id (``^[A-Za-z][A-Za-z0-9_-]*$``).
    """
    _check_id(element_id)
    aria = f"Distribution of {_clean(xlabel)} per side"
    if not sides:
        return _placeholder("no values", element_id=element_id, aria=aria)

    rng = np.random.default_rng(0)
    names = [_clean(name) for name, _ in sides]
    short = [name if len(name) <= 32 else name[:31] + "…" for name in names]
    # Per side: the repeat numbers kept, their finite values and each one's vertical jitter. The
    # jitter is drawn for every value, finite or not, so a NaN does not shift the others.
    rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for _, values in sides:
        raw = np.asarray([_to_float(v) for v in values], dtype=float)
        jitter = rng.uniform(-0.17, 0.17, size=raw.size)
        keep = np.isfinite(raw)
        rows.append((np.flatnonzero(keep), raw[keep], jitter[keep]))

    labels = [f"{name} (n={vals.size})" for name, (_, vals, _) in zip(short, rows, strict=True)]
    longest = max(len(label) for label in labels)
    left_in = min(0.25 + 0.052 * longest, 2.6)
    height_in = 0.55 + 0.42 * len(rows)

    with _settings():
        fig = Figure(frameon=False, figsize=(_WIDTH_IN, max(height_in, 1.4)))
        ax = fig.add_axes(_axes_rect(fig, left=left_in, right=0.15, top=0.08, bottom=0.36))
        ax.grid(True, axis="x")
        ax.set_axisbelow(True)
        titles: dict[str, list[tuple[str, str]]] = {}
        for k, (name, (index, vals, jit)) in enumerate(zip(names, rows, strict=True)):
            color = _SIDE_COLORS[k % len(_SIDE_COLORS)]
            if vals.size == 0:
                ax.text(
                    0.5,
                    k,
                    "no values",
                    transform=ax.get_yaxis_transform(),
                    ha="center",
                    va="center",
                    color="#888888",
                    style="italic",
                )
                continue
            _draw_box(ax, vals, y=float(k), color=color)
            # Markers of a line rather than a scatter: one <use> per value, cheap and small.
            (dots,) = ax.plot(
                vals, k + jit, ls="", marker="o", ms=3.2, mew=0, color=color, alpha=0.75, zorder=3
            )
            dots.set_gid(f"side{k}")
            titles[f"side{k}"] = [
                (f"v{k}-{j}", f"{name} · repeat {j + 1} · {_fmt(v)}")
                for j, v in zip(index.tolist(), vals.tolist(), strict=True)
            ]
        if not titles:
            ax.set_xticks([])
        ax.set_yticks(range(len(rows)), labels)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.tick_params(axis="y", length=0)
        ax.spines["left"].set_visible(False)
        ax.set_xlabel(_clean(xlabel))
        return _render(fig, element_id=element_id, titles=titles, aria=aria)


def telemetry_svg(
    t_s: Sequence[float],
    series: Sequence[TelemetrySeries],
    *,
    element_id: str,
    shaded: Sequence[tuple[float, float]] = (),
    measured: tuple[float, float] | None = None,
) -> str:
    """Telemetry over a run: one small panel per series, stacked on a shared seconds axis.

    ``None`` samples stay gaps (an isolated sample between gaps is drawn as a dot so it is not
    lost). ``shaded`` spans, the periods in which the device was throttled, are translucent red
    on every panel, so that a dip in one signal can be matched to throttling in another;
    ``measured`` (start, end) is a light band marking the steps that were timed, since warm-up
    and tail samples outside it did not count.

    Raises ``ValueError`` if ``element_id`` is not a valid id or a series' ``values`` is not as
    long as ``t_s``.
    """
    _check_id(element_id)
    aria = "Telemetry: " + ", ".join(_clean(s.name) for s in series)
    for s in series:
        if len(s.values) != len(t_s):
            raise ValueError(
                f"telemetry series {s.name!r} has {len(s.values)} values for {len(t_s)} times"
            )
    t = np.asarray([_to_float(v) for v in t_s], dtype=float)
    if not series or not np.isfinite(t).any():
        return _placeholder("no telemetry samples", element_id=element_id, aria=aria)

    spans = [p for p in (_finite_pair(s) for s in shaded) if p is not None]
    window = _finite_pair(measured)
    n = len(series)
    top_in, bottom_in, gap_in = 0.2, 0.36, 0.2
    height_in = 1.1 * n
    axes_h = (height_in - top_in - bottom_in - gap_in * (n - 1)) / n

    with _settings():
        fig = Figure(frameon=False, figsize=(_WIDTH_IN, height_in))
        axes: list[Axes] = []
        for k in range(n):
            bottom = bottom_in + (n - 1 - k) * (axes_h + gap_in)
            rect = (0.62 / _WIDTH_IN, bottom / height_in, 1 - 0.74 / _WIDTH_IN, axes_h / height_in)
            axes.append(fig.add_axes(rect))
        legend: list[Patch] = []
        for k, (ax, s) in enumerate(zip(axes, series, strict=True)):
            ax.grid(True, axis="y")
            ax.set_axisbelow(True)
            y = np.asarray([_to_float(v) for v in s.values], dtype=float)
            y[~np.isfinite(t)] = np.nan
            _vspans(ax, spans, color=_THROTTLED, alpha=0.16, zorder=0.5)
            if window is not None:
                _vspans(ax, [window], color=_MEASURED, alpha=0.1, zorder=0.4)
            ok = np.isfinite(y)
            if ok.any():
                ax.plot(t, y, color=_POINT, lw=0.9, solid_joinstyle="round")
                lonely = ok & ~np.r_[False, ok[:-1]] & ~np.r_[ok[1:], False]
                if lonely.any():
                    ax.plot(t[lonely], y[lonely], ls="", marker="o", ms=2.0, color=_POINT)
                ax.yaxis.set_major_locator(MaxNLocator(nbins=2))
            else:
                ax.text(
                    0.5,
                    0.5,
                    "no samples",
                    transform=ax.transAxes,
                    ha="center",
                    va="center",
                    color="#888888",
                    style="italic",
                )
                ax.set_yticks([])
            name, unit = _clean(s.name), _clean(s.unit)
            # A text, not set_title: automatic title placement costs a layout pass per panel.
            ax.text(
                0.0,
                1.0,
                f"{name} ({unit})" if unit else name,
                transform=ax.transAxes,
                ha="left",
                va="bottom",
            )
            if k < n - 1:
                # Only the bottom panel has x ticks: they cost a millisecond each, and the panels
                # share one x range (set below) rather than sharex, which would share the locator.
                ax.xaxis.set_major_locator(NullLocator())
        if spans:
            legend.append(Patch(color=_THROTTLED, alpha=0.16, lw=0, label="throttled"))
        if window is not None:
            legend.append(Patch(color=_MEASURED, alpha=0.1, lw=0, label="measured steps"))
        if legend:
            axes[0].legend(
                handles=legend,
                loc="lower right",
                bbox_to_anchor=(1.0, 1.0),
                ncols=len(legend),
                frameon=False,
                borderaxespad=0.2,
                handlelength=1.4,
                handletextpad=0.5,
                columnspacing=1.2,
            )
        finite_t = t[np.isfinite(t)]
        lo, hi = float(finite_t.min()), float(finite_t.max())
        if hi <= lo:
            lo, hi = lo - 0.5, hi + 0.5
        for ax in axes:
            ax.set_xlim(lo, hi)
        axes[-1].set_xlabel("seconds since start")
        return _render(fig, element_id=element_id, titles={}, aria=aria)


# ---------------------------------------------------------------------------------------------
# Drawing helpers


def _draw_box(ax: Axes, vals: np.ndarray, *, y: float, color: str) -> None:
    """A horizontal box plot at height ``y``: drawn by hand, not with ``Axes.boxplot``, whose
    orientation argument changed across the matplotlib versions perfgate supports."""
    q1, med, q3 = (float(q) for q in np.percentile(vals, [25.0, 50.0, 75.0]))
    reach = 1.5 * (q3 - q1)
    lo = float(vals[vals >= q1 - reach].min())
    hi = float(vals[vals <= q3 + reach].max())
    half = 0.22
    box = Rectangle((q1, y - half), q3 - q1, 2 * half, lw=0.8, zorder=2)
    box.set_facecolor(to_rgba(color, 0.14))  # translucent fill, opaque edge: alpha stays unset
    box.set_edgecolor(color)
    ax.add_patch(box)
    nan = math.nan
    cap = half / 2
    ax.plot(
        [lo, q1, nan, q3, hi, nan, lo, lo, nan, hi, hi],
        [y, y, nan, y, y, nan, y - cap, y + cap, nan, y - cap, y + cap],
        color=color,
        lw=0.8,
        zorder=2,
    )
    ax.plot([med, med], [y - half, y + half], color=color, lw=1.8, zorder=2.5)


@contextlib.contextmanager
def _settings() -> Iterator[None]:
    """Matplotlib's defaults plus ``_RC`` for the duration of one chart, then the caller's own.

    Starting from the defaults, not from whatever ``matplotlibrc`` or style the process has,
    keeps the output identical across machines (usetex, a dark style...).
    """
    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        with matplotlib.rc_context(_RC):
            yield


def _vspans(
    ax: Axes, spans: Sequence[tuple[float, float]], *, color: str, alpha: float, zorder: float
) -> None:
    """Full-height x spans, as ``axvspan`` draws them, but as one collection per call: a
    telemetry chart has a few spans on every panel, and each ``axvspan`` costs half a
    millisecond to create. They do not widen the x range (that is the samples' range)."""
    if not spans:
        return
    verts = [[(a, 0.0), (b, 0.0), (b, 1.0), (a, 1.0)] for a, b in spans]
    shade = PolyCollection(
        verts, transform=ax.get_xaxis_transform(), facecolors=color, alpha=alpha, linewidths=0
    )
    shade.set_zorder(zorder)
    ax.add_collection(shade, autolim=False)


def _placeholder(message: str, *, element_id: str, aria: str) -> str:
    """A one-line chart that says why there is nothing to draw, instead of failing the report."""
    with _settings():
        fig = Figure(frameon=False, figsize=(_WIDTH_IN, 0.45))
        fig.text(0.5, 0.5, message, ha="center", va="center", color="#888888", style="italic")
        return _render(fig, element_id=element_id, titles={}, aria=aria)


def _axes_rect(
    fig: Figure, *, left: float, right: float, top: float, bottom: float
) -> tuple[float, float, float, float]:
    """An axes rectangle from margins in inches: fixed margins instead of a layout engine,
    because constrained or tight layout would cost a second draw for every chart."""
    width, height = fig.get_size_inches()
    return (
        left / width,
        bottom / height,
        1.0 - (left + right) / width,
        1.0 - (top + bottom) / height,
    )


def _check_id(element_id: str) -> None:
    """Reject an id that would not be a valid, unambiguous HTML/SVG id and CSS selector."""
    if not isinstance(element_id, str) or not _ID_RE.fullmatch(element_id):
        raise ValueError(f"element_id must match {_ID_RE.pattern}, got {element_id!r}")


def _clean(text: object) -> str:
    """Text with the characters XML 1.0 cannot hold removed, so no label can break the page."""
    return _XML_INVALID_RE.sub("", str(text))


def _to_float(value: object) -> float:
    """A float, or NaN for ``None``, non-numbers and infinities: they are all "no value here"."""
    if value is None:
        return math.nan
    try:
        f = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan
    return f if math.isfinite(f) else math.nan


def _is_finite(value: object) -> bool:
    return math.isfinite(_to_float(value))


def _finite_pair(pair: tuple[float, float] | None) -> tuple[float, float] | None:
    """``(low, high)`` in order, or ``None`` when either end is missing or not finite."""
    if pair is None:
        return None
    a, b = _to_float(pair[0]), _to_float(pair[1])
    if not (math.isfinite(a) and math.isfinite(b)) or a == b:
        return None
    return (a, b) if a < b else (b, a)


def _fmt(value: float) -> str:
    return f"{value:.6g}"


# ---------------------------------------------------------------------------------------------
# SVG post-processing


def _render(
    fig: Figure, *, element_id: str, titles: Mapping[str, Sequence[tuple[str, str]]], aria: str
) -> str:
    """Write ``fig`` as SVG (call inside the ``rc_context``) and rewrite it for inlining."""
    FigureCanvasSVG(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    return _rewrite(buf.getvalue(), element_id=element_id, titles=titles, aria=aria)


def _rewrite(
    data: bytes, *, element_id: str, titles: Mapping[str, Sequence[tuple[str, str]]], aria: str
) -> str:
    """Matplotlib's SVG document turned into an ``<svg>`` element that can share a page.

    ``titles`` maps the gid of a marker artist to one ``(id, hover text)`` per drawn point, in
    drawing order. Ids matplotlib made that something refers to (clip paths, marker paths) are
    renamed ``{element_id}-d{n}`` in document order, ours ``{element_id}-{id}``, and the rest are
    dropped (``axes_1``, ``line2d_3``...: unused, and identical in every chart). Style attributes
    repeated on several elements become classes of a ``<style>`` scoped to the chart, since a
    ``<style>`` inside inline SVG applies to the whole page.
    """
    root = ET.fromstring(data)
    for child in list(root):
        if child.tag == _SVG + "metadata":
            root.remove(child)
    own = _attach_titles(root, titles)

    referenced: set[str] = set()
    for el in root.iter():
        for key, value in el.attrib.items():
            if key in (_XLINK_HREF, "href"):
                if value.startswith("#"):
                    referenced.add(value[1:])
            elif "url(#" in value:
                referenced.update(_URL_REF_RE.findall(value))

    prefix = element_id + "-"
    renamed: dict[str, str] = {}
    serial = itertools.count()

    def rename(old: str) -> str:
        new = renamed.get(old)
        if new is None:
            # Our ids never are "d" and a number: see the gids and point ids chosen above.
            new = prefix + old if old in own else f"{prefix}d{next(serial)}"
            renamed[old] = new
        return new

    def renamed_url(m: re.Match[str]) -> str:
        return f"url(#{rename(m.group(1))})"

    css: list[str] = []
    styled: list[tuple[ET.Element, str]] = []
    font_family = ""
    parents = {child: el for el in root.iter() for child in el}
    for el in list(root.iter()):
        tag = el.tag
        if el.text is not None and tag not in _TEXT_TAGS and not el.text.strip():
            el.text = None
        if el.tail is not None and tag != _SVG + "tspan" and not el.tail.strip():
            el.tail = None
        if tag == _SVG + "style":
            # Matplotlib's "*{stroke-linejoin: round; ...}" would restyle every SVG on the page.
            rule = (el.text or "").strip()
            css.append(rule.replace("*{", f"#{element_id} *{{") if rule.startswith("*") else rule)
            parents[el].remove(el)
            continue
        attrib = el.attrib
        for key, value in list(attrib.items()):
            if key == "d":
                attrib[key] = _compact_path(value)
            elif key == "style":
                if tag == _SVG + "text":
                    # The font list is the same on every label: said once, in the style sheet.
                    found = _FONT_FAMILY_RE.search(value)
                    if found and (not font_family or found.group(1) == font_family):
                        font_family = found.group(1)
                        value = _FONT_FAMILY_RE.sub("", value)
                compact = ";".join(
                    ":".join(part.strip() for part in decl.split(":", 1))
                    for decl in value.split(";")
                    if decl.strip()
                )
                del attrib[key]
                if compact:
                    styled.append((el, compact))
            elif key == "transform" and _NO_ROTATION_RE.fullmatch(value):
                del attrib[key]
            elif key == "id":
                if value in referenced or value in own:
                    attrib[key] = rename(value)
                else:
                    del attrib[key]
            elif key in (_XLINK_HREF, "href"):
                if value.startswith("#"):
                    attrib[key] = "#" + rename(value[1:])
            elif "url(#" in value:
                attrib[key] = _URL_REF_RE.sub(renamed_url, value)
            elif key in _GEOMETRY_ATTRS:
                attrib[key] = _LONG_FLOAT_RE.sub(_round_number, value)
    for el in list(root.iter(_SVG + "defs")):
        if len(el) == 0 and el in parents:
            parents[el].remove(el)

    if font_family:
        css.append(f"#{element_id} text{{font-family:{font_family}}}")
    counts: dict[str, int] = {}
    for _, style in styled:
        counts[style] = counts.get(style, 0) + 1
    classes: dict[str, str] = {}
    for el, style in styled:
        if counts[style] < 2:
            el.set("style", style)
            continue
        name = classes.get(style)
        if name is None:
            name = classes[style] = f"s{len(classes)}"
            css.append(f"#{element_id} .{name}{{{style}}}")
        el.set("class", name)
    sheet = ET.Element(_SVG + "style")
    sheet.text = "".join(css)
    root.insert(0, sheet)

    width_pt = _to_float(root.attrib.pop("width", "").removesuffix("pt"))
    root.attrib.pop("height", None)
    root.attrib.pop("id", None)
    attrs = {
        "xmlns": _SVG_NS,
        "xmlns:xlink": _XLINK_NS,
        "id": element_id,
        "class": "perfgate-chart",
        "role": "img",
        "aria-label": _clean(aria),
    }
    natural = f"width:{width_pt * _PX_PER_PT:.0f}px;" if math.isfinite(width_pt) else ""
    attrs["style"] = natural + "max-width:100%;height:auto"
    attrs.update({_attr_name(k): v for k, v in root.attrib.items() if _attr_name(k)})
    out: list[str] = ["<svg"]
    out.extend(f' {key}="{_escape_attr(value)}"' for key, value in attrs.items())
    out.append(">")
    for child in root:
        _serialize(child, out)
    out.append("</svg>")
    return "".join(out)


def _attach_titles(root: ET.Element, titles: Mapping[str, Sequence[tuple[str, str]]]) -> set[str]:
    """Wrap each marker drawn by an artist whose gid is in ``titles`` in a ``<g id=...>`` that
    holds a ``<title>``, the one hover mechanism browsers support in a static SVG. Returns the
    ids made.

    Matplotlib writes such an artist as a group holding, per drawn point and in order, a
    ``<use>`` of a shared marker path (or an inline ``<path>``), maybe inside clip groups, and
    the marker definition inside ``<defs>``. If the count does not match the titles (a matplotlib
    change), that group gets none: a missing hover text is better than a wrong one.
    """
    made: set[str] = set()
    if not titles:
        return made
    groups = [el for el in root.iter(_SVG + "g") if el.get("id") in titles]
    for group in groups:
        gid = group.get("id", "")
        made.add(gid)
        slots: list[tuple[ET.Element, int]] = []
        _find_markers(group, slots)
        texts = titles[gid]
        if len(slots) != len(texts):
            continue
        for (parent, index), (point_id, text) in zip(slots, texts, strict=True):
            marker = parent[index]
            wrapper = ET.Element(_SVG + "g", {"id": point_id})
            wrapper.tail, marker.tail = marker.tail, None
            ET.SubElement(wrapper, _SVG + "title").text = _clean(text)
            wrapper.append(marker)
            parent[index] = wrapper
            made.add(point_id)
    return made


def _find_markers(parent: ET.Element, slots: list[tuple[ET.Element, int]]) -> None:
    """``(parent, index)`` of every ``<use>`` or ``<path>`` under ``parent``, outside ``<defs>``."""
    for index, child in enumerate(parent):
        if child.tag in (_SVG + "use", _SVG + "path"):
            slots.append((parent, index))
        elif child.tag != _SVG + "defs":
            _find_markers(child, slots)


def _compact_path(d: str) -> str:
    """Path data with coordinates rounded to 0.01 pt and no blanks around the commands."""
    d = " ".join(_LONG_FLOAT_RE.sub(_round_number, d).split())
    return _PATH_SPACE_RE.sub(r"\1", d)


def _round_number(m: re.Match[str]) -> str:
    text = f"{float(m.group()):.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


_XML_NS = "{http://www.w3.org/XML/1998/namespace}"


def _attr_name(key: str) -> str:
    """The serialised name of an attribute; empty for one in a namespace we do not write."""
    if not key.startswith("{"):
        return key
    if key.startswith("{" + _XLINK_NS + "}"):
        return "xlink:" + key[len(_XLINK_NS) + 2 :]
    if key.startswith(_XML_NS):
        return "xml:" + key[len(_XML_NS) :]
    return ""


def _serialize(el: ET.Element, out: list[str]) -> None:
    """Append ``el`` as SVG markup with the SVG namespace as the default one."""
    if not el.tag.startswith(_SVG):
        return  # foreign markup (none is expected): dropped rather than mis-prefixed
    tag = el.tag[len(_SVG) :]
    if tag == "g" and not el.attrib:
        # A group without attributes does nothing: matplotlib nests many once ids are gone.
        for child in el:
            _serialize(child, out)
        if el.tail:
            out.append(_escape_text(el.tail))
        return
    out.append("<" + tag)
    for key, value in el.attrib.items():
        name = _attr_name(key)
        if name:
            out.append(f' {name}="{_escape_attr(value)}"')
    if len(el) == 0 and not el.text:
        out.append("/>")
    else:
        out.append(">")
        if el.text:
            out.append(_escape_text(el.text))
        for child in el:
            _serialize(child, out)
        out.append(f"</{tag}>")
    if el.tail:
        out.append(_escape_text(el.tail))


def _escape_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escape_attr(text: str) -> str:
    return (
        _escape_text(text)
        .replace('"', "&quot;")
        .replace("\n", "&#10;")
        .replace("\r", "&#13;")
        .replace("\t", "&#9;")
    )
