"""Communication share, exposure and overlap from profiler traces (``trace.communication``).

Real traces: the two ranks of a CPU DDP run over gloo (``tests/data/traces/README.md``) and an A100
NCCL training trace in ``tests/data/advise/``. Expected values
on the A100 trace are swept from the raw events by stream, independently of the module's interval
arithmetic and kernel-name families. Small hand-made traces pin each rule, and property tests check
the invariants and the exact values against a brute-force count on random integer timelines.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.advise.catalogue import EVIDENCE
from perfgate.advise.trace_evidence import trace_evidence
from perfgate.distributed.summary import rank_imbalance, step_imbalance
from perfgate.trace.communication import CommunicationSummary, communication_summary
from perfgate.trace.loader import load_document as load_trace

HERE = Path(__file__).resolve().parent
TRACES = HERE / "data" / "traces"
ADVISE = HERE / "data" / "advise"
NCCL = ADVISE / "a100-train-nccl.json.gz"
RANKS = [TRACES / f"cpu-gloo-ddp-rank{rank}.json.gz" for rank in (0, 1)]


@cache
def raw(path: Path) -> dict[str, Any]:
    return load_trace(path)


@cache
def summary(path: Path) -> CommunicationSummary:
    found = communication_summary(raw(path))
    assert found is not None
    return found


# --- CPU: two ranks of DDP over gloo ---------------------------------------------------------


@pytest.mark.parametrize("path", RANKS, ids=["rank0", "rank1"])
def test_gloo_all_reduce_after_backward_is_exposed(path: Path) -> None:
    found = summary(path)
    events = raw(path)["traceEvents"]
    assert found.device == "cpu"
    assert found.backend == "gloo"
    assert found.steps == 3
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    assert found.window_us == pytest.approx(sum(e["dur"] for e in steps))
    # One all-reduce (one bucket, after backward) and one buffer broadcast per step.
    gloo = [e for e in events if str(e.get("name", "")).startswith("gloo:")]
    assert found.collectives == len(gloo) == 6
    assert 0.05 < found.share < 0.6
    assert found.overlap is not None and found.overlap < 0.2
    assert found.exposed_us == pytest.approx(found.communication_us, rel=0.05)
    assert 0 < found.compute_us < found.window_us - found.exposed_us + 1e-6


def test_the_two_gloo_ranks_computed_about_the_same() -> None:
    compute = [summary(path).compute_us for path in RANKS]
    imbalance = rank_imbalance(compute)
    assert imbalance is not None and imbalance < 0.2  # same model, same batch size


@pytest.mark.parametrize("path", RANKS, ids=["rank0", "rank1"])
def test_cpu_evidence_carries_the_communication_metrics(path: Path) -> None:
    found = trace_evidence(raw(path))
    expected = summary(path)
    assert found["device"] == "cpu"
    assert found["communication_share"] == pytest.approx(expected.share)
    assert found["communication_exposed_share"] == pytest.approx(expected.exposed_share)
    assert found["communication_overlap"] == pytest.approx(expected.overlap)
    kinds = {"number": float, "bool": bool, "text": str}
    for key, value in found.items():
        assert key in EVIDENCE, key
        assert type(value) is kinds[EVIDENCE[key].kind], (key, value)


# --- GPU: an A100 NCCL trace -------------------------------------------------------------------

COMM_STREAM, COMPUTE_STREAM = 40, 7
"""The trace's NCCL stream and its one compute stream (``../shared/traces/README.md``)."""


def _sweep(
    windows: list[tuple[float, float]],
    communication: list[tuple[float, float]],
    computation: list[tuple[float, float]],
) -> tuple[float, float, float]:
    """(communication, exposed, compute) µs inside the windows, by a sweep over every boundary."""
    edges = sorted(
        (time, kind, delta)
        for kind, spans in enumerate((windows, communication, computation))
        for start, end in spans
        for time, delta in ((start, 1), (end, -1))
    )
    open_ = [0, 0, 0]
    talking = exposed = busy = 0.0
    previous = edges[0][0]
    for time, kind, delta in edges:
        span = time - previous
        if open_[0] > 0:
            talking += span if open_[1] > 0 else 0.0
            exposed += span if open_[1] > 0 and open_[2] == 0 else 0.0
            busy += span if open_[2] > 0 else 0.0
        open_[kind] += delta
        previous = time
    return talking, exposed, busy


