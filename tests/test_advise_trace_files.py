"""``perfgate advise --trace``: advice, a diagnosis and a trace diff from profiler traces alone.

On every real trace in ``tests/data/advise/`` (A100, V100, H100, B200, MI300) the advice must
hold at least the findings the recorded evidence gives (``trace_expectations.EXPECTED``), with
every configuration fact read by perfgate from the trace itself: no recorder, no assumption
but the one the advice names. A trace recorded here the way teams record them
(``torch.profiler`` with ``tensorboard_trace_handler``) goes through the command line, and two
of them, before and after a change, through the trace diff.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from cli_in_process import invoke
from trace_expectations import EXPECTED

from perfgate.advise.trace_session import TraceAdviseRequest, advise_traces_session
from perfgate.documents.advice import ADVICE, WorkloadAdvice
from perfgate.trace.diff import diff_traces
from perfgate.trace.loader import parse_trace
from perfgate.trace.timeline import build_timeline

DATA = Path(__file__).resolve().parent / "data" / "advise"
SMALL = {"a100-alexnet-forward", "h100-qwen-0.5b-inference-sdpa"}
STEP_ANNOTATIONS = {"a100-alexnet-forward": "[param|pytorch.model.alex_net|0|0|0|measure|forward]"}
"""Traces without ``ProfilerStep#`` marks, and the range that spans their step."""


def advise_file(name: str) -> WorkloadAdvice:
    request = TraceAdviseRequest(
        traces=[DATA / f"{name}.json.gz"], step_annotation=STEP_ANNOTATIONS.get(name)
    )
    (result,) = advise_traces_session(request)
    return result


@pytest.mark.parametrize(
    "name",
    [n if n in SMALL else pytest.param(n, marks=pytest.mark.slow) for n in sorted(EXPECTED)],
)
def test_a_trace_alone_gives_the_recorded_findings(name: str) -> None:
    result = advise_file(name)
    fired = {item.rule_id for item in result.advice}
    expected, _ = EXPECTED[name]
    assert fired >= expected, f"missing {sorted(expected - fired)}"
    assert result.source == str(DATA / f"{name}.json.gz") and result.diagnosis is not None
    # Every configuration fact the rules read came from the trace, with its reason.
    inferred = {fact.name: fact for fact in result.inferred}
    for item in result.advice:
        for key in item.evidence:
            if key in inferred:
                assert inferred[key].reason


def test_advice_that_rests_on_an_assumption_says_so() -> None:
    result = advise_file("v100-train")
    (cudnn,) = [item for item in result.advice if item.rule_id == "cudnn-benchmark-off"]
    assert any(note.startswith("assumes cudnn_benchmark = false: ") for note in cudnn.notes)
    (fact,) = [fact for fact in result.inferred if fact.name == "cudnn_benchmark"]
    assert fact.assumed and fact.value is False
    others = [item for item in result.advice if "cudnn_benchmark" not in item.evidence]
    assert others and all(not note.startswith("assumes") for i in others for note in i.notes)


def test_the_facts_come_from_the_trace() -> None:
    """Qwen on an H100: nothing compiled, 16 sequences a batch, 3 % of the memory reserved —
    read from the trace's ops, input shapes, ``[memory]`` samples and device properties."""
    result = advise_file("h100-qwen-0.5b-inference-sdpa")
    facts = {fact.name: fact.value for fact in result.inferred}
    assert facts["compiled"] is False
    assert facts["batch_size"] == 16.0  # [16, 559] token ids, [16, 559, 896] activations
    assert facts["memory_total_bytes"] == 85018279936.0  # the H100's totalGlobalMem
    assert 0.96 < float(facts["memory_headroom_fraction"]) < 0.97
    assert result.evidence["gpu_name"] == "NVIDIA H100 80GB HBM3"


def test_a_trace_without_step_marks_takes_its_step_from_a_named_range() -> None:
    marked = advise_file("a100-alexnet-forward")
    assert marked.evidence["profiled_steps"] == 1.0
    facts = {fact.name: fact.value for fact in marked.inferred}
    assert facts["conv_layer_count"] == 5.0  # AlexNet's five convolutions, once
    whole = advise_traces_session(
        TraceAdviseRequest(traces=[DATA / "a100-alexnet-forward.json.gz"])
    )
    assert "profiled_steps" not in whole[0].evidence  # no marks: no step time is claimed


