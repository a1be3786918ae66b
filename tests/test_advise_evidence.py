"""Evidence from real profiling windows of the built-in workloads (CPU), their knobs flipped.

Each knob is checked to move the evidence the way it must: ``attention=manual`` shows the
hand-written pattern and no SDPA, ``precision=bf16`` puts the matmuls in bf16, ``optimizer=fused``
shrinks the optimizer's share, ``non_contiguous`` raises the copy share, and so on. The windows
run in this process through ``profile_workload`` (the worker's own code) on one thread; two slow
tests go through the real worker process, including a failing workload.
"""

from __future__ import annotations

import gc
import importlib
import os
import re
import statistics
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from perfgate.advise.catalogue import EVIDENCE, SHARE_NAMES, Evidence
from perfgate.advise.evidence import (
    ProfilingFailed,
    collect_evidence,
    evidence_from_trace,
    profile_spec,
    profile_workloads,
    workload_kind,
)
from perfgate.advise.trace_evidence import trace_evidence
from perfgate.config import Config, load_config
from perfgate.documents.worker import ProfilerWindow
from perfgate.runner.orchestrator import worker_spec
from perfgate.runner.plan import Selection, make_plan
from perfgate.trace.capture import profile_workload
from perfgate.trace.facts import GcMonitor, optimizer_facts
from perfgate.trace.loader import load_trace
from perfgate.workloads.knobs import resolve_knobs
from perfgate.workloads.protocol import WorkloadContext

