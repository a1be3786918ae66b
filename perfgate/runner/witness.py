"""The parent's clock witnesses the worker's measured window: step times the worker reports
must account for the time the parent saw pass.

Every timing a worker reports comes from inside the process that runs the code under test, so
that code can lie about it: a pull request that patched ``time.perf_counter`` (or perfgate's
timer) to leave out its own extra work reported the old step time and passed. The parent cannot
time the steps itself, but it can time the *window* that holds them. The worker writes a marker
line to a FIFO the parent reads (``begin R`` right after the boundary that starts its measured
steps, ``end R`` right after the last one is known to be done — on a GPU after the
synchronisation that ends the window; ``R`` is the rank, 0 for a single process), and a thread of
the parent stamps each line with the parent's monotonic clock as it arrives. The measured steps
are contiguous (each boundary mark ends one step and starts the next, ``perfgate.runner.timing``),
so their sum *is* the worker's window by its own clock, and must match the parent's within the
marker's delivery time (:func:`window_problem`). Time left out of the steps shows up as a window
longer than the steps; a clock made to run slow, the same; a window never reported (the FIFO
closed, markers not written) is a problem too.

This binds what the worker reports to the parent's clock; it does not make a compromised worker
honest about *which* work it timed (see the README's threat model for what remains).
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

RELATIVE_TOLERANCE = 0.05
"""How far (as a share of the parent's window) the reported steps may fall from it."""
ABSOLUTE_TOLERANCE_S = 0.05
"""Plus this much: the markers' delivery to the parent's reading thread, which a loaded
machine can delay by a scheduling slice or two at each end of the window."""


def window_problem(
    windows: Mapping[int, float],
    steps: Mapping[int, Sequence[float]],
    relative: float = RELATIVE_TOLERANCE,
    absolute_s: float = ABSOLUTE_TOLERANCE_S,
) -> str | None:
    """Why the reported steps do not fit the windows the parent saw, or None when they do.

    ``windows``: rank → seconds between that rank's ``begin`` and ``end`` markers by the
    parent's clock; ``steps``: rank → the measured step times the worker reported.
    """
    for rank, times in sorted(steps.items()):
        whose = f"rank {rank}'s" if len(steps) > 1 else "the worker's"
        if rank not in windows:
            return f"{whose} measured window never reached the parent (its markers were lost)"
        window, reported = windows[rank], sum(times)
        slack = relative * window + absolute_s
        if abs(window - reported) > slack:
            return (
                f"{whose} clock disagrees with the parent's: its steps add up to "
                f"{reported:.3g} s of the {window:.3g} s window the parent saw "
                f"(±{slack:.2g} s allowed)"
            )
    return None


class ClockWitness:
    """The parent's side: a FIFO in ``folder`` and a thread stamping its marker lines."""

    def __init__(self, folder: Path, label: str) -> None:
        self.path = folder / f"{label}.clock"
        os.mkfifo(self.path, 0o600)
        self._read = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        # Held open so that the FIFO never reads as ended before the worker opens it.
        self._keep = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
        self._stamps: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="clock-witness", daemon=True)
        self._thread.start()

    def windows(self) -> dict[int, float]:
        """Rank → seconds between its first ``begin`` and its first ``end``, by this clock."""
        with self._lock:
            stamps = dict(self._stamps)
        return {
            rank: stamps[("end", rank)] - begin
            for (kind, rank), begin in stamps.items()
            if kind == "begin" and ("end", rank) in stamps
        }

    def close(self) -> None:
        """Stop listening and remove the FIFO (idempotent)."""
        if self._stop.is_set():
            return
        self._stop.set()
        with contextlib.suppress(OSError):
            os.write(self._keep, b"\n")  # wakes the thread
        self._thread.join(timeout=5)
        for fd in (self._keep, self._read):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> ClockWitness:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _listen(self) -> None:
        pending = b""
        while not self._stop.is_set():
            readable, _, _ = select.select([self._read], [], [], 1.0)
            if not readable:
                continue
            now = time.monotonic()
            try:
                data = os.read(self._read, 4096)
            except BlockingIOError:
                continue
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                self._stamp(line, now)

    def _stamp(self, line: bytes, now: float) -> None:
        kind, _, rank_text = line.decode("ascii", "replace").partition(" ")
        if kind not in ("begin", "end") or not rank_text.isdigit():
            return
        with self._lock:
            self._stamps.setdefault((kind, int(rank_text)), now)


class WindowReporter:
    """The worker's side: writes the markers to the parent's FIFO (never raising: a worker
    whose markers are lost is judged by the parent, not crashed by the reporter)."""

    def __init__(self, path: Path | str | None, rank: int) -> None:
        self._rank = rank
        self._fd: int | None = None
        if path:
            with contextlib.suppress(OSError):
                self._fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)

    def begin(self) -> None:
        self._write("begin")

    def end(self) -> None:
        self._write("end")

    def _write(self, kind: str) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.write(self._fd, f"{kind} {self._rank}\n".encode())
