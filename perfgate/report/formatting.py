"""How perfgate writes numbers, units and intervals, for every surface: the terminal tables,
the PR comment and job summary, and the HTML report.

One module, so a step time, a FLOP rate or a change reads the same wherever it is shown.
Renderers only format; nothing here decides.
"""

from __future__ import annotations

from collections.abc import Sequence

from perfgate.documents.verdict import Mover, WorkChange


def format_seconds(value: float) -> str:
    """Seconds with a unit that keeps three significant digits readable."""
    if value >= 1:
        return f"{value:.3f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.2f} ms"
    return f"{value * 1e6:.1f} µs"


def format_flops(tflops: float | None) -> str:
    """Achieved FLOP rate with a unit (CPU runs reach GFLOP/s, GPUs hundreds of TFLOP/s)."""
    if tflops is None:
        return "—"
    if tflops >= 1:
        return f"{tflops:.1f} T"
    return f"{tflops * 1e3:.1f} G"


def format_bytes(value: int | None) -> str:
    """Binary-prefixed bytes, or a dash when unknown."""
    if value is None:
        return "—"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def format_value(metric: str, value: float) -> str:
    """A metric's value in its unit, as the terminal table's readers know it."""
    if metric == "step_time_s":
        return format_seconds(value)
    if metric == "peak_memory_bytes":
        return format_bytes(round(value))
    if metric == "mfu":
        return f"{value:.1%}"
    if metric == "tflops":
        return format_tflops(value)
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def format_tflops(tflops: float) -> str:
    """A FLOP rate with the unit a reader expects: GFLOP/s on a CPU, TFLOP/s on a GPU."""
    return f"{tflops:.1f} TFLOP/s" if tflops >= 1 else f"{tflops * 1e3:.1f} GFLOP/s"


def format_bandwidth(bytes_per_s: float) -> str:
    """Bytes per second in decimal GB/s, as bandwidths are quoted on datasheets."""
    return f"{bytes_per_s / 1e9:.1f} GB/s"


def signed(ratio: float) -> str:
    """A worse-is-greater ratio as a signed percentage: 1.081 → ``+8.1``."""
    return f"{(ratio - 1) * 100:+.1f}"


def signed_percent(ratio: float) -> str:
    """A worse-is-greater ratio as a signed change: 1.081 → ``+8.1 %`` (positive is worse)."""
    return f"{signed(ratio)} %"


def change_interval(low: float, high: float) -> str:
    """An interval of worse-is-greater ratios as signed percentages: ``+2.0 … +9.7 %``."""
    return f"{signed(low)} … {signed(high)} %"


METRIC_LABELS = {
    "step_time_s": "step time",
    "samples_per_s": "samples/s",
    "tokens_per_s": "tokens/s",
    "tflops": "TFLOP/s",
    "mfu": "MFU",
    "peak_memory_bytes": "peak memory",
}
"""What a reader calls each gated metric (its unit where it is a rate)."""


def metric_label(metric: str) -> str:
    """The reader's name of ``metric`` (an unknown one as it is)."""
    return METRIC_LABELS.get(metric, metric)


def own_change(ratio: float, direction: str) -> float:
    """The metric's own relative change from a worse-is-greater ratio: a step 25 % longer is
    ``+0.25``, and the throughput that follows from it ``-0.20`` (a rate's ratio is
    baseline ÷ head, so its own change is the inverse)."""
    return ratio - 1 if direction == "lower" else 1 / ratio - 1


def own_interval(low: float, high: float, direction: str) -> tuple[str, str]:
    """The ends of a worse-is-greater interval as the metric's own signed changes, lowest
    first (``+20.0``, ``+28.0``; a rate's ends swap as they invert)."""
    ends = sorted((own_change(low, direction), own_change(high, direction)))
    return f"{ends[0] * 100:+.1f}", f"{ends[1] * 100:+.1f}"


def own_percent(ratio: float, direction: str) -> str:
    """The metric's own change, signed: ``+25.0 %`` for a step time, ``-20.0 %`` for the
    throughput it gives."""
    return f"{own_change(ratio, direction) * 100:+.1f} %"


