"""The worker's report is untrusted input: the workload's code runs in the worker process and
can write anything where its report goes. A report that does not fit its format or its spec
fails the repeat with one line saying why — never a traceback, never a pass.

The reader alone (``perfgate.documents.worker.load_report``) on hand-made reports, then real
workers of the faulty fixture whose workload forges the report its worker writes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import factories
import pytest
from fixture_types import CliRun

from perfgate.config import load_config
from perfgate.documents.result import load_result
from perfgate.documents.worker import (
    MAX_PROBLEM_CHARS,
    MAX_REPORT_BYTES,
    WORKER_REPORT,
    RepeatReport,
    WorkerReport,
    WorkerSpec,
    read_report,
)
from perfgate.errors import ExitCode
from perfgate.runner.forkserver import worker_launcher
from perfgate.runner.orchestrator import run_repeat
from perfgate.runner.plan import Selection, make_plan

SPEC = factories.worker_spec(nproc_per_node=None, profile=None, timeout_s=60.0)
"""A timed single-process spec of 2 warm-up and 4 measured steps (as factories.measurement)."""


def _honest() -> dict[str, Any]:
    report = WorkerReport(status="ok", measurement=factories.measurement())
    written: dict[str, Any] = json.loads(json.dumps(WORKER_REPORT.dump(report)))
    return written


def _read(tmp_path: Path, text: str, spec: WorkerSpec = SPEC) -> RepeatReport:
    path = tmp_path / "out.json"
    path.write_text(text)
    return read_report(path, spec)


def _measurement(**changes: Any) -> str:
    document = _honest()
    document["measurement"].update(changes)
    return json.dumps(document)


def test_the_honest_report_reads_back(tmp_path: Path) -> None:
    reported = _read(tmp_path, json.dumps(_honest()))
    assert reported.status == "ok" and reported.error is None
    assert reported.report == WorkerReport(status="ok", measurement=factories.measurement())


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{'status': 'ok'", "the worker's report is not valid JSON (Expecting property name"),
        ("", "the worker's report is not valid JSON (Expecting value"),
        ("[1, 2]", "the worker's report is not a perfgate.worker-report document"),
        (
            _measurement(step_times_s=[0.01, "fast", 0.01, 0.01]),
            "the worker's report does not match the perfgate.worker-report format: at "
            "measurement/step_times_s/1: 'fast' is not of type 'number'",
        ),
        (
            _measurement(step_times_s=[0.01, float("nan"), 0.01, 0.01]),
            "the worker's report: measurement/step_times_s/1 is nan, not a finite number",
        ),
        (
            _measurement(peak_memory={"rss_bytes": float("inf")}),
            "the worker's report: measurement/peak_memory/rss_bytes is inf, not a finite number",
        ),
        (
            _measurement(steady_start=True),
            "at measurement/steady_start: True is not of type 'integer'",
        ),
        (
            json.dumps({**_honest(), "measurement": None}),
            "the worker's report is ok but holds no measurement",
        ),
        (
            json.dumps({k: v for k, v in _honest().items() if k != "status"}),
            "at (top): 'status' is a required property",
        ),
        (
            json.dumps({**_honest(), "status": "passed"}),
            "at status: 'passed' is not one of ['ok', 'error', 'usage_error']",
        ),
        (
            json.dumps({**_honest(), "schema_version": 2}),
            "the worker's report was written by a newer perfgate",
        ),
        (
            json.dumps({**_honest(), "status": "error", "measurement": None}),
            "the worker's report says error without an error text",
        ),
    ],
    ids=[
        "not-json",
        "empty",
        "not-an-object",
        "wrong-type",
        "nan",
        "infinity",
        "bool-for-int",
        "ok-without-measurement",
        "missing-status",
        "unknown-status",
        "newer-major",
        "error-without-text",
    ],
)
def test_a_malformed_report_is_named_in_one_line(tmp_path: Path, text: str, reason: str) -> None:
    reported = _read(tmp_path, text)
    assert reported.status == "malformed" and reported.report is None
    assert reported.error is not None and reason in reported.error, reported.error
    assert "\n" not in reported.error and len(reported.error) <= MAX_PROBLEM_CHARS


def test_missing_fields_are_named(tmp_path: Path) -> None:
    document = _honest()
    del document["measurement"]["step_times_s"]
    reported = _read(tmp_path, json.dumps(document))
    assert reported.error == (
        "the worker's report does not match the perfgate.worker-report format: at "
        "measurement: 'step_times_s' is a required property"
    )


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"step_times_s": [0.01]}, "measurement/step_times_s holds 1 steps, not the 4 asked"),
        ({"warmup_times_s": []}, "measurement/warmup_times_s holds 0 steps, not the 2 asked"),
        (
            {"step_times_s": [0.01, -0.001, 0.01, 0.01]},
            "measurement/step_times_s/1 is -0.001 s, not in (0, 60]",
        ),
        (
            {"step_times_s": [0.01, 0.0, 0.01, 0.01]},
            "measurement/step_times_s/1 is 0.0 s, not in (0, 60]",
        ),
        ({"first_step_s": 61.0}, "measurement/first_step_s is 61.0 s, not in (0, 60]"),
        (
            {"dataloader_wait_s": [0.0, -1.0]},
            "measurement/dataloader_wait_s/1 is -1.0 s, not in [0, 60]",
        ),
        ({"steady_start": 4}, "measurement/steady_start 4 leaves none of its 4 steps"),
        ({"steady_start": -1}, "measurement/steady_start -1 leaves none of its 4 steps"),
        ({"peak_memory": {"rss_bytes": -5}}, "measurement/peak_memory/rss_bytes is -5 bytes"),
    ],
)
def test_a_measurement_its_spec_cannot_have_produced_is_refused(
    tmp_path: Path, changes: dict[str, Any], reason: str
) -> None:
    reported = _read(tmp_path, _measurement(**changes))
    assert reported == RepeatReport(status="malformed", error=f"the worker's report: {reason}")


def test_a_profiling_spec_wants_a_profile(tmp_path: Path) -> None:
    profiling = factories.worker_spec(nproc_per_node=None)
    assert _read(tmp_path, json.dumps(_honest()), profiling).error == (
        "the worker's report is ok but holds no profiling window"
    )


def test_no_file_is_no_report_and_a_crash_is_judged_by_the_process(tmp_path: Path) -> None:
    assert read_report(tmp_path / "missing.json", SPEC) == RepeatReport(status=None)


def test_what_is_not_a_regular_file_is_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)  # opening it to read would wait for a writer forever
    assert read_report(fifo, SPEC).error == "the worker's report is not a regular file"
    folder = tmp_path / "folder.json"
    folder.mkdir()
    assert read_report(folder, SPEC).status == "malformed"


def test_a_flood_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    with open(path, "wb") as handle:
        handle.truncate(MAX_REPORT_BYTES + 1)
    assert read_report(path, SPEC).error == (
        f"the worker's report is {MAX_REPORT_BYTES + 1} bytes, more than any report"
    )


def test_a_long_reason_stays_one_short_line(tmp_path: Path) -> None:
    document = _honest()
    document["measurement"]["step_times_s"] = "x\n" * 10_000
    error = _read(tmp_path, json.dumps(document)).error
    assert error is not None and "\n" not in error
    assert len(error) == MAX_PROBLEM_CHARS and error.endswith("…")


# --- real workers whose workload forges the report --------------------------------------------

FORGERIES = {
    "wrong_type": "at measurement/step_times_s/0: 'fast' is not of type 'number'",
    "nan": "measurement/step_times_s/0 is nan, not a finite number",
    "missing_field": "at measurement: 'step_times_s' is a required property",
    "not_json": "the worker's report is not valid JSON (Expecting property name",
    "faster_than_possible": "measurement/step_times_s/0 is -0.001 s, not in (0, 120]",
    "fewer_steps": "measurement/step_times_s holds 1 steps, not the 3 asked",
}


@pytest.mark.slow
def test_a_forged_report_fails_its_repeat_with_the_reason(
    faulty_project: Path, tmp_path: Path
) -> None:
    """Each forgery (tests/fixtures/faulty_project: the workload rewrites its worker's report)
    fails the repeat as an error, one line naming what is wrong, and ends the workload."""
    config = load_config(cwd=faulty_project)
    with worker_launcher() as launcher:
        for preset, reason in FORGERIES.items():
            selection = Selection(
                workloads=[f"forges_its_report@{preset}"],
                repeats=2,
                steps=3,
                warmup=1,
                timeout_s=120,
            )
            [planned], settings = make_plan(config, selection)
            repeat, measured = run_repeat(
                planned, settings, "cpu", {}, tmp_path, 0, tag=f"{preset}-", launcher=launcher
            )
            assert repeat.status == "error" and measured is None, (preset, repeat)
            error = repeat.error or ""
            assert error.startswith("untrustworthy measurement: "), error
            assert reason in error and "\n" not in error, (preset, error)
            assert repeat.step_times_s == [] and repeat.ranks is None


@pytest.mark.slow
def test_a_forged_report_never_passes_a_run(faulty_project: Path, perfgate_cli: CliRun) -> None:
    out = faulty_project / "result.json"
    completed = perfgate_cli(
        "run",
        *("-w", "forges_its_report@nan", "-w", "healthy"),
        *("--repeats", "2", "--steps", "3", "--warmup", "1", "--no-store", "--out", str(out)),
        cwd=faulty_project,
    )
    assert completed.returncode == ExitCode.INFRASTRUCTURE, completed.stderr
    assert "Traceback" not in completed.stderr
    forged, healthy = load_result(out).workloads
    assert forged.status == "error" and len(forged.repeats) == 1
    assert forged.error == (
        "repeat 0: untrustworthy measurement: the worker's report: "
        "measurement/step_times_s/0 is nan, not a finite number"
    )
    assert healthy.status == "ok"
