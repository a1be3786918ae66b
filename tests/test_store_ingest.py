"""Ingest: idempotent by run id, refuses a reused id, writes metric summaries, fails clearly."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from conftest_db import STEP_TIMES, count_rows, fake_run, query
from fixture_types import CliRun

from perfgate.documents.result import write_result
from perfgate.errors import ExitCode, UsageError
from perfgate.store.engine import StoreUnavailable, make_engine
from perfgate.store.ingest import RunConflict, store_run

pytest_plugins = ["conftest_db"]


def metric_rows(url: str) -> dict[str, tuple[float, list[float]]]:
    rows = query(url, "SELECT metric, median, repeat_values FROM metric_summaries")
    return {m: (median, json.loads(v) if isinstance(v, str) else v) for m, median, v in rows}


def test_the_same_run_twice_is_stored_once(database_url: str, tmp_path: Path) -> None:
    run = fake_run()
    assert store_run(database_url, run, tmp_path) is True
    assert store_run(database_url, run, tmp_path) is False
    counts = [count_rows(database_url, t) for t in ("runs", "workload_results", "repeat_samples")]
    assert counts == [1, 1, 3]
    assert count_rows(database_url, "environments") == 1
    assert store_run(database_url, fake_run(), tmp_path) is True  # same environment, new run
    assert count_rows(database_url, "environments") == 1


def test_a_reused_run_id_with_other_content_is_refused(database_url: str, tmp_path: Path) -> None:
    run_id = "00000000-0000-4000-8000-000000000001"
    store_run(database_url, fake_run(run_id), tmp_path)
    with pytest.raises(RunConflict) as conflict:
        store_run(database_url, fake_run(run_id, loss=2.0), tmp_path, origin=Path("b.json"))
    assert isinstance(conflict.value, UsageError)
    assert conflict.value.exit_code == ExitCode.USAGE
    message = str(conflict.value)
    assert message.startswith(f"b.json: run {run_id} is already stored")
    assert "differs from the stored one" in message
    assert count_rows(database_url, "runs") == 1


def test_metric_summaries_per_repeat(database_url: str, tmp_path: Path) -> None:
    store_run(database_url, fake_run(), tmp_path)
    medians = [statistics.median(t * (1 + i / 10) for t in STEP_TIMES[1:]) for i in range(2)]
    metrics = metric_rows(database_url)
    assert set(metrics) == {"step_time_s", "samples_per_s", "tflops", "peak_memory_bytes"}
    assert metrics["step_time_s"][1] == pytest.approx(medians)
    assert metrics["step_time_s"][0] == pytest.approx(statistics.median(medians))
    assert metrics["samples_per_s"][1] == pytest.approx([32 / m for m in medians])
    assert metrics["tflops"][1] == pytest.approx([2e9 / m / 1e12 for m in medians])
    assert metrics["peak_memory_bytes"] == (1000.5, [1000, 1001])  # rss on CPU


def test_gpu_runs_get_mfu_and_cuda_memory(database_url: str, tmp_path: Path) -> None:
    store_run(database_url, fake_run(device="cuda"), tmp_path)
    metrics = metric_rows(database_url)
    tflops = metrics["tflops"][1]
    assert metrics["mfu"][1] == pytest.approx([t / 100.0 for t in tflops])
    assert metrics["peak_memory_bytes"][1] == [5_000_000_000, 5_000_000_001]
    ((peak,),) = query(database_url, "SELECT max(peak_memory_bytes) FROM workload_results")
    assert peak == 5_000_000_001  # past 32 bits: migration 0002 widened the column


def test_read_only_sqlite_is_store_unavailable(tmp_path: Path) -> None:
    database = tmp_path / "perfgate.db"
    make_engine(f"sqlite:///{database}", tmp_path).dispose()
    read_only = f"sqlite:///file:{database}?mode=ro&uri=true"
    with pytest.raises(StoreUnavailable, match="readonly") as unavailable:
        store_run(read_only, fake_run(), tmp_path)
    assert unavailable.value.exit_code == ExitCode.INFRASTRUCTURE


def test_unreachable_postgres_on_ingest_masks_the_password(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable) as unavailable:
        store_run("postgres://perfgate:hunter2@127.0.0.1:1/perfgate", fake_run(), tmp_path)
    assert "hunter2" not in str(unavailable.value) and "***" in str(unavailable.value)


@pytest.mark.slow
def test_cli_ingest_names_the_conflicting_file(tmp_path: Path, perfgate_cli: CliRun) -> None:
    run_id = "00000000-0000-4000-8000-000000000002"
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    write_result(first, fake_run(run_id))
    write_result(second, fake_run(run_id, loss=3.0))
    (tmp_path / "perfgate.toml").write_text('database_url = "sqlite:///runs.db"\n')
    completed = perfgate_cli("ingest", str(first), str(first), str(second), cwd=tmp_path)
    assert completed.returncode == ExitCode.USAGE, completed.stderr
    assert f"second.json: run {run_id} is already stored" in completed.stderr
