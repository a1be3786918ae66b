"""``perfgate merge``: thin command over ``perfgate.merge``."""

from __future__ import annotations

from pathlib import Path

import typer

from perfgate.cli.console import guarded, say


def merge_command(
    shards: list[Path] = typer.Argument(..., help="result documents of perfgate run --shard i/n"),
    out: Path = typer.Option(..., "--out", "-o", help="where to write the merged run"),
) -> None:
    """Merge the shard documents of one run into one result document (for compare and store)."""
    from perfgate.merge import merge_documents  # lazy: the fingerprint checks, only to merge

    merged = guarded(lambda: merge_documents(shards, out))
    say(f"merged {len(shards)} shards ({len(merged.workloads)} workloads): {out}")