def _nccl_expected(step: str | None) -> tuple[float, float, float, float, int]:
    """(window, communication, exposed, compute, collectives) of one step (None: all) by stream."""
    events = raw(NCCL)["traceEvents"]
    markers = [
        e
        for e in events
        if e.get("cat") == "user_annotation"
        and str(e["name"]).startswith("ProfilerStep#")
        and (step is None or e["name"] == step)
    ]
    windows = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in markers]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    on = {
        stream: [
            (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
            for e in kernels
            if e["args"]["stream"] == stream
        ]
        for stream in (COMM_STREAM, COMPUTE_STREAM)
    }
    assert len(on[COMM_STREAM]) + len(on[COMPUTE_STREAM]) == len(kernels)
    talking, exposed, busy = _sweep(windows, on[COMM_STREAM], on[COMPUTE_STREAM])
    count = sum(1 for s, e in on[COMM_STREAM] if any(a < e and s < b for a, b in windows))
    return sum(b - a for a, b in windows), talking, exposed, busy, count


def test_nccl_stream_kernels_are_the_communication() -> None:
    names = {
        e["name"]
        for e in raw(NCCL)["traceEvents"]
        if e.get("cat") == "kernel" and e["args"]["stream"] == COMM_STREAM
    }
    assert names and all(name.startswith("ncclKernel_") for name in names)


@pytest.mark.parametrize("step", ["ProfilerStep#5", None], ids=["one-step", "all-steps"])
def test_nccl_exposure_matches_a_sweep_of_the_raw_events(step: str | None) -> None:
    trace = raw(NCCL)
    if step is not None:  # keep only that step's marker: the module then analyses that window
        events = [
            e
            for e in trace["traceEvents"]
            if not str(e.get("name", "")).startswith("ProfilerStep#") or e["name"] == step
        ]
        trace = {**trace, "traceEvents": events}
    found = communication_summary(trace)
    assert found is not None
    window, talking, exposed, busy, count = _nccl_expected(step)
    assert found.device == "cuda"
    assert found.backend == "nccl"
    assert found.steps == (1 if step else 3)
    assert found.window_us == pytest.approx(window)
    assert found.communication_us == pytest.approx(talking)
    assert found.exposed_us == pytest.approx(exposed)
    assert found.compute_us == pytest.approx(busy)
    assert found.collectives == count
    assert 0 < found.exposed_us < found.communication_us  # partly hidden behind backward


def test_nccl_evidence_adds_exposure_and_overlap() -> None:
    found = trace_evidence(raw(NCCL))
    expected = summary(NCCL)
    assert found["communication_exposed_share"] == pytest.approx(expected.exposed_share)
    assert found["communication_overlap"] == pytest.approx(expected.overlap)
    # The GPU share stays the category breakdown's: the same NCCL kernels (they never overlap
    # each other), over a window that also spans the µs gaps between the step markers.
    assert float(found["communication_share"]) == pytest.approx(expected.share, rel=1e-3)


@pytest.mark.parametrize("name", ["h100-qwen-0.5b-inference-sdpa", "a100-alexnet-forward"])
def test_a_single_process_trace_has_no_summary_and_no_metrics(name: str) -> None:
    trace = raw(ADVISE / f"{name}.json.gz")
    assert communication_summary(trace) is None
    found = trace_evidence(trace)
    assert not {"communication_exposed_share", "communication_overlap"} & set(found)


# --- the rules on hand-made traces -------------------------------------------------------------


def _x(name: str, ts: float, dur: float, cat: str, tid: int = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid,
            "args": args}  # fmt: skip


def _step(number: int, ts: float, dur: float) -> dict[str, Any]:
    return _x(f"ProfilerStep#{number}", ts, dur, "user_annotation")


NCCL_KERNEL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
GEMM_KERNEL = "ampere_sgemm_128x64_nn"


def _summary(*events: dict[str, Any], **extra: Any) -> CommunicationSummary:
    found = communication_summary({"traceEvents": list(events), **extra})
    assert found is not None
    return found


def test_a_comm_kernel_under_a_compute_kernel_is_fully_hidden() -> None:
    found = _summary(
        _step(1, 0, 100),
        _x(GEMM_KERNEL, 0, 100, "kernel", tid=7, stream=7),
        _x(NCCL_KERNEL, 20, 40, "kernel", tid=40, stream=40),
        distributedInfo={"backend": "nccl", "rank": 0},
    )
    assert (found.device, found.backend, found.steps, found.collectives) == ("cuda", "nccl", 1, 1)
    assert (found.window_us, found.compute_us, found.communication_us) == (100, 100, 40)
    assert found.exposed_us == 0
    assert found.overlap == 1.0
    assert found.share == pytest.approx(0.4)
    assert found.exposed_share == 0


def test_memcpy_is_not_computation_on_a_gpu() -> None:
    found = _summary(
        _step(1, 0, 100),
        _x(GEMM_KERNEL, 0, 10, "kernel", stream=7),
        _x("Memcpy DtoD (Device -> Device)", 20, 40, "gpu_memcpy", stream=7),
        _x(NCCL_KERNEL, 20, 40, "kernel", stream=40),
    )
    assert found.compute_us == 10
    assert found.exposed_us == 40
    assert found.overlap == 0.0


def test_a_synchronous_all_reduce_blocking_the_main_thread_is_exposed() -> None:
    # The blocked call sits inside a parent op that spans it: the parent must not hide it.
    found = _summary(
        _step(1, 0, 100),
        _x("aten::mm", 0, 25, "cpu_op"),
        _x("autograd::engine::evaluate_function: AddmmBackward0", 25, 65, "cpu_op"),
        _x("c10d::allreduce_", 30, 50, "cpu_op"),
        _x("record_param_comms", 31, 48, "cpu_op"),
        _x("aten::add_", 90, 5, "cpu_op"),
        _x("gloo:all_reduce", 32, 46, "user_annotation", tid=2),
        distributedInfo={"backend": "gloo"},
    )
    assert (found.device, found.backend, found.collectives) == ("cpu", "gloo", 1)
    assert found.communication_us == 46
    assert found.exposed_us == 46
    assert found.overlap == 0.0
    assert found.compute_us == 25 + 5 + 10 + 5  # mm, the parent before and after the call, add_


def test_an_asynchronous_all_reduce_under_main_thread_ops_is_hidden() -> None:
    found = _summary(
        _step(1, 0, 100),
        _x("c10d::allreduce_", 0, 2, "cpu_op"),
        _x("aten::wait", 90, 5, "cpu_op"),
        _x("autograd::engine::evaluate_function: AddmmBackward0", 2, 60, "cpu_op"),
        _x("gloo:all_reduce", 10, 60, "user_annotation", tid=2),
    )
    assert found.backend is None  # no distributedInfo
    assert found.communication_us == 60
    assert found.exposed_us == 8  # 62…70: the op ended, the wait had not begun
    assert found.overlap == pytest.approx(1 - 8 / 60)
    assert found.compute_us == 60


def test_other_threads_ops_are_not_the_main_threads_computation() -> None:
    found = _summary(
        _step(1, 0, 100),
        _x("aten::mm", 0, 10, "cpu_op"),
        _x("aten::copy_", 0, 100, "cpu_op", tid=3),  # e.g. a pin-memory thread
        _x("gloo:broadcast", 50, 20, "user_annotation", tid=2),
    )
    assert found.compute_us == 10
    assert found.exposed_us == 20


def test_time_outside_the_step_windows_is_ignored() -> None:
    found = _summary(
        _step(1, 100, 100),
        _step(2, 250, 50),
        _x("aten::mm", 90, 20, "cpu_op"),  # 10 inside
        _x("aten::mm", 150, 10, "cpu_op"),
        _x("aten::mm", 210, 30, "cpu_op"),  # between the steps
        _x("gloo:all_reduce", 50, 40, "user_annotation", tid=2),  # before: not counted
        _x("gloo:all_reduce", 195, 60, "user_annotation", tid=2),  # 5 + 5 inside
        _x("gloo:all_reduce", 320, 10, "user_annotation", tid=2),  # after
    )
    assert found.steps == 2
    assert found.window_us == 150
    assert found.compute_us == 20
    assert found.communication_us == 10
    assert found.exposed_us == 10
    assert found.collectives == 1


def test_without_step_markers_the_whole_span_is_one_window() -> None:
    found = _summary(
        _x("aten::mm", 10, 30, "cpu_op", tid=5),
        _x("aten::relu", 40, 10, "cpu_op", tid=5),
        _x("aten::add", 0, 1, "cpu_op", tid=6),  # a second, less busy thread
        _x("gloo:all_reduce", 45, 15, "user_annotation", tid=2),
    )
    assert found.steps == 1
    assert found.window_us == 50  # 10 … 60: the other thread's op is not analysed
    assert found.compute_us == 40
    assert found.exposed_us == 10


def test_traces_without_collectives_have_no_summary() -> None:
    assert communication_summary({}) is None
    assert (
        communication_summary({"traceEvents": [_step(1, 0, 10), _x("aten::mm", 0, 5, "cpu_op")]})
        is None
    )
    gpu = [_step(1, 0, 10), _x(GEMM_KERNEL, 0, 5, "kernel")]
    assert communication_summary({"traceEvents": gpu}) is None
    # gloo annotations are how a CPU trace shows collectives; on a GPU trace kernels decide.
    gpu.append(_x("nccl:all_reduce", 1, 2, "user_annotation"))
    assert communication_summary({"traceEvents": gpu}) is None


def test_to_dict_is_json_ready_and_has_the_derived_values() -> None:
    found = _summary(_step(1, 0, 100), _x("gloo:all_reduce", 0, 50, "user_annotation", tid=2))
    document = found.to_dict()
    assert document["share"] == 0.5
    assert document["exposed_share"] == 0.5
    assert document["overlap"] == 0.0
    assert document["compute_us"] == 0
    assert set(document) == {
        "device", "backend", "steps", "window_us", "compute_us", "compute_us_per_step",
        "communication_us", "exposed_us", "collectives", "share", "exposed_share", "overlap",
    }  # fmt: skip
    assert document["compute_us_per_step"] == [0]
    empty = CommunicationSummary(
        device="cpu", backend=None, steps=1, window_us=0, compute_us=0, communication_us=0,
        exposed_us=0, collectives=0,
    )  # fmt: skip
    assert (empty.share, empty.exposed_share, empty.overlap) == (0.0, 0.0, None)


@pytest.mark.parametrize(
    ("compute", "expected"),
    [([], None), ([5.0], None), ([0.0, 0.0], None), ([10.0, 8.0], 0.2), ([3.0, 3.0], 0.0),
     ([10.0, 0.0, 5.0], 1.0), ([8.0, 10.0, 9.0], 0.2)],
)  # fmt: skip
def test_rank_imbalance(compute: list[float], expected: float | None) -> None:
    found = rank_imbalance(compute)
    assert found == expected if expected is None else found == pytest.approx(expected)


# --- properties on random timelines ------------------------------------------------------------

SPANS = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 12)), max_size=6)
"""Integer (start, duration) pairs on a 0…52 µs timeline."""


