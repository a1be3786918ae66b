"""``perfgate export``: CSV, the Bencher Metric Format and github-action-benchmark's JSON, from
real result and verdict documents (the maximal ones of ``tests/factories.py`` and runs written
to disk), in process."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from pathlib import Path

import factories
import jsonschema
import pytest
from cli_in_process import invoke
from synthetic import synthetic_run

from perfgate.documents.result import RESULT, SourceInfo
from perfgate.documents.verdict import VERDICT
from perfgate.errors import ExitCode, UsageError
from perfgate.files import write_json_atomic
from perfgate.report.exports import (
    RUN_COLUMNS,
    VERDICT_COLUMNS,
    action_benchmark_entries,
    bencher_metrics,
    benchmark_name,
    export_documents,
    parse_format,
    runs_csv,
    verdicts_csv,
)

BMF_SCHEMA = {  # https://bencher.dev/bmf.json, as its reference page gives it
    "$schema": "http://json-schema.org/draft-07/schema",
    "type": "object",
    "patternProperties": {
        ".+": {
            "type": "object",
            "patternProperties": {
                ".+": {
                    "type": "object",
                    "properties": {
                        "value": {"type": "number"},
                        "lower_value": {"type": "number"},
                        "upper_value": {"type": "number"},
                    },
                    "required": ["value"],
                }
            },
        }
    },
}


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_runs_csv_has_a_row_per_workload_with_its_headline_numbers() -> None:
    run = factories.run()
    rows = _rows(runs_csv([run, synthetic_run(0.1, 1)]))
    assert list(rows[0]) == list(RUN_COLUMNS)
    assert [r["workload"] for r in rows] == ["gpt", "mlp", "mlp"]
    gpt = rows[0]
    summary = run.workloads[0].summary
    assert summary is not None
    assert float(gpt["median_step_s"]) == summary.median_step_s
    assert float(gpt["fastest_repeat_step_s"]) == 0.0100
    assert float(gpt["slowest_repeat_step_s"]) == 0.0101
    assert gpt["commit"] == run.source.commit and gpt["canary_slowdown"] == "0.1"
    assert json.loads(gpt["knobs"]) == {"compile": False, "precision": "bf16"}
    assert int(gpt["peak_memory_bytes"]) == 2**30 and gpt["mfu"] == "0.1"
    assert rows[2]["commit"] == "" and rows[2]["mfu"] == ""  # none: an empty cell, not "None"


def test_a_cell_a_spreadsheet_would_run_is_quoted() -> None:
    hostile = SourceInfo(branch='=HYPERLINK("http://x")', subject="+1 cmd|' /C calc'!A0")
    rows = _rows(runs_csv([replace(factories.run(), source=hostile)]))
    assert rows[0]["branch"] == '\'=HYPERLINK("http://x")'
    assert rows[0]["subject"].startswith("'+1")
    assert not rows[0]["median_step_s"].startswith("'")  # numbers stay numbers


def test_verdict_csv_has_a_row_per_metric_and_keeps_workloads_without_comparisons() -> None:
    verdict = factories.verdict()
    rows = _rows(verdicts_csv([verdict]))
    assert list(rows[0]) == list(VERDICT_COLUMNS)
    compared = [r for r in rows if r["metric"]]
    assert [r["metric"] for r in compared] == ["step_time_s", "samples_per_s"]
    assert compared[0]["min_detectable"] == "inf" and compared[0]["verdict"] == "regression"
    assert compared[1]["derived_from"] == "step_time_s"
    statuses = {r["workload"]: r["workload_status"] for r in rows if not r["metric"]}
    assert statuses == {
        "mlp": "missing",
        "bert": "definition_changed",
        "new": "no_baseline",
        "odd": "loss_mismatch",
    }
    assert {r["overall"] for r in rows} == {"regression"}


def test_bmf_follows_benchers_schema_with_latency_in_nanoseconds() -> None:
    run = factories.run()
    report = bencher_metrics([run])
    jsonschema.validate(report, BMF_SCHEMA)
    assert list(report) == ["gpt@full [precision=bf16]", "mlp@full [precision=bf16]"]
    gpt = report["gpt@full [precision=bf16]"]
    assert gpt["latency"] == {
        "value": pytest.approx(0.0101e9),
        "lower_value": pytest.approx(0.0100e9),
        "upper_value": pytest.approx(0.0101e9),
    }
    throughput = gpt["throughput"]
    assert throughput["lower_value"] <= throughput["value"] <= throughput["upper_value"]
    assert gpt["throughput"]["value"] == 3168.0 and gpt["tflops"] == {"value": 99.0}
    assert set(gpt) == {
        "latency",
        "throughput",
        "tokens-per-second",
        "tflops",
        "mfu",
        "first-step",
        "peak-memory-bytes",
    }


def test_a_knob_at_its_default_leaves_the_name_alone() -> None:
    workload = replace(factories.workload(), knobs={"compile": False}, preset="smoke")
    assert benchmark_name(workload) == "gpt@smoke"


def test_github_action_benchmark_splits_the_directions() -> None:
    run = factories.run()
    smaller = action_benchmark_entries([run], bigger_is_better=False)
    bigger = action_benchmark_entries([run], bigger_is_better=True)
    names = [e["name"] for e in smaller]
    assert names[:3] == [
        "gpt@full [precision=bf16] step time",
        "gpt@full [precision=bf16] first step",
        "gpt@full [precision=bf16] peak memory",
    ]
    step = smaller[0]
    assert step["unit"] == "ms" and step["value"] == 10.1 and step["range"] == "± 0.05"
    assert run.run_id in str(step["extra"]) and "commit c0ffee" in str(step["extra"])
    assert smaller[2] == {**smaller[2], "unit": "MiB", "value": 1024.0}
    assert {e["unit"] for e in bigger} == {"samples/s", "tokens/s", "TFLOP/s", "fraction of peak"}
    for entry in smaller + bigger:
        assert set(entry) <= {"name", "unit", "value", "range", "extra"}
        assert isinstance(entry["value"], float)


def test_only_measured_workloads_reach_a_tracker() -> None:
    run = synthetic_run(0.1, 1, status="error")
    assert bencher_metrics([run]) == {}
    assert action_benchmark_entries([run], bigger_is_better=False) == []
    assert _rows(runs_csv([run]))[0]["status"] == "error"


@pytest.mark.parametrize(
    ("results", "verdicts", "fmt", "needle"),
    [
        ([], [], "csv", "nothing to export"),
        ([factories.run()], [factories.verdict()], "csv", "separately"),
        ([], [factories.verdict()], "bmf", "export verdicts with --format csv"),
        ([factories.run(), factories.run()], [], "bmf", "more than one of these documents"),
    ],
)
def test_exports_a_format_cannot_hold_are_refused(
    results: list, verdicts: list, fmt: str, needle: str
) -> None:
    with pytest.raises(UsageError, match=needle):
        export_documents(results, verdicts, parse_format(fmt))


def test_an_unknown_format_names_the_known_ones() -> None:
    with pytest.raises(UsageError, match="use one of: csv, bmf, github-action-benchmark"):
        parse_format("xml")


def test_the_command_writes_stdout_or_a_file_and_refuses_bad_input(tmp_path: Path) -> None:
    result = tmp_path / "run.json"
    verdict = tmp_path / "verdict.json"
    write_json_atomic(result, RESULT.dump(factories.run()))
    write_json_atomic(verdict, VERDICT.dump(factories.verdict()))
    printed = invoke("export", str(result), "--format", "bmf")
    assert printed.code == ExitCode.OK
    assert json.loads(printed.stdout) == bencher_metrics([factories.run()])
    out = tmp_path / "verdict.csv"
    written = invoke("export", str(verdict), "-o", str(out))
    assert written.code == ExitCode.OK and "exported 1 verdict(s) as csv" in written.stdout
    assert out.read_text() == verdicts_csv([factories.verdict()])
    assert invoke("export", str(result), "-f", "xml").code == ExitCode.USAGE
    (tmp_path / "other.json").write_text('{"schema": "perfgate.advice"}')
    other = invoke("export", str(tmp_path / "other.json"))
    assert other.code == ExitCode.USAGE and "neither a result nor a verdict" in other.stderr
    broken = invoke("export", str(tmp_path / "missing.json"))
    assert broken.code == ExitCode.USAGE and "does not exist" in broken.stderr
    mixed = invoke("export", str(result), str(verdict), "-o", str(tmp_path / "mixed.csv"))
    assert mixed.code == ExitCode.USAGE and not (tmp_path / "mixed.csv").exists()
