"""A fork server: every repeat still a fresh process, without paying for ``import torch`` again.

A spawned worker (``python -m perfgate.runner.worker``) of mlp@smoke takes 2.8 s on the 2-core
CI machine for a few milliseconds of timed steps: 0.9 s for the interpreter and ``import
torch``, 1.0 s in the factory (``torch.optim.Optimizer`` imports ``torch._dynamo``), 0.8 s for
the interpreter's teardown. An interleaved A/B runs many rounds of such repeats, so that cost
is the gate's latency. A child of the fork server takes 0.2 s (``benchmarks/startup.md``).

The server (``python -m perfgate.runner.forkserver``, one per :func:`worker_launcher`, started
by the first repeat that needs it) imports :data:`SERVER_IMPORTS` once, then forks one child per
repeat. The child is still the unit the statistics assume: a process of its own, its own
session and process group (``os.setsid``, so the parent's kill of the worker's group takes
its DataLoader workers along), its own CUDA context, and a copy of the server's pristine
post-import state — never of an earlier child's, whose changes die with it. What makes that
safe, and equivalent to a spawned worker:

- **No torch work in the server.** Forking after OpenMP's thread pool or CUDA started is
  unsafe (their threads do not exist in the child; their locks may be held). The server only
  imports: torch creates its intra-op pool and its CUDA context on first use, which happens
  in the child. numpy (imported by torch) starts an OpenBLAS pool at import, but OpenBLAS
  stops it in its own ``pthread_atfork`` handler before every fork and the server never
  restarts it: from its first fork on the server is one thread.
- **The environment is the worker's.** The server is started with exactly the environment a
  spawned worker would get (``OMP_NUM_THREADS`` included: libgomp reads it when torch loads
  it, i.e. in the server) and replaced by a fresh one when a repeat asks for another. The
  worker pins its threads with ``torch.set_num_threads`` itself, in the child, as before.
- **Memory of its own.** Before the worker starts, the child copies the anonymous pages it
  still shares with the server and maps the file pages the server's imports mapped
  (:func:`_make_memory_its_own`, ~135 ms): left shared, the pages cost copy-on-write faults in
  the first timed steps, which then measured 13 % slower than a spawned worker's, and peak RSS
  was 18 % lower. Kernels without ``MADV_POPULATE_*`` (before Linux 5.14) keep spawning.
- **User code only in the children.** Workload modules (``WorkerSpec.python_path``, which differs
  between the base and head checkouts of an A/B) are imported by the worker in the child, so
  each side sees its own; the child also drops the server's directory-listing caches
  (``importlib.invalidate_caches``), which may predate a checkout's files.
- **Random state.** Python's ``random`` reseeds itself in a forked child; the child reseeds
  numpy's global generator from the OS as a new process would; torch is seeded by the worker.
  The str hash seed is the server's, so it is fixed for one run (as under ``PYTHONHASHSEED``)
  rather than drawn anew for every repeat.
- **The end of a process.** The child runs ``worker.main``, flushes its streams, runs the
  ``atexit`` handlers and leaves with ``os._exit`` (the server's own state must not be torn
  down by each child); an escaping exception is printed and exits 1, as in an interpreter.
  Skipping the interpreter's teardown saves most of the ~1 s a spawned worker takes to exit.
- **Nothing outlives perfgate.** The server asks to be killed when perfgate dies, and each
  child, first thing, when the server dies (``perfgate.parent.die_with_parent``;
  the server forks from its only thread, so "the server's thread exits" means "the server
  dies"). perfgate's stop-signal handler kills the server and the running child itself.

The protocol is JSON lines on the server's stdin and stdout (which it moves to private
descriptors before importing anything, so stray output cannot corrupt it): ``{"start":
{spec, out, log}}`` is answered ``{"started": pid}`` once the child has its own session; the
child's end is reported as ``{"exited": pid, "code": c}`` with ``c`` as in
``subprocess.Popen.returncode`` (negative: the signal). Like a Popen child, the ended child
stays a zombie until the parent has killed its group and sends ``{"release": pid}``, so its
pid can never be reused by an unrelated process in between. EOF on stdin ends the server.

If the server dies, the waiting parent sees EOF at once (:class:`ForkServerLost`: the repeat
is a crash with the server's account, never a hang) and the next repeat starts a fresh server.
A server that cannot start at all leaves the launcher spawning workers as before.

``PERFGATE_WORKER_START=spawn`` turns the fork server off; it is the default for single-process
repeats on Linux (elsewhere, and where ``os.fork`` is missing, workers are spawned). torchrun
repeats are always spawned.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import IO, Any, Literal, NoReturn

from perfgate.errors import UsageError
from perfgate.parent import child_environment, die_with_parent, mark_as_parent
from perfgate.runner.lifetime import track, untrack
from perfgate.runner.pycommand import module_command

START_ENV = "PERFGATE_WORKER_START"
"""``fork`` (the default, on Linux only) or ``spawn`` (``python -m perfgate.runner.worker``)."""

SERVER_IMPORTS = ("torch", "torch._dynamo", "perfgate.runner.worker")
"""What every repeat would import anyway, imported once in the server: torch (0.9–1.3 s on
the CI machine), ``torch._dynamo`` (1.0 s; ``torch.optim.Optimizer`` imports it when a factory
builds its optimizer) and the worker (whose own imports are light: it imports torch lazily)."""

SERVER_COMMAND = tuple(module_command("perfgate.runner.forkserver"))
"""The server's command line: like a spawned worker's, so ``sys.path`` starts alike (without
the working directory, ``perfgate.runner.pycommand``)."""

HANDSHAKE_TIMEOUT_S = 120.0
"""Longest wait for the server to be ready, or to answer a start (it forks at once): far
beyond the import time even on a loaded machine, short of hanging a run on a stuck server."""

SERVER_TAIL_CHARS = 1000
SERVER_UNSUPPORTED_EXIT = 3
"""The server's exit code where the kernel lacks what :func:`_make_memory_its_own` needs."""
PAGE_PRESENT, PAGE_FILE, PAGE_EXCLUSIVE = 1 << 63, 1 << 61, 1 << 56
"""Bits of a ``/proc/PID/pagemap`` entry: mapped; a file page; mapped by this process only."""
MADV_POPULATE_READ = 22
"""Linux 5.14+: map pages in, as a read would (a file page from the page cache)."""
MADV_POPULATE_WRITE = 23
"""Linux 5.14+: fault pages in writable, copying a shared (copy-on-write) page as a write would."""
CHILD_SETUP_EXIT = 71
"""The child's exit code when it fails before the worker runs (``EX_OSERR``; its traceback is
in the log, and the parent reports a crash with it)."""


