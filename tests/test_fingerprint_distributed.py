"""The fingerprint's distributed section: backends, NCCL, NVLink, and the world of a run.

This machine has no GPU and no NVIDIA driver, so the NVLink logic runs against a fake
``pynvml`` module (the same technique as ``test_telemetry.py``): a fake is the only way to see
active, inactive and unsupported links here. A real GPU reports through the same calls.
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pytest
import torch

from perfgate.telemetry.fingerprint import (
    collect_fingerprint,
    comparability_fields,
    fingerprint_differences,
    fingerprint_key,
    fingerprint_notes,
    nccl_version_text,
    with_world,
)

NOT_SUPPORTED = 3
INVALID_ARGUMENT = 2


class FakeNVMLError(Exception):
    """pynvml's error class: the NVML return code is in ``value``."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


@dataclass
class FakeBoard:
    """A fake GPU: ``links[i]`` is link i's state (1 active, 0 inactive); a link index past
    the list raises INVALID_ARGUMENT, and ``nvlink=False`` raises NOT_SUPPORTED for every link."""

    uuid: str
    links: list[int] = field(default_factory=list)
    nvlink: bool = True


class FakeNvml:
    """The few pynvml calls the fingerprint makes; every other query is absent (None)."""

    def __init__(self, boards: list[FakeBoard], max_links: int | None = None) -> None:
        self.boards = boards
        self.max_links = max_links
        self.link_queries = 0

    def module(self) -> ModuleType:
        module = ModuleType("pynvml")
        for name in dir(self):
            if name.startswith("nvml"):
                setattr(module, name, getattr(self, name))
        module.NVMLError = FakeNVMLError  # type: ignore[attr-defined]
        if self.max_links is not None:
            module.NVML_NVLINK_MAX_LINKS = self.max_links  # type: ignore[attr-defined]
        return module

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return len(self.boards)

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeBoard:
        if not 0 <= index < len(self.boards):
            raise FakeNVMLError(INVALID_ARGUMENT)
        return self.boards[index]

    def nvmlDeviceGetName(self, board: FakeBoard) -> str:
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUUID(self, board: FakeBoard) -> str:
        return board.uuid

    def nvmlDeviceGetNvLinkState(self, board: FakeBoard, link: int) -> int:
        self.link_queries += 1
        if not board.nvlink:
            raise FakeNVMLError(NOT_SUPPORTED)
        if link >= len(board.links):
            raise FakeNVMLError(INVALID_ARGUMENT)
        return board.links[link]


def install(monkeypatch: pytest.MonkeyPatch, fake: FakeNvml) -> FakeNvml:
    monkeypatch.setitem(sys.modules, "pynvml", fake.module())
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return fake


def distributed(device: str = "cuda") -> dict[str, Any]:
    section = collect_fingerprint(device, 1)["distributed"]
    assert isinstance(section, dict)
    return section


# --- the section on this machine ----------------------------------------------------------------


def test_the_section_on_this_cpu_machine() -> None:
    section = distributed("cpu")
    json.dumps(section, allow_nan=False)
    assert section["torch_distributed"] is torch.distributed.is_available()
    assert section["gloo_available"] is torch.distributed.is_gloo_available()
    assert section["nccl_available"] is torch.distributed.is_nccl_available()
    if not section["nccl_available"]:
        assert section["nccl_version"] is None
    # A CPU run describes no GPU interconnect: NVML is not asked.
    assert section["nvlink"] is None and section["nvlink_active_links"] is None
    if torch.version.cuda is None and torch.version.hip is None:
        assert section["gpu_count"] == 0  # a CPU-only torch build can use no GPU
    assert "world_size" not in section and "backend" not in section


def test_without_nvml_nvlink_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # the binding is not installed
    section = distributed("cuda")
    assert section["nvlink"] is None and section["nvlink_active_links"] is None


@pytest.mark.parametrize(
    ("version", "text"),
    [
        ((2, 21, 5), "2.21.5"),
        ((2, 27, 3, "a0"), "2.27.3a0"),
        (22105, "2.21.5"),  # NCCL ≥ 2.9's code, as older torch returned it
        (2708, "2.7.8"),  # before 2.9
        (None, None),
        (0, None),
        ("2.21.5", None),
    ],
)
def test_nccl_version_text(version: Any, text: str | None) -> None:
    assert nccl_version_text(version) == text


# --- NVLink through a fake pynvml (no GPU here) --------------------------------------------------


def test_active_links_on_any_gpu_mean_nvlink(monkeypatch: pytest.MonkeyPatch) -> None:
    install(
        monkeypatch,
        FakeNvml(
            [
                FakeBoard("GPU-0", links=[1, 1, 1, 1] + [0] * 14),  # 4 of 18 active
                FakeBoard("GPU-1", links=[1] * 12),  # an A100: links 12-17 raise
            ]
        ),
    )
    section = distributed()
    assert section["nvlink"] is True
    assert section["nvlink_active_links"] == 16
    assert section["gpu_count"] == 2


