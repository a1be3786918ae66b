"""The fork server: a forked repeat is as fresh a process as a spawned one and ends the same ways.

Real worker processes on the faulty fixture project, each case on both start methods where
both apply. Processes left behind are found by a marker in their environment (every worker
and server inherits it), so other test runs on the machine cannot confuse the scan. No timing
is asserted: speed is measured in benchmarks/startup.py.
"""

from __future__ import annotations

import os
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from perfgate.config import load_config
from perfgate.documents.result import RepeatResult
from perfgate.errors import UsageError
from perfgate.runner import forkserver
from perfgate.runner.forkserver import START_ENV, ForkServer, start_method, worker_launcher
from perfgate.runner.interleave import Arm, run_interleaved
from perfgate.runner.orchestrator import run_repeat, warm_launcher
from perfgate.runner.plan import Selection, make_plan

MARK = "PERFGATE_TEST_FORKSERVER_MARK"
linux = pytest.mark.skipif(sys.platform != "linux", reason="the fork server is Linux-only")


def test_start_method_defaults_to_fork_on_linux_and_can_be_turned_off() -> None:
    assert start_method({START_ENV: "spawn"}) == "spawn"
    assert start_method({}) == ("fork" if sys.platform == "linux" else "spawn")
    assert start_method({START_ENV: " Fork "}) == start_method({})
    with pytest.raises(UsageError, match="is not a way to start workers"):
        start_method({START_ENV: "forkserver"})


@pytest.fixture
def mark(monkeypatch: pytest.MonkeyPatch) -> str:
    """A marker every worker and server started by the test inherits."""
    value = uuid.uuid4().hex
    monkeypatch.setenv(MARK, value)
    return value


@pytest.fixture
def launcher(request: pytest.FixtureRequest, mark: str) -> Iterator[ForkServer | None]:
    """A launcher for the start method in ``request.param``."""
    with worker_launcher({START_ENV: request.param}) as made:
        assert (made is None) == (request.param == "spawn")
        yield made


