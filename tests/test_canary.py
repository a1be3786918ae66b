"""The canary: ``--inject-slowdown`` parsing, a real slowed CPU run, and canaries kept out of
baselines."""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from pathlib import Path

import pytest
from conftest_db import fake_run
from fixture_types import CliRun
from sqlmodel import Session

from perfgate.documents.result import load_result
from perfgate.errors import ExitCode, UsageError
from perfgate.runner.canary import SlowdownInjector, reference_step_s
from perfgate.runner.plan import parse_slowdown
from perfgate.store.engine import make_engine
from perfgate.store.history import load_history
from perfgate.store.ingest import store_run


@pytest.mark.parametrize(
    ("text", "fraction"), [("5%", 0.05), ("12.5", 0.125), (" 50 % ", 0.5), ("1000%", 10.0)]
)
def test_slowdown_is_read_as_percent(text: str, fraction: float) -> None:
    assert parse_slowdown(text) == pytest.approx(fraction)


@pytest.mark.parametrize("text", ["-1", "0", "0%", "abc", "2000%", "nan", "inf", "", "%"])
def test_bad_slowdown_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="inject-slowdown"):
        parse_slowdown(text)


def test_reference_leaves_out_the_first_warmup_step() -> None:
    assert reference_step_s([9.0, 1.0, 2.0, 3.0]) == 2.0
    assert reference_step_s([4.0]) == 4.0


def test_cpu_burn_takes_the_injected_time() -> None:
    injector = SlowdownInjector("cpu", 0.5, [1.0, 0.04, 0.04])
    assert injector.reference_s == pytest.approx(0.04)
    assert injector.seconds_per_step == pytest.approx(0.02)
    started = time.perf_counter()
    injector.burn()
    assert time.perf_counter() - started >= 0.02


@pytest.mark.slow
def test_bad_slowdown_on_the_command_line_exits_2(tmp_path: Path, perfgate_cli: CliRun) -> None:
    completed = perfgate_cli(
        "run", "-w", "mlp", "--inject-slowdown", "2000%", "--no-store", cwd=tmp_path, timeout=60
    )
    assert completed.returncode == ExitCode.USAGE, completed.stdout + completed.stderr
    assert len(completed.stderr.strip().splitlines()) == 1
    assert "inject-slowdown" in completed.stderr


@pytest.mark.slow
@pytest.mark.parametrize("clock", ["real", "virtual"])
def test_canary_run_is_slowed_and_marked(tmp_path: Path, perfgate_cli: CliRun, clock: str) -> None:
    """On real time the injected cost is sized from the warm-up and marked in the document; on
    the deterministic step clock (its noise off) the steady steps are then exactly 1.5× the
    reference. A real-time ratio is not asserted: under a neighbour's load the warm-up steps
    can be slower than the steady ones, which says nothing about the injection."""
    out = tmp_path / "canary.json"
    env = {"PERFGATE_TEST_STEP_CLOCK": "virtual:between=0,within=0"} if clock == "virtual" else {}
    completed = perfgate_cli(
        "run", "-w", "mlp", "--device", "cpu", "--repeats", "2", "--steps", "6", "--warmup", "3",
        "--inject-slowdown", "50%", "--no-store", "--out", str(out), cwd=tmp_path, env=env,
    )  # fmt: skip
    assert completed.returncode == ExitCode.OK, completed.stdout + completed.stderr
    assert "canary run: +50% injected per step" in completed.stdout
    assert json.loads(out.read_text())["settings"]["inject_slowdown"] == 0.5
    result = load_result(out)
    assert result.settings.inject_slowdown == 0.5
    (workload,) = result.workloads
    assert workload.status == "ok"
    for repeat in workload.repeats:
        assert len(repeat.step_times_s) == 6 and len(repeat.warmup_times_s) == 3
        reference = reference_step_s(repeat.warmup_times_s)
        assert repeat.injected_s_per_step is not None and repeat.injected_s_per_step > 0
        assert repeat.injected_s_per_step == pytest.approx(0.5 * reference)
        if clock == "virtual":
            steady = statistics.median(repeat.step_times_s[repeat.steady_start :])
            assert steady == pytest.approx(1.5 * reference)


def test_history_skips_canary_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'perfgate.db'}"
    normal = fake_run("00000000-0000-0000-0000-000000000001")
    canary = dataclasses.replace(
        fake_run("00000000-0000-0000-0000-000000000002", started_at="2026-11-30T18:00:00+00:00"),
        settings=dataclasses.replace(normal.settings, inject_slowdown=0.05),
    )
    assert store_run(url, normal, tmp_path) and store_run(url, canary, tmp_path)
    engine = make_engine(url, tmp_path)
    try:
        with Session(engine) as session:
            series = load_history(session, "main")
    finally:
        engine.dispose()
    assert [point.run_id for points in series.values() for point in points] == [normal.run_id]
