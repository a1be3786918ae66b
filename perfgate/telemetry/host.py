"""Host-side telemetry through psutil: CPU and memory of the machine, a process and its children.

CPU percentages are computed here from differences of cumulative CPU times rather than with
``psutil.cpu_percent(interval=None)``: psutil keeps that call's "previous reading" in shared
state, so any other caller in the same process would silently shorten our windows, and a child
seen for the first time would read 0 %. With our own differences, a child that appeared since the
last sample contributes all the CPU time it has used (all of it falls inside the window), and a
child that exited contributes nothing more (its last slice is lost; it cannot be read after exit).

Percentages follow ``top``: 100 % is one core busy, so a process can exceed 100 %. The system
figure is the busy share of all CPUs (0 to 100). RSS sums over children count shared copy-on-write
pages of forked DataLoader workers once per worker; read them as an upper bound and a trend.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psutil

MIN_CPU_WINDOW_S = 0.05
"""Shorter windows give no CPU percentage: /proc CPU times tick every 10 ms, so a 5 ms window
reads as either 0 % or 200 %."""

_CGROUP_V2_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
_CGROUP_V1_QUOTA = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
_CGROUP_V1_PERIOD = Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")


class _CpuTimes(Protocol):
    """What ``psutil.cpu_times()`` returns (a platform-specific named tuple of seconds)."""

    @property
    def idle(self) -> float: ...

    def __iter__(self) -> Iterator[float]: ...


@dataclass(frozen=True)
class HostSample:
    """One host reading. Process fields are None once the process has exited."""

    system_cpu_percent: float | None
    process_cpu_percent: float | None
    process_rss_bytes: int | None
    children_cpu_percent: float | None
    children_rss_bytes: int | None
    children_count: int | None


class HostProbe:
    """Samples one process (by PID) and all its descendants; each ``sample`` covers the time
    since the previous one (or since construction)."""

    def __init__(self, pid: int) -> None:
        self._process = _process_or_none(pid)
        self._last_wall = time.monotonic()
        self._last_system = psutil.cpu_times()
        self._last_process_cpu = _cpu_seconds(self._process)
        self._last_children_cpu: dict[tuple[int, float], float] = self._children_cpu()[0]

    def sample(self) -> HostSample:
        """Read everything once; never raises for processes that come and go."""
        now = time.monotonic()
        window = now - self._last_wall
        system = psutil.cpu_times()
        process_cpu = _cpu_seconds(self._process)
        children_cpu, children_rss = self._children_cpu()
        sample = HostSample(
            system_cpu_percent=_system_percent(self._last_system, system, window),
            process_cpu_percent=_percent(self._last_process_cpu, process_cpu, window),
            process_rss_bytes=_rss(self._process),
            children_cpu_percent=self._children_percent(children_cpu, window),
            children_rss_bytes=children_rss,
            children_count=len(children_cpu) if children_rss is not None else None,
        )
        self._last_wall, self._last_system = now, system
        self._last_process_cpu, self._last_children_cpu = process_cpu, children_cpu
        return sample

    def _children_cpu(self) -> tuple[dict[tuple[int, float], float], int | None]:
        """CPU seconds of each live descendant, keyed by (pid, create time) so a reused PID is
        a new child; and their summed RSS (None when the parent is gone)."""
        if self._process is None:
            return {}, None
        try:
            children = descendants(self._process)
        except psutil.Error:
            return {}, None
        seconds: dict[tuple[int, float], float] = {}
        rss = 0
        for child in children:
            try:
                with child.oneshot():
                    times = child.cpu_times()
                    seconds[(child.pid, child.create_time())] = times.user + times.system
                    rss += child.memory_info().rss
            except psutil.Error:
                continue
        return seconds, rss

    def _children_percent(
        self, children_cpu: dict[tuple[int, float], float], window: float
    ) -> float | None:
        """CPU % of the descendants over the window; a new child counts from zero."""
        if self._process is None or window < MIN_CPU_WINDOW_S:
            return None
        used = sum(
            seconds - self._last_children_cpu.get(key, 0.0) for key, seconds in children_cpu.items()
        )
        return round(100 * max(used, 0.0) / window, 1)


def descendants(process: psutil.Process) -> list[psutil.Process]:
    """All descendants of ``process``.

    On Linux this walks ``/proc/PID/task/TID/children`` from the process down: a few small
    reads, where psutil's ``children(recursive=True)`` reads the status of every process on the
    machine (about 2 ms per sample here, most of the sampler's CPU cost). Elsewhere, or on
    kernels without that file, psutil's scan is used.
    """
    if not Path(f"/proc/{process.pid}/task").is_dir():
        return process.children(recursive=True)
    found: list[psutil.Process] = []
    pending = [process.pid]
    while pending:
        pid = pending.pop()
        for child_pid in _proc_children(pid):
            try:
                found.append(psutil.Process(child_pid))
            except psutil.Error:
                continue
            pending.append(child_pid)
    return found


def _proc_children(pid: int) -> list[int]:
    """Direct children of every thread of ``pid``, from procfs (empty when it has exited)."""
    children: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return children
    for tid in tasks:
        try:
            text = Path(f"/proc/{pid}/task/{tid}/children").read_text()
        except OSError:
            continue
        children.extend(int(token) for token in text.split())
    return children


def default_thread_count() -> int:
    """Intra-op threads perfgate pins when none is configured: the physical cores this process
    may use (SMT siblings share a core's vector units, so a second thread per core adds
    contention rather than matmul throughput)."""
    physical = psutil.cpu_count(logical=False) or 1
    return max(1, min(physical, affinity_count()))


def affinity_count() -> int:
    """CPUs this process may run on (its affinity mask, e.g. a container's cpuset)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return psutil.cpu_count(logical=True) or 1


def cpu_quota_cores() -> float | None:
    """The cgroup CPU quota in cores (cgroup v2, then v1); None when there is no quota."""
    try:
        if _CGROUP_V2_CPU_MAX.exists():
            quota, period = _CGROUP_V2_CPU_MAX.read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        if _CGROUP_V1_QUOTA.exists():
            quota_us = int(_CGROUP_V1_QUOTA.read_text())
            return None if quota_us <= 0 else quota_us / int(_CGROUP_V1_PERIOD.read_text())
    except (OSError, ValueError):
        return None
    return None


def _process_or_none(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def _cpu_seconds(process: psutil.Process | None) -> float | None:
    """User + system CPU seconds of the process itself (children not included)."""
    if process is None:
        return None
    try:
        times = process.cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system


def _rss(process: psutil.Process | None) -> int | None:
    if process is None:
        return None
    try:
        return int(process.memory_info().rss)
    except psutil.Error:
        return None


def _percent(before: float | None, after: float | None, window: float) -> float | None:
    """CPU seconds used over the window as a percentage of one core."""
    if before is None or after is None or window < MIN_CPU_WINDOW_S:
        return None
    return round(100 * max(after - before, 0.0) / window, 1)


def _system_percent(before: _CpuTimes, after: _CpuTimes, window: float) -> float | None:
    """Busy share of all CPUs, counted as psutil does: idle and iowait are not busy, and guest
    time is already inside user time."""
    if window < MIN_CPU_WINDOW_S:
        return None
    total = _cpu_total(after) - _cpu_total(before)
    idle = _cpu_idle(after) - _cpu_idle(before)
    return round(100 * (total - idle) / total, 1) if total > 0 else None


def _cpu_total(times: _CpuTimes) -> float:
    return sum(times) - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)


def _cpu_idle(times: _CpuTimes) -> float:
    return times.idle + getattr(times, "iowait", 0.0)
