"""Distributed repeats under torchrun (gloo on this CPU): per-rank samples, communication, and a
failing rank that fails the workload cleanly, leaving no process behind.

Real torchrun launches of real 2-rank DistributedDataParallel training; nothing is mocked.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psutil
import pytest
from fixture_types import CliRun

from perfgate.documents.result import load_result
from perfgate.errors import ExitCode

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).parent / "fixtures" / "ddp_project"


@pytest.fixture
def ddp_project(tmp_path: Path) -> Path:
    target = tmp_path / "ddp_project"
    shutil.copytree(FIXTURE, target)
    return target


def _leftovers(marker: Path) -> list[psutil.Process]:
    """Live processes whose command line names ``marker`` (a test's own folder)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        command = " ".join(process.info["cmdline"] or [])
        if str(marker) in command and "perfgate" in command:
            found.append(process)
    return found


def test_ddp_workload_on_two_ranks(tmp_path: Path, perfgate_cli: CliRun) -> None:
    out = tmp_path / "ddp.json"
    completed = perfgate_cli(
        "run", "-w", "ddp", "--nproc-per-node", "2", "--repeats", "2", "--steps", "6",
        "--warmup", "2", "--no-store", "--out", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    result = load_result(out)  # schema-valid with the distributed fields
    assert result.settings.nproc_per_node == 2
    (workload,) = result.workloads
    assert workload.status == "ok"
    assert workload.setup_info["distributed"]["backend"] == "gloo"
    assert workload.setup_info["distributed"]["world_size"] == 2
    # the global batch: both ranks' samples
    assert workload.samples_per_step == 2 * workload.params["batch_size"]
    for repeat in workload.repeats:
        assert repeat.ranks is not None and [r.rank for r in repeat.ranks] == [0, 1]
        for rank in repeat.ranks:
            assert len(rank.step_times_s) == 6
            assert rank.median_step_s > 0
        slowest = max(repeat.ranks, key=lambda r: r.median_step_s)
        assert repeat.slowest_rank == slowest.rank
        assert repeat.step_times_s == slowest.step_times_s  # the verdict is on the slowest rank
    first, second = workload.repeats
    assert first.ranks is not None and second.ranks is not None
    windows = [rank.communication for rank in first.ranks]
    assert all(w is not None and w["backend"] == "gloo" and w["collectives"] > 0 for w in windows)
    assert all(rank.communication is None for rank in second.ranks)  # first repeat only
    summary = workload.summary
    assert summary is not None and summary.world_size == 2
    assert summary.communication_share is not None and 0 < summary.communication_share < 1
    assert summary.communication_exposed_share is not None
    assert summary.communication_exposed_share <= summary.communication_share + 1e-9
    assert summary.communication_overlap is not None and 0 <= summary.communication_overlap <= 1
    assert summary.rank_spread is not None and 0 <= summary.rank_spread < 1
    assert summary.rank_imbalance is not None and 0 <= summary.rank_imbalance < 1
    assert "ddp: ranks 2 (gloo); rank step times rank 0 " in completed.stdout
    assert "communication " in completed.stdout and "% exposed" in completed.stdout
    assert _leftovers(tmp_path) == []

    # compare judges the slowest rank and says so; the report shows every rank.
    compared = perfgate_cli(
        "compare", str(out), "--baseline", str(out), "--json", str(tmp_path / "verdict.json"),
        "--markdown", str(tmp_path / "comment.md"), "--html", str(tmp_path / "report.html"),
        cwd=tmp_path,
    )  # fmt: skip
    assert compared.returncode in (0, 4), compared.stderr  # 2 repeats may be too few to say
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    (judged,) = verdict["workloads"]
    assert any(n.startswith("2 ranks: judged on the slowest rank's step") for n in judged["notes"])
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "rank step times" in html and "rank 1 " in html and "compute imbalance" in html
    assert "2 ranks: judged on the slowest rank" in (tmp_path / "comment.md").read_text()


@pytest.mark.parametrize(
    ("mode", "status", "needle"),
    [
        ("raise", "error", "rank 1"),
        ("exit", "crashed", "torchrun (2 ranks)"),
    ],
)
def test_a_failing_rank_fails_the_workload_cleanly(
    ddp_project: Path, perfgate_cli: CliRun, mode: str, status: str, needle: str
) -> None:
    out = ddp_project / "result.json"
    completed = perfgate_cli(
        "run", "-w", "ranked", "--nproc-per-node", "2", "--repeats", "2", "--steps", "6",
        "--warmup", "1", "--knob", f"fail={mode}", "--timeout", "60", "--no-store",
        "--out", str(out), cwd=ddp_project, timeout=120,
    )  # fmt: skip
    assert completed.returncode == ExitCode.INFRASTRUCTURE, completed.stderr
    (workload,) = load_result(out).workloads
    assert workload.status == status
    assert needle in (workload.error or "")
    if mode == "raise":
        assert "planted failure on rank 1" in (workload.error or "")
    assert len(workload.repeats) == 1  # a failed repeat ends the workload
    assert workload.repeats[0].wall_s < 60  # torchrun stopped rank 0: no wait for the timeout
    assert "Traceback" not in completed.stderr
    assert _leftovers(ddp_project) == []


def test_a_hung_rank_is_killed_with_its_whole_group(
    ddp_project: Path, perfgate_cli: CliRun
) -> None:
    """Rank 1 sleeps, rank 0 waits in the all-reduce: the timeout kills torchrun and both
    ranks (each in a session of its own), and the workload is a timeout."""
    out = ddp_project / "result.json"
    completed = perfgate_cli(
        "run", "-w", "ranked", "--nproc-per-node", "2", "--repeats", "1", "--steps", "6",
        "--warmup", "1", "--knob", "fail=hang", "--timeout", "15", "--no-store",
        "--out", str(out), cwd=ddp_project, timeout=120,
    )  # fmt: skip
    assert completed.returncode == ExitCode.INFRASTRUCTURE, completed.stderr
    (workload,) = load_result(out).workloads
    assert workload.status == "timeout"
    assert "15 s timeout" in (workload.error or "")
    assert _leftovers(ddp_project) == []


def test_a_single_process_workload_refuses_ranks(tmp_path: Path, perfgate_cli: CliRun) -> None:
    completed = perfgate_cli(
        "run", "-w", "gpt", "--nproc-per-node", "2", "--no-store", cwd=tmp_path
    )  # fmt: skip
    assert completed.returncode == ExitCode.USAGE
    assert "does not train under torch.distributed" in completed.stderr
    assert "select ddp" in completed.stderr
