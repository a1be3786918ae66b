"""Processes the measured code left behind: adopted, then killed, before anything is judged.

Code under test can start a process that leaves its worker's session and process group
(``setsid`` after a double fork, the way daemons do): killing the worker's group misses it, and
an orphan is normally adopted by init, out of perfgate's sight. Such a process could go on
running while the base side of an A/B is measured (slowing it, to flatter the head), or write
into the gate's output folder after the verdict is written. The gate therefore makes itself the
*child subreaper* of everything below it (``PR_SET_CHILD_SUBREAPER``, Linux 3.4+): an orphan
of any of its descendants is re-parented to the gate, so it stays a descendant, and
:func:`kill_strays` kills every descendant the gate did not already have when it started.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Collection

import psutil

PR_SET_CHILD_SUBREAPER = 36
"""``prctl`` option (``<linux/prctl.h>``): orphans below this process are re-parented to it."""

STRAY_WAIT_S = 10.0
"""How long to wait for killed strays to be gone (a SIGKILL is final; a loaded machine can take
a moment to show it)."""


def adopt_orphans() -> bool:
    """Make this process the subreaper of its descendants; False where the kernel cannot."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def descendants() -> set[int]:
    """The pids of every living descendant of this process."""
    with contextlib.suppress(psutil.Error):
        return {p.pid for p in psutil.Process().children(recursive=True)}
    return set()


def kill_strays(spared: Collection[int] = ()) -> list[int]:
    """Kill (SIGKILL) every descendant not in ``spared``, wait for them, and return their pids.

    The pids are killed one by one, never by process group: a stray may share a group with
    something that must live. Zombies re-parented to this process are reaped by the wait.
    """
    try:
        found = [p for p in psutil.Process().children(recursive=True) if p.pid not in spared]
    except psutil.Error:
        return []
    for process in found:
        with contextlib.suppress(psutil.Error):
            process.send_signal(signal.SIGKILL)
    with contextlib.suppress(psutil.Error):
        psutil.wait_procs(found, timeout=STRAY_WAIT_S)
    for process in found:  # a re-parented zombie is our child now: reap it
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(process.pid, os.WNOHANG)
    return [p.pid for p in found]
