"""perfgate calibrate: noise computations on hand-made results, the record and its document,
storage on SQLite and PostgreSQL, the inconclusive explanation, the table, the command."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from alembic import command
from alembic.config import Config as AlembicConfig
from conftest_db import fake_run, query
from fixture_types import CliRun
from sqlalchemy import create_engine, inspect
from typer.testing import CliRunner

from perfgate.calibration import measure
from perfgate.calibration.explain import explain_inconclusive, percent
from perfgate.calibration.measure import (
    calibrate_workload,
    measure_calibrations,
    parse_target,
    robust_cv,
    within_process_cv,
)
from perfgate.cli import app
from perfgate.compare.sequential import DEFAULT_MAX_ROUNDS
from perfgate.config import load_config
from perfgate.documents.calibration import CALIBRATION, Calibration, CalibrationReport
from perfgate.documents.result import (
    RepeatResult,
    RepeatStatus,
    RunResult,
    RunSettings,
    WorkloadResult,
    load_result,
    write_result,
)
from perfgate.documents.verdict import MetricComparison
from perfgate.errors import ExitCode, UsageError
from perfgate.report.calibration import calibration_row, calibration_table
from perfgate.runner.forkserver import ForkServer
from perfgate.runner.orchestrator import RunObserver
from perfgate.runner.plan import PlannedWorkload, Selection
from perfgate.stats.power import (
    min_detectable,
    noise_sigma,
    recommended_threshold,
    repeats_needed,
    repeats_needed_tuned,
)
from perfgate.stats.sequential import narrowest_band, sequential_design
from perfgate.store.calibration import latest_calibrations, save_calibrations
from perfgate.store.engine import MIGRATIONS, SchemaOutOfDate, make_engine, upgrade_database
from perfgate.telemetry.fingerprint import fingerprint_key

pytest_plugins = ["conftest_db"]

SETTINGS = RunSettings(repeats=6, steps=5, warmup=1, timeout_s=60, threads=2, seed=0)
MEDIANS = [0.100, 0.104, 0.097, 0.110, 0.101, 0.099]
"""Each repeat's median steady step: the between-process noise comes from these alone."""


def repeat(index: int, level: float, spread: float, status: RepeatStatus = "ok") -> RepeatResult:
    """A repeat whose first measured step is a slow outlier excluded by ``steady_start``, and
    whose steady steps are ``level`` ± ``spread`` (median exactly ``level``)."""
    steady = [level * (1 - spread), level, level, level * (1 + spread), level]
    return RepeatResult(
        index=index,
        status=status,
        step_times_s=[level * 5, *steady] if status == "ok" else [],
        steady_start=1,
    )


def workload(medians: list[float], spread: float = 0.02, **fields: Any) -> WorkloadResult:
    repeats = [repeat(i, level, spread) for i, level in enumerate(medians)]
    defaults: dict[str, Any] = {
        "name": "mlp",
        "version": 1,
        "kind": "builtin",
        "factory": "perfgate.workloads.mlp:build",
        "preset": "smoke",
        "definition_hash": "a" * 64,
        "knobs": {"precision": "off"},
        "params": {},
        "device": "cpu",
        "status": "ok",
        "repeats": repeats,
    }
    return WorkloadResult(**{**defaults, **fields})


def calibration(**fields: Any) -> Calibration:
    made = calibrate_workload(
        workload(MEDIANS),
        settings=SETTINGS,
        environment_key=fingerprint_key({"cpu": "test"}),
        configured_repeats=5,
        threshold=0.05,
        target=0.10,
        created_at="2026-11-29T18:00:00+00:00",
    )
    return replace(made, **fields)


def comparison(**fields: Any) -> MetricComparison:
    defaults: dict[str, Any] = {
        "metric": "step_time_s",
        "direction": "lower",
        "baseline_median": 0.1,
        "head_median": 0.104,
        "ratio": 1.04,
        "ci_low": 0.97,
        "ci_high": 1.12,
        "p_value": 0.2,
        "threshold": 0.05,
        "min_detectable": math.inf,
        "baseline_repeats": 3,
        "head_repeats": 3,
        "verdict": "inconclusive",
    }
    return MetricComparison(**{**defaults, **fields})