class ForkServerLost(Exception):
    """The fork server died while a repeat was running; the text says how."""


def start_method(environ: Mapping[str, str]) -> Literal["fork", "spawn"]:
    """How single-process workers start: fork on Linux unless ``PERFGATE_WORKER_START=spawn``.

    Elsewhere workers are always spawned: the server relies on Linux (``waitid``, and the
    libraries torch loads being safe to fork before use, which macOS's are not).
    """
    wanted = environ.get(START_ENV, "").strip().lower()
    if wanted not in ("", "fork", "spawn"):
        raise UsageError(
            f"{START_ENV}={wanted!r} is not a way to start workers", "use fork or spawn"
        )
    linux = sys.platform == "linux" and hasattr(os, "fork")
    return "fork" if linux and wanted != "spawn" else "spawn"


@contextmanager
def worker_launcher(environ: Mapping[str, str] | None = None) -> Iterator[ForkServer | None]:
    """A fork server for the repeats of one run (None: spawn them), closed on exit.

    The server itself starts with the first repeat that uses it, so a run that only spawns
    (torchrun repeats) never pays for it, unless the caller starts it sooner with
    :meth:`ForkServer.prestart`. Use the launcher from one thread, which outlives it: the
    server is killed when the thread that started it ends (``perfgate.runner.lifetime``).
    """
    if start_method(os.environ if environ is None else environ) == "spawn":
        yield None
        return
    server = ForkServer()
    try:
        yield server
    finally:
        server.close()


