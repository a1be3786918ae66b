"""The pure parts of a distributed repeat: combining the ranks' documents, the summary, and a
single-process document staying exactly as an older perfgate wrote it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from perfgate.distributed.ranks import combine_ranks, read_rank_documents
from perfgate.distributed.summary import distributed_summary
from perfgate.documents.result import (
    RESULT,
    RankResult,
    RepeatResult,
    load_result,
    result_from_dict,
)
from perfgate.files import rank_output_path, rank_trace_path
from perfgate.runner.launch import torchrun_command
from perfgate.runner.pycommand import module_command

DATA = Path(__file__).parent / "data"


def _ok(steps: list[float], **extra: Any) -> dict[str, Any]:
    return {"status": "ok", "step_times_s": steps, "steady_start": 0, "timer": "perf_counter",
            "peak_memory": {"rss_bytes": 1}, **extra}  # fmt: skip


def test_the_slowest_rank_decides_and_every_rank_is_kept() -> None:
    merged = combine_ranks({0: _ok([0.010, 0.012, 0.011]), 1: _ok([0.020, 0.019, 0.021])}, 2)
    assert merged["status"] == "ok"
    assert merged["slowest_rank"] == 1
    assert merged["step_times_s"] == [0.020, 0.019, 0.021]
    assert [r["rank"] for r in merged["ranks"]] == [0, 1]
    assert [r["median_step_s"] for r in merged["ranks"]] == [0.011, 0.020]


def test_a_ranks_own_error_beats_the_peers_it_took_down() -> None:
    documents = {
        0: {"status": "error", "error": "RuntimeError: Connection reset by peer", "failed_at": 1.0},
        1: {"status": "error", "error": "ValueError: bad batch", "failed_at": 2.0},
    }
    combined = combine_ranks(documents, 2)
    assert combined["status"] == "error"
    assert combined["error"].startswith("rank 1 (then rank 0 failed too): ValueError: bad batch")


def test_the_first_of_several_own_errors_is_the_cause() -> None:
    documents = {
        0: {"status": "error", "error": "B", "failed_at": 5.0},
        1: {"status": "error", "error": "A", "failed_at": 4.0},
    }
    assert combine_ranks(documents, 2)["error"] == "rank 1 (then rank 0 failed too): A"


def test_a_rank_that_wrote_nothing_is_a_crash_named_with_what_its_peer_saw() -> None:
    documents = {0: {"status": "error", "error": "x\nRuntimeError: Connection closed by peer"}}
    combined = combine_ranks(documents, 2)
    assert combined == {
        "status": "crashed",
        "error": "rank 1 wrote no result (crashed or was killed); rank 0 then failed: "
        "RuntimeError: Connection closed by peer",
    }


def test_bad_input_on_any_rank_wins() -> None:
    documents = {0: _ok([0.01]), 1: {"status": "usage_error", "error": "knob x is unknown"}}
    assert combine_ranks(documents, 2) == {
        "status": "usage_error",
        "error": "rank 1: knob x is unknown",
    }


def test_documents_are_read_per_rank_and_garbage_is_absent(tmp_path: Path) -> None:
    out = tmp_path / "w-0.out.json"
    assert rank_output_path(out, 1) == tmp_path / "w-0.out.rank1.json"
    rank_output_path(out, 0).write_text(json.dumps(_ok([0.01])))
    rank_output_path(out, 1).write_text("{not json")
    assert set(read_rank_documents(out, 2)) == {0}
    assert rank_trace_path(tmp_path / "t.json", 0) == tmp_path / "t.json"
    assert rank_trace_path(tmp_path / "t.json", 2) == tmp_path / "t.rank2.json"


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