# --- the trace diff on two real traces of one job --------------------------------------------


@pytest.mark.slow
def test_two_traces_of_one_job_diff_into_what_moved() -> None:
    """The A100 job before (control) and after (test) a change: the step grew 60 %, and the
    largest mover is the device-to-device copies, 3 a step before and 774 after."""
    before = build_timeline(parse_trace(_json("a100-train-control")))
    after = build_timeline(parse_trace(_json("a100-train-test")))
    diff = diff_traces(before, after, before_path="control", after_path="test", top=10)
    assert diff.step_change == pytest.approx(124.21 / 77.53 - 1, abs=0.01)
    top = diff.changes[0]
    assert (top.side, top.name, top.change) == (
        "kernel",
        "Memcpy DtoD (Device -> Device)",
        "slower",
    )
    assert (top.before_calls, round(top.after_calls)) == (3.0, 774)
    assert top.step_share == pytest.approx((top.after_us - top.before_us) / 77528.5, rel=1e-3)
    assert [c.change for c in diff.changes].count("added") >= 3  # new sgemm kernels on V100s
    assert len(diff.changes) == 10 and diff.omitted > 0


def _json(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(gzip.decompress((DATA / f"{name}.json.gz").read_bytes()))
    return loaded


# --- hand-made traces: the diff's classes, exactly -------------------------------------------


def _op(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1}


def _steps(ops_per_step: list[tuple[str, float]], steps: int) -> dict[str, Any]:
    """``steps`` steps of 1000 µs, each running ``ops_per_step`` back to back."""
    events = []
    for step in range(steps):
        start = step * 1000.0
        events.append(
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "ts": start,
             "dur": 1000.0, "pid": 1, "tid": 1}
        )  # fmt: skip
        at = start
        for name, dur in ops_per_step:
            events.append(_op(name, at, dur))
            at += dur
    return {"traceEvents": events}


def test_the_diff_sorts_each_mover_into_its_class() -> None:
    before = _steps(
        [("aten::mm", 300), ("aten::add", 100), ("aten::relu", 50), ("aten::mul", 10)], 2
    )
    after = _steps(
        [("aten::mm", 450), ("aten::copy_", 120), ("aten::relu", 51), ("aten::mul", 2),
         ("aten::mul", 2), ("aten::mul", 2)],
        4,
    )  # fmt: skip
    diff = diff_traces(
        build_timeline(parse_trace(before)),
        build_timeline(parse_trace(after)),
        before_path="a",
        after_path="b",
    )
    moved = {c.name: c for c in diff.changes}
    assert moved["aten::mm"].change == "slower" and moved["aten::mm"].step_share == pytest.approx(
        0.15
    )
    assert moved["aten::copy_"].change == "added" and moved["aten::copy_"].after_us == 120
    assert moved["aten::add"].change == "removed" and moved["aten::add"].before_calls == 1
    # 10 µs once a step becomes 2 µs three times: 0.4 % of the step, below the time floor.
    assert moved["aten::mul"].change == "more frequent" and moved["aten::mul"].after_calls == 3
    assert "aten::relu" not in moved  # 1 µs a step: no mover
    assert [c.name for c in diff.changes] == ["aten::mm", "aten::copy_", "aten::add", "aten::mul"]
    assert diff.before.steps == 2 and diff.after.steps == 4 and diff.step_change == 0.0


# --- the command line, on traces recorded here as teams record them --------------------------


