"""Telemetry: what the hardware did while a workload ran, and what the machine is.

* ``nvml`` — a never-raising wrapper over NVML (GPU facts and counters).
* ``host`` — process, children and system CPU/memory through psutil.
* ``sampler`` — the parent-side sampling thread and the window summary of its series.
* ``peaks`` — vendor peak TFLOP/s per GPU and dtype, and MFU.
* ``fingerprint`` — the environment record and the key that decides comparability.

Importing this package loads neither torch nor the NVML library; both load on first use.
"""

from perfgate.telemetry.fingerprint import (
    collect_fingerprint,
    fingerprint_differences,
    fingerprint_key,
)
from perfgate.telemetry.nvml import NvmlSession, Unavailable, open_nvml
from perfgate.telemetry.peaks import PeakLookup, lookup_peak, mfu
from perfgate.telemetry.sampler import TelemetrySampler, summarize

__all__ = [
    "NvmlSession",
    "PeakLookup",
    "TelemetrySampler",
    "Unavailable",
    "collect_fingerprint",
    "fingerprint_differences",
    "fingerprint_key",
    "lookup_peak",
    "mfu",
    "open_nvml",
    "summarize",
]
