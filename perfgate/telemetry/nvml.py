"""A thin, never-raising wrapper over NVML (the ``nvidia-ml-py`` package, imported as ``pynvml``).

NVML is the driver's management library: it reads the GPU's own counters without touching the
CUDA context of the process being measured, which is why perfgate samples through it from the
parent process. Two rules shape this module:

* Opening NVML on a machine without an NVIDIA driver is normal (CPU runners), so ``open_nvml``
  returns ``Unavailable(reason)`` instead of raising.
* Which queries a GPU supports depends on its model, driver and virtualisation (energy counters
  are missing on older boards, MIG hides utilisation, vGPUs hide clocks). Every individual query
  that fails yields ``None`` for its field, so one unsupported counter never costs the others.

What the numbers mean: NVML's "GPU utilisation" is the percentage of the driver's sample period
(between 1/6 s and 1 s depending on the product) during which *a kernel was running* on the GPU.
It is not SM occupancy or achieved FLOP/s: one tiny kernel kept in flight reads as 100 %.
"Memory utilisation" likewise is the fraction of time device memory was being read or written.
Use MFU for "how well is the GPU used"; use utilisation for "is the GPU idle, waiting on the host".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

# Clock event ("throttle") reason bits, from nvml.h. They are part of NVML's stable ABI; they are
# spelled out here because older pynvml releases do not export every name.
THROTTLE_REASON_BITS: dict[int, str] = {
    0x001: "gpu_idle",
    0x002: "applications_clocks_setting",
    0x004: "sw_power_cap",
    0x008: "hw_slowdown",
    0x010: "sync_boost",
    0x020: "sw_thermal_slowdown",
    0x040: "hw_thermal_slowdown",
    0x080: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
    0x200: "board_limit",
    0x400: "reliability",
}
_KNOWN_REASON_BITS = sum(THROTTLE_REASON_BITS)

SLOWING_REASONS: frozenset[str] = frozenset(
    {
        "hw_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
        "sw_thermal_slowdown",
        "sw_power_cap",
    }
)
"""Reasons that mean the GPU runs slower than it would unconstrained. ``gpu_idle`` (nothing to
do) and ``applications_clocks_setting`` (clocks held where the operator set them, which is what
you want for low noise) are reported but do not count as throttling; nor do the rarer
board-limit and reliability reasons, whose effect NVIDIA does not document: they stay visible
in ``throttle_reasons`` for the reader to judge."""

_NVML_ERROR_NO_PERMISSION = 4
_NVML_ERROR_DRIVER_NOT_LOADED = 9
_NVML_ERROR_LIBRARY_NOT_FOUND = 12
_NVML_CLOCK_SM = 1
_NVML_CLOCK_MEM = 2
_NVML_TEMPERATURE_GPU = 0
_NVML_DEVICE_MIG_ENABLE = 1
_NVML_FEATURE_ENABLED = 1
_NVML_NVLINK_MAX_LINKS = 18
"""NVML's NVML_NVLINK_MAX_LINKS (Hopper's link count; Blackwell reports the same 18 per GPU),
for bindings that do not export it. Each link index is probed on its own: an index the GPU does
not have, or a GPU without NVLink, raises for that link only."""

_INIT_REASONS: dict[int, str] = {
    _NVML_ERROR_LIBRARY_NOT_FOUND: "NVML library not found (no NVIDIA driver)",
    _NVML_ERROR_DRIVER_NOT_LOADED: "NVIDIA driver not loaded",
    _NVML_ERROR_NO_PERMISSION: "no permission to query NVML",
}


@dataclass(frozen=True)
class Unavailable:
    """Something could not be opened or resolved; ``reason`` says why, in words for a report."""

    reason: str


@dataclass(frozen=True)
class DeviceFacts:
    """What does not change while a benchmark runs: identity, limits and clock policy."""

    index: int
    name: str | None
    uuid: str | None
    memory_total_bytes: int | None
    compute_capability: str | None
    mig_enabled: bool | None
    """``None`` when the GPU does not support MIG at all."""
    power_limit_w: float | None
    """The enforced power limit: the cap ``sw_power_cap`` throttling refers to."""
    sm_clock_max_mhz: int | None
    mem_clock_max_mhz: int | None
    applications_sm_clock_mhz: int | None
    default_applications_sm_clock_mhz: int | None
    clocks_locked: bool | None
    """True when application clocks differ from their defaults (``nvidia-smi -ac``). NVML has no
    portable getter for clocks locked with ``nvidia-smi --lock-gpu-clocks``, so False means "no
    application clocks set", not "clocks provably free"."""
    nvlink_active_links: int | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