def _cells(spans: list[tuple[int, int]]) -> set[int]:
    """The unit cells [t, t+1) the spans cover."""
    return {t for start, duration in spans for t in range(start, start + duration)}


@st.composite
def timelines(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, set[int]]]:
    """A random trace and, by brute force, the cells of each kind of time it should report."""
    gpu = draw(st.booleans())
    steps = draw(
        st.lists(st.tuples(st.integers(0, 40), st.integers(1, 12)), min_size=1, max_size=3)
    )
    starts = sorted({start for start, _ in steps})  # one marker per start, as a profiler writes
    steps = [(start, next(d for s, d in steps if s == start)) for start in starts]
    talking = draw(SPANS.filter(bool))
    busy = draw(SPANS)
    blocked = [] if gpu else draw(SPANS)
    events = [_step(number, start, duration) for number, (start, duration) in enumerate(steps)]
    if gpu:
        events += [_x(NCCL_KERNEL, s, d, "kernel", stream=40) for s, d in talking]
        events += [_x(GEMM_KERNEL, s, d, "kernel", stream=7) for s, d in busy]
    else:
        events += [_x("gloo:all_reduce", s, d, "user_annotation", tid=2) for s, d in talking]
        events += [_x("aten::mm", s, d, "cpu_op") for s, d in busy]
        events += [_x("c10d::allreduce_", s, d, "cpu_op") for s, d in blocked]
    window = _cells(steps)
    compute = (_cells(busy) - _cells(blocked)) & window
    communication = _cells(talking) & window
    cells = {"window": window, "compute": compute, "communication": communication,
             "exposed": communication - compute}  # fmt: skip
    return {"traceEvents": events}, cells


