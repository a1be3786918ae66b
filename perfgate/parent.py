"""A process perfgate starts dies with the perfgate process that started it, however that ends.

When perfgate is killed outright (SIGKILL, a crash), nothing of perfgate runs any more, so the
kernel must end its children: every process perfgate starts asks, first thing, to be sent
SIGKILL when its parent dies (:func:`die_with_parent`, ``PR_SET_PDEATHSIG``). The chain: the
fork server dies with perfgate and each forked worker with the server; a spawned worker dies
with perfgate; torchrun's agent (``perfgate.distributed.torchrun``) with perfgate, and each rank
with the agent. (A stop *signal* to perfgate is the other way it ends: see
``perfgate.runner.lifetime``.)

Whoever starts a process names itself in its environment (:data:`PARENT_ENV`, through
:func:`child_environment` or :func:`mark_as_parent`), so the child can tell whether its parent
already died before it asked for the signal — the interpreter's start-up takes long enough for
that to happen — and end itself instead of running on as an orphan.

Below the runner and ``perfgate.distributed`` alike: the worker, the fork server and torchrun's
agent all start with :func:`die_with_parent`.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Mapping

PARENT_ENV = "PERFGATE_PARENT_PID"
"""The pid of the perfgate process (perfgate, its fork server, torchrun's agent) that started
this one; set only by perfgate, so a worker run by hand is left alone."""

PR_SET_PDEATHSIG = 1
"""``prctl`` option (``<linux/prctl.h>``): the signal this process gets when its parent dies."""


def child_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """``environment`` naming this process as the parent of the process started with it."""
    return {**environment, PARENT_ENV: str(os.getpid())}


def mark_as_parent() -> None:
    """Name this process as the parent of those it starts from now on (by ``fork``, or with a
    copy of ``os.environ``: the fork server, torchrun's agent)."""
    os.environ[PARENT_ENV] = str(os.getpid())


def die_with_parent() -> None:
    """Be killed (SIGKILL) when the parent named in :data:`PARENT_ENV` dies; kill this process
    now if it already has (the signal only covers a parent that is still alive).

    A no-op without :data:`PARENT_ENV` (not started by perfgate) and off Linux:
    ``PR_SET_PDEATHSIG`` is Linux's, other systems have no such request (workers there are
    only killed by perfgate's signal handlers), and the fork server is Linux-only anyway.
    """
    parent = os.environ.get(PARENT_ENV)
    if parent is None or sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
    if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != int(parent):  # reparented: the parent died before the request
        os.kill(os.getpid(), signal.SIGKILL)
