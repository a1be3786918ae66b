"""``perfgate merge``: shards of one run become one run; anything incomparable is refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from fixture_types import CliRun

from perfgate.documents.result import RunResult, load_result, write_result
from perfgate.errors import UsageError
from perfgate.merge import merge_shards

H200 = Path(__file__).resolve().parent / "data" / "h200" / "gpu-bf16.json"


def shards() -> tuple[RunResult, RunResult]:
    run = load_result(H200)
    first = dataclasses.replace(
        run,
        run_id="00000000-0000-4000-8000-000000000001",
        settings=dataclasses.replace(run.settings, shard="1/2"),
        workloads=run.workloads[:2],
    )
    second = dataclasses.replace(
        run,
        run_id="00000000-0000-4000-8000-000000000002",
        started_at="2026-11-30T00:40:00+00:00",
        finished_at="2026-11-30T00:45:00+00:00",
        settings=dataclasses.replace(run.settings, shard="2/2"),
        workloads=run.workloads[2:],
    )
    return first, second


def test_shards_merge_into_one_run_with_a_stable_id() -> None:
    first, second = shards()
    merged = merge_shards([first, second])
    assert [w.name for w in merged.workloads] == ["gpt", "resnet", "mlp"]
    assert merged.settings.shard is None
    assert merged.finished_at == "2026-11-30T00:45:00+00:00"
    assert merged.run_id == merge_shards([second, first]).run_id  # a retried job: same id
    assert merged.run_id not in (first.run_id, second.run_id)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"suite": "other"}, "differ in suite"),
        ({"device": "cpu"}, "differ in device"),
        ("commit", "differ in commit"),
        ("settings", "differ in settings"),
        ("environment", "different machine types"),
        ("duplicate", "more than one shard: mlp"),
    ],
)
def test_incomparable_shards_are_refused_naming_the_difference(
    change: object, message: str
) -> None:
    first, second = shards()
    if change == "commit":
        second = dataclasses.replace(
            second, source=dataclasses.replace(second.source, commit="f" * 40)
        )
    elif change == "settings":
        second = dataclasses.replace(
            second, settings=dataclasses.replace(second.settings, steps=99)
        )
    elif change == "environment":
        gpu = {**second.environment["gpu"], "model": "NVIDIA H100 80GB HBM3"}
        second = dataclasses.replace(second, environment={**second.environment, "gpu": gpu})
    elif change == "duplicate":
        second = dataclasses.replace(second, workloads=[*second.workloads, *second.workloads])
    else:
        assert isinstance(change, dict)
        second = dataclasses.replace(second, **change)
    with pytest.raises(UsageError, match=message):
        merge_shards([first, second])


@pytest.mark.slow
def test_the_command_writes_a_valid_document(tmp_path: Path, perfgate_cli: CliRun) -> None:
    paths = []
    for index, shard in enumerate(shards(), start=1):
        paths.append(tmp_path / f"shard{index}.json")
        write_result(paths[-1], shard)
    out = tmp_path / "run.json"
    done = perfgate_cli("merge", *map(str, paths), "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "merged 2 shards (3 workloads)" in done.stdout
    assert [w.name for w in load_result(out).workloads] == ["gpt", "resnet", "mlp"]
    again = perfgate_cli("merge", str(paths[0]), str(paths[0]), "--out", str(out), cwd=tmp_path)
    assert again.returncode == 2 and "given twice" in again.stderr
