"""Workers die with perfgate: a cancelled run (SIGTERM, SIGINT) or a killed one (SIGKILL) leaves
no worker, fork server, DataLoader worker, torchrun agent or rank behind.

Real ``perfgate run`` processes on real workloads, killed mid-repeat; nothing is mocked. Every
process of a run inherits a tag in its environment, so a scan of all processes finds whatever
is left of it (and nothing of other runs on the machine). A kill is sent only once the
processes it must take down are seen running — never after a guessed sleep — and the only time
bound is the generous wait for them to disappear.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from perfgate.parent import PARENT_ENV
from perfgate.runner.forkserver import START_ENV

TAG_ENV = "PERFGATE_TEST_TAG"
GONE_WITHIN_S = 30.0
"""How long the processes of a killed run may take to disappear: a SIGKILL is immediate, but
DataLoader workers notice their worker's death by polling (every 5 s), and this machine is slow
when loaded."""
SEEN_WITHIN_S = 300.0
"""How long a run may take to reach its first measured steps on a loaded machine."""

PASS_TAG = f"[tool.perfgate]\nworker_env = [{TAG_ENV!r}]\n"
"""Configuration that lets the tag through the workers' environment allow-list."""

linux = pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")

SLEEPY = '''
"""A repeat that runs for minutes: a step that sleeps, fed by two DataLoader workers. Each
process notes its pid in marks/ once it runs, so the test knows when to kill."""

import os
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

from perfgate import TrainingSetup, WorkloadContext

MARKS = Path(__file__).parent / "marks"


def mark(role: str) -> None:
    (MARKS / f"{role}-{os.getpid()}").touch()


class Slow(Dataset):
    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, index: int) -> torch.Tensor:
        time.sleep(0.01)
        return torch.ones(4)


def loader_started(worker_id: int) -> None:
    mark("loader")


def make(ctx: WorkloadContext) -> TrainingSetup:
    mark("worker")
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Slow(), batch_size=2, num_workers=2, worker_init_fn=loader_started)

    def step(batch: torch.Tensor) -> torch.Tensor:
        time.sleep(0.2)
        optimizer.zero_grad()
        loss = model(batch).sum()
        loss.backward()
        optimizer.step()
        return loss.detach()

    return TrainingSetup(
        model=model, optimizer=optimizer, batches=loader, step=step, samples_per_step=2
    )
'''


def tagged(tag: str) -> list[psutil.Process]:
    """Live processes carrying ``tag`` (a zombie is dead: only its exit status is left)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            if process.environ().get(TAG_ENV) == tag:
                found.append(process)
        except psutil.Error:
            continue
    return found


def command_line(process: psutil.Process) -> list[str]:
    """The process's arguments; none for one that ended meanwhile."""
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def connected(process: psutil.Process) -> bool:
    """Whether the process holds an established TCP connection."""
    try:
        connections = process.net_connections(kind="tcp")
    except psutil.Error:
        return False
    return any(c.status == psutil.CONN_ESTABLISHED for c in connections)


def wait_for(condition: Callable[[], bool], within_s: float, what: str) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, f"not seen within {within_s:g} s: {what}"
        time.sleep(0.2)


