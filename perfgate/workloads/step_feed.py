"""The step feed: a training script's step boundaries, shared with ``perfgate monitor``.

A script that marks its steps (``with session.step():``, ``perfgate.workloads.session``) and
runs with ``PERFGATE_MONITOR_FEED=PATH`` in its environment (``perfgate monitor -- CMD`` sets
it) writes, at the end of every step, a few counters into a small memory-mapped file: steps
taken, seconds inside steps, seconds between them, samples and tokens per step. The monitor
reads the file at its own pace (a few times a second) and turns differences into step time,
throughput and the share of time spent outside the step (waiting for data, logging).

A step costs the script two ``perf_counter`` calls and one ``struct.pack_into`` into the
mapped page (about a microsecond); no system call, no lock, no thread. A reader never sees a
half-written record: the writer bumps a sequence number to odd before writing and to even
after, and the reader retries until it reads the same even number on both sides.

No torch import, no perfgate import beyond the standard library: the session module imports
it before a script builds anything.
"""

from __future__ import annotations

import mmap
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path

ENVIRONMENT = "PERFGATE_MONITOR_FEED"
"""The variable naming the feed file; unset, scripts write nothing."""
MAGIC = b"PGSF"
_HEADER = struct.Struct("<4sQ")
"""magic, sequence number (odd while a write is under way)."""
_BODY = struct.Struct("<QddQQ")
"""steps, seconds in steps, seconds between steps, samples and tokens per step."""
SIZE = mmap.PAGESIZE


@dataclass(frozen=True)
class FeedReading:
    """The feed's counters at one moment (cumulative since the script's first step)."""

    steps: int
    busy_s: float
    """Seconds inside ``with session.step():`` blocks."""
    idle_s: float
    """Seconds from the end of one step to the start of the next."""
    samples_per_step: int
    tokens_per_step: int


def create_feed(path: Path) -> None:
    """An empty feed file of one page (the monitor makes it before it starts the job)."""
    with path.open("wb") as handle:
        record = _HEADER.pack(MAGIC, 0) + _BODY.pack(0, 0.0, 0.0, 0, 0)
        handle.write(record.ljust(SIZE, b"\0"))


class FeedWriter:
    """The script's side: counts steps into the mapped file."""

    def __init__(self, path: Path) -> None:
        if not path.exists() or path.stat().st_size < SIZE:
            create_feed(path)
        with path.open("r+b") as handle:
            self._map = mmap.mmap(handle.fileno(), SIZE)
        self._sequence = 0
        self._steps = 0
        self._busy = 0.0
        self._idle = 0.0
        self._samples = 0
        self._tokens = 0
        self._began = 0.0
        self._ended: float | None = None

    def describe(self, samples_per_step: int, tokens_per_step: int | None) -> None:
        """The script's throughput units (its session's)."""
        self._samples, self._tokens = samples_per_step, tokens_per_step or 0
        self._write()

    def begin(self) -> None:
        now = time.perf_counter()
        if self._ended is not None:
            self._idle += now - self._ended
        self._began = now

    def end(self) -> None:
        now = time.perf_counter()
        self._busy += now - self._began
        self._steps += 1
        self._ended = now
        self._write()

    def _write(self) -> None:
        self._sequence += 1  # odd: a write is under way
        _HEADER.pack_into(self._map, 0, MAGIC, self._sequence)
        _BODY.pack_into(
            self._map, _HEADER.size, self._steps, self._busy, self._idle, self._samples,
            self._tokens,
        )  # fmt: skip
        self._sequence += 1
        _HEADER.pack_into(self._map, 0, MAGIC, self._sequence)


def feed_from_environment() -> FeedWriter | None:
    """The writer of the feed named by :data:`ENVIRONMENT`, or None (not monitored, or the
    file cannot be mapped: a monitor must never break the training it watches)."""
    path = os.environ.get(ENVIRONMENT)
    if not path:
        return None
    try:
        return FeedWriter(Path(path))
    except (OSError, ValueError):
        return None


class FeedReader:
    """The monitor's side: consistent readings of the feed."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._map: mmap.mmap | None = None

    def read(self) -> FeedReading | None:
        """The newest consistent reading; None while the file is missing or not a feed."""
        if self._map is None:
            try:
                with self._path.open("rb") as handle:
                    self._map = mmap.mmap(handle.fileno(), SIZE, access=mmap.ACCESS_READ)
            except (OSError, ValueError):
                return None
        for _ in range(100):
            magic, before = _HEADER.unpack_from(self._map, 0)
            if magic != MAGIC:
                return None
            steps, busy, idle, samples, tokens = _BODY.unpack_from(self._map, _HEADER.size)
            if before % 2 == 0 and _HEADER.unpack_from(self._map, 0)[1] == before:
                return FeedReading(steps, busy, idle, samples, tokens)
        return None