def record_traces(folder: Path, *, extra_copy: bool) -> None:
    """A few steps of a small training loop under ``torch.profiler`` with
    ``tensorboard_trace_handler``, as the PyTorch tutorials have it; ``extra_copy`` adds a
    ``.contiguous()`` of a transposed activation to every step."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batch = torch.randn(32, 64)
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=4, repeat=1)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=schedule,
        on_trace_ready=torch.profiler.tensorboard_trace_handler(str(folder), use_gzip=True),
        record_shapes=True,
    ) as profiler:
        for _ in range(5):
            out = model(batch)
            if extra_copy:
                out = out.t().contiguous().t()
            loss = out.square().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            profiler.step()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    before, after = tmp_path_factory.mktemp("before"), tmp_path_factory.mktemp("after")
    record_traces(before, extra_copy=False)
    record_traces(after, extra_copy=True)
    return before, after


def test_a_tensorboard_folder_is_advised_on_the_command_line(
    recorded: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, _ = recorded
    (trace,) = list(folder.iterdir())
    assert trace.name.endswith(".pt.trace.json.gz")
    out = tmp_path / "advice.json"
    ended = invoke("advise", "--trace", str(folder), "--json", str(out))
    assert ended.code == 0, ended.stderr
    assert "(trace)" in ended.stdout and "from the trace: compiled = false" in ended.stdout
    report = ADVICE.load(out)
    (workload,) = report.workloads
    assert workload.source == str(trace) and workload.name == trace.name.removesuffix(
        ".pt.trace.json.gz"
    )
    assert workload.evidence["device"] == "cpu" and workload.evidence["profiled_steps"] == 4.0
    assert workload.diagnosis is not None and workload.changes is None


def test_the_diff_names_the_op_a_change_added(recorded: tuple[Path, Path], tmp_path: Path) -> None:
    before, after = recorded
    out = tmp_path / "advice.json"
    ended = invoke(
        "advise", "--trace", str(after), "--before", str(before), "--json", str(out), "--top", "40"
    )
    assert ended.code == 0, ended.stderr
    assert "changes per step since" in ended.stdout
    (workload,) = ADVICE.load(out).workloads
    assert workload.changes is not None
    added = {c.name for c in workload.changes.changes if c.change == "added"}
    # The copy .contiguous() makes: its op, and the copy kernel below it on the CPU.
    assert {"aten::contiguous", "aten::clone"} <= added, added


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--trace", "missing.json"), "trace missing.json does not exist"),
        (("--trace", "empty-folder"), "holds no trace file"),
        (("--trace", "not-gzip.json.gz"), "is not a readable gzip file"),
        (("--trace", "not-json.json"), "is not JSON"),
        (("--trace", "no-events.json"), "holds no list of trace events"),
        (("--trace", "bad-events.json"), "holds no list of trace events"),
        (("--trace", "ok.json", "--workload", "mlp"), "--workload profile a workload"),
        (("--trace", "ok.json", "--verify"), "--verify profile a workload"),
        (("--before", "ok.json"), "--before and --step-annotation need --trace"),
        (("--trace", "ok.json", "--trace", "ok.json", "--before", "ok.json"), "exactly one"),
        (("--trace", "ok.json", "--step-annotation", "nope"), "no range named 'nope'"),
        (("--trace", "ok.json", "--top", "0"), "--top 0 must be at least 1"),
        (("--trace", "ok.json", "--rule", "no-such-rule"), "unknown rule id"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], says: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty-folder").mkdir()
    (tmp_path / "not-gzip.json.gz").write_bytes(b"\x1f\x8bnot really gzip")
    (tmp_path / "not-json.json").write_text("{traceEvents: oops")
    (tmp_path / "no-events.json").write_text(json.dumps({"schemaVersion": 1}))
    (tmp_path / "bad-events.json").write_text(json.dumps({"traceEvents": [1, 2]}))
    (tmp_path / "ok.json").write_text(json.dumps(_steps([("aten::mm", 500)], 2)))
    ended = invoke("advise", *args)
    assert ended.code == 2, (ended.stdout, ended.stderr)
    assert says in ended.stderr and "Traceback" not in ended.stderr
    assert len(ended.stderr.strip().splitlines()) == 1, ended.stderr


def test_a_malformed_event_is_read_around(tmp_path: Path) -> None:
    """Times that are not numbers, args that are not objects: skipped, not crashed on."""
    document = _steps([("aten::mm", 500)], 2)
    document["traceEvents"] += [
        {"ph": "X", "cat": "cpu_op", "name": "aten::bad", "ts": "soon", "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::odd", "ts": 10, "dur": 1, "args": [1]},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": float("nan"), "dur": 1},
    ]
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(document))
    ended = invoke("advise", "--trace", str(path))
    assert ended.code == 0, ended.stderr