CUDA_ONLY = {name for name, spec in EVIDENCE.items() if spec.devices == ("cuda",)}


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """One intra-op thread: the CI runner's cores are shared, and two threads spin-wait."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def profile(workload: str, tmp_path: Path, steps: int = 3, **raw_knobs: Any) -> Evidence:
    """A real profiling window of a built-in smoke workload, as the worker runs it."""
    module = importlib.import_module(f"perfgate.workloads.{workload}")
    knobs = resolve_knobs(workload, module.DEFINITION.knobs, raw_knobs)
    context = WorkloadContext(
        device="cpu",
        preset="smoke",
        params=module.DEFINITION.presets["smoke"],
        knobs=knobs,
        seed=0,
    )
    trace = tmp_path / f"{workload}-{len(list(tmp_path.iterdir()))}.json"
    facts = profile_workload(
        module.build(context), device="cpu", knobs=knobs, warmup=1, steps=steps, trace_path=trace
    )
    return evidence_from_trace(load_trace(trace), facts)


WINDOWS = 3
"""Profiling windows per side whenever a test compares measured shares: the median of three
interleaved windows, so one window disturbed by the shared runner (a stall, a neighbour's
burst) cannot flip the comparison."""


def median_shares(
    workload: str, tmp_path: Path, names: tuple[str, ...], steps: int = 3, **raw_knobs: Any
) -> dict[str, float]:
    """Each share in ``names`` as the median over ``WINDOWS`` profiling windows."""
    windows = [profile(workload, tmp_path, steps=steps, **raw_knobs) for _ in range(WINDOWS)]
    return {name: statistics.median(float(w[name]) for w in windows) for name in names}


def test_catalogue_names_kinds_units_and_devices() -> None:
    for name, spec in EVIDENCE.items():
        assert spec.name == name
        assert re.fullmatch(r"[a-z][a-z0-9_]*", name)
        assert spec.kind in ("number", "bool", "text")
        assert spec.unit in ("share", "fraction", "count", "ms", "us", "bytes", "tflops", "")
        assert spec.unit == "" or spec.kind == "number"
        assert spec.devices and set(spec.devices) <= {"cpu", "cuda"}
        assert spec.description
    assert all(name.endswith("_share") for name in SHARE_NAMES)


@pytest.mark.slow
def test_gpt_manual_attention_is_detected_and_sdpa_is_not(tmp_path: Path) -> None:
    manual = profile("gpt", tmp_path, attention="manual")
    sdpa = profile("gpt", tmp_path, attention="sdpa")
    assert manual["manual_attention_detected"] is True
    assert manual["manual_attention_count"] == 2  # one per layer of the smoke preset
    assert manual["sdpa_used"] is False
    assert sdpa["sdpa_used"] is True
    assert sdpa["flash_attention_used"] is True  # the CPU flash kernel
    assert sdpa["manual_attention_detected"] is False
    assert float(manual["attention_share"]) > 0
    assert float(sdpa["attention_share"]) > 0


def test_gpt_bf16_autocast_puts_the_matmuls_in_bf16(tmp_path: Path) -> None:
    fp32 = profile("gpt", tmp_path, precision="off")
    bf16 = profile("gpt", tmp_path, precision="bf16")
    assert fp32["matmul_dtype"] == "fp32"
    assert fp32["fp32_matmul_fraction"] == 1.0
    assert fp32["autocast_enabled"] is False
    assert bf16["matmul_dtype"] == "bf16"
    assert float(bf16["fp32_matmul_fraction"]) < 0.5
    assert bf16["autocast_enabled"] is True
    assert bf16["compute_dtype"] == "bf16"


@pytest.mark.slow
def test_optimizer_implementations_are_recorded_and_fused_is_cheapest(tmp_path: Path) -> None:
    plain = profile("mlp", tmp_path, steps=5, optimizer="plain")
    foreach = profile("mlp", tmp_path, steps=5, optimizer="foreach")
    fused = profile("mlp", tmp_path, steps=5, optimizer="fused")
    assert (plain["optimizer_fused"], plain["optimizer_foreach"]) == (False, False)
    assert (foreach["optimizer_fused"], foreach["optimizer_foreach"]) == (False, True)
    assert (fused["optimizer_fused"], fused["optimizer_foreach"]) == (True, False)
    assert plain["optimizer_class"] == "AdamW"
    assert plain["optimizer_supports_fused"] is True
    # A per-parameter loop of small ops against one fused kernel per step.
    share = ("optimizer_share",)
    assert (
        median_shares("mlp", tmp_path, share, steps=5, optimizer="plain")["optimizer_share"]
        > median_shares("mlp", tmp_path, share, steps=5, optimizer="fused")["optimizer_share"]
    )


@pytest.mark.slow
def test_datapipe_loader_settings_and_the_wait_without_workers(tmp_path: Path) -> None:
    serial = profile("datapipe", tmp_path, num_workers=0)
    parallel = profile("datapipe", tmp_path, num_workers=2)
    assert serial["dataloader_present"] is True
    assert serial["dataloader_num_workers"] == 0
    assert "dataloader_prefetch_factor" not in serial  # no workers: no prefetching
    # Decoding in the main process is nearly the whole step of this tiny CNN.
    wait = median_shares("datapipe", tmp_path, ("dataloader_wait_share",), num_workers=0)
    assert wait["dataloader_wait_share"] > 0.5
    assert parallel["dataloader_num_workers"] == 2
    assert parallel["dataloader_prefetch_factor"] == 2
    assert parallel["dataloader_persistent_workers"] is True
    assert serial["dataloader_pin_memory"] is False
    assert serial["cpu_cores_available"] == len(os.sched_getaffinity(0))


@pytest.mark.slow
def test_non_contiguous_activations_raise_the_copy_share(tmp_path: Path) -> None:
    copy = ("copy_share",)
    contiguous = median_shares("mlp", tmp_path, copy, steps=5, non_contiguous=False)
    strided = median_shares("mlp", tmp_path, copy, steps=5, non_contiguous=True)
    assert strided["copy_share"] > 1.5 * contiguous["copy_share"]


@pytest.mark.slow
def test_resnet_memory_format_and_convolution_time(tmp_path: Path) -> None:
    nchw = profile("resnet", tmp_path, channels_last=False)
    nhwc = profile("resnet", tmp_path, channels_last=True)
    assert nchw["channels_last"] is False
    assert nhwc["channels_last"] is True
    assert float(nchw["conv_layer_count"]) > 0
    shares = median_shares("resnet", tmp_path, ("conv_share", "matmul_share"), channels_last=False)
    assert shares["conv_share"] > shares["matmul_share"]
    assert nchw["conv_dtype"] == "fp32"


def test_matmul_alignment_follows_the_batch_size(tmp_path: Path) -> None:
    gpt = profile("gpt", tmp_path)  # every dimension a multiple of 8 in the smoke preset
    odd = profile("mlp", tmp_path, batch_size=7)
    assert gpt["matmul_dims_aligned"] is True
    assert gpt["misaligned_matmul_fraction"] == 0.0
    assert odd["matmul_dims_aligned"] is False
    assert float(odd["misaligned_matmul_fraction"]) > 0.9
    assert "7" in str(odd["hot_matmul_dims"])


def test_a_cpu_window_has_no_gpu_metric_and_sane_facts(tmp_path: Path) -> None:
    found = profile("mlp", tmp_path)
    assert found["device"] == "cpu"
    assert not CUDA_ONLY & set(found)
    assert found["profiled_steps"] == 3
    assert 0 < float(found["memory_headroom_fraction"]) < 1
    assert found["batch_size"] == 64
    assert found["compiled"] is False
    assert found["float32_matmul_precision"] in ("highest", "high", "medium")
    for name in SHARE_NAMES:
        if name in found:
            assert 0 <= float(found[name]) <= 1


# --- the parser on small hand-made traces ------------------------------------------------------


def _event(name: str, ts: float, dur: float, cat: str = "cpu_op", **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1,
            "args": args}  # fmt: skip


def _attention_trace(inside_sdpa: bool) -> dict[str, Any]:
    """One 100 µs step: q·kᵀ, scale, softmax, ·v, a backward node of the first bmm, a linear."""
    dims: dict[str, Any] = {"Input Dims": [[2, 4, 8, 16], [2, 4, 16, 8]]}
    chain = [
        _event("aten::matmul", 10, 10, **dims),
        _event("aten::bmm", 11, 8, **{"Sequence number": 5}),  # type: ignore[arg-type]
        _event("aten::mul", 21, 2),
        _event("aten::softmax", 24, 4),
        _event("aten::_softmax", 24.5, 3),
        _event("aten::matmul", 30, 10, **dims),
        _event("aten::bmm", 31, 8, **{"Sequence number": 7}),  # type: ignore[arg-type]
    ]
    if inside_sdpa:
        chain = [_event("aten::scaled_dot_product_attention", 9, 32), *chain]
    events = [
        _event("ProfilerStep#1", 0, 100, cat="user_annotation"),
        *chain,
        _event("autograd::engine::evaluate_function: BmmBackward0", 50, 10,
               **{"Sequence number": 5}),  # type: ignore[arg-type]
        _event("aten::linear", 70, 10),
        _event("aten::addmm", 71, 8, **{"Input type": ["float", "float", "float"]}),  # type: ignore[arg-type]
    ]  # fmt: skip
    return {"traceEvents": events}


def test_manual_attention_chain_and_its_backward_are_attention_time() -> None:
    found = trace_evidence(_attention_trace(inside_sdpa=False))
    assert found["manual_attention_detected"] is True
    assert found["manual_attention_count"] == 1
    # 10 + 2 + 4 + 10 µs of forward chain and the 10 µs backward node, of a 100 µs step.
    assert found["attention_share"] == pytest.approx(0.36)
    assert found["matmul_share"] == pytest.approx(0.10)  # linear's self time and its addmm
    assert found["step_time_ms"] == pytest.approx(0.1)


def test_the_same_ops_inside_sdpa_are_not_manual_attention() -> None:
    found = trace_evidence(_attention_trace(inside_sdpa=True))
    assert found["manual_attention_detected"] is False
    assert found["sdpa_used"] is True
    assert float(found["attention_share"]) >= 0.32


def test_gc_monitor_counts_collections_only_while_started() -> None:
    monitor = GcMonitor()
    gc.collect()
    monitor.start()
    gc.collect()
    monitor.stop()
    gc.collect()
    facts = monitor.facts(steps=1)
    assert facts["gc_collections"] == 1
    assert float(facts["gc_pause_ms_per_step"]) >= 0


def test_optimizer_facts_resolve_torch_defaults() -> None:
    parameters = [torch.nn.Parameter(torch.zeros(2))]
    default = optimizer_facts(torch.optim.AdamW(parameters))
    assert default["optimizer_foreach"] is False  # torch's default on CPU tensors
    assert default["optimizer_fused"] is False

    class Custom(torch.optim.Optimizer):
        def __init__(self, params: Any) -> None:
            super().__init__(params, {"lr": 0.1})

    assert optimizer_facts(Custom(parameters))["optimizer_supports_fused"] is False


def test_the_profile_spec_is_a_timed_spec_plus_the_profile_entry(tmp_path: Path) -> None:
    selection = Selection(workloads=["resnet"], knobs=["channels_last=true"], inject_slowdown=0.05)
    [planned], settings = make_plan(Config(root=tmp_path), selection)
    spec = profile_spec(planned, settings, "cpu", 4, tmp_path / "t.json")
    timed = worker_spec(planned, settings, "cpu", count_flops=False)
    assert spec.profile == ProfilerWindow(steps=4, trace_path=tmp_path / "t.json")
    assert spec.inject_slowdown is None  # a canary's extra cost never enters the evidence
    assert timed.inject_slowdown == 0.05
    assert spec == replace(timed, profile=spec.profile, inject_slowdown=None)
    assert spec.knobs["channels_last"] is True
    assert workload_kind(planned) == "convnet"


# --- through the real worker process ---------------------------------------------------------


@pytest.mark.slow
def test_a_profiling_worker_returns_evidence_and_keeps_the_trace(tmp_path: Path) -> None:
    selection = Selection(workloads=["gpt"], knobs=["attention=manual"], warmup=1, threads=1)
    traces = tmp_path / "traces"
    [outcome] = profile_workloads(
        Config(root=tmp_path), selection, device="cpu", steps=2, trace_dir=traces
    )
    assert (outcome.name, outcome.status, outcome.error) == ("gpt", "ok", None)
    gpt = outcome.evidence
    assert gpt["workload_kind"] == "transformer"
    assert gpt["device"] == "cpu"
    assert gpt["manual_attention_detected"] is True
    assert gpt["profiled_steps"] == 2
    assert gpt["optimizer_class"] == "AdamW"
    assert outcome.trace_path == traces / "gpt.trace.json"
    kept = trace_evidence(load_trace(outcome.trace_path))
    assert kept["manual_attention_count"] == gpt["manual_attention_count"]


@pytest.mark.slow
def test_a_failing_workload_is_a_result_and_the_others_are_profiled(
    faulty_project: Path,
) -> None:
    config = load_config(cwd=faulty_project)
    selection = Selection(workloads=["raises", "healthy"], warmup=1, threads=1, timeout_s=120)
    with pytest.raises(ProfilingFailed) as caught:
        collect_evidence(config, selection, device="cpu", steps=3)
    assert "raises: error" in caught.value.problem
    outcomes = {o.name: o for o in caught.value.outcomes}
    assert outcomes["raises"].status == "error"
    assert "simulated failure in the training step" in (outcomes["raises"].error or "")
    assert outcomes["raises"].evidence == {}
    assert outcomes["healthy"].status == "ok"
    assert outcomes["healthy"].trace_path is None  # no trace_dir: it went with the scratch
    healthy = outcomes["healthy"].evidence
    assert healthy["workload_kind"] == "user"
    assert healthy["optimizer_class"] == "SGD"
    assert healthy["dataloader_present"] is False
