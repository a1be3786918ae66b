"""The pure parts of a distributed repeat: combining the ranks' reports, the summary, and a
single-process document staying exactly as an older perfgate wrote it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import factories
import pytest

from perfgate.distributed.ranks import combine_ranks, read_rank_reports
from perfgate.distributed.summary import distributed_summary
from perfgate.documents.result import (
    RESULT,
    RankResult,
    RepeatResult,
    load_result,
    result_from_dict,
)
from perfgate.documents.worker import WORKER_REPORT, RankPlace, RepeatReport, WorkerReport
from perfgate.files import rank_output_path, rank_trace_path
from perfgate.runner.launch import torchrun_command
from perfgate.runner.pycommand import module_command

DATA = Path(__file__).parent / "data"


def _ok(steps: list[float], rank: int = 0, world_size: int = 2) -> WorkerReport:
    measured = factories.measurement(
        timer="perf_counter",
        warmup_times_s=[],
        step_times_s=steps,
        steady_start=0,
        peak_memory={"rss_bytes": 1},
        communication=None,
    )
    return WorkerReport(
        status="ok",
        rank=RankPlace(rank=rank, world_size=world_size, backend="gloo"),
        measurement=measured,
    )


def _failed(error: str, failed_at: float | None = None) -> WorkerReport:
    return WorkerReport(status="error", error=error, failed_at=failed_at)


def test_the_slowest_rank_decides_and_every_rank_is_kept() -> None:
    merged = combine_ranks({0: _ok([0.010, 0.012, 0.011]), 1: _ok([0.020, 0.019, 0.021], 1)}, 2)
    assert merged.status == "ok" and merged.report is not None
    assert merged.slowest_rank == 1 and merged.report.rank == RankPlace(
        rank=1, world_size=2, backend="gloo"
    )
    assert merged.report.measurement is not None
    assert merged.report.measurement.step_times_s == [0.020, 0.019, 0.021]
    assert merged.ranks is not None
    assert [r.rank for r in merged.ranks] == [0, 1]
    assert [r.median_step_s for r in merged.ranks] == [0.011, 0.020]
    assert [r.peak_memory for r in merged.ranks] == [{"rss_bytes": 1}] * 2


def test_a_ranks_own_error_beats_the_peers_it_took_down() -> None:
    reports = {
        0: _failed("RuntimeError: Connection reset by peer", 1.0),
        1: _failed("ValueError: bad batch", 2.0),
    }
    combined = combine_ranks(reports, 2)
    assert combined.status == "error"
    assert combined.error is not None
    assert combined.error.startswith("rank 1 (then rank 0 failed too): ValueError: bad batch")


def test_the_first_of_several_own_errors_is_the_cause() -> None:
    reports = {0: _failed("B", 5.0), 1: _failed("A", 4.0)}
    assert combine_ranks(reports, 2).error == "rank 1 (then rank 0 failed too): A"


def test_a_rank_that_wrote_nothing_is_a_crash_named_with_what_its_peer_saw() -> None:
    reports = {0: _failed("x\nRuntimeError: Connection closed by peer")}
    assert combine_ranks(reports, 2) == RepeatReport(
        status="crashed",
        error="rank 1 wrote no result (crashed or was killed); rank 0 then failed: "
        "RuntimeError: Connection closed by peer",
    )


def test_bad_input_on_any_rank_wins() -> None:
    reports = {0: _ok([0.01]), 1: WorkerReport(status="usage_error", error="knob x is unknown")}
    assert combine_ranks(reports, 2) == RepeatReport(
        status="usage_error", error="rank 1: knob x is unknown"
    )


def test_a_report_that_cannot_be_trusted_beats_everything() -> None:
    reports = {0: WorkerReport(status="usage_error", error="knob x is unknown")}
    combined = combine_ranks(reports, 2, {1: "rank 1's report is not valid JSON (…)"})
    assert combined == RepeatReport(
        status="malformed", error="rank 1's report is not valid JSON (…)"
    )


def test_reports_are_read_per_rank_and_garbage_is_named(tmp_path: Path) -> None:
    out = tmp_path / "w-0.out.json"
    assert rank_output_path(out, 1) == tmp_path / "w-0.out.rank1.json"
    spec = factories.worker_spec(warmup=0, steps=1, nproc_per_node=3, profile=None, timeout_s=60.0)
    rank_output_path(out, 0).write_text(json.dumps(WORKER_REPORT.dump(_ok([0.01], 0, 3))))
    rank_output_path(out, 1).write_text("{not json")
    reports, malformed = read_rank_reports(out, spec, 3)  # rank 2 wrote nothing
    assert set(reports) == {0} and reports[0] == _ok([0.01], 0, 3)
    assert list(malformed) == [1]
    assert malformed[1].startswith("rank 1's report is not valid JSON (Expecting")
    assert rank_trace_path(tmp_path / "t.json", 0) == tmp_path / "t.json"
    assert rank_trace_path(tmp_path / "t.json", 2) == tmp_path / "t.rank2.json"


def test_a_report_from_another_rank_is_not_trusted(tmp_path: Path) -> None:
    out = tmp_path / "w-0.out.json"
    spec = factories.worker_spec(warmup=0, steps=1, nproc_per_node=2, profile=None)
    for rank in (0, 1):  # rank 1 claims to be rank 0
        rank_output_path(out, rank).write_text(json.dumps(WORKER_REPORT.dump(_ok([0.01]))))
    reports, malformed = read_rank_reports(out, spec, 2)
    assert set(reports) == {0}
    assert malformed == {1: "rank 1's report says it is rank 0 of 2, not rank 1 of 2"}


def test_torchrun_is_the_launcher() -> None:
    command = torchrun_command(4, Path("s.json"), Path("o.json"))
    launcher = module_command("perfgate.distributed.torchrun")
    assert command[: len(launcher)] == launcher and command[len(launcher)] == "--standalone"
    assert "--nproc-per-node=4" in command and "--max-restarts=0" in command
    rank = module_command("perfgate.runner.worker", "s.json", "o.json")
    assert command[-len(rank) - 1 :] == ["--no-python", *rank]


def _repeat(index: int, medians: list[float], windows: list[dict[str, Any] | None]) -> RepeatResult:
    return RepeatResult(
        index=index, status="ok", timer="perf_counter", step_times_s=[max(medians)],
        ranks=[
            RankResult(rank=r, median_step_s=m, step_times_s=[m], communication=w)
            for r, (m, w) in enumerate(zip(medians, windows, strict=True))
        ],
    )  # fmt: skip


def _window(
    share: float, exposed: float, overlap: float | None, steps: list[float]
) -> dict[str, Any]:
    return {"share": share, "exposed_share": exposed, "overlap": overlap,
            "compute_us": sum(steps), "compute_us_per_step": steps}  # fmt: skip


def test_the_summary_reads_spread_communication_and_imbalance() -> None:
    first = _repeat(
        0,
        [0.010, 0.008],
        [_window(0.4, 0.3, 0.25, [10, 30, 10]), _window(0.5, 0.5, 0.0, [6, 5, 9])],
    )
    second = _repeat(1, [0.012, 0.012], [None, None])
    summary = distributed_summary([first, second])
    assert summary["world_size"] == 2
    assert summary["rank_spread"] == pytest.approx((0.2 + 0.0) / 2)  # median of two repeats
    assert summary["communication_share"] == pytest.approx(0.45)
    assert summary["communication_exposed_share"] == pytest.approx(0.4)
    assert summary["communication_overlap"] == pytest.approx(0.125)
    assert summary["rank_imbalance"] == pytest.approx((10 - 5) / 10)  # quickest steps: 10 vs 5
    assert distributed_summary([RepeatResult(index=0, status="ok", step_times_s=[0.1])]) == {}


def test_a_single_process_document_is_written_as_before() -> None:
    """Fields added for distributed runs appear only when set: an existing document round-trips
    byte for byte, so a stored run's digest still matches when it is ingested again."""
    path = next(p for p in sorted((DATA / "h200").glob("*.json")) if "advice" not in p.name)
    original = json.loads(path.read_text())
    data = result_from_dict(original).to_dict()
    # (these documents predate source.subject, which, unlike the distributed fields, is always
    # written, and the header's schema_minor, which the ingest digest leaves out: the two
    # differences)
    assert data.pop("schema_minor") == RESULT.minor
    assert data == {**original, "source": {**original["source"], "subject": None}}
    assert "nproc_per_node" not in data["settings"]
    assert all("ranks" not in r for w in data["workloads"] for r in w["repeats"])
    load_result(path)
