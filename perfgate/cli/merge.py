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

    def action() -> str:
        from perfgate.files import check_output_path
        from perfgate.merge import merge_shards
        from perfgate.result import load_result, write_result

        check_output_path(out, "--out")
        merged = merge_shards([load_result(path) for path in shards])
        write_result(out, merged)
        return f"merged {len(shards)} shards ({len(merged.workloads)} workloads): {out}"

    say(guarded(action))