@dataclass(frozen=True)
class GpuSample:
    """One reading of the fast-changing counters. Every field is None when unsupported."""

    util_percent: int | None
    """Share of the last driver sample period in which a kernel was running (not occupancy)."""
    mem_util_percent: int | None
    mem_used_bytes: int | None
    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    power_w: float | None
    temperature_c: int | None
    energy_mj: int | None
    """Energy counter since the driver was loaded: only differences are meaningful."""
    throttle_reasons: list[str] | None
    throttled: bool | None
    """True when a reason in ``SLOWING_REASONS`` is active."""
    other_processes: int | None = None
    """Compute processes on this GPU outside the measured process tree (another job sharing
    the GPU); set by the sampler, which knows the tree (``NvmlDevice.compute_pids``)."""


def decode_throttle_reasons(mask: int) -> list[str]:
    """Names of the bits set in an NVML clock event reason mask (unknown bits as ``0x…``)."""
    names = [name for bit, name in THROTTLE_REASON_BITS.items() if mask & bit]
    unknown = mask & ~_KNOWN_REASON_BITS
    if unknown:
        names.append(f"unknown_{unknown:#x}")
    return names


def is_throttled(reasons: list[str]) -> bool:
    """Whether any of ``reasons`` slows the GPU down (idle and set clocks do not)."""
    return any(reason in SLOWING_REASONS for reason in reasons)


class NvmlDevice:
    """One GPU, by NVML index. Obtain it from ``NvmlSession.device``."""

    def __init__(self, nvml: ModuleType, handle: object, index: int) -> None:
        self._nvml = nvml
        self._handle = handle
        self.index = index

    def _query(self, function: str, *args: object) -> Any:
        """Call ``pynvml.<function>(handle, *args)``; None when missing, unsupported or failing."""
        return _call(self._nvml, function, self._handle, *args)

    def facts(self) -> DeviceFacts:
        """Static facts; each field None where this GPU or driver cannot report it."""
        memory = self._query("nvmlDeviceGetMemoryInfo")
        capability = self._query("nvmlDeviceGetCudaComputeCapability")
        mig = self._query("nvmlDeviceGetMigMode")
        power_mw = self._query("nvmlDeviceGetEnforcedPowerLimit")
        app_sm = self._query("nvmlDeviceGetApplicationsClock", _NVML_CLOCK_SM)
        default_sm = self._query("nvmlDeviceGetDefaultApplicationsClock", _NVML_CLOCK_SM)
        return DeviceFacts(
            index=self.index,
            name=_text(self._query("nvmlDeviceGetName")),
            uuid=_text(self._query("nvmlDeviceGetUUID")),
            memory_total_bytes=_int(getattr(memory, "total", None)),
            compute_capability=f"{capability[0]}.{capability[1]}" if capability else None,
            mig_enabled=mig[0] == _NVML_DEVICE_MIG_ENABLE if mig else None,
            power_limit_w=power_mw / 1000 if power_mw is not None else None,
            sm_clock_max_mhz=_int(self._query("nvmlDeviceGetMaxClockInfo", _NVML_CLOCK_SM)),
            mem_clock_max_mhz=_int(self._query("nvmlDeviceGetMaxClockInfo", _NVML_CLOCK_MEM)),
            applications_sm_clock_mhz=_int(app_sm),
            default_applications_sm_clock_mhz=_int(default_sm),
            clocks_locked=self._applications_clocks_set(),
            nvlink_active_links=self.nvlink_active_links(),
        )

    def _applications_clocks_set(self) -> bool | None:
        """Whether SM or memory application clocks differ from the defaults (None: unknown)."""
        pairs = [
            (
                self._query("nvmlDeviceGetApplicationsClock", clock),
                self._query("nvmlDeviceGetDefaultApplicationsClock", clock),
            )
            for clock in (_NVML_CLOCK_SM, _NVML_CLOCK_MEM)
        ]
        known = [(current, default) for current, default in pairs if None not in (current, default)]
        return any(current != default for current, default in known) if known else None

    def nvlink_active_links(self) -> int | None:
        """Active NVLink links; None when the GPU has no NVLink or the driver will not say.

        ``nvmlDeviceGetNvLinkState`` raises for a link the GPU lacks (and for every link of a
        GPU without NVLink), so each link is asked on its own and a failure costs only it."""
        limit = _int(getattr(self._nvml, "NVML_NVLINK_MAX_LINKS", None)) or _NVML_NVLINK_MAX_LINKS
        states = [self._query("nvmlDeviceGetNvLinkState", link) for link in range(limit)]
        known = [state for state in states if state is not None]
        return sum(state == _NVML_FEATURE_ENABLED for state in known) if known else None

    def sample(self) -> GpuSample:
        """Read the fast-changing counters once (about a dozen cheap driver calls)."""
        utilization = self._query("nvmlDeviceGetUtilizationRates")
        memory = self._query("nvmlDeviceGetMemoryInfo")
        power_mw = self._query("nvmlDeviceGetPowerUsage")
        reasons = self._throttle_reasons()
        return GpuSample(
            util_percent=_int(getattr(utilization, "gpu", None)),
            mem_util_percent=_int(getattr(utilization, "memory", None)),
            mem_used_bytes=_int(getattr(memory, "used", None)),
            sm_clock_mhz=_int(self._query("nvmlDeviceGetClockInfo", _NVML_CLOCK_SM)),
            mem_clock_mhz=_int(self._query("nvmlDeviceGetClockInfo", _NVML_CLOCK_MEM)),
            power_w=power_mw / 1000 if power_mw is not None else None,
            temperature_c=_int(self._query("nvmlDeviceGetTemperature", _NVML_TEMPERATURE_GPU)),
            energy_mj=_int(self._query("nvmlDeviceGetTotalEnergyConsumption")),
            throttle_reasons=reasons,
            throttled=is_throttled(reasons) if reasons is not None else None,
        )

    def compute_pids(self) -> set[int] | None:
        """PIDs of the compute processes running on this GPU; None when NVML cannot say
        (inside a container NVML may report host PIDs, so callers compare with care)."""
        processes = self._query("nvmlDeviceGetComputeRunningProcesses")
        if processes is None:
            return None
        pids = {_int(getattr(process, "pid", None)) for process in processes}
        return {pid for pid in pids if pid is not None}

    def _throttle_reasons(self) -> list[str] | None:
        """Decoded clock event reasons; the pre-R535 "throttle reasons" call is the fallback."""
        mask = self._query("nvmlDeviceGetCurrentClocksEventReasons")
        if mask is None:
            mask = self._query("nvmlDeviceGetCurrentClocksThrottleReasons")
        return decode_throttle_reasons(int(mask)) if mask is not None else None