# --- noise -------------------------------------------------------------------------------------


def test_robust_cv_is_scaled_mad_over_median() -> None:
    # median 1.0; deviations 0.1, 0, 0.1, 0, 0.2 → MAD 0.1
    assert robust_cv([0.9, 1.0, 1.1, 1.0, 1.2]) == pytest.approx(0.14826)
    assert robust_cv([2.0, 2.0, 2.0, 9.0]) == 0.0  # one outlier step moves nothing


def test_within_process_noise_uses_only_steady_steps_of_ok_repeats() -> None:
    result = workload([0.1, 0.2, 0.3], spread=0.02)
    crashed = repeat(3, 0.1, 0.5, status="crashed")
    result = replace(result, repeats=[*result.repeats, crashed])
    # steady steps level·(0.98, 1, 1, 1.02, 1): MAD 0 → the robust CV ignores the two tails
    assert within_process_cv(result) == 0.0
    wobbly = replace(
        result,
        repeats=[
            replace(r, step_times_s=[9.0, 0.9, 1.0, 1.1, 1.0, 1.2], steady_start=1)
            for r in result.repeats[:3]
        ],
    )
    assert within_process_cv(wobbly) == pytest.approx(0.14826)


def test_within_process_noise_needs_two_steady_steps() -> None:
    result = workload([0.1, 0.2, 0.3])
    short = replace(
        result,
        repeats=[replace(r, step_times_s=[0.5, 0.1], steady_start=1) for r in result.repeats],
    )
    with pytest.raises(UsageError, match="two steady steps"):
        within_process_cv(short)


def test_calibration_figures_follow_the_power_model() -> None:
    made = calibration()
    sigma = float(np.std(np.log(MEDIANS), ddof=1))
    assert made.between_sigma == pytest.approx(sigma)
    assert made.repeat_values_s == tuple(MEDIANS)
    assert made.step_median_s == pytest.approx(statistics.median(MEDIANS))
    assert made.repeats == 6 and made.steps == 5 and made.warmup == 1
    assert made.min_detectable == min_detectable(sigma, 5, 5, 0.05)
    assert made.recommended_threshold == recommended_threshold(sigma, 5, 5)
    assert made.repeats_for_target == repeats_needed(sigma, 0.10, 0.05)
    assert made.repeats_for_target_tuned == repeats_needed_tuned(sigma, 0.10)
    assert made.repeats_for_target is not None and made.repeats_for_target > 5
    assert made.within_cv == 0.0 and made.definition_hash == "a" * 64


def test_three_configured_repeats_can_never_detect_and_a_small_target_sits_in_the_band() -> None:
    made = calibrate_workload(
        workload(MEDIANS),
        settings=SETTINGS,
        environment_key="e",
        configured_repeats=3,
        threshold=0.05,
        target=0.02,
        created_at="2026-11-29T18:00:00+00:00",
    )
    assert made.min_detectable == math.inf
    assert made.repeats_for_target is None  # 2 % lies inside a ±5 % band
    assert made.repeats_for_target_tuned == repeats_needed_tuned(made.between_sigma, 0.02)


# --- the record and its document ---------------------------------------------------------------


@pytest.mark.parametrize(("text", "fraction"), [("2%", 0.02), ("2", 0.02), (" 2.5 % ", 0.025)])
def test_target_is_a_percentage(text: str, fraction: float) -> None:
    assert parse_target(text) == pytest.approx(fraction)


@pytest.mark.parametrize("text", ["0", "100%", "-1", "abc", "nan", "inf"])
def test_bad_target_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="--target"):
        parse_target(text)


