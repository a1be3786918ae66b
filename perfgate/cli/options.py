"""Options several commands share, declared once."""

from __future__ import annotations

import typer

CONFIG_OPTION = typer.Option(
    None, "--config", help="perfgate.toml or pyproject.toml (default: nearest one upwards)"
)
