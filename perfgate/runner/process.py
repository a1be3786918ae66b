"""One repeat in one fresh process: spawn, sample from outside, enforce the time limit, classify.

A distributed repeat (``nproc_per_node`` in the spec) is one ``torchrun`` whose ranks each
write a report; they are combined (``perfgate.distributed.ranks``) before the same
classification, so a crashed, failed or hung rank ends the repeat like a failed worker would.

The worker's report is untrusted input: the workload's code runs in that process and can write
anything there. It is read through its format (``perfgate.documents.worker.load_report``), and
a report that does not fit — not JSON, NaN, a field of the wrong type or missing, steps the
spec did not ask for — fails the repeat as an untrustworthy measurement, with the reason.

The parent never trusts the child to end well. The worker runs in its own process group so a
timeout or a crash takes its DataLoader workers down with it, and every way a process can end —
a result, an exception, a signal, ``os._exit``, a hang — becomes a result with its error text
rather than an exception that would stop the other workloads (a timeout is a result, not an
exception). Telemetry is sampled here, in the parent, so the timed process carries none of it.
The worker never outlives the parent: it dies with it, and a stop signal to the parent kills
it first (``perfgate.runner.lifetime``).

A single-process worker is forked by the run's fork server when it has one
(``perfgate.runner.forkserver``: 0.2 s a repeat instead of 2.8 s, as fresh a process) and
spawned as ``python -m perfgate.runner.worker`` otherwise; either way the same sampling, time
limit, kill and classification apply. A fork server that dies under a repeat makes it a crash.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from perfgate.distributed.ranks import combine_ranks, read_rank_reports
from perfgate.documents.result import RankResult
from perfgate.documents.worker import (
    WORKER_SPEC,
    Measurement,
    ProfileReport,
    RepeatReport,
    WorkerReport,
    WorkerSpec,
    read_report,
)
from perfgate.errors import UsageError
from perfgate.parent import child_environment
from perfgate.runner.environment import worker_environment
from perfgate.runner.forkserver import ForkedWorker, ForkServer, ForkServerLost
from perfgate.runner.launch import torchrun_command
from perfgate.runner.lifetime import kill_tree, tracked
from perfgate.runner.pycommand import module_command
from perfgate.runner.strays import adopt_orphans, descendants, kill_strays
from perfgate.runner.witness import ClockWitness, window_problem
from perfgate.telemetry.sampler import TelemetrySampler

STDERR_TAIL_CHARS = 2000
WORKER_EXIT_ERROR = 1
WORKER_EXIT_USAGE = 2
WORKER_EXIT_CRASH = 70
"""Stands for "a rank wrote no result" (torchrun exits 0 or 1 either way): a crash, never a
pass, with the ranks' own account in the combined report's error."""


@dataclass(frozen=True, kw_only=True)
class RepeatProcessResult:
    """How one worker process ended, with its report when the repeat is ok."""

    status: str
    error: str | None
    exit_code: int | None
    spawned: float
    """Unix time just before the worker was started (the repeat's ``spawned`` phase)."""
    wall_s: float
    stderr_tail: str | None
    telemetry: dict[str, Any]
    clock_problem: str | None = None
    """Why the parent's clock does not vouch for the reported steps (``perfgate.runner.witness``);
    None when it does, or when the harness's virtual clock timed them."""
    report: WorkerReport | None = None
    """The worker's report (the slowest rank's, of a torchrun) when the repeat is ok: schema-
    valid and consistent with its spec (``perfgate.documents.worker.load_report``)."""
    slowest_rank: int | None = None
    """A torchrun's timed repeat: the rank whose steps ``report`` holds."""
    ranks: list[RankResult] | None = None
    """A torchrun's timed repeat: every rank's samples."""

    @property
    def measurement(self) -> Measurement | None:
        """An ok timed repeat's measurement."""
        report = self.report if self.status == "ok" else None
        return report.measurement if report is not None else None

    @property
    def profile(self) -> ProfileReport | None:
        """An ok profiling window's outcome."""
        report = self.report if self.status == "ok" else None
        return report.profile if report is not None else None


def run_worker(
    spec: WorkerSpec,
    workdir: Path,
    label: str,
    timeout_s: float,
    gpu_index: int | None,
    sample_interval_s: float,
    launcher: ForkServer | None = None,
) -> RepeatProcessResult:
    """Run ``perfgate.runner.worker`` on ``spec``; raise UsageError only for bad input.

    With a ``launcher`` a single-process worker is forked by it (torchrun repeats are always
    spawned). Its environment is the one a spawned worker gets — this process's, plus
    ``OMP_NUM_THREADS`` for pinned threads — and the fork server is started with it, because
    libgomp reads the variable when torch loads it; the worker also pins its threads with
    ``torch.set_num_threads``, which takes effect in either kind of process.
    """
    spec_path = workdir / f"{label}.spec.json"
    out_path = workdir / f"{label}.out.json"
    log_path = workdir / f"{label}.log"
    # A profiling run times no steps, and the test harness's virtual clock is not wall time:
    # nothing for the parent to witness in either.
    witnessed = spec.step_clock is None and spec.profile is None
    witness = ClockWitness(workdir, label) if witnessed else None
    if witness is not None:
        spec = replace(spec, clock_witness=witness.path)
    spec_path.write_text(json.dumps(WORKER_SPEC.dump(spec)))
    environment = repeat_environment(spec)
    world_size = spec.nproc_per_node or 0
    command = (
        torchrun_command(world_size, spec_path, out_path)
        if world_size
        else module_command("perfgate.runner.worker", str(spec_path), str(out_path))
    )
    adopt_orphans()  # a process the worker detaches (setsid) stays ours to find and kill
    before = descendants()
    spawned = time.time()
    started = time.perf_counter()
    with open(log_path, "w+b") as log:
        forked = (
            launcher.start(spec_path, out_path, log, environment)
            if launcher is not None and not world_size
            else None
        )
        process = forked or subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_environment(environment),
            start_new_session=True,
        )
        with process, tracked(process):
            sampler = TelemetrySampler(process.pid, gpu_index, sample_interval_s)
            sampler.start()
            timed_out = False
            lost = None
            try:
                exit_code: int | None = process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                exit_code = None
            except ForkServerLost as exc:
                lost = str(exc)
                exit_code = None
            finally:
                telemetry = sampler.stop()
                _kill_tree(process)
        wall_s = time.perf_counter() - started
    server = launcher.server_pid if launcher is not None else None
    kill_strays(before | ({server} if server is not None else set()))
    windows = {}
    if witness is not None:
        windows = witness.windows()
        witness.close()
    tail = _tail(log_path)
    if world_size:
        reports, malformed = read_rank_reports(out_path, spec, world_size)
        reported = combine_ranks(reports, world_size, malformed)
        exit_code = _rank_exit_code(exit_code, reported)
    else:
        reported = read_report(out_path, spec)
    name = f"torchrun ({world_size} ranks)" if world_size else "worker"
    status, error = _classify(exit_code, timed_out, reported, tail, timeout_s, name, lost)
    if status == "usage_error":
        raise UsageError(str(error))
    clock_problem = None
    if witness is not None and status == "ok":
        clock_problem = window_problem(windows, _reported_steps(reported))
    ok = status == "ok"
    return RepeatProcessResult(
        clock_problem=clock_problem,
        status=status,
        report=reported.report if ok else None,
        slowest_rank=reported.slowest_rank if ok else None,
        ranks=reported.ranks if ok else None,
        error=error,
        exit_code=exit_code,
        spawned=spawned,
        wall_s=wall_s,
        stderr_tail=tail,
        telemetry=telemetry,
    )