def start_run(
    project: Path, tag: str, *args: str, start: str | None = None
) -> subprocess.Popen[str]:
    """``perfgate run`` on the project, for far longer than the test lasts (stdout, which the
    test never reads, is dropped so that a full pipe cannot block the run)."""
    environment = {**os.environ, TAG_ENV: tag, "COLUMNS": "200"}
    for name in ("PERFGATE_DATABASE_URL", "GITHUB_STEP_SUMMARY", START_ENV, PARENT_ENV):
        environment.pop(name, None)
    if start is not None:
        environment[START_ENV] = start
    command = [sys.executable, "-m", "perfgate", "run", *args]
    command += ["--repeats", "1", "--warmup", "1", "--steps", "100000", "--timeout", "3600"]
    command += ["--no-store", "--out", str(project / "result.json")]
    return subprocess.Popen(
        command, cwd=project, env=environment, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def kill_and_check(
    parent: subprocess.Popen[str], number: signal.Signals, seen: list[psutil.Process], tag: str
) -> None:
    """Send ``number`` to perfgate, check how it ended, and that every process of the run is
    gone within :data:`GONE_WITHIN_S` (the time it took is printed)."""
    assert parent.poll() is None, parent.communicate()
    assert all(process.is_running() for process in seen)
    os.kill(parent.pid, number)
    killed = time.monotonic()
    _, stderr = parent.communicate(timeout=SEEN_WITHIN_S)
    exited = time.monotonic() - killed
    if number == signal.SIGKILL:
        assert parent.returncode == -signal.SIGKILL
    else:
        assert parent.returncode == 128 + number, stderr
        last = stderr.strip().splitlines()[-1]
        assert last == f"interrupted by {number.name}: every worker it started was killed"
        assert "Traceback" not in stderr
    deadline = killed + GONE_WITHIN_S
    left = tagged(tag)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = tagged(tag)
    survivors = [(p.pid, " ".join(command_line(p))) for p in left]
    for process in left:  # never leave them to the next test
        process.kill()
    assert survivors == [], f"alive {GONE_WITHIN_S:g} s after {number.name}: {survivors}"
    gone = time.monotonic() - killed
    print(f"{number.name}: perfgate ended {exited:.1f} s later, the rest of the run {gone:.1f} s")


@pytest.fixture
def sleepy_project(tmp_path: Path) -> Path:
    project = tmp_path / "sleepy_project"
    (project / "marks").mkdir(parents=True)
    (project / "sleepy.py").write_text(SLEEPY)
    (project / "pyproject.toml").write_text(
        PASS_TAG
        + textwrap.dedent(
            """
            [tool.perfgate.workloads.sleepy]
            factory = "sleepy:make"
            """
        )
    )
    return project


@pytest.mark.slow
@linux
@pytest.mark.parametrize(
    "number", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda number: number.name
)
@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_no_worker_outlives_a_stopped_or_killed_run(
    sleepy_project: Path, start: str, number: signal.Signals
) -> None:
    tag = uuid.uuid4().hex
    parent = start_run(sleepy_project, tag, "-w", "sleepy", "--threads", "1", start=start)
    try:
        marks = sleepy_project / "marks"

        def marked(role: str) -> list[int]:
            return [int(path.name.split("-")[1]) for path in marks.glob(f"{role}-*")]

        def running() -> bool:
            assert parent.poll() is None, parent.communicate()
            return len(marked("worker")) == 1 and len(marked("loader")) == 2

        wait_for(running, SEEN_WITHIN_S, "a worker and its two DataLoader workers")
        seen = [p for p in tagged(tag) if p.pid != parent.pid]
        by_pid = {p.pid: p for p in seen}
        # the scan finds them all (the tag reaches them), and they are what they should be
        (worker,) = (by_pid[pid] for pid in marked("worker"))
        loaders = [by_pid[pid] for pid in marked("loader")]
        assert {p.ppid() for p in loaders} == {worker.pid}
        assert {os.getpgid(p.pid) for p in loaders} == {worker.pid}  # in the worker's group
        if start == "fork":  # the fork server forked the worker
            (server,) = (p for p in seen if p.pid == worker.ppid())
            assert server.ppid() == parent.pid
            assert "perfgate.runner.forkserver" in " ".join(server.cmdline())
        else:
            assert worker.ppid() == parent.pid
        kill_and_check(parent, number, seen, tag)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.communicate()


@pytest.mark.slow
@linux
@pytest.mark.parametrize("number", [signal.SIGKILL, signal.SIGTERM], ids=lambda number: number.name)
def test_no_rank_outlives_a_stopped_or_killed_distributed_run(
    tmp_path: Path, number: signal.Signals
) -> None:
    tag = uuid.uuid4().hex
    (tmp_path / "pyproject.toml").write_text(PASS_TAG)
    parent = start_run(tmp_path, tag, "-w", "ddp", "--nproc-per-node", "2")
    try:

        def ranks() -> list[psutil.Process]:
            """The ranks (torchrun's agent has the worker module in its arguments too)."""
            assert parent.poll() is None, parent.communicate()
            return [
                p
                for p in tagged(tag)
                if "perfgate.runner.worker" in (line := command_line(p))
                and "perfgate.distributed.torchrun" not in line
            ]

        def joined() -> bool:
            """Both ranks hold a TCP connection (to the agent's store): they are inside the
            repeat, joining or past the start of the process group."""
            found = ranks()
            return len(found) == 2 and all(connected(p) for p in found)

        wait_for(joined, SEEN_WITHIN_S, "two ranks in the process group")
        seen = [p for p in tagged(tag) if p.pid != parent.pid]
        (agent,) = (p for p in seen if "perfgate.distributed.torchrun" in command_line(p))
        assert agent.ppid() == parent.pid
        assert {p.ppid() for p in ranks()} == {agent.pid}
        kill_and_check(parent, number, seen, tag)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.communicate()


CHILD = """
import os, sys, time
from perfgate.parent import PARENT_ENV, die_with_parent

if sys.argv[1] == "late":  # wait until the parent is gone, then ask
    while os.getppid() == int(os.environ[PARENT_ENV]):
        time.sleep(0.01)
die_with_parent()
if sys.argv[1] == "early":
    print("asked", flush=True)
time.sleep(600)
"""

MIDDLE = """
import os, subprocess, sys
from perfgate.parent import child_environment

child = subprocess.Popen(
    [sys.executable, "-c", sys.argv[1], sys.argv[2]],
    env=child_environment(os.environ),
    stdout=subprocess.PIPE,
    stderr=subprocess.DEVNULL,
)
print(child.pid, flush=True)
if sys.argv[2] == "early":
    child.stdout.readline()  # it has asked to die with this process: now die
"""


@linux
@pytest.mark.parametrize("when", ["early", "late"])
def test_a_child_dies_with_its_parent_even_if_the_parent_died_before_it_asked(
    when: str,
) -> None:
    """``early``: the parent dies after the child asked, and the kernel kills the child.
    ``late``: the parent is already gone when the child asks, so the child kills itself."""
    completed = subprocess.run(
        [sys.executable, "-c", MIDDLE, CHILD, when],
        capture_output=True, text=True, timeout=SEEN_WITHIN_S, check=True,
    )  # fmt: skip
    pid = int(completed.stdout)

    def gone() -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    wait_for(gone, GONE_WITHIN_S, f"the end of the orphaned child {pid}")