def marked_processes(mark: str, *keep: int | None) -> list[psutil.Process]:
    """Live processes carrying the marker, other than ``keep`` (the running server)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.pid in keep or process.pid == os.getpid():
                continue
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            if process.environ().get(MARK) == mark:
                found.append(process)
        except psutil.Error:
            continue
    return found


def ended(pid: int) -> bool:
    """Whether process ``pid`` is gone (or a zombie: dead, not yet reaped)."""
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def one_repeat(
    project: Path,
    workload: str,
    scratch: Path,
    launcher: ForkServer | None,
    index: int = 0,
    timeout_s: float = 120,
    threads: int | None = None,
) -> tuple[RepeatResult, dict[str, Any]]:
    """One repeat of ``workload``: its result, and the setup information it reported."""
    selection = Selection(
        workloads=[workload], repeats=1, steps=3, warmup=1, timeout_s=timeout_s, threads=threads
    )
    plan, settings = make_plan(load_config(cwd=project), selection)
    repeat, measured = run_repeat(plan[0], settings, "cpu", {}, scratch, index, launcher=launcher)
    return repeat, dict(measured.setup_info) if measured is not None else {}


@pytest.mark.slow
@linux
@pytest.mark.parametrize("launcher", ["fork", "spawn"], indirect=True)
def test_a_repeat_is_a_fresh_process_in_its_own_session_either_way(
    faulty_project: Path, tmp_path: Path, launcher: ForkServer | None, mark: str
) -> None:
    repeat, info = one_repeat(
        faulty_project, "describes_its_process", tmp_path, launcher, threads=1
    )
    assert repeat.status == "ok", repeat.error
    assert len(repeat.step_times_s) == 3 and repeat.threads == 1
    names = [
        "spawned",
        "start",
        "imports_done",
        "setup_done",
        "flops_done",
        "measure_start",
        "measure_end",
        "work_done",
    ]
    assert sorted(repeat.phases, key=repeat.phases.__getitem__) == names  # no cuda_ready on cpu
    assert info["sid"] == info["pid"]  # a session (and process group) of its own
    server = launcher.server_pid if launcher is not None else None
    assert info["ppid"] == (server or os.getpid())
    assert info["cuda_initialized"] is False
    assert info["argv"] == [
        str(tmp_path / f"describes_its_process-0.{end}.json") for end in ("spec", "out")
    ]
    assert info["omp_num_threads"] == "1"
    if server is not None:  # started with the worker's environment, and one thread
        assert psutil.Process(server).environ()["OMP_NUM_THREADS"] == "1"
        assert len(os.listdir(f"/proc/{server}/task")) == 1
        assert psutil.Process(server).children() == []  # the ended worker was reaped
    assert marked_processes(mark, server) == []


@pytest.mark.slow
@linux
@pytest.mark.parametrize("launcher", ["fork"], indirect=True)
def test_every_child_starts_from_the_servers_state_never_an_earlier_childs(
    faulty_project: Path, tmp_path: Path, launcher: ForkServer | None
) -> None:
    infos = []
    servers = []
    for index in range(2):
        repeat, info = one_repeat(
            faulty_project, "describes_its_process", tmp_path, launcher, index
        )
        assert repeat.status == "ok", repeat.error
        infos.append(info)
        assert launcher is not None
        servers.append(launcher.server_pid)
    assert servers[0] == servers[1] == infos[0]["ppid"] == infos[1]["ppid"]
    assert [info["inherited_mark"] for info in infos] == [None, None]
    assert infos[0]["numpy_draw"] != infos[1]["numpy_draw"]  # reseeded as a new process is
    assert infos[0]["random_draw"] != infos[1]["random_draw"]


FAILURES = {
    "raises": ("error", 1, "RuntimeError: simulated failure in the training step"),
    "exits": ("crashed", 7, "worker exited with code 7 without writing a result"),
    "kills_itself": ("crashed", -9, "worker killed by SIGKILL"),
    "hangs": ("timeout", None, "no result within the 8 s timeout; the process group was killed"),
}


@pytest.mark.slow
@linux
@pytest.mark.parametrize("workload", list(FAILURES))
@pytest.mark.parametrize("launcher", ["fork", "spawn"], indirect=True)
def test_a_failing_worker_is_classified_as_on_the_spawn_path(
    faulty_project: Path,
    tmp_path: Path,
    launcher: ForkServer | None,
    mark: str,
    workload: str,
) -> None:
    status, exit_code, text = FAILURES[workload]
    # Only the hang waits for the short timeout; a spawned worker importing torch on a busy
    # runner can take longer than 8 s to reach its failure, which must not read as a hang.
    timeout_s = 8 if status == "timeout" else 300
    repeat, _ = one_repeat(faulty_project, workload, tmp_path, launcher, timeout_s=timeout_s)
    assert (repeat.status, repeat.exit_code) == (status, exit_code)
    assert text in (repeat.error or "")
    assert "fork server" not in (repeat.error or "")
    assert set(repeat.phases) == {"spawned"}
    server = launcher.server_pid if launcher is not None else None
    assert marked_processes(mark, server) == []  # nothing outlives the repeat, not even a hang
    if server is not None:
        assert psutil.Process(server).children() == []


@pytest.mark.slow
@linux
@pytest.mark.parametrize("launcher", ["fork"], indirect=True)
def test_a_server_dying_mid_repeat_is_a_crash_and_the_next_repeat_gets_a_new_server(
    faulty_project: Path, tmp_path: Path, launcher: ForkServer | None, mark: str
) -> None:
    assert launcher is not None
    repeat, _ = one_repeat(faulty_project, "kills_its_parent", tmp_path, launcher, timeout_s=300)
    assert repeat.status == "crashed"  # noticed at once: not a timeout
    assert "fork server" in (repeat.error or "") and "killed by SIGKILL" in (repeat.error or "")
    assert launcher.server_pid is None
    assert marked_processes(mark) == []  # the orphaned worker was killed too

    repeat, info = one_repeat(faulty_project, "describes_its_process", tmp_path, launcher, 1)
    assert repeat.status == "ok", repeat.error
    assert launcher.server_pid is not None
    assert info["ppid"] == launcher.server_pid


@pytest.mark.slow
@linux
@pytest.mark.parametrize("launcher", ["fork"], indirect=True)
def test_a_server_that_cannot_start_leaves_the_worker_spawned(
    faulty_project: Path,
    tmp_path: Path,
    launcher: ForkServer | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        forkserver, "SERVER_COMMAND", (sys.executable, "-c", "import sys; sys.exit(3)")
    )
    for index in range(2):
        repeat, info = one_repeat(
            faulty_project, "describes_its_process", tmp_path, launcher, index
        )
        assert repeat.status == "ok", repeat.error
        assert info["ppid"] == os.getpid()
        log = (tmp_path / f"describes_its_process-{index}.log").read_text()
        assert log.startswith("perfgate: no fork server (the fork server (pid ")
        assert "exited with code 3); the worker was spawned" in log


@pytest.mark.slow
@linux
def test_a_warm_launchers_server_is_started_at_once_and_serves_the_first_repeat(
    faulty_project: Path, tmp_path: Path, mark: str
) -> None:
    selection = Selection(workloads=["describes_its_process"], repeats=1, steps=3, warmup=1)
    plan, settings = make_plan(load_config(cwd=faulty_project), selection)
    with warm_launcher(plan, settings, "cpu") as launcher:
        assert launcher is not None
        prestarted = launcher.server_pid
        assert prestarted is not None  # running before any repeat asked for it
        repeat, measured = run_repeat(plan[0], settings, "cpu", {}, tmp_path, 0, launcher=launcher)
        assert repeat.status == "ok", repeat.error
        assert measured is not None and measured.setup_info["ppid"] == prestarted
        assert launcher.server_pid == prestarted
    assert ended(prestarted)
    assert marked_processes(mark) == []


@pytest.mark.slow
@linux
def test_a_prestarted_server_nobody_used_is_stopped_with_its_launcher(
    mark: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with worker_launcher({START_ENV: "fork"}) as launcher:
        assert launcher is not None
        launcher.prestart({"OMP_NUM_THREADS": "1"})
        unused = launcher.server_pid
        assert unused is not None
    assert ended(unused)

    with worker_launcher({START_ENV: "fork"}) as launcher:
        assert launcher is not None
        # a server still importing when its launcher closes
        monkeypatch.setattr(
            forkserver, "SERVER_COMMAND", (sys.executable, "-c", "import time; time.sleep(60)")
        )
        launcher.prestart({})
        importing = launcher.server_pid
        assert importing is not None
    assert ended(importing)
    assert marked_processes(mark) == []


@pytest.mark.slow
@linux
@pytest.mark.parametrize("launcher", ["fork"], indirect=True)
def test_a_repeat_in_another_environment_replaces_the_prestarted_server(
    faulty_project: Path, tmp_path: Path, launcher: ForkServer | None
) -> None:
    assert launcher is not None
    launcher.prestart({"PERFGATE_TEST_FORKSERVER_OTHER": "1"})
    prestarted = launcher.server_pid
    repeat, info = one_repeat(faulty_project, "describes_its_process", tmp_path, launcher)
    assert repeat.status == "ok", repeat.error
    assert prestarted is not None and info["ppid"] not in (prestarted, os.getpid())
    assert info["ppid"] == launcher.server_pid
    assert ended(prestarted)


@pytest.mark.slow
@linux
def test_a_forked_repeat_holds_the_memory_a_spawned_one_does(
    faulty_project: Path, tmp_path: Path
) -> None:
    """The child copies what it shares with the server and maps the server's file pages again
    (without the latter, mlp@smoke's peak RSS was 18 % lower forked than spawned)."""
    peaks = {}
    for method in ("fork", "spawn"):
        (tmp_path / method).mkdir()
        with worker_launcher({START_ENV: method}) as launcher:
            repeat, _ = one_repeat(faulty_project, "healthy", tmp_path / method, launcher)
        assert repeat.status == "ok", repeat.error
        peaks[method] = repeat.peak_memory["rss_bytes"]
    assert peaks["fork"] == pytest.approx(peaks["spawn"], rel=0.08)


VERSIONED = """
import itertools

import torch

from perfgate import TrainingSetup, WorkloadContext

VERSION = {version}


def make(ctx: WorkloadContext) -> TrainingSetup:
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(batch: object) -> torch.Tensor:
        return torch.tensor(float(VERSION))

    return TrainingSetup(
        model=model,
        optimizer=optimizer,
        batches=itertools.repeat(None),
        step=step,
        samples_per_step=1,
    )
"""


@pytest.mark.slow
@linux
def test_ab_sides_each_import_their_own_version_of_a_module(
    tmp_path: Path, mark: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(START_ENV, raising=False)  # the default: forked
    arms = []
    version: float  # ints here, floats in the loop over the results below
    for label, version in (("base", 1), ("head", 2)):
        checkout = tmp_path / label
        checkout.mkdir()
        (checkout / "versioned.py").write_text(VERSIONED.format(version=version))
        (checkout / "pyproject.toml").write_text(
            textwrap.dedent(
                """
                [tool.perfgate.workloads.versioned]
                factory = "versioned:make"
                """
            )
        )
        selection = Selection(workloads=["versioned"], repeats=4, steps=2, warmup=1)
        plan, settings = make_plan(load_config(cwd=checkout), selection)
        arms.append(Arm(label=label, plan=plan, settings=settings))
    base, head = run_interleaved(arms, "cpu", {}, rounds=4)
    for (result,), version in ((base, 1.0), (head, 2.0)):
        assert result.status == "ok", result.error
        assert len(result.repeats) == 4
        assert {loss for repeat in result.repeats for loss in repeat.losses} == {version}
    assert marked_processes(mark) == []  # the server went with the run
