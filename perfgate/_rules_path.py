"""Where perfgate's built-in rule files live: ``perfgate/rules/``, package data.

The repository's top-level ``rules/`` is a symbolic link to that folder, so the rules are
reviewed like documentation, next to ``baselines/``, and the wheel carries the real files (a
linked folder inside the package is refused by setuptools 77 and later when it builds). An
install that lost them fails with a clear message instead of advising from an empty library.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.errors import UsageError

if TYPE_CHECKING:
    from perfgate.config import Config


def builtin_rules_folder() -> Path:
    """The built-in rules folder; a ``UsageError`` when this install does not have it."""
    folder = Path(__file__).parent / "rules"
    if not folder.is_dir():
        raise UsageError(
            f"perfgate's built-in rules are missing ({folder} does not exist)",
            "install perfgate from a source checkout (pip install -e .), "
            "or name the rule folders explicitly",
        )
    return folder


def rule_folders(config: Config) -> list[Path]:
    """The built-in rules folder, then each ``rule_paths`` folder of the configuration."""
    return [builtin_rules_folder(), *(config.root / folder for folder in config.rule_paths)]
