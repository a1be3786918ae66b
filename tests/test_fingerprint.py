"""The environment fingerprint on this (CPU-only) machine, its key and its differences."""

from __future__ import annotations

import copy
import json
import platform
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import torch

import perfgate
from perfgate.errors import UsageError
from perfgate.telemetry.fingerprint import (
    collect_fingerprint,
    fingerprint_differences,
    fingerprint_key,
    performance_env,
)


def _all_keys(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield key
            yield from _all_keys(inner)


@pytest.fixture
def fp() -> dict[str, Any]:
    return collect_fingerprint("cpu", 2)


def test_fingerprint_has_the_facts(fp: dict[str, Any]) -> None:
    json.dumps(fp, allow_nan=False)
    assert fp["perfgate_version"] == perfgate.__version__
    assert fp["device"] == "cpu"
    assert fp["gpu"] is None
    assert fp["gpu_unavailable_reason"]
    assert fp["torch"]["version"] == torch.__version__
    assert fp["torch"]["git_version"] == torch.version.git_version
    assert fp["torch"]["debug"] is False
    assert fp["torch"]["cuda_runtime"] == torch.version.cuda
    assert "cudnn" in fp["torch"]
    assert fp["python"]["version"] == platform.python_version()
    assert fp["python"]["implementation"] == platform.python_implementation()
    assert fp["cpu"]["logical_cores"] >= 1
    assert fp["cpu"]["affinity_count"] >= 1
    assert "physical_cores" in fp["cpu"] and "model" in fp["cpu"]
    assert fp["memory_total_bytes"] > 0
    assert fp["os"]["system"] == platform.system()
    assert fp["threads"] == {"intra_op": 2}
    assert isinstance(fp["env"], dict)


def test_no_hostname(fp: dict[str, Any]) -> None:
    assert not {"hostname", "host", "node"} & set(_all_keys(fp))
    node = platform.node()
    if len(node) >= 6:  # a short name could occur by chance in another value
        assert node not in json.dumps(fp)


def test_cuda_without_nvml_gives_a_reason_and_torch_default_threads() -> None:
    fp = collect_fingerprint("cuda", None)
    if fp["gpu"] is not None:
        pytest.skip("this machine has an NVIDIA driver")
    assert fp["device"] == "cuda"
    assert fp["gpu_unavailable_reason"]
    assert fp["threads"]["intra_op"] == torch.get_num_threads()


def test_bad_cuda_ordinal_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        collect_fingerprint("cuda:x", 1)


def test_only_performance_variables_are_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("TORCHINDUCTOR_MAX_AUTOTUNE", "1")
    monkeypatch.setenv("PERFGATE_TEST_UNRELATED", "secret")
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    env = collect_fingerprint("cpu", 1)["env"]
    assert env["OMP_NUM_THREADS"] == "3"
    assert env["TORCHINDUCTOR_MAX_AUTOTUNE"] == "1"
    assert "PERFGATE_TEST_UNRELATED" not in env
    assert "CUBLAS_WORKSPACE_CONFIG" not in env
    assert performance_env({"CUDA_LAUNCH_BLOCKING": "1", "HOME": "/x"}) == {
        "CUDA_LAUNCH_BLOCKING": "1"
    }


def test_key_is_stable_across_calls(fp: dict[str, Any]) -> None:
    again = collect_fingerprint("cpu", 2)
    assert fingerprint_key(fp) == fingerprint_key(again)
    assert fingerprint_differences(fp, again) == []
    assert len(fingerprint_key(fp)) == 64


def _with_gpu(fp: dict[str, Any], **gpu: Any) -> dict[str, Any]:
    block = {
        "model": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-1",
        "count": 1,
        "mig_enabled": False,
        "driver_version": "550.54.15",
        "memory_total_bytes": 80 * 2**30,
        "applications_sm_clock_mhz": 1980,
        "clocks_locked": False,
        **gpu,
    }
    return {**copy.deepcopy(fp), "device": "cuda", "gpu": block}


def test_volatile_fields_do_not_change_the_key(fp: dict[str, Any]) -> None:
    a = _with_gpu(fp)
    b = _with_gpu(fp, uuid="GPU-2", applications_sm_clock_mhz=1410, clocks_locked=True)
    b["memory_total_bytes"] += 1
    b["env"] = {"TORCHINDUCTOR_CACHE_DIR": "/tmp/x"}
    b["python"]["version"] = fp["python"]["version"].rsplit(".", 1)[0] + ".999"
    b["os"]["release"] = "other"
    assert fingerprint_key(a) == fingerprint_key(b)
    assert fingerprint_differences(a, b) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda f: f["torch"].update(version="9.9.9"), "torch: {torch} → 9.9.9"),
        (
            lambda f: f["gpu"].update(model="NVIDIA A100-SXM4-80GB"),
            "GPU: NVIDIA H100 80GB HBM3 → NVIDIA A100-SXM4-80GB",
        ),
        (lambda f: f["gpu"].update(count=8), "GPU count: 1 → 8"),
        (lambda f: f["gpu"].update(mig_enabled=True), "MIG: False → True"),
        (lambda f: f["gpu"].update(driver_version="560.1"), "driver: 550.54.15 → 560.1"),
        (lambda f: f["threads"].update(intra_op=4), "threads: 2 → 4"),
        (lambda f: f["cpu"].update(model="Other CPU"), "CPU: {cpu} → Other CPU"),
        (lambda f: f["python"].update(version="2.7.18"), "Python: {python} → 2.7"),
    ],
)
def test_key_fields_change_the_key_and_are_listed(
    fp: dict[str, Any], change: Any, expected: str
) -> None:
    a = _with_gpu(fp)
    b = copy.deepcopy(a)
    change(b)
    assert fingerprint_key(a) != fingerprint_key(b)
    python = ".".join(platform.python_version().split(".")[:2])
    assert fingerprint_differences(a, b) == [
        expected.format(torch=torch.__version__, cpu=fp["cpu"]["model"], python=python)
    ]


def test_cpu_and_gpu_runs_are_not_comparable(fp: dict[str, Any]) -> None:
    differences = fingerprint_differences(fp, _with_gpu(fp))
    assert differences[0] == "device: cpu → cuda"
    assert "GPU: none → NVIDIA H100 80GB HBM3" in differences


def test_old_or_partial_records_still_get_a_key() -> None:
    assert len(fingerprint_key({})) == 64
    assert fingerprint_differences({}, {"torch": {"version": "2.13.0"}}) == ["torch: none → 2.13.0"]
