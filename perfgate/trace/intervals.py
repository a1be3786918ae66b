"""Sets of time intervals as sorted lists of disjoint ``(start, end)`` pairs.

:func:`merge` makes such a list from any intervals; the other functions take merged lists.
"""

from __future__ import annotations

from collections.abc import Iterable

from perfgate.trace.model import Interval


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """The union of possibly overlapping intervals, as a sorted list of disjoint ones."""
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def intersect(first: list[Interval], second: list[Interval]) -> list[Interval]:
    """The time covered by both of two merged lists."""
    result: list[Interval] = []
    i = j = 0
    while i < len(first) and j < len(second):
        start, end = max(first[i][0], second[j][0]), min(first[i][1], second[j][1])
        if start < end:
            result.append((start, end))
        if first[i][1] < second[j][1]:
            i += 1
        else:
            j += 1
    return result


def subtract(kept: list[Interval], removed: list[Interval]) -> list[Interval]:
    """The time of one merged list not covered by another."""
    result: list[Interval] = []
    j = 0
    for start, end in kept:
        while j < len(removed) and removed[j][1] <= start:
            j += 1
        cursor, k = start, j
        while k < len(removed) and removed[k][0] < end:
            if removed[k][0] > cursor:
                result.append((cursor, removed[k][0]))
            cursor = max(cursor, removed[k][1])
            k += 1
        if cursor < end:
            result.append((cursor, end))
    return result


def length(intervals: list[Interval]) -> float:
    """Total length of a merged list."""
    return sum(end - start for start, end in intervals)


def touches(interval: Interval, windows: list[Interval]) -> bool:
    """Whether ``interval`` overlaps any of ``windows`` by more than a point."""
    start, end = interval
    return any(start < w_end and end > w_start for w_start, w_end in windows)
