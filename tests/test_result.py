"""The result document: schema validation, atomic writes, refusal of newer formats."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from perfgate.documents.result import (
    RepeatResult,
    RunResult,
    RunSettings,
    SourceInfo,
    WorkloadResult,
    WorkloadSummary,
    load_result,
    validate_document,
    write_result,
)
from perfgate.errors import UsageError
from perfgate.files import write_json_atomic


def tiny_result() -> RunResult:
    repeat = RepeatResult(
        index=0, status="ok", timer="perf_counter", step_times_s=[0.1, 0.1], losses=[1.0, None]
    )
    workload = WorkloadResult(
        name="mlp",
        version=1,
        kind="builtin",
        factory="perfgate.workloads.mlp:build",
        preset="smoke",
        definition_hash="a" * 64,
        knobs={},
        params={},
        device="cpu",
        status="ok",
        repeats=[repeat],
        summary=WorkloadSummary(ok_repeats=1, median_step_s=0.1, mfu_reason="CPU"),
    )
    return RunResult(
        run_id="12345678-1234-1234-1234-123456789abc",
        perfgate_version="0.1.0",
        started_at="2026-11-29T18:00:00+00:00",
        finished_at="2026-11-29T18:01:00+00:00",
        suite="smoke",
        device="cpu",
        settings=RunSettings(repeats=1, steps=2, warmup=1, timeout_s=10, threads=2, seed=0),
        source=SourceInfo(),
        environment={},
        workloads=[workload],
    )


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_result(path, tiny_result())
    loaded = load_result(path)
    assert loaded == tiny_result()
    assert json.loads(path.read_text())["status"] == "ok"


def mutate(data: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(data)
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        (["run_id"], "not-a-uuid", "at run_id"),
        (["workloads", 0, "status"], "fine", "at workloads/0/status"),
        (["workloads", 0, "repeats", 0, "step_times_s"], [], "at workloads/0/repeats/0"),
        (["workloads", 0, "repeats", 0, "step_times_s"], [-1.0], "step_times_s/0"),
        (["settings", "repeats"], 0, "at settings/repeats"),
        (["schema"], "other", "not a perfgate.result document"),
        (["schema_version"], 99, "written by a newer perfgate"),
    ],
)
def test_invalid_documents_are_rejected_with_the_location(
    path: list[Any], value: Any, needle: str
) -> None:
    data = mutate(tiny_result().to_dict(), path, value)
    with pytest.raises(UsageError) as caught:
        validate_document(data)
    assert needle in caught.value.one_line()


def test_a_failed_repeat_must_say_why() -> None:
    data = mutate(tiny_result().to_dict(), ["workloads", 0, "repeats", 0, "status"], "crashed")
    with pytest.raises(UsageError, match="repeats/0"):
        validate_document(data)


def test_truncated_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_result(path, tiny_result())
    path.write_text(path.read_text()[:100])
    with pytest.raises(UsageError, match="is not valid JSON"):
        load_result(path)


def test_atomic_write_leaves_the_old_file_when_serialisation_fails(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_json_atomic(path, {"a": 1})
    with pytest.raises(ValueError):
        write_json_atomic(path, {"a": float("nan")})  # JSON has no NaN: refused mid-write
    assert json.loads(path.read_text()) == {"a": 1}
    assert os.listdir(tmp_path) == ["r.json"]  # no temporary file left behind


def test_unwritable_folder_is_a_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UsageError, match="cannot write"):
        write_json_atomic(blocker / "r.json", {})