def test_a_failing_link_costs_only_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """Link 0 raising (an index the GPU lacks) does not hide the active links after it."""

    class Gappy(FakeNvml):
        def nvmlDeviceGetNvLinkState(self, board: FakeBoard, link: int) -> int:
            if link == 0:
                raise FakeNVMLError(INVALID_ARGUMENT)
            return super().nvmlDeviceGetNvLinkState(board, link)

    install(monkeypatch, Gappy([FakeBoard("GPU-0", links=[1, 1, 0, 1])]))  # link 0 raises
    section = distributed()
    assert section["nvlink"] is True and section["nvlink_active_links"] == 2  # links 1 and 3


def test_no_nvlink_hardware_is_false_not_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, FakeNvml([FakeBoard("GPU-0", nvlink=False)] * 2))
    section = distributed()
    assert section["nvlink"] is False  # NVML answered: no link anywhere
    assert section["nvlink_active_links"] is None  # no GPU has links to count
    assert fake.link_queries > 0


def test_inactive_links_are_false_and_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FakeNvml([FakeBoard("GPU-0", links=[0] * 18)]))
    section = distributed()
    assert section["nvlink"] is False and section["nvlink_active_links"] == 0


def test_the_binding_link_count_bounds_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, FakeNvml([FakeBoard("GPU-0", links=[1] * 18)], max_links=4))
    section = distributed()
    assert section["nvlink_active_links"] == 4
    # The GPU block asks once more for the GPU in use: 4 probes each, never 18.
    assert fake.link_queries == 8


def test_only_visible_gpus_count(monkeypatch: pytest.MonkeyPatch) -> None:
    install(
        monkeypatch,
        FakeNvml([FakeBoard("GPU-0", links=[1] * 18), FakeBoard("GPU-1", nvlink=False)]),
    )
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    section = distributed()
    assert section["gpu_count"] == 1
    assert section["nvlink"] is False and section["nvlink_active_links"] is None


# --- the world of a distributed run: key fields -------------------------------------------------

LEGACY_LABELS = (
    "device", "GPU", "GPU count", "MIG", "driver", "CUDA", "cuDNN", "torch", "Python", "CPU",
    "physical cores", "threads",
)  # fmt: skip


@pytest.fixture
def fp() -> dict[str, Any]:
    return collect_fingerprint("cpu", 2)


def test_a_single_process_run_keeps_the_key_it_had(fp: dict[str, Any]) -> None:
    """World size and backend join the key only when set: stored baselines still match."""
    fields = comparability_fields(fp)
    legacy = {label: fields[label] for label in LEGACY_LABELS}
    canonical = json.dumps(legacy, sort_keys=True, separators=(",", ":"))
    assert fingerprint_key(fp) == hashlib.sha256(canonical.encode()).hexdigest()


def test_with_world_sets_the_world_on_a_copy(fp: dict[str, Any]) -> None:
    before = copy.deepcopy(fp)
    world = with_world(fp, 4, "gloo")
    assert fp == before  # the original is untouched
    assert world["distributed"]["world_size"] == 4
    assert world["distributed"]["backend"] == "gloo"
    assert world["distributed"]["gloo_available"] == fp["distributed"]["gloo_available"]
    json.dumps(world, allow_nan=False)
    # A record from before the section existed gets one.
    old = {k: v for k, v in fp.items() if k != "distributed"}
    assert with_world(old, 2, "nccl")["distributed"] == {"world_size": 2, "backend": "nccl"}


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (None, (2, "gloo"), ["world size: none → 2", "backend: none → gloo"]),
        ((2, "gloo"), (4, "gloo"), ["world size: 2 → 4"]),
        ((2, "gloo"), (2, "nccl"), ["backend: gloo → nccl"]),
    ],
)
def test_a_different_world_is_not_comparable(
    fp: dict[str, Any], a: tuple[int, str] | None, b: tuple[int, str], expected: list[str]
) -> None:
    first = with_world(fp, *a) if a else fp
    second = with_world(fp, *b)
    assert fingerprint_key(first) != fingerprint_key(second)
    # compare refuses on any of these lines (without --allow-env-drift); merge names them.
    assert fingerprint_differences(first, second) == expected


def test_the_same_world_is_comparable(fp: dict[str, Any]) -> None:
    assert fingerprint_key(with_world(fp, 2, "gloo")) == fingerprint_key(with_world(fp, 2, "gloo"))
    assert fingerprint_differences(with_world(fp, 2, "gloo"), with_world(fp, 2, "gloo")) == []


def _with_interconnect(fp: Mapping[str, Any], **section: Any) -> dict[str, Any]:
    changed = copy.deepcopy(dict(fp))
    changed["distributed"].update(section)
    return changed


def test_nccl_and_nvlink_are_noted_but_do_not_split_baselines(fp: dict[str, Any]) -> None:
    a = _with_interconnect(fp, nccl_version="2.21.5", nvlink=True, nvlink_active_links=144)
    b = _with_interconnect(fp, nccl_version="2.26.2", nvlink=False, nvlink_active_links=None)
    assert fingerprint_key(a) == fingerprint_key(b)
    assert fingerprint_differences(a, b) == []
    assert fingerprint_notes(a, b) == [
        "NCCL: 2.21.5 → 2.26.2",
        "NVLink: True → False",
        "NVLink links: 144 → none",
    ]
    assert fingerprint_notes(a, a) == []
    assert fingerprint_notes({}, {}) == []  # old records: nothing to say