def reused_or_own(launcher: ForkServer | None) -> AbstractContextManager[ForkServer | None]:
    """``launcher`` when the caller holds one open (``orchestrator.warm_launcher``), left open;
    else a launcher of the callee's own (:func:`worker_launcher`)."""
    return nullcontext(launcher) if launcher is not None else worker_launcher()


class ForkServer:
    """The parent's side: starts (and restarts) the server process and asks it for workers."""

    def __init__(self) -> None:
        self._connection: _Connection | None = None
        self._unavailable: str | None = None

    @property
    def server_pid(self) -> int | None:
        """The live server's pid, if one is running."""
        connection = self._connection
        return connection.pid if connection is not None and connection.alive() else None

    def start(
        self, spec_path: Path, out_path: Path, log: IO[bytes], environment: Mapping[str, str]
    ) -> ForkedWorker | None:
        """Fork a worker on ``spec_path`` with ``log`` as its stdout and stderr; None when the
        server cannot (it would not start, or it died answering): the caller then spawns it,
        and ``log`` begins with the reason."""
        request = {"spec": str(spec_path), "out": str(out_path), "log": log.name}
        try:
            connection = self._connect(dict(environment))
            return ForkedWorker(connection, connection.start_child(request))
        except ForkServerLost as exc:
            if self._connection is not None and not self._connection.alive():
                self.close()  # the next repeat starts a fresh server
            log.write(f"perfgate: no fork server ({exc}); the worker was spawned\n".encode())
            log.flush()
            return None

    def prestart(self, environment: Mapping[str, str]) -> None:
        """Start the server for repeats with ``environment`` now, without waiting for it.

        Its imports (``import torch`` and ``torch._dynamo``: seconds) then run beside the
        caller's own work before the first repeat (the fingerprint imports torch in this
        process), on the other core; the first :meth:`start` waits for whatever is left. A
        repeat that asks for another environment replaces it, as it would a used server.
        """
        if self._connection is None and self._unavailable is None:
            self._connection = _Connection(dict(environment), os.getcwd())

    def close(self) -> None:
        """Stop the server (idempotent); a later :meth:`start` begins a fresh one."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _connect(self, environment: dict[str, str]) -> _Connection:
        """The server for this environment and working directory: the running one, else a
        fresh one. A server that does not start is not tried again in this launcher."""
        if self._unavailable is not None:
            raise ForkServerLost(self._unavailable)
        connection = self._connection
        wanted = (environment, os.getcwd())
        if connection is None or connection.started_in != wanted or not connection.alive():
            self.close()
            connection = _Connection(*wanted)
        if not connection.ready:
            try:
                connection.expect("ready")
            except ForkServerLost as exc:
                self._unavailable = str(exc)
                connection.close()
                self._connection = None
                raise
            connection.ready = True
        self._connection = connection
        return connection


class ForkedWorker:
    """A forked worker as ``run_worker`` sees a ``subprocess.Popen``: ``pid``, ``wait`` (raising
    ``subprocess.TimeoutExpired``, or :class:`ForkServerLost`) and a context manager whose exit
    lets the server reap the process."""

    def __init__(self, connection: _Connection, pid: int) -> None:
        self._connection = connection
        self.pid = pid
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        """The exit code (negative: the signal), once the server reports the worker's end."""
        if self.returncode is None:
            self.returncode = self._connection.wait_exit(self.pid, timeout)
        return self.returncode

    def __enter__(self) -> ForkedWorker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.returncode is not None:
            self._connection.release(self.pid)


