"""Parent-side telemetry: a daemon thread that samples the worker process from outside.

The runner starts a ``TelemetrySampler`` in the parent for the PID of the worker it spawned.
Nothing runs inside the timed process: NVML's driver lock, psutil's /proc reads and this thread's
share of the GIL all stay in the parent, so measuring cannot slow the thing measured.

The rate is capped at a few Hz (``MIN_INTERVAL_S``): every sample costs a dozen NVML calls and a
scan of /proc for descendants, which is CPU the benchmark competes for on a small CI runner, and
NVML's utilisation counter only refreshes every 1/6 s to 1 s anyway, so faster sampling would
repeat readings rather than add information.

The series is columnar and JSON-ready (lists of numbers or nulls, never NaN)::

    {"interval_s": 0.25,
     "t": [unix time of each sample, ...],
     "host": {"system_cpu_percent": [...], "process_cpu_percent": [...],
              "process_rss_bytes": [...], "children_cpu_percent": [...],
              "children_rss_bytes": [...], "children_count": [...],
              "process_read_bytes_per_s": [...], "process_write_bytes_per_s": [...],
              "system_iowait_percent": [...], "system_io_pressure_percent": [...],
              "system_disk_read_bytes_per_s": [...], "system_disk_write_bytes_per_s": [...],
              "system_net_sent_bytes_per_s": [...], "system_net_recv_bytes_per_s": [...],
              "process_runqueue_wait_percent": [...], "system_other_cpu_percent": [...],
              "system_cpu_pressure_percent": [...], "system_steal_percent": [...],
              "cpu_freq_mhz": [...], "system_runnable": [...]},
     "gpu": {"util_percent": [...], "mem_util_percent": [...], "mem_used_bytes": [...],
             "sm_clock_mhz": [...], "mem_clock_mhz": [...], "power_w": [...],
             "temperature_c": [...], "energy_mj": [...], "throttled": [...],
             "throttle_reasons": [[names], ...], "other_processes": [...]} or null,
     "gpu_unavailable_reason": null or "why there is no gpu series",
     "sampler_error": null or "the exception that ended sampling early"}

Rates (CPU %, bytes per second; see ``perfgate.telemetry.host``) in sample *i* describe the
window that ends at ``t[i]``; the first window starts at ``start()``. The last sample is taken
when ``stop()`` is called, so the tail is never lost.

``stop()`` never raises for a failure inside the sampling thread: the runner calls it in a
``finally`` that must go on to kill the worker, and a telemetry fault must not cost the
measurement. The fault is recorded in ``sampler_error`` instead, where the report shows it.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import asdict, fields, replace
from typing import Any

from perfgate.errors import UsageError
from perfgate.telemetry.host import HostProbe, HostSample
from perfgate.telemetry.nvml import GpuSample, NvmlDevice, NvmlSession, Unavailable, open_nvml

MIN_INTERVAL_S = 0.2
"""Sampling faster than 5 Hz is refused (raised to this); see the module docstring for why."""

_STOP_TIMEOUT_S = 10.0
"""How long ``stop()`` waits for an in-flight sample; a hung driver call must not hang the run."""

HOST_COLUMNS: tuple[str, ...] = tuple(field.name for field in fields(HostSample))
GPU_COLUMNS: tuple[str, ...] = tuple(field.name for field in fields(GpuSample))


class TelemetrySampler:
    """Samples host and (optionally) GPU counters for ``pid`` every ``interval_s`` seconds.

    ``gpu_index`` is the NVML index of the GPU the worker uses (None on CPU runs). Use it as
    ``start()`` … ``stop()``, or as a context manager whose ``stop()`` happens on exit; ``stop()``
    may be called again afterwards and returns the same series.
    """

    def __init__(self, pid: int, gpu_index: int | None, interval_s: float = 0.25) -> None:
        if not math.isfinite(interval_s):
            raise UsageError(f"telemetry interval {interval_s!r} is not a number", "give seconds")
        self.pid = pid
        self.gpu_index = gpu_index
        self.interval_s = max(float(interval_s), MIN_INTERVAL_S)
        self._stop_event = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._session: NvmlSession | None = None
        self._t: list[float] = []
        self._host: dict[str, list[Any]] = {name: [] for name in HOST_COLUMNS}
        self._gpu: dict[str, list[Any]] | None = None
        self._gpu_unavailable_reason: str | None = None
        self._error: Exception | None = None
        self._result: dict[str, Any] | None = None

    def __enter__(self) -> TelemetrySampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Open the probes and start the sampling thread (once per sampler)."""
        if self._thread is not None:
            raise UsageError("a TelemetrySampler can only be started once", "create a new one")
        host = HostProbe(self.pid)
        gpu = self._open_gpu()
        self._thread = threading.Thread(
            target=self._run, args=(host, gpu), name="perfgate-telemetry", daemon=True
        )
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        """Take the final sample, stop the thread promptly and return the series (never raises
        for what happened in the thread; see ``sampler_error``)."""
        if self._result is not None:
            return self._result
        if self._thread is None:
            raise UsageError("TelemetrySampler.stop() called before start()")
        self._stop_event.set()
        self._thread.join(_STOP_TIMEOUT_S)
        if self._session is not None and not self._thread.is_alive():
            self._session.close()
        self._result = self._snapshot()
        return self._result

    def _open_gpu(self) -> NvmlDevice | None:
        """The NVML device to sample, or None with ``_gpu_unavailable_reason`` set."""
        if self.gpu_index is None:
            self._gpu_unavailable_reason = "no GPU in use (CPU run)"
            return None
        session = open_nvml()
        if isinstance(session, Unavailable):
            self._gpu_unavailable_reason = session.reason
            return None
        device = session.device(self.gpu_index)
        if isinstance(device, Unavailable):
            session.close()
            self._gpu_unavailable_reason = device.reason
            return None
        self._session = session
        self._gpu = {name: [] for name in GPU_COLUMNS}
        return device

    def _run(self, host: HostProbe, gpu: NvmlDevice | None) -> None:
        """Sample until stopped; ``Event.wait`` (not ``sleep``) lets ``stop()`` cut a wait short."""
        try:
            while not self._stop_event.wait(self.interval_s):
                self._record(host, gpu)
            self._record(host, gpu)
        except Exception as error:  # recorded in the series: a sampler bug must not pass silently
            self._error = error

    def _record(self, host: HostProbe, gpu: NvmlDevice | None) -> None:
        now = time.time()
        host_sample = asdict(host.sample())
        gpu_sample = asdict(_gpu_sample(gpu, host)) if gpu is not None else None
        with self._lock:
            self._t.append(round(now, 3))
            for name, column in self._host.items():
                column.append(host_sample[name])
            if self._gpu is not None and gpu_sample is not None:
                for name, column in self._gpu.items():
                    column.append(gpu_sample[name])

    def _snapshot(self) -> dict[str, Any]:
        """A copy of the columns, consistent even if a hung sample is still in flight."""
        with self._lock:
            return {
                "interval_s": self.interval_s,
                "t": list(self._t),
                "host": {name: list(column) for name, column in self._host.items()},
                "gpu": (
                    {name: list(column) for name, column in self._gpu.items()}
                    if self._gpu is not None
                    else None
                ),
                "gpu_unavailable_reason": self._gpu_unavailable_reason,
                "sampler_error": repr(self._error) if self._error is not None else None,
            }


