"""Monitoring against real servers (issue 21): Prometheus, Pushgateway and Alertmanager from
Debian's packages, each started by the test on loopback ports (``tests/monitoring_servers.py``).

- a stored run pushed to the Pushgateway is scraped by Prometheus and a PromQL query returns
  its numbers, with the labels perfgate chose and none it did not;
- a planted regression (a commit that doubles the step) judged by ``perfgate compare`` fires
  ``PerfgateRegressionOnMain`` from the shipped rules, and Alertmanager, routed as the shipped
  example routes, delivers it to a local webhook;
- Prometheus scrapes ``perfgate monitor`` while a training script runs under it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixture_types import CliRun
from monitoring_servers import (
    alertmanager_server,
    free_port,
    get_json,
    prometheus,
    pushgateway,
    query,
    wait_for,
    webhook,
)
from scratch_repo import VIRTUAL, commit_edit, committed_project

from perfgate.documents.result import load_result
from perfgate.errors import ExitCode

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
FILES = ROOT / "perfgate" / "monitoring" / "files"
QUICK = ("--steps", "4", "--warmup", "1", "--repeats", "3", "--device", "cpu", "--no-store")


def host(url: str) -> str:
    return url.removeprefix("http://")


def test_a_pushed_run_is_scraped_and_queried(tmp_path: Path, perfgate_cli: CliRun) -> None:
    repo = committed_project(tmp_path / "repo")
    ran = perfgate_cli("run", *QUICK, "--out", "run.json", cwd=repo, env=VIRTUAL)
    assert ran.returncode == ExitCode.OK, ran.stdout + ran.stderr
    result = load_result(repo / "run.json")
    (workload,) = result.workloads
    assert workload.summary is not None
    with (
        pushgateway(tmp_path) as gateway,
        prometheus(tmp_path, {"pushgateway": host(gateway.url)}) as server,
    ):
        pushed = perfgate_cli(
            "export", "run.json", "--openmetrics", "--push", gateway.url, cwd=repo
        )
        assert pushed.returncode == ExitCode.OK, pushed.stdout + pushed.stderr
        assert "pushed to" in pushed.stdout and "workload=costly" in pushed.stdout
        (sample,) = wait_for(server, 'perfgate_step_time_seconds{workload="costly"}')
        assert float(sample["value"][1]) == pytest.approx(workload.summary.median_step_s)
        labels = sample["metric"]
        assert labels["branch"] == "main" and labels["suite"] == "ab" and labels["gpu"] == "cpu"
        assert labels["preset"] == workload.preset and labels["job"] == "perfgate"
        assert result.source.commit is not None
        assert result.source.commit not in str(labels) and result.run_id not in str(labels)
        (throughput,) = query(server, 'perfgate_throughput_samples_per_second{workload="costly"}')
        assert float(throughput["value"][1]) == pytest.approx(workload.summary.samples_per_s)
        # Storing the run with a configured gateway pushes it again: the same group is
        # replaced, not a second one added.
        stored = perfgate_cli(
            "ingest", "run.json", cwd=repo, env={"PERFGATE_PUSHGATEWAY_URL": gateway.url}
        )
        assert stored.returncode == ExitCode.OK, stored.stdout + stored.stderr
        assert f"pushed to {gateway.url} (1 workload group(s))" in stored.stdout
        groups = get_json(f"{gateway.url}/api/v1/metrics")["data"]
        assert len(groups) == 1 and groups[0]["labels"]["workload"] == "costly"
        time.sleep(2.5)
        assert len(query(server, "perfgate_step_time_seconds")) == 1


def test_a_planted_regression_fires_its_alert_through_alertmanager(
    tmp_path: Path, perfgate_cli: CliRun
) -> None:
    repo = committed_project(tmp_path / "repo")
    enough = (*QUICK, "--repeats", "6")  # a rank test needs 6 a side to reach p < 0.05
    base = perfgate_cli("run", *enough, "--out", "base.json", cwd=repo, env=VIRTUAL)
    assert base.returncode == ExitCode.OK, base.stdout + base.stderr
    commit_edit(
        repo,
        "        time.sleep(BASE_WAIT_S)\n",
        "        time.sleep(BASE_WAIT_S)\n        time.sleep(BASE_WAIT_S)  # planted\n",
        "a second wait per step",
    )
    head = perfgate_cli("run", *enough, "--out", "head.json", cwd=repo, env=VIRTUAL)
    assert head.returncode == ExitCode.OK, head.stdout + head.stderr
    judged = perfgate_cli(
        "compare", "head.json", "--baseline", "base.json", "--json", "verdict.json", cwd=repo
    )
    assert judged.returncode == ExitCode.REGRESSION, judged.stdout + judged.stderr
    with webhook() as receiver:
        routes = (FILES / "alertmanager-example.yml").read_text()
        routes = routes.replace("http://127.0.0.1:5001", receiver.url)
        routes = routes.replace("group_wait: 30s", "group_wait: 1s")
        (tmp_path / "alertmanager.yml").write_text(routes)
        with (
            pushgateway(tmp_path) as gateway,
            alertmanager_server(tmp_path, tmp_path / "alertmanager.yml") as alerts,
            prometheus(
                tmp_path,
                {"pushgateway": host(gateway.url)},
                rule_files=[FILES / "perfgate-rules.yml"],
                alertmanager=alerts.url,
            ) as server,
        ):
            pushed = perfgate_cli(
                "export", "head.json", "verdict.json", "--openmetrics", "--push", gateway.url,
                cwd=repo,
            )  # fmt: skip
            assert pushed.returncode == ExitCode.OK, pushed.stdout + pushed.stderr
            wait_for(server, 'ALERTS{alertname="PerfgateRegressionOnMain", alertstate="firing"}')
            assert receiver.arrived.wait(60), (alerts.log.read_text()[-2000:], receiver.bodies)
    body = receiver.bodies[0]
    assert body["path"] == "/perfgate/page"  # severity page: the paging receiver
    (alert,) = [a for a in body["alerts"] if a["labels"]["alertname"] == "PerfgateRegressionOnMain"]
    assert alert["status"] == "firing"
    assert alert["labels"]["workload"] == "costly" and alert["labels"]["suite"] == "ab"
    assert alert["annotations"]["summary"] == "costly@smoke (ab) regressed on main"


def test_prometheus_scrapes_perfgate_monitor_while_a_job_trains(
    tmp_path: Path, perfgate_cli: CliRun
) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, time\n"
        "import torch\n"
        "import perfgate\n"
        "model = torch.nn.Linear(64, 64)\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n"
        "session = perfgate.Session(model=model, optimizer=optimizer, samples_per_step=32)\n"
        "x = torch.randn(32, 64)\n"
        "deadline = time.monotonic() + float(sys.argv[1])\n"
        "while time.monotonic() < deadline:\n"
        "    time.sleep(0.02)  # the next batch\n"
        "    with session.step():\n"
        "        loss = model(x).square().mean()\n"
        "        optimizer.zero_grad()\n"
        "        loss.backward()\n"
        "        optimizer.step()\n"
    )
    port = free_port()
    with prometheus(tmp_path, {"training": f"127.0.0.1:{port}"}) as server:
        job = subprocess.Popen(
            [sys.executable, "-m", "perfgate", "monitor", "--port", str(port), "--interval",
             "0.5", "--window", "5", "--linger", "3", "--no-gpu", "--",
             sys.executable, str(script), "25"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={k: v for k, v in os.environ.items() if k != "PERFGATE_MONITOR_FEED"},
        )  # fmt: skip
        try:
            (steps,) = wait_for(server, "perfgate_live_steps_total > 20", timeout=90)
            assert steps["metric"]["job"] == "training"
            (step,) = wait_for(server, "perfgate_live_step_time_seconds > 0")
            assert 0.02 < float(step["value"][1]) < 5.0  # at least the wait, never absurd
            # The 20 ms batch wait: diagnose's input-pipeline rule over the rolling window.
            wait_for(server, 'perfgate_live_bottleneck{bound="input-pipeline"} == 1')
            assert query(server, "perfgate_live_gpu_utilization_ratio") == []  # --no-gpu
            output, _ = job.communicate(timeout=120)
        finally:
            if job.poll() is None:
                job.kill()
    assert job.returncode == 0, output
    assert "steps seen" in output