class _Connection:
    """One server process, its pipes, and the messages read from it so far."""

    def __init__(self, environment: dict[str, str], cwd: str) -> None:
        self.started_in = (environment, cwd)
        self._output, path = tempfile.mkstemp(prefix="perfgate-forkserver-", suffix=".log")
        os.unlink(path)  # the descriptor keeps it while the server lives
        self._process = subprocess.Popen(
            SERVER_COMMAND,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._output,
            env=child_environment(environment),
            cwd=cwd,
        )
        track(self._process)
        self.pid = self._process.pid
        self._partial = b""
        self._answers: list[dict[str, Any]] = []
        self._exits: dict[int, int] = {}
        self._eof = False
        self.ready = False  # whether the server has said so (its imports are done)

    def alive(self) -> bool:
        return not self._eof and self._process.poll() is None

    def start_child(self, request: dict[str, str]) -> int:
        self._send({"start": request})
        return int(self.expect("started")["started"])

    def expect(self, key: str) -> dict[str, Any]:
        """The server's next answer, which must carry ``key``; ForkServerLost when it died,
        could not fork, or did not answer in time (it is then killed)."""
        deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S
        while not self._answers:
            if self._eof:
                raise ForkServerLost(self.lost_reason())
            if not self._read(deadline):
                self._process.kill()
                self._eof = True
                raise ForkServerLost(
                    f"the fork server (pid {self.pid}) did not answer within "
                    f"{HANDSHAKE_TIMEOUT_S:g} s"
                )
        answer = self._answers.pop(0)
        if key not in answer:
            raise ForkServerLost(str(answer.get("error", answer)))
        return answer

    def wait_exit(self, pid: int, timeout: float | None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while pid not in self._exits:
            if self._eof:
                raise ForkServerLost(self.lost_reason())
            if not self._read(deadline):
                raise subprocess.TimeoutExpired(f"forked worker {pid}", timeout or 0.0)
        return self._exits[pid]

    def release(self, pid: int) -> None:
        del self._exits[pid]
        with contextlib.suppress(ForkServerLost):  # a dead server reaps nothing
            self._send({"release": pid})

    def lost_reason(self) -> str:
        """What became of the server: its exit status and the end of its output."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=5)
        code = self._process.returncode
        if code is None:
            state = "stopped answering"
        elif code < 0:
            state = f"was killed by {signal.Signals(-code).name}"
        else:
            state = f"exited with code {code}"
        size = os.fstat(self._output).st_size
        written = os.pread(self._output, SERVER_TAIL_CHARS, max(size - SERVER_TAIL_CHARS, 0))
        tail = written.decode("utf-8", "replace").strip()
        text = f"the fork server (pid {self.pid}) {state}"
        return f"{text}; its output ends with: {tail}" if tail else text

    def close(self) -> None:
        untrack(self._process)
        if not self.ready:  # still importing (a prestarted server nobody used): it has no
            self._process.kill()  # child yet, and would read its EOF only once imported
        if self._process.stdin is not None:
            with contextlib.suppress(OSError):
                self._process.stdin.close()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        os.close(self._output)

    def _send(self, message: dict[str, Any]) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        try:
            stdin.write(json.dumps(message).encode() + b"\n")
            stdin.flush()
        except OSError:  # BrokenPipeError: the server is gone
            self._eof = True
            raise ForkServerLost(self.lost_reason()) from None

    def _read(self, deadline: float | None) -> bool:
        """Read what the server wrote, filing exit reports apart from answers; False when
        the deadline passed first (EOF sets ``_eof``)."""
        stdout = self._process.stdout
        assert stdout is not None
        remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        readable, _, _ = select.select([stdout], [], [], remaining)
        if not readable:
            return False
        data = os.read(stdout.fileno(), 65536)
        if not data:
            self._eof = True
            return True
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            message = json.loads(line)
            if "exited" in message:
                self._exits[int(message["exited"])] = int(message["code"])
            else:
                self._answers.append(message)
        return True


def serve() -> None:
    """The server's loop (``python -m perfgate.runner.forkserver``)."""
    die_with_parent()
    mark_as_parent()
    requests, replies = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # stray output of the imports goes to the server's log, not the protocol
    os.close(devnull)
    unsupported = _unsupported()
    if unsupported:
        print(f"the fork server cannot run here: {unsupported}", file=sys.stderr)
        os._exit(SERVER_UNSUPPORTED_EXIT)
    for name in SERVER_IMPORTS:
        importlib.import_module(name)
    file_pages = _file_pages_in_use()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda number, frame: None)
    private = (requests, replies, wake_read, wake_write)
    running: set[int] = set()

    def reply(message: dict[str, Any]) -> None:
        os.write(replies, json.dumps(message).encode() + b"\n")

    reply({"ready": os.getpid()})
    buffer = b""
    while True:
        readable, _, _ = select.select([requests, wake_read], [], [])
        if wake_read in readable:
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_read, 4096):
                    pass
            for pid in sorted(running):
                status = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                if status is not None:
                    running.discard(pid)
                    reply({"exited": pid, "code": _returncode(status)})
        if requests in readable:
            data = os.read(requests, 65536)
            if not data:
                return
            buffer += data
            while b"\n" in buffer:
                line, _, buffer = buffer.partition(b"\n")
                message = json.loads(line)
                if "release" in message:
                    os.waitpid(int(message["release"]), 0)
                    continue
                try:
                    pid = _fork_child(message["start"], private, file_pages)
                except OSError as exc:  # EAGAIN, ENOMEM: the parent spawns this one instead
                    reply({"error": f"fork failed: {exc}"})
                    continue
                running.add(pid)
                reply({"started": pid})