def _gpu_sample(gpu: NvmlDevice, host: HostProbe) -> GpuSample:
    """The GPU's counters, with how many compute processes outside the worker's tree share it."""
    sample = gpu.sample()
    pids = gpu.compute_pids()
    if pids is None:
        return sample
    return replace(sample, other_processes=len(pids - host.tree_pids()))


def summarize(
    series: dict[str, Any], start: float | None = None, end: float | None = None
) -> dict[str, Any]:
    """Mean and max of every column over the samples with ``start <= t <= end``.

    Returns ``{"samples", "start", "end", "host": {column: {"mean", "max"}}, "gpu": {column:
    {"mean", "max"}, "throttled_fraction", "throttle_reasons", "energy_j"} | None}``. The GPU
    block replaces the raw ``throttled``/``throttle_reasons``/``energy_mj`` columns with the share
    of samples that were throttled, the reasons seen, and the energy counter's increase over the
    window (an undercount by up to one interval at each edge). Empty windows give nulls.
    """
    times = series.get("t") or []
    selected = [
        i
        for i, t in enumerate(times)
        if (start is None or t >= start) and (end is None or t <= end)
    ]
    host = series.get("host") or {}
    gpu = series.get("gpu")
    return {
        "samples": len(selected),
        "start": start,
        "end": end,
        "host": {name: _stats(_pick(column, selected)) for name, column in host.items()},
        "gpu": _summarize_gpu(gpu, selected) if gpu is not None else None,
    }


def _summarize_gpu(gpu: dict[str, list[Any]], selected: list[int]) -> dict[str, Any]:
    special = {"throttled", "throttle_reasons", "energy_mj"}
    summary: dict[str, Any] = {
        name: _stats(_pick(column, selected)) for name, column in gpu.items() if name not in special
    }
    flags = _pick(gpu.get("throttled", []), selected)
    summary["throttled_fraction"] = sum(map(bool, flags)) / len(flags) if flags else None
    reasons = _pick(gpu.get("throttle_reasons", []), selected)
    summary["throttle_reasons"] = sorted({name for names in reasons for name in names})
    energy = _pick(gpu.get("energy_mj", []), selected)
    summary["energy_j"] = (energy[-1] - energy[0]) / 1000 if len(energy) >= 2 else None
    return summary


def _pick(column: list[Any], selected: list[int]) -> list[Any]:
    """The non-null values of ``column`` at the selected sample indices."""
    return [column[i] for i in selected if i < len(column) and column[i] is not None]


def _stats(values: list[Any]) -> dict[str, float | None]:
    numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if not numbers:
        return {"mean": None, "max": None}
    return {"mean": sum(numbers) / len(numbers), "max": max(numbers)}
