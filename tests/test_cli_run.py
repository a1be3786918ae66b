"""``perfgate run`` end to end through the real CLI: smoke suite, storage, user workloads."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from fixture_types import CliRun

import perfgate
from perfgate.documents.result import load_result
from perfgate.errors import ExitCode

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parent.parent


def test_smoke_suite_runs_stores_and_summarises(tmp_path: Path, perfgate_cli: CliRun) -> None:
    out = tmp_path / "smoke.json"
    completed = perfgate_cli(
        "run",
        "--suite",
        "smoke",
        "--device",
        "cpu",
        "--repeats",
        "2",
        "--steps",
        "3",
        "--warmup",
        "1",
        "--out",
        str(out),
        cwd=tmp_path,
    )
    assert completed.returncode == ExitCode.OK, completed.stdout + completed.stderr
    result = load_result(out)
    assert [w.name for w in result.workloads] == ["gpt", "resnet", "mlp", "datapipe"]
    for workload in result.workloads:
        assert workload.status == "ok"
        assert len(workload.repeats) == 2
        assert all(len(r.step_times_s) == 3 and r.timer == "perf_counter" for r in workload.repeats)
        assert all(r.threads and r.threads >= 1 for r in workload.repeats)
        assert workload.flops is not None and workload.flops.counted_per_step
        summary = workload.summary
        assert summary is not None and summary.median_step_s and summary.samples_per_s
        assert summary.mfu is None and summary.mfu_reason  # CPU: no vendor peak, never a guess
        assert summary.tflops and summary.tflops > 0
        assert all(r.losses and r.losses[-1] is not None for r in workload.repeats)
        for repeat in workload.repeats:  # sampled from the parent: host columns, no GPU here
            telemetry = repeat.telemetry or {}
            assert telemetry["host"]["process_rss_bytes"] and telemetry["gpu"] is None
            assert telemetry["gpu_unavailable_reason"]
            assert repeat.phases["measure_start"] <= repeat.phases["measure_end"]
    gpt = result.workloads[0]
    assert gpt.tokens_per_step and gpt.summary and gpt.summary.tokens_per_s
    assert gpt.flops and gpt.flops.analytic_per_step and gpt.flops.analytic_formula
    assert result.environment["perfgate_version"] == perfgate.__version__
    assert "gpt" in completed.stdout and "result:" in completed.stdout

    database = tmp_path / ".perfgate" / "perfgate.db"
    with sqlite3.connect(database) as connection:
        (runs,) = connection.execute("select count(*) from runs").fetchone()
        (workloads,) = connection.execute("select count(*) from workload_results").fetchone()
        (samples,) = connection.execute("select count(*) from repeat_samples").fetchone()
        (mode,) = connection.execute("pragma journal_mode").fetchone()
    assert (runs, workloads, samples, mode) == (1, 4, 8, "wal")


def test_user_workload_from_the_example_project(tmp_path: Path, perfgate_cli: CliRun) -> None:
    import shutil

    project = tmp_path / "user_project"
    shutil.copytree(REPO / "examples" / "user_project", project)
    out = tmp_path / "user.json"
    completed = perfgate_cli(
        "run",
        "--repeats",
        "2",
        "--steps",
        "3",
        "--warmup",
        "1",
        "--knob",
        "regressor.normalize_inputs=false",
        "--no-store",
        "--out",
        str(out),
        cwd=project,
    )
    assert completed.returncode == ExitCode.OK, completed.stdout + completed.stderr
    result = load_result(out)
    regressor = next(w for w in result.workloads if w.name == "regressor")
    assert regressor.kind == "user" and regressor.status == "ok"
    assert regressor.knobs["normalize_inputs"] is False
    assert regressor.setup_info["hidden"] == 48
    assert regressor.flops and regressor.flops.counted_per_step
    assert not (project / ".perfgate").exists()  # --no-store touches no database


def test_unreachable_database_keeps_the_document_and_ingest_recovers(
    tmp_path: Path, perfgate_cli: CliRun
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    (tmp_path / "perfgate.toml").write_text(f'database_url = "sqlite:///{blocker}/x.db"\n')
    out = tmp_path / "kept.json"
    completed = perfgate_cli(
        "run",
        "-w",
        "mlp",
        "--repeats",
        "1",
        "--steps",
        "2",
        "--warmup",
        "1",
        "--out",
        str(out),
        cwd=tmp_path,
        env={"COLUMNS": "60"},  # a narrow terminal: the command must still be one line
    )
    assert completed.returncode == ExitCode.INFRASTRUCTURE, completed.stderr
    assert f"perfgate ingest {out}" in completed.stderr
    assert load_result(out).workloads[0].status == "ok"

    (tmp_path / "perfgate.toml").write_text('database_url = "sqlite:///good.db"\n')
    first = perfgate_cli("ingest", str(out), cwd=tmp_path)
    second = perfgate_cli("ingest", str(out), cwd=tmp_path)
    assert first.returncode == 0 and " stored in " in first.stdout
    assert second.returncode == 0 and "already stored" in second.stdout
    with sqlite3.connect(tmp_path / "good.db") as connection:
        assert connection.execute("select count(*) from runs").fetchone() == (1,)


def test_document_is_deterministic_in_its_inputs(tmp_path: Path, perfgate_cli: CliRun) -> None:
    """Same seed → same losses in every repeat and run (timings of course differ)."""
    losses = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.json"
        completed = perfgate_cli(
            "run",
            "-w",
            "mlp",
            "--repeats",
            "1",
            "--steps",
            "3",
            "--warmup",
            "1",
            "--no-store",
            "--out",
            str(out),
            cwd=tmp_path,
        )
        assert completed.returncode == 0, completed.stderr
        document = json.loads(out.read_text())
        losses.append(document["workloads"][0]["repeats"][0]["losses"])
        assert document["workloads"][0]["definition_hash"]
    assert losses[0] == losses[1]
