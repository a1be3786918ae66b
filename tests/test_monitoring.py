"""Monitoring (issue 21) without servers: the series of a run and their labels, the OpenMetrics
export, what may be pushed, the step feed, the live window, the shipped alert rules
(``promtool check rules`` / ``promtool test rules``), the Alertmanager example (``amtool``)
and the Grafana dashboard (rebuilt with grafana-foundation-sdk and compared).

The real servers — push, scrape, PromQL, an alert through Alertmanager to a webhook, and
Prometheus scraping ``perfgate monitor`` — are in ``tests/test_monitoring_servers.py``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import factories
import pytest
from cli_in_process import invoke
from fixture_types import CliRun
from hypothesis import given, settings
from hypothesis import strategies as st
from monitoring_servers import binary
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from perfgate.diagnose.classify import classify
from perfgate.documents.result import RunResult, SourceInfo, write_result
from perfgate.documents.verdict import VERDICT
from perfgate.errors import ExitCode, UsageError
from perfgate.monitoring import live, series
from perfgate.monitoring.push import openmetrics_text, push_run
from perfgate.monitoring.series import LABELS, RUN_SERIES, run_labels
from perfgate.telemetry.host import HostSample
from perfgate.workloads.step_feed import FeedReader, FeedReading, FeedWriter, create_feed

ROOT = Path(__file__).resolve().parent.parent
FILES = ROOT / "perfgate" / "monitoring" / "files"


def main_run() -> RunResult:
    """The factories' run as a run of main (not a PR's, not a canary)."""
    run = factories.run()
    return dataclasses.replace(
        run,
        source=SourceInfo(commit="c0ffee" * 6 + "abcd", branch="main", trigger="nightly"),
        settings=dataclasses.replace(run.settings, inject_slowdown=None),
    )


def families(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    parsed = {}
    for family in text_string_to_metric_families(text):
        parsed[family.name] = [(dict(s.labels), s.value) for s in family.samples]
    return parsed


def test_a_run_s_series_carry_bounded_labels_and_its_numbers() -> None:
    run = main_run()
    text = openmetrics_text([run], factories.verdict())
    found = families(text)
    gpt = next(w for w in run.workloads if w.name == "gpt")
    assert gpt.summary is not None
    ((labels, value),) = found["perfgate_step_time_seconds"][:1]
    assert value == pytest.approx(gpt.summary.median_step_s)
    assert set(labels) == set(LABELS) and labels["branch"] == "main"
    assert labels["environment"] == run_labels(run, gpt)["environment"]
    assert len(labels["environment"]) == series.ENVIRONMENT_CHARS
    # No label holds the commit, the run id or the date: those grow without end.
    assert "c0ffee" not in text and run.run_id not in text and "2026-12-02" not in text
    states = {s["state"]: v for s, v in found["perfgate_verdict"] if s["workload"] == "gpt"}
    assert states == {"pass": 0, "regression": 1, "improvement": 0, "inconclusive": 0}
    changes = {s["metric"]: v for s, v in found["perfgate_change_ratio"]}
    assert changes["step_time_s"] == pytest.approx(1.24)


def test_every_series_is_named_by_prometheus_conventions() -> None:
    for entry in RUN_SERIES:
        assert re.fullmatch(r"perfgate_[a-z_]+", entry.name), entry.name
        assert not entry.name.endswith("_total")  # gauges, not counters
    for name in live.LIVE_SERIES:
        assert name.startswith("perfgate_live_")


def test_a_pull_request_s_or_a_canary_s_run_is_never_pushed() -> None:
    pr_run = factories.run()  # branch "feature", PR 42, and a canary
    with pytest.raises(UsageError, match="pull request's"):
        push_run("http://127.0.0.1:9", pr_run)
    canary = dataclasses.replace(main_run(), settings=factories.run().settings)
    with pytest.raises(UsageError, match="is a canary"):
        push_run("http://127.0.0.1:9", canary)


def test_an_unreachable_gateway_is_an_infrastructure_error() -> None:
    from perfgate.errors import InfrastructureError

    with pytest.raises(InfrastructureError, match="cannot push to the Pushgateway"):
        push_run("http://127.0.0.1:9", main_run(), timeout_s=2)


def test_the_export_command_writes_openmetrics(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    write_result(path, main_run())
    verdict = tmp_path / "verdict.json"
    verdict.write_text(json.dumps(VERDICT.dump(factories.verdict())))
    ended = invoke("export", str(path), str(verdict), "--openmetrics")
    assert ended.code == ExitCode.OK, ended.stderr
    assert ended.stdout.endswith("# EOF\n")
    assert "perfgate_verdict" in families(ended.stdout)
    out = tmp_path / "run.om"
    written = invoke("export", str(path), "--openmetrics", "-o", str(out))
    assert written.code == ExitCode.OK and out.read_text().endswith("# EOF\n")
    lone = invoke("export", str(path), "--push", "http://127.0.0.1:9")
    assert lone.code == ExitCode.USAGE and "--push needs --openmetrics" in lone.stderr
    two = invoke("export", str(path), str(verdict), str(verdict), "--openmetrics")
    assert two.code == ExitCode.USAGE and "2 verdicts given" in two.stderr
    down = invoke("export", str(path), "--openmetrics", "--push", "http://127.0.0.1:9")
    assert down.code == ExitCode.INFRASTRUCTURE and "cannot push" in down.stderr


def test_the_step_feed_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "feed"
    create_feed(path)
    reader = FeedReader(path)
    assert reader.read() == FeedReading(0, 0.0, 0.0, 0, 0)
    writer = FeedWriter(path)
    writer.describe(64, None)
    stop = threading.Event()
    seen: list[FeedReading] = []

    def read() -> None:
        while not stop.is_set():
            reading = reader.read()
            if reading is not None:
                seen.append(reading)

    thread = threading.Thread(target=read)
    thread.start()
    for _ in range(2000):
        writer.begin()
        writer.end()
    stop.set()
    thread.join()
    final = reader.read()
    assert final is not None and final.steps == 2000 and final.samples_per_step == 64
    # Never a torn record: steps only grow, and so do the seconds with them.
    assert all(a.steps <= b.steps and a.busy_s <= b.busy_s for a, b in itertools.pairwise(seen))
    assert FeedReader(tmp_path / "missing").read() is None
    (tmp_path / "other").write_bytes(b"not a feed" * 1000)
    assert FeedReader(tmp_path / "other").read() is None


def host(cpu: float) -> HostSample:
    return HostSample(
        system_cpu_percent=50.0, process_cpu_percent=cpu, process_rss_bytes=1 << 30,
        children_cpu_percent=None, children_rss_bytes=None, children_count=0,
    )  # fmt: skip


@settings(max_examples=50, deadline=None)
@given(
    busy=st.floats(0.001, 1.0), idle=st.floats(0.0, 1.0), steps=st.integers(1, 1000),
    seconds=st.floats(0.5, 100.0),
)  # fmt: skip
def test_the_window_turns_counters_into_rates(
    busy: float, idle: float, steps: int, seconds: float
) -> None:
    window = live.Window(1000.0)
    window.add(0.0, FeedReading(10, 1.0, 0.5, 32, 0), host(100.0))
    later = FeedReading(10 + steps, 1.0 + busy * steps, 0.5 + idle * steps, 32, 0)
    window.add(seconds, later, host(100.0))
    found = window.steps()
    assert found is not None
    step_s, samples, tokens, wait = found
    assert step_s == pytest.approx(busy + idle)
    assert samples == pytest.approx(32 * steps / seconds) and tokens == 0
    assert wait == pytest.approx(idle / (busy + idle))


def test_a_window_that_waits_for_its_batches_is_input_bound() -> None:
    window = live.Window(30.0)
    window.add(0.0, FeedReading(0, 0.0, 0.0, 32, 0), host(100.0))
    window.add(5.0, FeedReading(100, 3.0, 2.0, 32, 0), host(100.0))
    signals = live.signals_of(window, "cpu", cpus=2)
    assert signals.dataloader_wait_share == pytest.approx(0.4)
    assert signals.cpu_busy == pytest.approx(0.5)
    assert classify(signals).bound == "input-pipeline"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--interval", "0.05", "--", "true"), "faster than 5 Hz"),
        (("--window", "0.5", "--", "true"), "fewer than two samples"),
        (("--pid", "1", "--", "true"), "not both"),
        ((), "not both"),
        (("--", "/no/such/program"), "cannot start"),
        (("--pid", "999999999"), "no process 999999999"),
    ],
)
def test_monitor_refuses_bad_requests_in_one_line(args: tuple[str, ...], needle: str) -> None:
    ended = invoke("monitor", "--port", "0", *args)
    assert ended.code == ExitCode.USAGE, ended.stdout + ended.stderr
    assert needle in ended.stderr and "Traceback" not in ended.stderr


def test_the_rules_are_valid_and_their_unit_tests_pass() -> None:
    promtool = binary("promtool")
    for command in (["check", "rules", "perfgate-rules.yml"],
                    ["test", "rules", "perfgate-rules.test.yml"]):  # fmt: skip
        done = subprocess.run([promtool, *command], cwd=FILES, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "SUCCESS" in done.stdout


def test_the_rules_and_the_dashboard_query_only_series_perfgate_exposes() -> None:
    known = {s.name for s in RUN_SERIES} | set(live.LIVE_SERIES) | {live.BOUND}
    known |= {f"{live.STEPS}_total"}
    rules = (FILES / "perfgate-rules.yml").read_text().splitlines()
    texts = [line for line in rules if not line.lstrip().startswith("#")]
    dashboard = json.loads((FILES / "grafana-dashboard.json").read_text())
    texts += [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    used = {name for text in texts for name in re.findall(r"\b(perfgate_[a-z_]+)\b", text)}
    assert used and used <= known, used - known


def test_the_alertmanager_example_is_valid() -> None:
    amtool = binary("amtool")
    done = subprocess.run(
        [amtool, "check-config", str(FILES / "alertmanager-example.yml")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_shipped_dashboard_is_what_the_builder_builds() -> None:
    spec = importlib.util.spec_from_file_location(
        "grafana_dashboard", ROOT / "scripts" / "grafana_dashboard.py"
    )
    assert spec is not None and spec.loader is not None
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    assert (FILES / "grafana-dashboard.json").read_text() == builder.text()
    board = builder.build()
    assert board["uid"] == "perfgate-training"
    titles = [p["title"] for p in board["panels"]]
    assert {"Step time", "MFU", "GPU utilisation", "What bounds the step"} <= set(titles)


def test_ingest_stores_the_run_even_when_the_gateway_is_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.json"
    write_result(path, main_run())
    pr_path, pr_run = tmp_path / "pr.json", "00000000-0000-4000-8000-000000000042"
    write_result(pr_path, dataclasses.replace(factories.run(), run_id=pr_run))
    monkeypatch.setenv("PERFGATE_DATABASE_URL", f"sqlite:///{tmp_path / 'runs.db'}")
    monkeypatch.setenv("PERFGATE_PUSHGATEWAY_URL", "http://127.0.0.1:9")
    monkeypatch.chdir(tmp_path)
    ended = invoke("ingest", str(path), str(pr_path))
    assert ended.code == ExitCode.OK, ended.stderr
    assert f"{path}: run {main_run().run_id} stored" in ended.stdout
    assert f"{path}: not pushed to http://127.0.0.1:9: cannot push to the Pushgateway" in (
        ended.stdout
    )
    refused = f"{pr_path}: not pushed to http://127.0.0.1:9: run {pr_run} is a pull request's"
    assert refused in ended.stdout.replace("\n", " ")


def test_a_real_h200_run_gives_its_gpu_series() -> None:
    """The H200's result document (tests/data/h200): NVML's means over the repeats become the
    GPU series, in base units, labelled with the GPU's model."""
    from perfgate.documents.result import load_result

    run = load_result(ROOT / "tests" / "data" / "h200" / "gpu-bf16.json")
    found = families(openmetrics_text([run]))
    gpt = next(w for w in run.workloads if w.name == "gpt")
    gpu = [(r.telemetry_summary or {})["gpu"] for r in gpt.repeats]
    power = {s["workload"]: v for s, v in found["perfgate_gpu_power_watts"]}
    assert power["gpt"] == pytest.approx(sum(g["power_w"]["mean"] for g in gpu) / len(gpu))
    clock = {s["workload"]: v for s, v in found["perfgate_gpu_sm_clock_hertz"]}
    assert clock["gpt"] == pytest.approx(1980e6, rel=0.05)
    util = {s["workload"]: v for s, v in found["perfgate_gpu_utilization_ratio"]}
    assert 0 < util["gpt"] <= 1
    labels = found["perfgate_mfu_ratio"][0][0]
    assert "H200" in labels["gpu"] and labels["branch"] == "main"


@pytest.mark.slow
def test_monitor_exits_with_the_job_s_code(tmp_path: Path, perfgate_cli: CliRun) -> None:
    killed = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    for script, code in (("raise SystemExit(3)", 3), (killed, 128 + 15)):
        ended = perfgate_cli(
            "monitor", "--port", "0", "--no-gpu", "--", sys.executable, "-c", script, cwd=tmp_path
        )
        assert ended.returncode == code, ended.stdout + ended.stderr
        assert "steps seen" in ended.stdout
