"""Telemetry: real psutil sampling of real processes, the real no-GPU NVML path, and the GPU path
through a fake ``pynvml``.

The fake replaces only what this machine cannot have, a GPU and its driver: the code under test
(the NVML wrapper, the sampler thread, the summary, the fingerprint's GPU block and the doctor's
GPU rows) runs unchanged against it. Nothing here asserts on speed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from perfgate.doctor import diagnose_machine
from perfgate.telemetry.fingerprint import collect_fingerprint
from perfgate.telemetry.host import HostProbe
from perfgate.telemetry.nvml import (
    NvmlDevice,
    NvmlSession,
    Unavailable,
    decode_throttle_reasons,
    is_throttled,
    open_nvml,
)
from perfgate.telemetry.sampler import (
    _STOP_TIMEOUT_S,
    GPU_COLUMNS,
    HOST_COLUMNS,
    MIN_INTERVAL_S,
    TelemetrySampler,
    summarize,
)

HW_THERMAL = 0x40
SW_POWER_CAP = 0x04
GPU_IDLE = 0x01
APP_CLOCKS = 0x02
NOT_SUPPORTED = 3
INVALID_ARGUMENT = 2

# A busy process with a sleeping child of its own: the shape of a training worker with a
# DataLoader worker. It prints the child's PID so the test can end both by PID.
BUSY_WITH_CHILD = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
print(child.pid, flush=True)
deadline = time.time() + 120
while time.time() < deadline:
    sum(range(1000))
"""


# --------------------------------------------------------------------------- real processes


@pytest.fixture
def busy_tree() -> Iterator[tuple[int, int]]:
    """(worker PID, its child's PID); both are killed by PID afterwards."""
    worker = subprocess.Popen(
        [sys.executable, "-c", BUSY_WITH_CHILD], stdout=subprocess.PIPE, text=True
    )
    assert worker.stdout is not None
    child_pid = int(worker.stdout.readline())
    try:
        yield worker.pid, child_pid
    finally:
        for pid in (child_pid, worker.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        worker.wait()


def test_sampler_samples_a_real_process_and_its_children(busy_tree: tuple[int, int]) -> None:
    worker_pid, _ = busy_tree
    sampler = TelemetrySampler(worker_pid, None, interval_s=MIN_INTERVAL_S)
    sampler.start()
    time.sleep(0.7)
    series = sampler.stop()

    json.dumps(series, allow_nan=False)
    assert series["interval_s"] == MIN_INTERVAL_S
    assert len(series["t"]) >= 1
    assert set(series["host"]) == set(HOST_COLUMNS)
    assert all(len(column) == len(series["t"]) for column in series["host"].values())
    host = series["host"]
    assert max(v for v in host["process_rss_bytes"] if v is not None) > 0
    assert max(v for v in host["children_count"] if v is not None) >= 1
    assert max(v for v in host["children_rss_bytes"] if v is not None) > 0
    assert max(v for v in host["process_cpu_percent"] if v is not None) > 0
    assert series["gpu"] is None
    assert series["gpu_unavailable_reason"] == "no GPU in use (CPU run)"
    assert series["sampler_error"] is None


def test_interval_below_the_floor_is_raised() -> None:
    assert TelemetrySampler(os.getpid(), None, interval_s=0.01).interval_s == MIN_INTERVAL_S
    assert TelemetrySampler(os.getpid(), None, interval_s=0.5).interval_s == 0.5


def test_stop_cuts_the_wait_short_and_keeps_the_final_sample() -> None:
    sampler = TelemetrySampler(os.getpid(), None, interval_s=60)
    sampler.start()
    began = time.monotonic()
    series = sampler.stop()
    assert time.monotonic() - began < _STOP_TIMEOUT_S  # liveness: not the 60 s interval
    assert len(series["t"]) == 1
    assert series["host"]["process_rss_bytes"][0] > 0
    assert sampler.stop() is series


def test_sampler_as_context_manager() -> None:
    with TelemetrySampler(os.getpid(), None) as sampler:
        pass
    assert len(sampler.stop()["t"]) == 1


def test_a_fault_in_the_thread_is_recorded_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: HostProbe) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(HostProbe, "sample", broken)
    sampler = TelemetrySampler(os.getpid(), None)
    sampler.start()
    series = sampler.stop()
    assert series["sampler_error"] == "RuntimeError('boom')"
    assert series["t"] == []


