"""Every process perfgate starts dies with it, however perfgate ends.

A worker runs in a session of its own (``perfgate.runner.process``: so that killing its group
takes its DataLoader workers along), which also means that a signal to perfgate's own process
group never reaches it. A CI runner that cancels a job, or a Ctrl-C, would then leave training
processes burning the CPU or GPU under the next job's measurements. Two mechanisms, one for each
way perfgate can end:

- **perfgate is killed outright (SIGKILL, a crash).** Nothing of perfgate runs any more, so the
  kernel must do it: every process perfgate starts asks, first thing, to be sent SIGKILL when its
  parent dies (``perfgate.parent.die_with_parent``, ``PR_SET_PDEATHSIG``; in a module of its
  own, below the runner, because torchrun's agent in ``perfgate.distributed`` asks too). A
  worker's DataLoader workers are its forked children, in its process group: PyTorch's own
  watchdog ends them once the worker is gone (it checks ``os.getppid()`` every 5 s).
- **perfgate is asked to stop (SIGTERM, SIGINT, SIGHUP).** The CLI's handler
  (:func:`stop_on_signals`) kills the process tree of every registered worker and fork server
  (:func:`tracked`) at once, then unwinds with :class:`Interrupted` so that scratch folders are
  removed; the CLI exits ``128 + the signal's number`` (130 SIGINT, 143 SIGTERM, 129 SIGHUP),
  as a shell reports a process killed by that signal. A second signal exits at once. The parent
  death signal remains the safety net for a worker started in the instant before it was
  registered: it dies when perfgate exits.

The kernel sends the parent-death signal when the **thread** that started the child exits, not
the process. perfgate starts a worker from the thread that then waits for it (``run_worker``
returns only once the worker is dead), and the fork server from the thread of the first repeat
that needs it: a launcher (``perfgate.runner.forkserver.worker_launcher``) must be used by one
thread, which outlives it (in the CLI, the main thread). The fork server and torchrun's agent
start their children from their own main threads.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Protocol

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Running(Protocol):
    """A started process as the registry sees it: a ``subprocess.Popen`` or a forked worker."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...


_LIVE: set[Running] = set()
_stopping = False


class Interrupted(BaseException):
    """perfgate was asked to stop by a signal; every registered process is already dead.

    A ``BaseException``, like ``KeyboardInterrupt``, so that no ``except Exception`` records it
    as a workload's failure and carries on with the next one.
    """

    def __init__(self, number: int) -> None:
        self.exit_code = 128 + number
        super().__init__(f"interrupted by {signal.Signals(number).name}")


@contextmanager
def tracked(process: Running) -> Iterator[None]:
    """Register ``process`` as live while the block runs (see :func:`track`)."""
    track(process)
    try:
        yield
    finally:
        untrack(process)


def track(process: Running) -> None:
    """Have a stop signal kill ``process`` and its descendants while it is not reaped."""
    _LIVE.add(process)


def untrack(process: Running) -> None:
    """Forget ``process`` (it ended, and was killed and reaped as usual)."""
    _LIVE.discard(process)


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``, its process group, every descendant and every descendant's group.

    A plain worker's DataLoader workers share its group. torchrun starts each rank in a
    session of its own, so the ranks (and their DataLoader workers) are found as descendants
    and their groups killed too: nothing is left waiting in a collective. The fork server is
    in perfgate's own group, which is never killed; its forked workers lead groups of their
    own. Does not wait: the caller reaps its own child.
    """
    import psutil

    try:
        descendants = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    groups = {pid}
    for child in descendants:
        with contextlib.suppress(OSError):
            groups.add(os.getpgid(child.pid))
    groups.discard(os.getpgrp())
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    for child in descendants:
        with contextlib.suppress(psutil.Error):
            child.kill()
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def kill_live() -> None:
    """Kill every registered process's tree. One already reaped (``returncode`` set) is
    skipped: its pid may belong to another process by now."""
    for process in list(_LIVE):
        if process.returncode is None:
            kill_tree(process.pid)


def stop_on_signals() -> None:
    """Handle SIGINT, SIGTERM and SIGHUP (from the main thread, as Python requires): kill every
    registered process, then raise :class:`Interrupted` where the main thread is, so that the
    run unwinds (repeats are reaped, scratch folders removed). A second signal while it unwinds
    kills again and exits at once, for a cleanup that would not end."""
    for number in STOP_SIGNALS:
        signal.signal(number, _on_stop_signal)


def _on_stop_signal(number: int, frame: FrameType | None) -> None:
    global _stopping
    kill_live()
    if _stopping:
        name = signal.Signals(number).name
        os.write(2, f"interrupted again by {name}: exiting without cleaning up\n".encode())
        os._exit(128 + number)
    _stopping = True
    raise Interrupted(number)
