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

After matplotlib has written the SVG, ``perfgate.report.svg`` rewrites it so that several charts
can share one HTML page (page-unique ids, a style sheet scoped to the chart, hover titles on the
data points, rounded coordinates).
"""

from __future__ import annotations

import contextlib
import io
import math
import re
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

from perfgate.report.svg import clean_text, inline_svg

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

_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")

_WIDTH_IN = 7.0

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
    aria = f"History of {clean_text(ylabel)} over the last {len(points)} runs"
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
        ax.set_ylabel(clean_text(ylabel))
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
    aria = f"Distribution of {clean_text(xlabel)} per side"
    if not sides:
        return _placeholder("no values", element_id=element_id, aria=aria)

    rng = np.random.default_rng(0)
    names = [clean_text(name) for name, _ in sides]
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
        ax.set_xlabel(clean_text(xlabel))
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
    aria = "Telemetry: " + ", ".join(clean_text(s.name) for s in series)
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
            name, unit = clean_text(s.name), clean_text(s.unit)
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
    return inline_svg(buf.getvalue(), element_id=element_id, titles=titles, aria=aria)