def test_a_process_that_exits_gives_nulls_not_errors() -> None:
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    sampler = TelemetrySampler(worker.pid, None)
    sampler.start()
    worker.kill()
    worker.wait()
    series = sampler.stop()
    assert series["host"]["process_rss_bytes"][-1] is None
    assert series["host"]["process_cpu_percent"][-1] is None
    assert series["host"]["process_read_bytes_per_s"][-1] is None
    assert series["host"]["process_write_bytes_per_s"][-1] is None


def test_host_probe_of_a_missing_pid() -> None:
    worker = subprocess.Popen([sys.executable, "-c", "pass"])
    worker.wait()
    sample = HostProbe(worker.pid).sample()
    assert sample.process_rss_bytes is None
    assert sample.children_count is None


# --------------------------------------------------------------------------- NVML, real path


def test_nvml_unavailable_here_gives_a_reason() -> None:
    session = open_nvml()
    if isinstance(session, NvmlSession):
        session.close()
        pytest.skip("this machine has an NVIDIA driver")
    assert isinstance(session, Unavailable)
    assert "NVML" in session.reason or "driver" in session.reason


def test_sampler_without_nvml_reports_why() -> None:
    if isinstance(session := open_nvml(), NvmlSession):
        session.close()
        pytest.skip("this machine has an NVIDIA driver")
    series = _sample_briefly(0)
    assert series["gpu"] is None
    assert series["gpu_unavailable_reason"]


def _sample_briefly(gpu_index: int | None) -> dict[str, Any]:
    sampler = TelemetrySampler(os.getpid(), gpu_index, interval_s=MIN_INTERVAL_S)
    sampler.start()
    time.sleep(0.5)
    return sampler.stop()


def test_missing_binding_is_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert open_nvml() == Unavailable("nvidia-ml-py (pynvml) is not installed")


# --------------------------------------------------------------------------- NVML, fake GPU