def test_document_writes_infinity_as_null_and_reads_it_back() -> None:
    never = calibration(min_detectable=math.inf, recommended_threshold=math.inf)
    document = CALIBRATION.dump(CalibrationReport(calibrations=[never]))
    text = json.dumps(document, allow_nan=False)  # what write_json_atomic requires
    entry = json.loads(text)["calibrations"][0]
    assert entry["min_detectable"] is None and entry["recommended_threshold"] is None
    assert document["schema"] == "perfgate.calibration" and document["schema_version"] == 1
    assert CALIBRATION.read(json.loads(text), "calibration").calibrations == [never]


# --- the store ---------------------------------------------------------------------------------


def test_store_round_trip_picks_the_newest_matching_calibration(
    database_url: str, tmp_path: Path
) -> None:
    head = fake_run()  # mlp, definition "a"*64, environment {"cpu": "test"}
    env = fingerprint_key(head.environment)
    older = calibration(environment_key=env, created_at="2026-11-01T00:00:00+00:00")
    newer = calibration(
        environment_key=env, created_at="2026-11-20T00:00:00+00:00", min_detectable=math.inf
    )
    elsewhere = calibration(environment_key="f" * 64, created_at="2026-11-28T00:00:00+00:00")
    other_code = calibration(
        environment_key=env, definition_hash="b" * 64, created_at="2026-11-28T00:00:00+00:00"
    )
    assert latest_calibrations(database_url, tmp_path, head) == {}
    assert save_calibrations(database_url, tmp_path, [older, newer, elsewhere, other_code]) == 4
    assert query(database_url, "SELECT count(*) FROM calibrations")[0][0] == 4
    found = latest_calibrations(database_url, tmp_path, head)
    assert found == {"mlp": newer}  # inf stored as NULL comes back as inf
    gpt_head = replace(head, workloads=[replace(head.workloads[0], name="gpt")])
    assert latest_calibrations(database_url, tmp_path, gpt_head) == {}


def test_a_database_at_revision_0002_is_upgraded_with_a_calibrations_table(
    database_url: str, tmp_path: Path
) -> None:
    engine = create_engine(database_url)
    with engine.begin() as connection:
        config = AlembicConfig()
        config.set_main_option("script_location", str(MIGRATIONS))
        config.attributes["connection"] = connection
        command.upgrade(config, "0002")
    with pytest.raises(SchemaOutOfDate, match="revision 0002, this perfgate needs 0004"):
        make_engine(database_url, tmp_path)
    assert upgrade_database(database_url, tmp_path) == ("0002", "0004")
    with engine.connect() as connection:
        assert "calibrations" in inspect(connection).get_table_names()
    engine.dispose()
    assert save_calibrations(database_url, tmp_path, [calibration()]) == 1


# --- the explanation ---------------------------------------------------------------------------


def test_only_inconclusive_timing_comparisons_are_explained() -> None:
    made = calibration()
    assert explain_inconclusive(comparison(verdict="no_change"), made) is None
    assert explain_inconclusive(comparison(verdict="regression"), made) is None
    assert explain_inconclusive(comparison(metric="peak_memory_bytes"), made) is None
    assert explain_inconclusive(comparison(metric="tokens_per_s", direction="higher"), made)


def test_without_a_calibration_the_sentence_says_how_to_get_one() -> None:
    text = explain_inconclusive(comparison(), None)
    assert text is not None and "`perfgate calibrate`" in text and "no calibration" in text


def test_explanation_golden_sentence() -> None:
    made = calibration(between_sigma=0.061, target=0.02)
    text = explain_inconclusive(comparison(), made)
    assert text == (
        "calibration 2026-11-29: between-process noise 6.1 %; at 3 repeats a side the test can "
        "never reach p ≤ 0.05, whatever the change; identical code needs a ±26 % threshold to "
        "pass at these repeats (it is ±5.0 %); 41 repeats a side would detect 10 % "
        "(perfgate calibrate)"
    )
    assert percent(recommended_threshold(0.061, 3, 3)) == "26 %"
    assert repeats_needed(0.061, 0.10, 0.05) == 41