@settings(max_examples=300, deadline=None, derandomize=True)
@given(timelines())
@pytest.mark.slow
def test_summary_invariants_and_exact_values_on_random_timelines(
    drawn: tuple[dict[str, Any], dict[str, set[int]]],
) -> None:
    trace, cells = drawn
    found = communication_summary(trace)
    assert found is not None
    assert 0 <= found.exposed_us <= found.communication_us <= found.window_us
    assert 0 <= found.compute_us <= found.window_us
    assert 0 <= found.exposed_share <= found.share <= 1
    assert found.overlap is None or 0 <= found.overlap <= 1
    assert (found.overlap is None) == (found.communication_us == 0)
    assert found.window_us == len(cells["window"])
    assert found.compute_us == len(cells["compute"])
    assert found.communication_us == len(cells["communication"])
    assert found.exposed_us == len(cells["exposed"])


def test_step_imbalance_takes_each_ranks_least_disturbed_step() -> None:
    # Rank 0's second step was stretched by a neighbour (40); its work is its quickest step.
    assert step_imbalance([[12.0, 40.0, 11.0], [20.0, 22.0, 21.0]]) == pytest.approx(0.45)
    assert step_imbalance([[10.0, 30.0], [10.0, 11.0]]) == 0.0
    assert step_imbalance([[10.0]]) is None
    assert step_imbalance([[10.0], []]) is None


def test_per_step_compute_sums_to_the_window_total() -> None:
    found = _summary(
        _step(1, 0, 100), _step(2, 100, 100),
        _x("aten::mm", 10, 30, "cpu_op"), _x("aten::mm", 120, 50, "cpu_op"),
        _x("gloo:all_reduce", 60, 20, "user_annotation", tid=2),
    )  # fmt: skip
    assert found.compute_us_per_step == (30, 50)
    assert sum(found.compute_us_per_step) == found.compute_us