def change_with_interval(ratio: float, low: float, high: float, direction: str) -> str:
    """A metric's own change and its 90 % interval, signed: ``+25.0 % (+20.0 … +28.0 %)`` for
    a step time, ``-20.0 % (-21.9 … -16.7 %)`` for the throughput it gives."""
    first, last = own_interval(low, high, direction)
    return f"{own_percent(ratio, direction)} ({first} … {last} %)"


WORK_LABELS = {
    "operators": "operators dispatched",
    "allocations": "allocations",
    "allocated_bytes": "bytes allocated",
    "host_syncs": "host syncs",
    "host_to_device_bytes": "host→device bytes",
    "device_to_host_bytes": "device→host bytes",
    "collectives": "collectives",
    "collective_bytes": "collective bytes",
}
"""A step's exact work counters as a reader names them; an operator is named as it is."""


def work_change_parts(counter: str, base: int, head: int) -> tuple[str, str, str, str]:
    """One changed work counter per step as (label, base, head, change): bytes with their
    unit, an operator's dispatches by its name, the change signed with its relative size
    (``+1, +50 %``; ``new`` or ``gone`` when a side had none)."""
    label = WORK_LABELS.get(counter, counter)
    show = format_bytes if counter.endswith("_bytes") else str
    delta = head - base
    sign = "+" if delta > 0 else "-"
    if base == 0:
        relative = "new"
    elif head == 0:
        relative = "gone"
    else:
        relative = f"{delta / base * 100:+.0f} %"
    return label, show(base), show(head), f"{sign}{show(abs(delta))}, {relative}"


def work_change_text(counter: str, base: int, head: int) -> str:
    """``host syncs 2 → 3 (+1, +50 %)``, ``aten.clone 0 → 1 (+1, new)``."""
    label, before, after, change = work_change_parts(counter, base, head)
    return f"{label} {before} → {after} ({change})"


def work_summary(changes: Sequence[WorkChange], limit: int = 4) -> str:
    """The first ``limit`` changed counters in one line, and how many more there are."""
    shown = "; ".join(work_change_text(c.counter, c.base, c.head) for c in changes[:limit])
    more = len(changes) - limit
    return shown + (f"; {more} more" if more > 0 else "")


def format_microseconds(us: float) -> str:
    """A time per step given in µs, with the unit that reads best (``3.1 ms``, ``90 µs``)."""
    return format_seconds(abs(us) / 1e6) if us else "0 µs"


def mover_parts(
    name: str, change: str, base: tuple[float, float], head: tuple[float, float],
    delta: tuple[float, float],
) -> tuple[str, str, str]:  # fmt: skip
    """An attributed op or kernel as (name and how it moved, time per step, calls per step):
    ``aten::copy_ (slower)``, ``+3.1 ms/step (+2.9 … +3.3 ms, +408 %)``, ``48/step, was 12``.
    ``base`` and ``head`` are (calls, µs) per step; ``delta`` the range of the time's change."""
    (base_calls, base_us), (head_calls, head_us) = base, head
    moved = head_us - base_us
    sign = "+" if moved >= 0 else "-"
    relative = f", {moved / base_us * 100:+.0f} %" if base_us > 0 and head_us > 0 else ""
    low, high = delta
    spread = f"{_signed_us(low)} … {_signed_us(high)}"
    time_text = f"{sign}{format_microseconds(moved)}/step ({spread}{relative})"
    calls = f"{head_calls:g}/step, was {base_calls:g}"
    return f"{name} ({change})", time_text, calls


def _signed_us(us: float) -> str:
    return f"{'+' if us >= 0 else '-'}{format_microseconds(us)}"


def mover_cells(mover: Mover) -> tuple[str, str, str]:
    """One attributed op or kernel as every renderer shows it: (name and how it moved, time
    per step, calls per step)."""
    return mover_parts(
        mover.name,
        mover.change,
        (mover.base_calls, mover.base_us),
        (mover.head_calls, mover.head_us),
        (mover.delta_low_us, mover.delta_high_us),
    )
