"""Where perfgate's built-in rule files live: the repository's top-level ``rules/`` folder.

The project keeps rule files at the top level, reviewed like documentation and next to
``baselines/``; the documented install (``pip install -e .`` from a clone) runs from the
checkout, so the folder is found relative to this file. A wheel built from ``pyproject.toml``
packages only ``perfgate*`` and would not carry it: then this fails with a clear message instead
of advising from an empty rule library.
"""

from __future__ import annotations

from pathlib import Path

from perfgate.errors import UsageError


def builtin_rules_folder() -> Path:
    """The built-in rules folder; a ``UsageError`` when this install does not have it."""
    folder = Path(__file__).resolve().parents[1] / "rules"
    if not folder.is_dir():
        raise UsageError(
            f"perfgate's built-in rules are missing ({folder} does not exist)",
            "install perfgate from a source checkout (pip install -e .), "
            "or name the rule folders explicitly",
        )
    return folder
