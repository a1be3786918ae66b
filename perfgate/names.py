"""Names are names: suites, workloads, presets and baseline keys are identifiers, never paths.

A suite name becomes a folder of ``baselines/`` and a workload name part of a scratch file's
name. Taken as written, ``--suite ../../elsewhere`` or an absolute suite in a configuration made
``compare --base-ref`` read snapshots outside the base checkout and ``baseline export`` write
outside ``baselines/`` (issue 16). Every name is therefore checked against one pattern where it
enters perfgate (configuration, command line, documents, the database), and the few places that
turn a name into a path check again and confine the result to its folder.
"""

from __future__ import annotations

import re
from pathlib import Path

from perfgate.errors import UsageError

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"
"""A letter or digit, then letters, digits, ``_``, ``.`` or ``-``: at most 100 characters. No
separator, no leading dot (``..`` and hidden files cannot be spelled), nothing a shell or a
markdown renderer reads specially."""
KEY_PATTERN = r"^[0-9a-f]{64}$"
"""A baseline key: the SHA-256 of its identity (``perfgate.store.history.baseline_key``)."""

_NAME = re.compile(NAME_PATTERN)
_KEY = re.compile(KEY_PATTERN)


def is_name(text: object) -> bool:
    """Whether ``text`` is a valid suite, workload or preset name."""
    return isinstance(text, str) and _NAME.fullmatch(text) is not None


def check_name(text: object, what: str, origin: str = "") -> str:
    """``text`` if it is a valid name; otherwise a usage error naming ``what`` and where."""
    if is_name(text):
        return str(text)
    where = f"{origin}: " if origin else ""
    raise UsageError(
        f"{where}{what} {text!r} is not a valid name",
        "use letters, digits, '_', '.' and '-' (starting with a letter or digit; no '/' or '..')",
    )


def check_key(text: object, origin: str = "") -> str:
    """``text`` if it is a baseline key (64 lowercase hex digits); otherwise a usage error."""
    if isinstance(text, str) and _KEY.fullmatch(text):
        return text
    where = f"{origin}: " if origin else ""
    raise UsageError(
        f"{where}baseline key {text!r} is not a SHA-256 hex digest",
        "re-export the baselines with perfgate baseline export",
    )


def confined(folder: Path, *parts: str) -> Path:
    """``folder / parts…``, refused (a usage error) unless it stays inside ``folder``.

    The parts are validated names already; this is the second lock on the door, so that a name
    that slipped past a check still cannot lead out of the folder.
    """
    path = folder.joinpath(*parts)
    base = folder.resolve()
    target = path.resolve()
    if target != base and base not in target.parents:
        raise UsageError(
            f"{path} leads outside {folder}", "use plain names for suites, workloads and keys"
        )
    return path