def _fork_child(
    request: dict[str, str], private: tuple[int, ...], file_pages: list[tuple[int, int]]
) -> int:
    """Fork the worker; return once it leads a session of its own (or has died trying)."""
    ready_read, ready_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_read)
        _child(request, (*private, ready_write), file_pages)
    os.close(ready_write)
    os.read(ready_read, 1)  # EOF: the child closed its end after os.setsid()
    os.close(ready_read)
    return pid


def _child(
    request: dict[str, str], inherited: tuple[int, ...], file_pages: list[tuple[int, int]]
) -> NoReturn:
    """The forked worker: never returns into the server's loop."""
    code = CHILD_SETUP_EXIT
    try:
        die_with_parent()  # the server, named by its mark_as_parent
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in inherited:  # the last one is the handshake pipe: closing it answers
            os.close(fd)
        _redirect(request["log"])
        _make_memory_its_own(file_pages)
        code = _run_worker(request["spec"], request["out"])
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def _redirect(log_path: str) -> None:
    """stdin from /dev/null, stdout and stderr to the repeat's log (as the spawn path does)."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(devnull)
    os.close(log)


def _file_pages_in_use() -> list[tuple[int, int]]:
    """The file-backed pages mapped in this process (the server, after its imports: torch's
    code and read-only data), as ``(address, length)`` runs. A forked child inherits only the
    mappings, not these pages' entries, so :func:`_make_memory_its_own` maps them again."""
    with open("/proc/self/maps") as maps:
        files = [
            fields[0]
            for fields in (line.split() for line in maps)
            if len(fields) > 5 and fields[5].startswith("/")
        ]
    return _page_runs(
        files, lambda entry: entry & (PAGE_PRESENT | PAGE_FILE) == PAGE_PRESENT | PAGE_FILE
    )


