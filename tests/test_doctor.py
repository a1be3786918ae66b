"""``diagnose_machine`` on this machine: no GPU (with the reasons), and the CPU facts.

The GPU rows are exercised against a fake NVML in ``test_telemetry.py``, next to that fake.
"""

from __future__ import annotations

import os

import pytest
import torch

from perfgate.doctor import Capability, diagnose_machine
from perfgate.telemetry.nvml import NvmlSession, open_nvml


@pytest.fixture(scope="module")
def capabilities() -> dict[str, Capability]:
    return {capability.name: capability for capability in diagnose_machine()}


@pytest.fixture(scope="module")
def no_gpu() -> None:
    session = open_nvml()
    if isinstance(session, NvmlSession):
        session.close()
        pytest.skip("this machine has an NVIDIA driver")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")


def test_every_capability_is_explained(capabilities: dict[str, Capability]) -> None:
    for capability in capabilities.values():
        assert capability.ok in (True, False, None)
        assert capability.detail.strip(), capability.name
    assert {"torch build", "CUDA", "NVML", "CPU", "threads", "process metrics"} <= set(capabilities)
    assert {"torch.compile", "torch.profiler", "FLOP counter"} <= set(capabilities)


def test_torch_build_is_reported(capabilities: dict[str, Capability]) -> None:
    build = capabilities["torch build"]
    assert torch.__version__ in build.detail
    assert build.facts["git_version"] == torch.version.git_version


@pytest.mark.usefixtures("no_gpu")
def test_no_gpu_is_reported_with_reasons(capabilities: dict[str, Capability]) -> None:
    assert capabilities["CUDA"].ok is False
    assert capabilities["CUDA"].facts["device_count"] == 0
    nvml = capabilities["NVML"]
    assert nvml.ok is False
    assert nvml.facts["reason"] in nvml.detail
    assert "cannot be sampled" in nvml.detail
    assert capabilities["MFU"].ok is None
    assert "MFU is not defined" in capabilities["MFU"].detail
    assert not any(name.startswith("GPU ") for name in capabilities)


def test_cpu_facts(capabilities: dict[str, Capability]) -> None:
    cpu = capabilities["CPU"]
    assert cpu.ok is True
    assert cpu.facts["logical_cores"] == os.cpu_count()
    assert cpu.facts["affinity_count"] >= 1
    assert str(cpu.facts["physical_cores"]) in cpu.detail
    threads = capabilities["threads"]
    assert 1 <= threads.facts["threads"] <= cpu.facts["affinity_count"]
    assert capabilities["process metrics"].ok is True


def test_distributed_backends_are_reported(capabilities: dict[str, Capability]) -> None:
    found = capabilities["torch.distributed"]
    assert found.ok is True  # gloo ships with every torch build this project supports
    assert found.detail.startswith("gloo (CPU ranks); no NCCL;")  # a CPU-only torch build
    assert "torchrun" in found.detail
    assert found.facts["gloo_available"] is True and found.facts["gpu_count"] == 0
