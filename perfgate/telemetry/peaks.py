"""Vendor peak TFLOP/s per GPU model and compute dtype, the denominator of MFU.

All figures are *dense* (NVIDIA's datasheets headline "with sparsity" numbers, twice the dense
ones, for 2:4 structured sparsity that training does not use). ``fp32`` is the plain CUDA-core
rate; ``tf32``, ``bf16`` and ``fp16`` are tensor-core rates with FP32 accumulation.

Matching is deliberately strict: a peak that belongs to a different board (PCIe instead of SXM,
a MIG slice instead of the whole GPU) would make MFU quietly wrong, which is worse than no MFU.
A name is normalised (case, ``NVIDIA``/``Tesla`` prefixes, ``-``/``_`` separators, memory-size
tokens such as ``80GB``) and must then equal one of an entry's known spellings; anything else
gets ``None`` with the reason, never the nearest guess.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

DTYPES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16")
_DTYPE_ALIASES: dict[str, str] = {
    "float32": "fp32",
    "float": "fp32",
    "tensorfloat32": "tf32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
}


@dataclass(frozen=True)
class PeakEntry:
    """One board: its known NVML spellings (normalised), peaks, and where they come from."""

    model: str
    names: frozenset[str]
    tflops: Mapping[str, float]
    source: str
    missing: Mapping[str, str]
    """Why a dtype has no figure (e.g. no bf16 tensor cores on Volta)."""


_NO_TF32_BF16 = {
    "tf32": "has no TF32 tensor cores (TF32 arrived with Ampere)",
    "bf16": "has no bf16 tensor cores (bf16 arrived with Ampere)",
}
_H100_SXM = {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}
_NVL = {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}
_A100 = {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}
_HALVED = "dense = half the datasheet's with-sparsity tensor figures"

PEAK_TABLE: tuple[PeakEntry, ...] = (
    PeakEntry(
        "H100 SXM5",
        frozenset({"H100 HBM3", "H100 SXM", "H100 SXM5"}),
        _H100_SXM,
        f"NVIDIA H100 Tensor Core GPU datasheet, SXM column; {_HALVED}",
        {},
    ),
    PeakEntry(
        "H100 PCIe",
        frozenset({"H100 PCIE"}),
        {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0},
        f"NVIDIA H100 Tensor Core GPU datasheet, PCIe column; {_HALVED}",
        {},
    ),
    PeakEntry(
        "H100 NVL",
        frozenset({"H100 NVL"}),
        _NVL,
        f"NVIDIA H100 Tensor Core GPU datasheet, H100 NVL column (per GPU); {_HALVED}",
        {},
    ),
    PeakEntry(
        "H200 SXM",
        frozenset({"H200", "H200 SXM"}),
        _H100_SXM,
        f"NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column; {_HALVED}",
        {},
    ),
    PeakEntry(
        "H200 NVL",
        frozenset({"H200 NVL"}),
        _NVL,
        f"NVIDIA H200 Tensor Core GPU datasheet, H200 NVL column; {_HALVED}",
        {},
    ),
    PeakEntry(
        "A100",
        frozenset({"A100 SXM4", "A100 SXM", "A100 PCIE"}),
        _A100,
        "NVIDIA A100 Tensor Core GPU datasheet (same for SXM4 and PCIe, 40 and 80 GB); " + _HALVED,
        {},
    ),
    PeakEntry(
        "A10",
        frozenset({"A10"}),
        {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0},
        f"NVIDIA A10 Tensor Core GPU datasheet; {_HALVED}",
        {},
    ),
    PeakEntry(
        "L4",
        frozenset({"L4"}),
        {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0},
        f"NVIDIA L4 Tensor Core GPU datasheet; {_HALVED}",
        {},
    ),
    PeakEntry(
        "L40S",
        frozenset({"L40S"}),
        {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05},
        "NVIDIA L40S datasheet (dense figures as listed)",
        {},
    ),
    PeakEntry(
        "B200",
        frozenset({"B200"}),
        {"tf32": 1100.0, "bf16": 2250.0, "fp16": 2250.0},
        f"NVIDIA HGX B200 datasheet, per GPU; {_HALVED}",
        {"fp32": "has no fp32 figure in perfgate's table (not in the tensor-core datasheet rows)"},
    ),
    PeakEntry(
        "V100 SXM2",
        frozenset({"V100 SXM2"}),
        {"fp32": 15.7, "fp16": 125.0},
        "NVIDIA Tesla V100 datasheet, SXM2 column (fp16 = tensor performance)",
        _NO_TF32_BF16,
    ),
    PeakEntry(
        "V100 PCIe",
        frozenset({"V100 PCIE"}),
        {"fp32": 14.0, "fp16": 112.0},
        "NVIDIA Tesla V100 datasheet, PCIe column (fp16 = tensor performance)",
        _NO_TF32_BF16,
    ),
    PeakEntry(
        "V100S PCIe",
        frozenset({"V100S PCIE"}),
        {"fp32": 16.4, "fp16": 130.0},
        "NVIDIA Tesla V100S datasheet (fp16 = tensor performance)",
        _NO_TF32_BF16,
    ),
    PeakEntry(
        "T4",
        frozenset({"T4"}),
        {"fp32": 8.1, "fp16": 65.0},
        "NVIDIA T4 datasheet (fp16 = mixed-precision tensor performance)",
        _NO_TF32_BF16,
    ),
)

_BY_NAME: dict[str, PeakEntry] = {name: entry for entry in PEAK_TABLE for name in entry.names}
_MEMORY_TOKEN = re.compile(r"^\d+GB$")
_DROPPED_TOKENS = frozenset({"NVIDIA", "TESLA"})


@dataclass(frozen=True)
class PeakLookup:
    """The peak for one GPU and dtype, or None with the reason a report should print."""

    gpu_name: str | None
    dtype: str
    tflops: float | None
    source: str | None
    reason: str | None
    model: str | None = None
    """The table entry that matched (e.g. ``"H100 SXM5"``)."""


def normalize_gpu_name(name: str) -> str:
    """``"Tesla V100-SXM2-16GB"`` → ``"V100 SXM2"``: upper case, no vendor prefix, no sizes."""
    tokens = re.split(r"[\s\-_]+", name.strip().upper())
    kept = [t for t in tokens if t and t not in _DROPPED_TOKENS and not _MEMORY_TOKEN.match(t)]
    return " ".join(kept)


def normalize_dtype(dtype: str) -> str | None:
    """Canonical dtype name (``bfloat16`` → ``bf16``), or None when unknown."""
    key = dtype.strip().lower().removeprefix("torch.")
    key = _DTYPE_ALIASES.get(key, key)
    return key if key in DTYPES else None


def lookup_peak(gpu_name: str | None, dtype: str) -> PeakLookup:
    """Peak dense TFLOP/s of ``gpu_name`` (as NVML or torch spells it) for ``dtype``.

    ``gpu_name`` None means a CPU run. Unknown, ambiguous and MIG names, and dtypes a GPU has no
    tensor cores for, give ``tflops=None`` with the reason.
    """
    canonical = normalize_dtype(dtype)
    if canonical is None:
        return _missing(
            gpu_name, dtype, f"unknown compute dtype {dtype!r} (expected {', '.join(DTYPES)})"
        )
    if gpu_name is None:
        return _missing(None, canonical, "CPU: no vendor peak table; MFU is not defined")
    normalized = normalize_gpu_name(gpu_name)
    if "MIG" in normalized.split():
        return _missing(
            gpu_name,
            canonical,
            f"GPU {gpu_name!r} is a MIG slice; the peak table "
            "has whole-GPU figures only, so MFU is not defined",
        )
    entry = _BY_NAME.get(normalized)
    if entry is None:
        return _missing(gpu_name, canonical, f"no peak-table entry for GPU {gpu_name!r}")
    tflops = entry.tflops.get(canonical)
    if tflops is None:
        why = entry.missing.get(canonical, f"has no {canonical} figure in perfgate's table")
        return _missing(gpu_name, canonical, f"{entry.model} {why}", entry.model)
    return PeakLookup(gpu_name, canonical, tflops, entry.source, None, entry.model)


def mfu(achieved_tflops: float | None, lookup: PeakLookup) -> tuple[float | None, str | None]:
    """Model FLOPs utilisation: achieved / peak, as ``(value, None)`` or ``(None, reason)``.

    A value above 1 is returned as is: it means the FLOP count or the dtype is wrong, and hiding
    it would hide that.
    """
    if lookup.tflops is None:
        return None, lookup.reason
    if achieved_tflops is None:
        return None, "achieved TFLOP/s unknown (no FLOP count)"
    if not math.isfinite(achieved_tflops) or achieved_tflops < 0:
        return None, f"achieved TFLOP/s {achieved_tflops!r} is not a valid rate"
    return achieved_tflops / lookup.tflops, None


def _missing(gpu_name: str | None, dtype: str, reason: str, model: str | None = None) -> PeakLookup:
    return PeakLookup(gpu_name, dtype, None, None, reason, model)