def _make_memory_its_own(file_pages: list[tuple[int, int]]) -> None:
    """Give the child the memory a spawned worker would have after the same imports.

    Anonymous pages still shared with the server (present, neither exclusive nor file pages)
    are copied now; left shared, they cost copy-on-write faults in the first timed steps,
    which measured slower for it: mlp@smoke (one thread, 3 warm-up and 20 measured steps, 12
    interleaved rounds) was 12.8 % slower per repeat forked than spawned without the copy,
    2.2 % with it. And the server's file pages are mapped again, as a spawned worker's imports
    map them, so that peak RSS is the same (mlp@smoke: 256 MiB without, 312 MiB spawned).
    About 210 MiB are copied and 80 MiB mapped, 135 ms on the CI machine.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    with open("/proc/self/maps") as maps:
        writable = [
            fields[0] for fields in (line.split() for line in maps) if fields[1][1:4:2] == "wp"
        ]
    shared = _page_runs(
        writable, lambda entry: entry & (PAGE_PRESENT | PAGE_FILE | PAGE_EXCLUSIVE) == PAGE_PRESENT
    )
    for advice, runs in ((MADV_POPULATE_WRITE, shared), (MADV_POPULATE_READ, file_pages)):
        for address, length in runs:
            if libc.madvise(ctypes.c_void_p(address), ctypes.c_size_t(length), advice):
                raise OSError(ctypes.get_errno(), f"madvise({advice}) failed")


def _page_runs(ranges: list[str], wanted: Callable[[int], bool]) -> list[tuple[int, int]]:
    """``(address, length)`` runs of the pages in ``ranges`` (``/proc/self/maps``'s
    ``start-end``) whose pagemap entry is ``wanted``."""
    page = os.sysconf("SC_PAGE_SIZE")
    runs = []
    with open("/proc/self/pagemap", "rb", buffering=0) as pagemap:
        for bounds in ranges:
            start, end = (int(bound, 16) for bound in bounds.split("-"))
            pagemap.seek(start // page * 8)
            entries = memoryview(pagemap.read((end - start) // page * 8)).cast("Q")
            first = None
            for index, entry in enumerate([*entries, 0]):
                if wanted(entry):
                    first = index if first is None else first
                elif first is not None:
                    runs.append((start + first * page, (index - first) * page))
                    first = None
    return runs


def _unsupported() -> str | None:
    """Why this kernel cannot run the fork server's children as fresh processes, if it cannot:
    :func:`_make_memory_its_own` needs ``MADV_POPULATE_*`` and a readable pagemap."""
    libc = ctypes.CDLL(None, use_errno=True)
    page = os.sysconf("SC_PAGE_SIZE")  # an empty range: the kernel checks only the advice
    if libc.madvise(ctypes.c_void_p(page), ctypes.c_size_t(0), MADV_POPULATE_WRITE):
        return "madvise(MADV_POPULATE_WRITE) is not supported (Linux 5.14 or later has it)"
    try:
        with open("/proc/self/pagemap", "rb") as pagemap:
            pagemap.read(8)
    except OSError as exc:
        return f"/proc/self/pagemap is not readable ({exc})"
    return None


def _run_worker(spec_path: str, out_path: str) -> int:
    """``python -m perfgate.runner.worker SPEC OUT`` in this process; its exit code."""
    from perfgate.runner import worker  # lazy: only a forked child runs it (SERVER_IMPORTS)

    importlib.invalidate_caches()
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()  # from the OS, as a new process's generator is
    sys.argv = [str(worker.__file__), spec_path, out_path]
    try:
        code = worker.main([spec_path, out_path])
    except SystemExit as exc:
        code = _exit_status(exc.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    atexit._run_exitfuncs()
    return code


def _exit_status(code: object) -> int:
    """What the interpreter makes of ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _returncode(status: os.waitid_result) -> int:
    """``subprocess.Popen.returncode`` from a ``waitid`` result."""
    if status.si_code == os.CLD_EXITED:
        return int(status.si_status)
    return -int(status.si_status)


if __name__ == "__main__":
    serve()
    os._exit(0)  # nothing to flush; the interpreter's teardown of torch would take ~1 s
