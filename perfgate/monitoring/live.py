"""``perfgate monitor``: a live training job's telemetry served at ``/metrics`` for Prometheus.

Wrapped (``perfgate monitor -- python train.py``) the job is started with the step feed's
variable set (``perfgate.workloads.step_feed``), so a script that marks its steps
(``with session.step():``) reports them; attached (``--pid PID``) the monitor samples a job it
did not start, and reads step counters only from a feed file the job was started with
(``--feed``). Every ``interval`` seconds (0.5 by default, never more than 5 Hz) one thread
reads the feed, the process tree (psutil: CPU, memory, storage reads, I/O wait) and the GPU
(NVML: utilisation, SM clock, power, memory, throttling), and updates the gauges the HTTP
server exposes. Step time and throughput are taken over a rolling window (30 s by default),
and so is the bound, by the very rules of ``perfgate diagnose`` (``perfgate.diagnose.classify``)
over the window's signals: the share of time between steps stands for the batch wait.

The training process never waits for the monitor: the feed is a memory-mapped page it writes
without a system call, and everything else is read from outside it.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import psutil
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from perfgate.diagnose.classify import Signals, classify
from perfgate.errors import InfrastructureError, UsageError
from perfgate.monitoring.series import BOUNDS
from perfgate.telemetry.host import HostProbe, HostSample
from perfgate.telemetry.nvml import NvmlDevice, NvmlSession, Unavailable, open_nvml
from perfgate.workloads.step_feed import ENVIRONMENT, FeedReader, FeedReading, create_feed

MIN_INTERVAL_S = 0.2
"""The fastest sampling allowed: 5 Hz, a few driver and /proc reads each."""


@dataclass(frozen=True, kw_only=True)
class MonitorRequest:
    """What to watch, how often, and where to serve it."""

    command: Sequence[str] = ()
    """The job to start and watch (empty: attach to ``pid``)."""
    pid: int | None = None
    feed: Path | None = None
    """A step feed file to read when attached (the job was started with
    ``PERFGATE_MONITOR_FEED`` pointing at it)."""
    port: int = 9464
    address: str = "127.0.0.1"
    interval_s: float = 0.5
    window_s: float = 30.0
    gpu_index: int | None = 0
    """The NVML device to sample (None: no GPU)."""
    linger_s: float = 0.0
    """Keep serving this long after the job ended (a last scrape)."""


@dataclass(frozen=True, kw_only=True)
class MonitorOutcome:
    """How the watched job ended (None: attached, and the process ended on its own)."""

    returncode: int | None
    samples: int
    steps: int


LIVE_SERIES: dict[str, str] = {
    "perfgate_live_step_time_seconds": "Mean step time over the rolling window.",
    "perfgate_live_throughput_samples_per_second": "Samples per second over the window.",
    "perfgate_live_throughput_tokens_per_second": "Tokens per second over the window.",
    "perfgate_live_input_wait_ratio": "Share of the window spent between steps (batch wait).",
    "perfgate_live_cpu_utilization_ratio": "CPU time of the job's process tree per CPU (0-1).",
    "perfgate_live_rss_bytes": "Resident memory of the job's process tree.",
    "perfgate_live_read_bytes_per_second": "Storage reads of the job's process tree.",
    "perfgate_live_gpu_utilization_ratio": "NVML GPU utilisation (0-1).",
    "perfgate_live_gpu_sm_clock_hertz": "SM clock.",
    "perfgate_live_gpu_power_watts": "Board power.",
    "perfgate_live_gpu_memory_used_bytes": "GPU memory in use.",
    "perfgate_live_gpu_throttled": "1 while a thermal or power throttle reason is active.",
    "perfgate_live_job_running": "1 while the watched job runs.",
}
"""The live gauges; each is exposed only once it has a value (no GPU: no GPU series, rather
than a 0 that reads as an idle GPU)."""
STEPS = "perfgate_live_steps"
BOUND = "perfgate_live_bottleneck"


class LiveCollector(Collector):
    """The newest readings, as ``/metrics`` shows them. The sampling thread replaces the
    snapshot whole; a scrape reads whichever snapshot is current."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {}
        self.steps = 0
        self.bound: str | None = None

    def collect(self) -> Iterable[Metric]:
        values, steps, bound = self.values, self.steps, self.bound
        yield CounterMetricFamily(STEPS, "Training steps the job has taken.", value=steps)
        for name, text in LIVE_SERIES.items():
            if name in values:
                yield GaugeMetricFamily(name, text, value=values[name])
        if bound is not None:
            family = GaugeMetricFamily(
                BOUND, "1 for what bounds the step over the window (diagnose's rules).",
                labels=["bound"],
            )  # fmt: skip
            for name in BOUNDS:
                family.add_metric([name], float(name == bound))
            yield family


