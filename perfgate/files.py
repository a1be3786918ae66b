"""The files perfgate is given and the files it writes: every failure is one typed line.

A path can be wrong in many ways (missing, a folder, a device, unreadable, on a full disk), and
a file's content in as many (not UTF-8, not JSON, nested thousands deep, holding NaN or an
integer no database column can take). Each becomes a ``UsageError`` (exit 2: a bad path or a
malformed file, for the user to fix) or an ``InfrastructureError`` (exit 3: the disk or the
machine failed) naming the file, the field where there is one, and the fix. Never a traceback,
and never exit 1, which CI reads as a performance regression.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from perfgate.errors import InfrastructureError, PerfgateError, UsageError

MAX_JSON_DEPTH = 64
"""Deepest nesting accepted in a JSON document. perfgate's own documents are about 10 deep; a
deeper one is not one of them, and would exhaust the interpreter's stack in the readers that
recurse into it (the schema validator, ``dataclasses.asdict``)."""
MAX_INTEGER = 2**63 - 1
"""The largest integer the database stores (a 64-bit column): a larger one in a document would
fail only when stored, as an overflow deep in the driver."""

_MACHINE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.ENOMEM, errno.EMFILE, errno.ENFILE, errno.ESTALE}
)
"""OS errors that say the machine failed (full disk, I/O error, exhausted limits), not the path."""
_FULL_DISK = frozenset({errno.ENOSPC, errno.EDQUOT})


def file_error(exc: OSError, path: Path | str, *, action: str, fix: str) -> PerfgateError:
    """The typed error for an OS failure to ``action`` ``path``: infrastructure (exit 3) when
    the disk or the machine failed, usage (exit 2, with ``fix``) when the path is the problem."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    problem = f"cannot {action} {path}: {reason}"
    if exc.errno in _FULL_DISK:
        return InfrastructureError(
            problem, "free space on that disk (or raise its quota) and rerun"
        )
    if exc.errno is None or exc.errno in _MACHINE_ERRNOS:
        return InfrastructureError(problem, "check the disk and the machine's limits, then rerun")
    return UsageError(problem, fix)


def os_error(exc: OSError) -> PerfgateError:
    """An OS error no reader or writer turned into a typed error (the CLI's last resort)."""
    names = [str(name) for name in (exc.filename, exc.filename2) if name is not None]
    return file_error(
        exc,
        " → ".join(names) or "a file",
        action="use",
        fix="check the path, that it is a file or folder as expected, and its permissions",
    )