class NvmlSession:
    """An initialised NVML. Close it (or use ``with``) so NVML's reference count is released."""

    def __init__(self, nvml: ModuleType) -> None:
        self._nvml = nvml
        self._closed = False
        self.device_count: int = _int(_call(nvml, "nvmlDeviceGetCount")) or 0
        self.driver_version: str | None = _text(_call(nvml, "nvmlSystemGetDriverVersion"))
        self.cuda_driver_version: str | None = _cuda_version_text(
            _call(nvml, "nvmlSystemGetCudaDriverVersion_v2")
            or _call(nvml, "nvmlSystemGetCudaDriverVersion")
        )

    def __enter__(self) -> NvmlSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Shut NVML down once; later calls do nothing."""
        if not self._closed:
            self._closed = True
            _call(self._nvml, "nvmlShutdown")

    def device(self, index: int) -> NvmlDevice | Unavailable:
        """The GPU at NVML (physical, PCI-ordered) ``index``, or why it cannot be opened."""
        if not 0 <= index < self.device_count:
            return Unavailable(f"no GPU at NVML index {index} ({self.device_count} present)")
        handle = _call(self._nvml, "nvmlDeviceGetHandleByIndex", index)
        if handle is None:
            return Unavailable(f"NVML could not open GPU {index}")
        return NvmlDevice(self._nvml, handle, index)

    def device_for_cuda_ordinal(
        self, ordinal: int, cuda_visible_devices: str | None
    ) -> NvmlDevice | Unavailable:
        """The GPU a process sees as ``cuda:<ordinal>`` under ``CUDA_VISIBLE_DEVICES``.

        NVML ignores ``CUDA_VISIBLE_DEVICES`` and counts every GPU, so ``cuda:0`` of a process
        restricted to ``CUDA_VISIBLE_DEVICES=3`` is NVML's device 3. Entries may be indices or
        ``GPU-`` UUID prefixes; a MIG instance is refused because NVML's device-level counters
        would describe the whole GPU, not the slice. CUDA's own order is "fastest first" unless
        ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; on machines with identical GPUs it matches NVML's.
        """
        if cuda_visible_devices is None:
            return self.device(ordinal)
        entries = [entry.strip() for entry in cuda_visible_devices.split(",") if entry.strip()]
        if not 0 <= ordinal < len(entries):
            return Unavailable(
                f"cuda:{ordinal} is not visible (CUDA_VISIBLE_DEVICES={cuda_visible_devices!r})"
            )
        entry = entries[ordinal]
        if entry.isdigit():
            return self.device(int(entry))
        if entry.upper().startswith("MIG-"):
            return Unavailable(
                "CUDA_VISIBLE_DEVICES selects a MIG instance; device-level NVML counters would "
                "describe the whole GPU"
            )
        return self._device_by_uuid_prefix(entry)

    def visible_devices(self, cuda_visible_devices: str | None) -> list[NvmlDevice]:
        """The GPUs this process may use (``CUDA_VISIBLE_DEVICES`` applied), in CUDA order;
        an entry NVML cannot resolve (a MIG instance, an unknown UUID) is left out."""
        count = self.device_count
        if cuda_visible_devices is not None:
            count = len([e for e in cuda_visible_devices.split(",") if e.strip()])
        devices = [self.device_for_cuda_ordinal(i, cuda_visible_devices) for i in range(count)]
        return [device for device in devices if isinstance(device, NvmlDevice)]

    def _device_by_uuid_prefix(self, prefix: str) -> NvmlDevice | Unavailable:
        """The one GPU whose UUID starts with ``prefix`` (CUDA accepts unique prefixes)."""
        matches = [
            index
            for index in range(self.device_count)
            if self._uuid(index).lower().startswith(prefix.lower())
        ]
        if len(matches) != 1:
            return Unavailable(f"CUDA_VISIBLE_DEVICES entry {prefix!r} matches {len(matches)} GPUs")
        return self.device(matches[0])

    def _uuid(self, index: int) -> str:
        """UUID of the GPU at NVML ``index`` ("" when NVML will not say)."""
        handle = _call(self._nvml, "nvmlDeviceGetHandleByIndex", index)
        if handle is None:
            return ""
        return _text(_call(self._nvml, "nvmlDeviceGetUUID", handle)) or ""


def nvlink_summary(devices: Sequence[NvmlDevice]) -> tuple[bool, int | None]:
    """Whether any of ``devices`` has an active NVLink, and their active links summed (None when
    no GPU could say: no NVLink hardware, or the driver refuses). NVML itself must work: where
    it does not, the caller has no devices and records None for both."""
    links = [device.nvlink_active_links() for device in devices]
    known = [count for count in links if count is not None]
    total = sum(known) if known else None
    return bool(total), total


def open_nvml() -> NvmlSession | Unavailable:
    """Initialise NVML, or say why it cannot be (never raises)."""
    try:
        import pynvml
    except ImportError:
        return Unavailable("nvidia-ml-py (pynvml) is not installed")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        reason = _INIT_REASONS.get(getattr(error, "value", -1))
        return Unavailable(reason or f"NVML initialisation failed: {error}")
    except OSError as error:
        return Unavailable(f"NVML could not be loaded: {error}")
    return NvmlSession(pynvml)


def _call(nvml: ModuleType, function: str, *args: object) -> Any:
    """``nvml.<function>(*args)``, or None when the binding lacks it or NVML reports an error.

    Any NVML error counts, not only "not supported": a permission or vGPU restriction on one
    counter must not stop a benchmark, and the report shows the missing field as null.
    """
    method: Callable[..., Any] | None = getattr(nvml, function, None)
    if method is None:
        return None
    try:
        return method(*args)
    except nvml.NVMLError:
        return None


def _text(value: object) -> str | None:
    """NVML strings arrive as ``bytes`` from older bindings and ``str`` from newer ones."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _cuda_version_text(value: object) -> str | None:
    """NVML encodes CUDA versions as ``1000 * major + 10 * minor`` (12040 → ``"12.4"``)."""
    number = _int(value)
    return f"{number // 1000}.{number % 1000 // 10}" if number else None