def test_explanation_uses_the_comparison_repeats_and_the_calibration_target() -> None:
    made = calibration(between_sigma=0.01, target=0.08)
    text = explain_inconclusive(comparison(baseline_repeats=6, head_repeats=5), made)
    smallest = min_detectable(0.01, 6, 5, 0.05)
    assert text is not None
    assert "at 6 baseline and 5 head repeats the smallest detectable change is " in text
    assert percent(smallest) in text and "identical code" not in text  # ±5 % is wide enough
    assert text.endswith(
        f"{repeats_needed(0.01, 0.08, 0.05)} repeats a side would detect 8.0 % (perfgate calibrate)"
    )
    hopeless = explain_inconclusive(comparison(), calibration(between_sigma=0.5))
    assert hopeless is not None and "no repeat count up to 200" in hopeless


# --- the table ---------------------------------------------------------------------------------


def test_table_cells() -> None:
    row = calibration_row(calibration(min_detectable=math.inf, target=0.02))
    assert row[0] == "mlp@smoke" and row[1] == "100.50 ms"
    assert row[4] == "±5.0 %" and row[5] == "never" and row[7] == "inside the band"
    row = calibration_row(calibration(repeats_for_target=None, repeats_for_target_tuned=None))
    assert row[7] == "> 200" and row[8] == "> 200"
    assert calibration_row(calibration(recommended_threshold=math.inf))[6] == "≥ 1000 %"
    assert calibration_row(calibration(recommended_threshold=0.18))[6] == "±18 %"
    headers = [column.header for column in calibration_table([calibration()], "cpu").columns]
    assert "detectable @ 5" in headers and "repeats for 10 %" in headers


# --- orchestration and the command -------------------------------------------------------------


def test_measure_calibrates_ok_workloads_at_the_configured_repeats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "perfgate.toml").write_text("repeats = 7\n[thresholds.mlp]\nstep_time_s = 0.08\n")
    seen: dict[str, Any] = {}

    def fake_run_workloads(
        plan: Sequence[PlannedWorkload],
        settings: RunSettings,
        device: str,
        environment: dict[str, Any],
        observer: RunObserver | None,
        launcher: ForkServer | None = None,
    ) -> list[WorkloadResult]:
        seen.update(settings=settings, device=device, names=[p.definition.name for p in plan])
        failed = workload([], name="gpt", status="crashed", error="SIGKILL", repeats=[])
        return [workload(MEDIANS), failed]

    monkeypatch.setattr(measure, "run_workloads", fake_run_workloads)
    config = load_config(cwd=tmp_path)
    run = measure_calibrations(
        config,
        Selection(workloads=["mlp", "gpt"], repeats=12, steps=6),
        device="cpu",
        target=0.2,
        threshold_for=config.thresholds.threshold,
    )
    assert seen["settings"].repeats == 12 and seen["names"] == ["mlp", "gpt"]
    assert [f.name for f in run.failures] == ["gpt"]
    (made,) = run.calibrations
    assert made.configured_repeats == 7 and made.threshold == 0.08 and made.steps == 6
    assert made.min_detectable == min_detectable(made.between_sigma, 7, 7, 0.08)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--target", "0"], "--target"),
        (["--repeats", "2"], "at least 3 repeats"),
        (["--steps", "3"], "at least 4 measured steps"),
        (["-w", "nope"], "unknown workload"),
    ],
)
def test_bad_input_exits_2_before_measuring(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["calibrate", "-w", "mlp", "--device", "cpu", *args])
    assert result.exit_code == ExitCode.USAGE, result.output
    assert message in result.output
    assert not (tmp_path / ".perfgate").exists()  # nothing measured, no database touched