def repeat_environment(spec: WorkerSpec) -> dict[str, str]:
    """The environment of the worker that runs ``spec``: this process's allowed variables
    (``perfgate.runner.environment``) plus ``OMP_NUM_THREADS`` when its threads are pinned."""
    environment = worker_environment(os.environ, spec.environment_allow)
    if spec.threads:
        environment["OMP_NUM_THREADS"] = str(spec.threads)
    return environment


def _reported_steps(reported: RepeatReport) -> dict[int, list[float]]:
    """Rank → the measured step times the worker (each rank of a torchrun) reported."""
    if reported.ranks:
        return {rank.rank: list(rank.step_times_s) for rank in reported.ranks}
    measured = reported.report.measurement if reported.report is not None else None
    return {0: list(measured.step_times_s) if measured is not None else []}


def _kill_tree(process: subprocess.Popen[bytes] | ForkedWorker) -> None:
    """Kill whatever is left of the worker (its process group and every descendant's group,
    ``perfgate.runner.lifetime.kill_tree``: no rank or DataLoader worker survives a timeout)
    and reap it. A forked worker whose server died is an orphan: killed like the others,
    reaped by init."""
    kill_tree(process.pid)
    try:
        process.wait()
    except ForkServerLost:
        _wait_until_gone(process.pid)


