"""Where perfgate's built-in rule files live: the repository's top-level ``rules/`` folder.

The project keeps rule files at the top level, reviewed like documentation and next to
``baselines/``. ``perfgate/rules`` is a symbolic link to it, so the same files are package data:
a checkout or editable install reads them through the link, and a wheel carries copies (setuptools
follows the link when it builds). Without either, this fails with a clear message instead of
advising from an empty rule library.
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