@pytest.mark.slow
def test_calibrating_without_a_store_imports_no_database_code() -> None:
    probe = (
        "import sys; import perfgate.cli, perfgate.calibration.measure, "
        "perfgate.report.calibration, perfgate.calibration.explain; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'sqlalchemy', 'sqlmodel', 'alembic', 'psycopg'}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_calibrate_end_to_end(tmp_path: Path, perfgate_cli: CliRun) -> None:
    (tmp_path / "perfgate.toml").write_text("repeats = 5\n")  # the gate's repeats: finite figures
    out = tmp_path / "calibration.json"
    args = ["-w", "mlp", "--steps", "4", "--warmup", "1", "--device", "cpu"]
    done = perfgate_cli("calibrate", *args, "--repeats", "3", "--json", str(out), cwd=tmp_path)
    assert done.returncode == ExitCode.OK, done.stderr
    (made,) = json.loads(out.read_text())["calibrations"]
    sigma = noise_sigma(made["repeat_values_s"])
    assert made["between_sigma"] == pytest.approx(sigma, rel=1e-12)
    assert made["repeats"] == 3 and made["configured_repeats"] == 5
    assert made["min_detectable"] == pytest.approx(min_detectable(sigma, 5, 5, 0.05), rel=1e-12)
    assert made["repeats_for_target"] is None  # the default 2 % target lies inside ±5 %
    assert made["step_median_s"] == pytest.approx(statistics.median(made["repeat_values_s"]))
    assert "mlp@smoke" in done.stdout and percent(made["between_sigma"]) in done.stdout
    assert "stored in sqlite:///.perfgate/perfgate.db" in done.stdout

    head_path = tmp_path / "head.json"
    ran = perfgate_cli(
        "run", *args, "--repeats", "1", "--no-store", "--out", str(head_path), cwd=tmp_path
    )
    assert ran.returncode == ExitCode.OK, ran.stderr
    head: RunResult = load_result(head_path)
    url = f"sqlite:///{tmp_path / '.perfgate' / 'perfgate.db'}"
    stored = latest_calibrations(url, tmp_path, head)  # a later run here finds it
    assert stored["mlp"] == CALIBRATION.load(out).calibrations[0]


@pytest.mark.slow
def test_compare_explains_inconclusive_verdicts_with_the_stored_calibration(
    tmp_path: Path,
    perfgate_cli: CliRun,
) -> None:
    run = fake_run("00000000-0000-0000-0000-00000000000a")
    ok_only = replace(run.workloads[0], repeats=run.workloads[0].repeats[:2])
    head = replace(run, workloads=[ok_only])
    base = replace(head, run_id="00000000-0000-0000-0000-00000000000b")
    for name, document in (("head", head), ("base", base)):
        write_result(tmp_path / f"{name}.json", document)
    (tmp_path / "perfgate.toml").write_text('database_url = "sqlite:///cal.db"\n')
    stored = calibration(environment_key=fingerprint_key(head.environment))
    save_calibrations("sqlite:///cal.db", tmp_path, [stored])

    def notes() -> list[str]:
        completed = perfgate_cli(
            "compare", "head.json", "--baseline", "base.json", "--json", "v.json", cwd=tmp_path
        )
        # Two repeats a side can never be significant: inconclusive, exit 4.
        assert completed.returncode == ExitCode.INCONCLUSIVE, completed.stdout + completed.stderr
        return json.loads((tmp_path / "v.json").read_text())["workloads"][0]["notes"]

    explained = notes()
    # The stored calibration also sets this workload's band (no threshold is configured): the
    # narrowest one identical code passes within the A/B budget, and the verdict says so.
    horizon = DEFAULT_MAX_ROUNDS["cpu"]
    band = min(max(narrowest_band(stored.between_sigma, sequential_design(horizon)), 0.01), 0.5)
    judged = comparison(baseline_repeats=2, head_repeats=2, threshold=band)
    assert explain_inconclusive(judged, stored) in explained
    assert any(note.startswith(f"threshold ±{band:.1%} from the calibration") for note in explained)
    (tmp_path / "cal.db").unlink()
    assert any("no calibration of this workload" in note for note in notes())
    assert not (tmp_path / "cal.db").exists()  # compare does not create a database to read