def read_bytes(path: Path, *, what: str, path_fix: str = "check the path") -> bytes:
    """The content of the file ``what`` at ``path`` (``what``: "result file", "config file",
    …, for the message). Refused: a missing path, a folder, a device (reading ``/dev/zero``
    never ends), and any OS failure to read it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise UsageError(f"{what} {path} does not exist", path_fix) from None
    except OSError as exc:
        raise file_error(exc, path, action="read", fix=path_fix) from None
    except ValueError:  # a NUL in the path: never from a command line, possibly from a file
        raise UsageError(f"{what} {path!r} is not a valid path", path_fix) from None
    if stat.S_ISDIR(mode):
        raise UsageError(f"{what} {path} is a directory, not a file", path_fix)
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
        raise UsageError(f"{what} {path} is {_kind(mode)}, not a file", path_fix)
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise file_error(exc, path, action="read", fix=path_fix) from None


def read_text(path: Path, *, what: str, fix: str, path_fix: str = "check the path") -> str:
    """The file as UTF-8 text; anything else is refused with ``fix``."""
    raw = read_bytes(path, what=what, path_fix=path_fix)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} {path} is not UTF-8 text (byte {exc.start})", fix) from None


def read_json(path: Path, *, what: str, fix: str, path_fix: str = "check the path") -> Any:
    """The file as a checked JSON value (:func:`check_json_values`); JSON is UTF-8 (RFC 8259),
    so bytes that are not are refused as not JSON, never guessed at."""
    raw = read_bytes(path, what=what, path_fix=path_fix)
    origin = f"{what} {path}"
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{origin} is not valid JSON (not UTF-8 text at byte {exc.start})", fix
        ) from None
    except RecursionError:
        raise UsageError(f"{origin} is nested too deeply to be a perfgate document", fix) from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{origin} is not valid JSON ({exc})", fix) from None
    except ValueError:  # an integer literal past Python's digit limit
        raise UsageError(f"{origin} is not valid JSON (a number too long to read)", fix) from None
    check_json_values(data, origin, fix)
    return data


def check_json_values(data: Any, origin: str, fix: str) -> None:
    """Refuse what no perfgate document holds and later steps would trip over: nesting deeper
    than ``MAX_JSON_DEPTH``, NaN or infinity (Python's reader accepts ``NaN`` and turns ``1e999``
    into infinity; SQLite would store them, PostgreSQL refuses them), integers a database column
    cannot hold, and text with a NUL or an unpaired surrogate (neither can be stored or printed).

    Iterative, so a deep document cannot exhaust the stack here; the problem names the field.
    """
    pending: list[tuple[Any, tuple[str, ...]]] = [(data, ())]
    while pending:
        value, where = pending.pop()
        if isinstance(value, dict):
            if len(where) >= MAX_JSON_DEPTH:
                raise UsageError(f"{origin} is nested more than {MAX_JSON_DEPTH} levels deep", fix)
            for key, item in value.items():
                _check_text(key, origin, where, fix)
                pending.append((item, (*where, key)))
        elif isinstance(value, list):
            if len(where) >= MAX_JSON_DEPTH:
                raise UsageError(f"{origin} is nested more than {MAX_JSON_DEPTH} levels deep", fix)
            pending.extend((item, (*where, str(index))) for index, item in enumerate(value))
        elif isinstance(value, str):
            _check_text(value, origin, where, fix)
        elif isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"{origin}: {_field(where)} is {value}, not a finite number", fix)
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INTEGER:
            raise UsageError(f"{origin}: {_field(where)} is an integer too large to store", fix)


def _check_text(text: str, origin: str, where: tuple[str, ...], fix: str) -> None:
    if "\x00" in text:
        raise UsageError(f"{origin}: {_field(where)} holds a NUL character", fix)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{origin}: {_field(where)} holds an unpaired surrogate", fix) from None


def _field(where: tuple[str, ...]) -> str:
    return "/".join(where) or "the top level"


def check_output_path(path: Path, option: str) -> None:
    """``path`` is a regular file or does not exist yet. A folder, a device node (``/dev/null``),
    a FIFO or a socket is refused, naming ``option``: an atomic write renames a new file over
    its target, which would replace a device node with a regular file, and a FIFO would block."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise file_error(
            exc, path, action="write", fix=f"choose a writable {option} path"
        ) from None
    except ValueError:  # a NUL in the path
        raise UsageError(
            f"{option} {path!r} is not a valid path", f"fix the {option} path"
        ) from None
    if not stat.S_ISREG(mode):
        raise UsageError(
            f"{option} {path} is {_kind(mode)}, not a regular file",
            f"give {option} the path of a new or regular file",
        )


def check_writable(path: Path, option: str) -> None:
    """Fail before measuring, not after, when ``option``'s file could not be written: the path
    (:func:`check_output_path`) and its folder, created if needed and probed with a file."""
    check_output_path(path, option)
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".perfgate-probe-"):
            pass
    except OSError as exc:
        raise file_error(
            exc, path, action="write", fix=f"choose a writable {option} path"
        ) from None


def write_text_atomic(path: Path, text: str, *, option: str) -> None:
    """Write ``text`` via a temporary file in the same folder, fsync, then rename: a reader (a CI
    step uploading the file, a browser) sees the old file or the new one, never half of one.

    Only a regular file or a new path is ever replaced (:func:`check_output_path`, checked again
    just before the rename), and a failed write leaves no temporary file behind. ``option``
    names the flag that chose the path, for the error message. A character UTF-8 cannot encode
    (a file name's undecodable byte, carried as a surrogate) is written as its escape.
    """
    path = Path(path)
    fix = f"choose a writable {option} path"
    check_output_path(path, option)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise file_error(exc, path, action="write", fix=fix) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        check_output_path(path, option)
        os.replace(tmp_name, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        if isinstance(exc, OSError):
            raise file_error(exc, path, action="write", fix=fix) from None
        raise


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def write_json_atomic(path: Path, data: Any, *, option: str = "--out") -> None:
    """Write ``data`` as strict JSON, atomically (:func:`perfgate.files.write_text_atomic`).

    Serialised before any file is touched: a value JSON cannot hold (NaN) fails with nothing
    written. ``option`` names the flag that chose the path, for the error message.
    """
    text = json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n"
    write_text_atomic(path, text, option=option)


def rank_output_path(out_path: Path, rank: int) -> Path:
    """Where rank ``rank`` of a distributed worker writes its report: ``x.out.json`` →
    ``x.out.rank1.json`` (the parent reads them all, ``perfgate.distributed.ranks``)."""
    return out_path.with_name(f"{out_path.stem}.rank{rank}{out_path.suffix}")


def rank_trace_path(trace_path: Path, rank: int) -> Path:
    """Where rank ``rank`` exports its profiler trace; rank 0 keeps the path it was given."""
    return trace_path if rank == 0 else rank_output_path(trace_path, rank)
