"""The peak table: real NVML/torch name strings, strict matching, reasons, and MFU arithmetic."""

from __future__ import annotations

import pytest

from perfgate.telemetry.peaks import DTYPES, PEAK_TABLE, lookup_peak, mfu, normalize_gpu_name


@pytest.mark.parametrize(
    ("name", "dtype", "tflops", "model"),
    [
        ("NVIDIA H100 80GB HBM3", "bf16", 989.4, "H100 SXM5"),
        ("NVIDIA H100 80GB HBM3", "tf32", 494.7, "H100 SXM5"),
        ("NVIDIA H100 80GB HBM3", "fp32", 67.0, "H100 SXM5"),
        ("NVIDIA H100 PCIe", "bf16", 756.0, "H100 PCIe"),
        ("NVIDIA H100 PCIe", "fp32", 51.2, "H100 PCIe"),
        ("NVIDIA H100 NVL", "bf16", 835.5, "H100 NVL"),
        ("NVIDIA H200", "bf16", 989.4, "H200 SXM"),
        ("NVIDIA H200", "fp16", 989.4, "H200 SXM"),
        ("NVIDIA H200 NVL", "tf32", 417.5, "H200 NVL"),
        ("NVIDIA A100-SXM4-80GB", "bf16", 312.0, "A100"),
        ("NVIDIA A100-SXM4-40GB", "tf32", 156.0, "A100"),
        ("NVIDIA A100-PCIE-40GB", "fp32", 19.5, "A100"),
        ("NVIDIA A100 80GB PCIe", "fp16", 312.0, "A100"),
        ("Tesla V100-SXM2-16GB", "fp16", 125.0, "V100 SXM2"),
        ("Tesla V100-SXM2-32GB", "fp32", 15.7, "V100 SXM2"),
        ("Tesla V100-PCIE-16GB", "fp16", 112.0, "V100 PCIe"),
        ("NVIDIA B200", "bf16", 2250.0, "B200"),
        ("NVIDIA B200", "tf32", 1100.0, "B200"),
        ("NVIDIA L4", "bf16", 121.0, "L4"),
        ("NVIDIA A10", "fp32", 31.2, "A10"),
        ("NVIDIA L40S", "fp16", 362.05, "L40S"),
        ("Tesla T4", "fp16", 65.0, "T4"),
        ("nvidia h100 80gb hbm3", "bfloat16", 989.4, "H100 SXM5"),
    ],
)
def test_real_names_find_their_peak(name: str, dtype: str, tflops: float, model: str) -> None:
    lookup = lookup_peak(name, dtype)
    assert lookup.tflops == tflops
    assert lookup.model == model
    assert lookup.reason is None
    assert lookup.source and "datasheet" in lookup.source


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA H100",  # SXM or PCIe? A guess would be wrong half the time.
        "NVIDIA A10G",
        "NVIDIA GeForce RTX 4090",
        "NVIDIA H100 80GB HBM3 Foo",
        "Tesla V100-SXM3-32GB",
    ],
)
def test_unknown_or_ambiguous_names_give_none_with_reason(name: str) -> None:
    lookup = lookup_peak(name, "bf16")
    assert lookup.tflops is None
    assert lookup.reason == f"no peak-table entry for GPU {name!r}"


def test_mig_slice_has_no_whole_gpu_peak() -> None:
    lookup = lookup_peak("NVIDIA A100-SXM4-40GB MIG 1g.5gb", "bf16")
    assert lookup.tflops is None
    assert lookup.reason is not None and "MIG" in lookup.reason


@pytest.mark.parametrize(("dtype", "word"), [("bf16", "bf16"), ("tf32", "TF32")])
def test_volta_has_no_ampere_tensor_formats(dtype: str, word: str) -> None:
    lookup = lookup_peak("Tesla V100-SXM2-16GB", dtype)
    assert lookup.tflops is None
    assert lookup.model == "V100 SXM2"
    assert lookup.reason is not None and word in lookup.reason
    assert lookup.reason.startswith("V100 SXM2 has no")


def test_cpu_has_no_peak() -> None:
    lookup = lookup_peak(None, "fp32")
    assert lookup.tflops is None
    assert lookup.reason == "CPU: no vendor peak table; MFU is not defined"


def test_unknown_dtype_is_a_reason_not_a_crash() -> None:
    lookup = lookup_peak("NVIDIA H100 80GB HBM3", "fp8")
    assert lookup.tflops is None
    assert lookup.reason is not None and "fp8" in lookup.reason


def test_name_normalisation() -> None:
    assert normalize_gpu_name("Tesla V100-SXM2-16GB") == "V100 SXM2"
    assert normalize_gpu_name(" NVIDIA A100_SXM4_80GB ") == "A100 SXM4"


def test_table_is_consistent() -> None:
    spellings = [name for entry in PEAK_TABLE for name in entry.names]
    assert len(spellings) == len(set(spellings)), "one spelling must not map to two boards"
    for entry in PEAK_TABLE:
        assert set(entry.tflops) <= set(DTYPES)
        assert all(value > 0 for value in entry.tflops.values())
        assert not set(entry.tflops) & set(entry.missing)
        assert entry.source


def test_mfu_arithmetic() -> None:
    peak = lookup_peak("NVIDIA A100-SXM4-80GB", "bf16")
    assert mfu(156.0, peak) == (0.5, None)
    assert mfu(0.0, peak) == (0.0, None)
    assert mfu(None, peak) == (None, "achieved TFLOP/s unknown (no FLOP count)")
    value, reason = mfu(float("nan"), peak)
    assert value is None and reason is not None


def test_mfu_without_peak_carries_the_lookup_reason() -> None:
    peak = lookup_peak("Tesla V100-SXM2-16GB", "bf16")
    assert mfu(10.0, peak) == (None, peak.reason)
    cpu = lookup_peak(None, "fp32")
    assert mfu(0.1, cpu) == (None, "CPU: no vendor peak table; MFU is not defined")