ORPHAN_WAIT_S = 30.0
"""How long to wait for a killed worker whose fork server died (init, not us, reaps it): a
SIGKILL is final, but on a loaded machine the exit can take a moment to be seen."""


def _wait_until_gone(pid: int) -> None:
    """Wait for a killed process that is not our child to be gone (reaped by init)."""
    import psutil

    with contextlib.suppress(psutil.Error):
        psutil.Process(pid).wait(timeout=ORPHAN_WAIT_S)


def _rank_exit_code(launcher_code: int | None, reported: RepeatReport) -> int | None:
    """torchrun's exit code in the worker's terms, so one classification serves both.

    torchrun exits 1 whenever a rank failed; the ranks' reports say how. A timeout (None)
    stays a timeout, and a failure no rank explained keeps the launcher's own code.
    """
    if launcher_code is None or launcher_code < 0:
        return launcher_code
    status = reported.status
    codes = {"ok": 0, "error": WORKER_EXIT_ERROR, "usage_error": WORKER_EXIT_USAGE}
    if status in codes and (launcher_code != 0 or status == "ok"):
        return codes[str(status)]
    return launcher_code if launcher_code not in (0, WORKER_EXIT_ERROR) else WORKER_EXIT_CRASH


def _tail(path: Path) -> str | None:
    text = path.read_bytes()[-STDERR_TAIL_CHARS:].decode("utf-8", "replace").strip()
    return text or None


def _classify(
    exit_code: int | None,
    timed_out: bool,
    reported: RepeatReport,
    tail: str | None,
    timeout_s: float,
    launcher: str = "worker",
    lost: str | None = None,
) -> tuple[str, str | None]:
    """Map the way the process ended to a repeat status and error text (``lost``: how the
    fork server died under a forked worker, whose own end it can then no longer report).

    A report that cannot be trusted (``malformed``) fails the repeat as an untrustworthy
    measurement, however the process ended, unless it was killed first (lost or timed out)."""
    status = reported.status
    if lost is not None:
        reason = f"{lost}, so the worker was killed"
        return "crashed", f"{reason}; output ends with: {tail}" if tail else reason
    if timed_out:
        return (
            "timeout",
            f"no result within the {timeout_s:g} s timeout; the process group was killed",
        )
    if status == "malformed":
        return "error", f"untrustworthy measurement: {reported.error}"
    if exit_code == 0 and status == "ok":
        return "ok", None
    if exit_code == WORKER_EXIT_USAGE and status == "usage_error":
        return "usage_error", reported.error
    if exit_code == WORKER_EXIT_ERROR and status == "error":
        return "error", reported.error
    assert exit_code is not None
    if exit_code < 0:
        name = signal.Signals(-exit_code).name
        hint = " (the kernel's out-of-memory killer sends this)" if name == "SIGKILL" else ""
        reason = f"{launcher} killed by {name}{hint}"
    elif exit_code == WORKER_EXIT_CRASH:
        reason = f"{launcher}: {reported.error or 'a rank wrote no result'}"
    else:
        reason = f"{launcher} exited with code {exit_code} without writing a result"
    return "crashed", f"{reason}; output ends with: {tail}" if tail else reason