class Window:
    """Feed and host readings of the last ``seconds``, turned into rates."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.feed: collections.deque[tuple[float, FeedReading]] = collections.deque()
        self.host: collections.deque[tuple[float, HostSample]] = collections.deque()

    def add(self, now: float, feed: FeedReading | None, host: HostSample) -> None:
        if feed is not None:
            self.feed.append((now, feed))
        self.host.append((now, host))
        for readings in (self.feed, self.host):
            while len(readings) > 1 and now - readings[0][0] > self.seconds:
                readings.popleft()

    def steps(self) -> tuple[float, float, float, float] | None:
        """(step time, samples/s, tokens/s, wait share) over the window; None before two
        readings a step apart."""
        if len(self.feed) < 2:
            return None
        (t0, first), (t1, last) = self.feed[0], self.feed[-1]
        taken = last.steps - first.steps
        if taken <= 0 or t1 <= t0:
            return None
        busy, idle = last.busy_s - first.busy_s, last.idle_s - first.idle_s
        step_s = (busy + idle) / taken
        rate = taken / (t1 - t0)
        wait = idle / (busy + idle) if busy + idle > 0 else 0.0
        return step_s, rate * last.samples_per_step, rate * last.tokens_per_step, wait

    def mean(self, field: str) -> float | None:
        values = [v for _, h in self.host if (v := getattr(h, field)) is not None]
        return sum(values) / len(values) if values else None


def signals_of(window: Window, device: str, cpus: int) -> Signals:
    """The window as diagnose's signals (None where the window has no reading)."""
    steps = window.steps()
    process = window.mean("process_cpu_percent")
    children = window.mean("children_cpu_percent")
    cpu = ((process or 0.0) + (children or 0.0)) / (100.0 * cpus) if process is not None else None
    iowait = window.mean("system_iowait_percent")
    pressure = window.mean("system_io_pressure_percent")
    return Signals(
        device=device,
        dataloader_wait_share=steps[3] if steps is not None else None,
        read_bytes_per_s=window.mean("process_read_bytes_per_s"),
        iowait_share=iowait / 100.0 if iowait is not None else None,
        io_pressure_share=pressure / 100.0 if pressure is not None else None,
        cpu_busy=cpu,
    )


def monitor(request: MonitorRequest) -> MonitorOutcome:
    """Watch the job until it ends, serving ``/metrics``; the job's exit code when started."""
    if request.interval_s < MIN_INTERVAL_S:
        raise UsageError(
            f"--interval {request.interval_s:g} s samples faster than {1 / MIN_INTERVAL_S:g} Hz",
            f"use --interval {MIN_INTERVAL_S:g} or more",
        )
    if request.window_s < 2 * request.interval_s:
        raise UsageError(
            f"--window {request.window_s:g} s holds fewer than two samples",
            "use a window of at least two intervals (default 30 s)",
        )
    if bool(request.command) == (request.pid is not None):
        raise UsageError("give a command to run or --pid, not both", "perfgate monitor -- CMD")
    registry = CollectorRegistry()
    metrics = LiveCollector()
    registry.register(metrics)
    with tempfile.TemporaryDirectory(prefix="perfgate-monitor-") as scratch:
        feed_path = request.feed or Path(scratch) / "steps.feed"
        process, job = _job(request, feed_path)
        try:
            server, thread = start_http_server(request.port, request.address, registry=registry)
        except OSError as error:
            _stop(job)
            raise InfrastructureError(
                f"cannot serve /metrics on {request.address}:{request.port}: {error.strerror}",
                "pick a free port with --port",
            ) from None
        try:
            return _watch(request, metrics, process, job, FeedReader(feed_path))
        finally:
            server.shutdown()
            thread.join(timeout=5)


def _job(
    request: MonitorRequest, feed: Path
) -> tuple[psutil.Process, subprocess.Popen[bytes] | None]:
    if request.pid is not None:
        try:
            return psutil.Process(request.pid), None
        except psutil.NoSuchProcess:
            raise UsageError(f"no process {request.pid}", "give the PID of a running job") from None
    create_feed(feed)
    try:
        job = subprocess.Popen(list(request.command), env={**os.environ, ENVIRONMENT: str(feed)})
    except OSError as error:
        raise UsageError(
            f"cannot start {request.command[0]!r}: {error.strerror}", "check the command"
        ) from None
    return psutil.Process(job.pid), job