class FakeNVMLError(Exception):
    """pynvml's error class: the NVML return code is in ``value``."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


@dataclass
class FakeGpu:
    """One fake board. ``reasons`` are returned one per call; the last one repeats."""

    name: str | bytes = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-aaaa-0000"
    reasons: list[int] = field(default_factory=lambda: [GPU_IDLE])
    energy_supported: bool = True
    nvlink: bool = True
    applications_clock: int = 1980
    mig_mode: list[int] | None = None
    energy_mj: int = 1_000_000


class FakeNvml:
    """Just enough of pynvml's functions, with NVML's units (mW, mJ, MHz, bytes)."""

    def __init__(
        self, gpus: list[FakeGpu], *, event_reasons_api: bool = True, init_error: int | None = None
    ) -> None:
        self.gpus = gpus
        self.event_reasons_api = event_reasons_api
        self.init_error = init_error
        self.shutdowns = 0

    def module(self) -> ModuleType:
        module = ModuleType("pynvml")
        names = [n for n in dir(self) if n.startswith("nvml")]
        if not self.event_reasons_api:
            names.remove("nvmlDeviceGetCurrentClocksEventReasons")
        for name in names:
            setattr(module, name, getattr(self, name))
        module.NVMLError = FakeNVMLError  # type: ignore[attr-defined]
        return module

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise FakeNVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"550.54.15"

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return 12040

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        if not 0 <= index < len(self.gpus):
            raise FakeNVMLError(INVALID_ARGUMENT)
        return self.gpus[index]

    def nvmlDeviceGetName(self, gpu: FakeGpu) -> str | bytes:
        return gpu.name

    def nvmlDeviceGetUUID(self, gpu: FakeGpu) -> str:
        return gpu.uuid

    def nvmlDeviceGetMemoryInfo(self, gpu: FakeGpu) -> SimpleNamespace:
        return SimpleNamespace(total=80 * 2**30, used=10 * 2**30, free=70 * 2**30)

    def nvmlDeviceGetCudaComputeCapability(self, gpu: FakeGpu) -> tuple[int, int]:
        return 9, 0

    def nvmlDeviceGetMigMode(self, gpu: FakeGpu) -> list[int]:
        if gpu.mig_mode is None:
            raise FakeNVMLError(NOT_SUPPORTED)
        return gpu.mig_mode

    def nvmlDeviceGetEnforcedPowerLimit(self, gpu: FakeGpu) -> int:
        return 700_000

    def nvmlDeviceGetMaxClockInfo(self, gpu: FakeGpu, clock: int) -> int:
        return {1: 1980, 2: 2619}[clock]

    def nvmlDeviceGetApplicationsClock(self, gpu: FakeGpu, clock: int) -> int:
        return {1: gpu.applications_clock, 2: 2619}[clock]

    def nvmlDeviceGetDefaultApplicationsClock(self, gpu: FakeGpu, clock: int) -> int:
        return {1: 1980, 2: 2619}[clock]

    def nvmlDeviceGetNvLinkState(self, gpu: FakeGpu, link: int) -> int:
        if not gpu.nvlink:
            raise FakeNVMLError(NOT_SUPPORTED)
        return 1

    def nvmlDeviceGetUtilizationRates(self, gpu: FakeGpu) -> SimpleNamespace:
        return SimpleNamespace(gpu=97, memory=40)

    def nvmlDeviceGetClockInfo(self, gpu: FakeGpu, clock: int) -> int:
        return {1: 1755, 2: 2619}[clock]

    def nvmlDeviceGetPowerUsage(self, gpu: FakeGpu) -> int:
        return 650_500

    def nvmlDeviceGetTemperature(self, gpu: FakeGpu, sensor: int) -> int:
        return 65

    def nvmlDeviceGetTotalEnergyConsumption(self, gpu: FakeGpu) -> int:
        if not gpu.energy_supported:
            raise FakeNVMLError(NOT_SUPPORTED)
        gpu.energy_mj += 150_000
        return gpu.energy_mj

    def nvmlDeviceGetCurrentClocksEventReasons(self, gpu: FakeGpu) -> int:
        return gpu.reasons.pop(0) if len(gpu.reasons) > 1 else gpu.reasons[0]

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, gpu: FakeGpu) -> int:
        return self.nvmlDeviceGetCurrentClocksEventReasons(gpu)


def install(monkeypatch: pytest.MonkeyPatch, fake: FakeNvml) -> FakeNvml:
    monkeypatch.setitem(sys.modules, "pynvml", fake.module())
    return fake


def open_fake(
    monkeypatch: pytest.MonkeyPatch, *gpus: FakeGpu, event_reasons_api: bool = True
) -> NvmlSession:
    install(monkeypatch, FakeNvml(list(gpus) or [FakeGpu()], event_reasons_api=event_reasons_api))
    session = open_nvml()
    assert isinstance(session, NvmlSession)
    return session


def fake_device(session: NvmlSession, index: int = 0) -> NvmlDevice:
    device = session.device(index)
    assert isinstance(device, NvmlDevice)
    return device


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (12, "NVML library not found (no NVIDIA driver)"),
        (9, "NVIDIA driver not loaded"),
        (999, "NVML initialisation failed: 999"),
    ],
)
def test_init_errors_become_reasons(
    monkeypatch: pytest.MonkeyPatch, code: int, reason: str
) -> None:
    install(monkeypatch, FakeNvml([], init_error=code))
    assert open_nvml() == Unavailable(reason)


def test_session_and_static_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    with open_fake(monkeypatch, FakeGpu(name=b"NVIDIA H100 80GB HBM3")) as session:
        assert session.driver_version == "550.54.15"
        assert session.cuda_driver_version == "12.4"
        facts = fake_device(session).facts()
    assert facts.name == "NVIDIA H100 80GB HBM3"
    assert facts.memory_total_bytes == 80 * 2**30
    assert facts.compute_capability == "9.0"
    assert facts.mig_enabled is None
    assert facts.power_limit_w == 700.0
    assert facts.sm_clock_max_mhz == 1980
    assert facts.clocks_locked is False
    assert facts.nvlink_active_links == 18
    json.dumps(facts.to_dict(), allow_nan=False)


def test_application_clocks_and_mig_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGpu(applications_clock=1410, mig_mode=[1, 1], nvlink=False)
    with open_fake(monkeypatch, gpu) as session:
        facts = fake_device(session).facts()
    assert facts.clocks_locked is True
    assert facts.mig_enabled is True
    assert facts.nvlink_active_links is None


def test_sample_reads_every_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    with open_fake(monkeypatch) as session:
        sample = fake_device(session).sample()
    assert sample.util_percent == 97
    assert sample.mem_util_percent == 40
    assert sample.mem_used_bytes == 10 * 2**30
    assert sample.sm_clock_mhz == 1755
    assert sample.mem_clock_mhz == 2619
    assert sample.power_w == 650.5
    assert sample.temperature_c == 65
    assert sample.energy_mj == 1_150_000
    assert sample.throttle_reasons == ["gpu_idle"]
    assert sample.throttled is False


@pytest.mark.parametrize(
    ("mask", "names", "throttled"),
    [
        (GPU_IDLE, ["gpu_idle"], False),
        (APP_CLOCKS, ["applications_clocks_setting"], False),
        (HW_THERMAL, ["hw_thermal_slowdown"], True),
        (SW_POWER_CAP, ["sw_power_cap"], True),
        (GPU_IDLE | SW_POWER_CAP, ["gpu_idle", "sw_power_cap"], True),
        (0, [], False),
        (0x10000, ["unknown_0x10000"], False),
    ],
)
def test_throttle_reason_decoding(mask: int, names: list[str], throttled: bool) -> None:
    assert decode_throttle_reasons(mask) == names
    assert is_throttled(names) is throttled


def test_unsupported_calls_give_none(monkeypatch: pytest.MonkeyPatch) -> None:
    with open_fake(monkeypatch, FakeGpu(energy_supported=False, reasons=[HW_THERMAL])) as session:
        sample = fake_device(session).sample()
    assert sample.energy_mj is None
    assert sample.util_percent == 97
    assert sample.throttled is True


def test_old_drivers_fall_back_to_throttle_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGpu(reasons=[SW_POWER_CAP])
    with open_fake(monkeypatch, gpu, event_reasons_api=False) as session:
        sample = fake_device(session).sample()
    assert sample.throttle_reasons == ["sw_power_cap"]
    assert sample.throttled is True


def test_cuda_visible_devices_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = [FakeGpu(uuid=f"GPU-{i}{i}{i}-x") for i in range(4)]
    with open_fake(monkeypatch, *gpus) as session:
        assert fake_device(session, 0).index == 0
        resolved = session.device_for_cuda_ordinal(1, "2, 3")
        assert isinstance(resolved, NvmlDevice) and resolved.index == 3
        by_uuid = session.device_for_cuda_ordinal(0, "GPU-222")
        assert isinstance(by_uuid, NvmlDevice) and by_uuid.index == 2
        assert isinstance(session.device_for_cuda_ordinal(1, "0"), Unavailable)
        assert isinstance(session.device_for_cuda_ordinal(0, "MIG-abc"), Unavailable)
        assert isinstance(session.device_for_cuda_ordinal(0, "GPU-"), Unavailable)
        assert isinstance(session.device(7), Unavailable)


def test_sampler_gpu_series_with_throttled_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, FakeNvml([FakeGpu(reasons=[HW_THERMAL, GPU_IDLE])]))
    series = _sample_briefly(0)

    json.dumps(series, allow_nan=False)
    gpu = series["gpu"]
    assert isinstance(gpu, dict)
    assert set(gpu) == set(GPU_COLUMNS)
    times = series["t"]
    assert isinstance(times, list)
    assert all(len(column) == len(times) for column in gpu.values())
    assert gpu["throttle_reasons"][0] == ["hw_thermal_slowdown"]
    assert gpu["throttled"] == [
        "hw_thermal_slowdown" in reasons for reasons in gpu["throttle_reasons"]
    ]
    assert series["gpu_unavailable_reason"] is None
    assert fake.shutdowns == 1

    summary = summarize(series)
    assert summary["samples"] == len(times)
    assert summary["gpu"]["throttled_fraction"] == pytest.approx(1 / len(times))
    assert "hw_thermal_slowdown" in summary["gpu"]["throttle_reasons"]
    assert summary["gpu"]["util_percent"] == {"mean": 97.0, "max": 97.0}


def test_sampler_with_a_gpu_index_nvml_does_not_have(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, FakeNvml([FakeGpu()]))
    sampler = TelemetrySampler(os.getpid(), 3)
    sampler.start()
    result = sampler.stop()
    assert result["gpu"] is None
    assert result["gpu_unavailable_reason"] == "no GPU at NVML index 3 (1 present)"
    assert fake.shutdowns == 1


# --------------------------------------------------------------------------- summarize


def _series() -> dict[str, Any]:
    return {
        "interval_s": 0.25,
        "t": [10.0, 10.25, 10.5, 10.75],
        "host": {"process_cpu_percent": [None, 100.0, 50.0, 300.0]},
        "gpu": {
            "util_percent": [0, 90, 100, 0],
            "energy_mj": [1000, 3000, 6000, None],
            "throttled": [False, True, False, None],
            "throttle_reasons": [[], ["sw_power_cap"], ["gpu_idle"], None],
        },
        "gpu_unavailable_reason": None,
    }


def test_summarize_restricts_to_the_window() -> None:
    summary = summarize(_series(), start=10.2, end=10.6)
    assert summary["samples"] == 2
    assert summary["host"]["process_cpu_percent"] == {"mean": 75.0, "max": 100.0}
    gpu = summary["gpu"]
    assert gpu["util_percent"] == {"mean": 95.0, "max": 100.0}
    assert gpu["throttled_fraction"] == 0.5
    assert gpu["throttle_reasons"] == ["gpu_idle", "sw_power_cap"]
    assert gpu["energy_j"] == 3.0
    assert "throttled" not in gpu and "energy_mj" not in gpu


def test_summarize_whole_series_skips_nulls() -> None:
    summary = summarize(_series())
    assert summary["samples"] == 4
    assert summary["host"]["process_cpu_percent"]["mean"] == 150.0
    assert summary["gpu"]["throttled_fraction"] == pytest.approx(1 / 3)
    assert summary["gpu"]["energy_j"] == 5.0


def test_summarize_empty_window_gives_nulls() -> None:
    summary = summarize(_series(), start=20.0, end=30.0)
    assert summary["samples"] == 0
    assert summary["host"]["process_cpu_percent"] == {"mean": None, "max": None}
    assert summary["gpu"]["throttled_fraction"] is None
    assert summary["gpu"]["energy_j"] is None
    json.dumps(summary, allow_nan=False)


def test_summarize_without_gpu() -> None:
    series = {**_series(), "gpu": None, "gpu_unavailable_reason": "CPU run"}
    assert summarize(series)["gpu"] is None
    assert summarize({"t": [], "host": {}, "gpu": None})["samples"] == 0


# --------------------------------------------------------------------------- NVML consumers


def test_fingerprint_gpu_block_from_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = [FakeGpu(uuid=f"GPU-{i}") for i in range(4)]
    install(monkeypatch, FakeNvml(gpus))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    fp = collect_fingerprint("cuda", 4)
    gpu = fp["gpu"]
    assert gpu["model"] == "NVIDIA H100 80GB HBM3"
    assert gpu["uuid"] == "GPU-2"
    assert gpu["count"] == 2
    assert gpu["nvml_index"] == 2
    assert gpu["driver_version"] == "550.54.15"
    assert gpu["cuda_driver_version"] == "12.4"
    assert gpu["clocks_locked"] is False
    assert fp["gpu_unavailable_reason"] is None
    assert fp["env"]["CUDA_VISIBLE_DEVICES"] == "2,3"


def test_doctor_gpu_rows_from_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FakeNvml([FakeGpu(energy_supported=False, mig_mode=[0, 0])]))
    capabilities = {c.name: c for c in diagnose_machine()}
    assert capabilities["NVML"].ok is True
    assert capabilities["GPU 0"].facts["name"] == "NVIDIA H100 80GB HBM3"
    assert capabilities["GPU 0 MFU"].ok is True
    assert capabilities["GPU 0 MFU"].facts["peaks_tflops"]["bf16"] == 989.4
    assert capabilities["GPU 0 utilisation"].ok is True
    assert capabilities["GPU 0 energy counter"].ok is False
    assert capabilities["GPU 0 clocks locked"].ok is False
    assert "noise" in capabilities["GPU 0 clocks locked"].detail
    assert capabilities["GPU 0 MIG"].ok is True
    assert "MFU" not in capabilities