def _watch(
    request: MonitorRequest,
    metrics: LiveCollector,
    process: psutil.Process,
    job: subprocess.Popen[bytes] | None,
    feed: FeedReader,
) -> MonitorOutcome:
    stop = threading.Event()
    forwarded = _forward_signals(job, stop)
    nvml, gpu = _open_gpu(request.gpu_index)
    device = "cuda" if gpu is not None else "cpu"
    probe = HostProbe(process.pid)
    window = Window(request.window_s)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    samples = 0
    try:
        while not stop.is_set():
            now = time.monotonic()
            reading = feed.read()
            window.add(now, reading, probe.sample())
            samples += 1
            if reading is not None:
                metrics.steps = reading.steps
            _update(metrics, window, device, cpus, gpu)
            if (job is not None and job.poll() is not None) or not process.is_running():
                break
            stop.wait(max(0.0, request.interval_s - (time.monotonic() - now)))
        metrics.values = {**metrics.values, "perfgate_live_job_running": 0.0}
        returncode = job.wait() if job is not None else None
        if request.linger_s > 0:
            time.sleep(request.linger_s)
        return MonitorOutcome(returncode=returncode, samples=samples, steps=metrics.steps)
    finally:
        _restore(forwarded)
        if nvml is not None:
            nvml.close()
        _stop(job)


def _update(
    metrics: LiveCollector, window: Window, device: str, cpus: int, gpu: NvmlDevice | None
) -> None:
    """A new snapshot of every gauge from the window and one GPU reading."""
    values: dict[str, float | None] = {"perfgate_live_job_running": 1.0}
    steps = window.steps()
    if steps is not None:
        step_s, samples, tokens, wait = steps
        values["perfgate_live_step_time_seconds"] = step_s
        values["perfgate_live_throughput_samples_per_second"] = samples
        values["perfgate_live_throughput_tokens_per_second"] = tokens or None
        values["perfgate_live_input_wait_ratio"] = wait
    signals = signals_of(window, device, cpus)
    values["perfgate_live_cpu_utilization_ratio"] = signals.cpu_busy
    values["perfgate_live_read_bytes_per_second"] = signals.read_bytes_per_s
    _, host = window.host[-1]
    if host.process_rss_bytes is not None:
        values["perfgate_live_rss_bytes"] = host.process_rss_bytes + (host.children_rss_bytes or 0)
    if gpu is not None:
        sample = gpu.sample()
        util, clock = sample.util_percent, sample.sm_clock_mhz
        values["perfgate_live_gpu_utilization_ratio"] = util / 100.0 if util is not None else None
        values["perfgate_live_gpu_sm_clock_hertz"] = clock * 1e6 if clock is not None else None
        values["perfgate_live_gpu_power_watts"] = sample.power_w
        values["perfgate_live_gpu_memory_used_bytes"] = sample.mem_used_bytes
        throttled = sample.throttled
        values["perfgate_live_gpu_throttled"] = float(throttled) if throttled is not None else None
    metrics.values = {name: float(v) for name, v in values.items() if v is not None}
    metrics.bound = classify(signals).bound


def _open_gpu(index: int | None) -> tuple[NvmlSession | None, NvmlDevice | None]:
    if index is None:
        return None, None
    session = open_nvml()
    if isinstance(session, Unavailable):
        return None, None
    device = session.device(index)
    if isinstance(device, Unavailable):
        session.close()
        return None, None
    return session, device


def _forward_signals(
    job: subprocess.Popen[bytes] | None, stop: threading.Event
) -> dict[int, object]:
    """A stop signal to the monitor goes to the job (which decides how to end); attached, it
    only stops the monitor."""
    previous: dict[int, object] = {}

    def forward(number: int, frame: FrameType | None) -> None:
        if job is not None and job.poll() is None:
            job.send_signal(number)
        else:
            stop.set()

    if threading.current_thread() is threading.main_thread():
        for number in (signal.SIGINT, signal.SIGTERM):
            previous[number] = signal.signal(number, forward)
    return previous


def _restore(previous: dict[int, object]) -> None:
    for number, handler in previous.items():
        signal.signal(number, handler)  # type: ignore[arg-type]


def _stop(job: subprocess.Popen[bytes] | None) -> None:
    if job is not None and job.poll() is None:
        job.terminate()
        try:
            job.wait(timeout=10)
        except subprocess.TimeoutExpired:
            job.kill()
            job.wait()
