"""``perfgate merge``: the result documents of a sharded run as the one run they are.

A CI matrix runs ``perfgate run --shard i/n`` on several runners of one machine type; compare,
store and report then want one run. Shards merge only when they measured the same thing the same
way: the same suite, device, settings (but the shard), revision and machine type (environment
fingerprint key). Anything else would put incomparable numbers under one run id, so it is refused
with the differences named. The merged run id is derived from the shards' ids, so merging the
same shards again (a retried CI job) gives the same document.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from perfgate.documents.result import RunResult, load_result, write_result
from perfgate.errors import UsageError
from perfgate.files import check_output_path
from perfgate.telemetry.fingerprint import fingerprint_differences, fingerprint_key

MERGE_NAMESPACE = uuid.UUID("9b0f3a52-6a5e-4d1e-9d8e-3f1c2b7a4e60")
"""Namespace of merged run ids (uuid5 over the sorted shard run ids)."""


def merge_documents(shards: Sequence[Path], out: Path) -> RunResult:
    """``perfgate merge``: read the shard documents, merge them, write the run to ``out``
    (checked first); the merged run."""
    check_output_path(out, "--out")
    merged = merge_shards([load_result(path) for path in shards])
    write_result(out, merged)
    return merged


def merge_shards(shards: Sequence[RunResult]) -> RunResult:
    """One run holding every shard's workloads, in shard order; a ``UsageError`` naming the
    first difference that makes the shards incomparable."""
    if not shards:
        raise UsageError(
            "no shard documents given", "pass the result of every perfgate run --shard"
        )
    first = shards[0]
    ids = [shard.run_id for shard in shards]
    if len(set(ids)) != len(ids):
        raise UsageError("a shard document is given twice", "pass each shard's result once")
    for shard in shards[1:]:
        _check_comparable(first, shard)
    names = [w.name for shard in shards for w in shard.workloads]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise UsageError(
            f"workloads measured in more than one shard: {', '.join(repeated)}",
            "give each shard a different --shard i/n of the same selection",
        )
    return replace(
        first,
        run_id=str(uuid.uuid5(MERGE_NAMESPACE, ",".join(sorted(ids)))),
        started_at=min(shard.started_at for shard in shards),
        finished_at=max(shard.finished_at for shard in shards),
        settings=replace(first.settings, shard=None),
        workloads=[w for shard in shards for w in shard.workloads],
    )


def _check_comparable(first: RunResult, other: RunResult) -> None:
    where = f"shards {first.run_id} and {other.run_id}"
    fix = "merge only the shards of one perfgate run --shard i/n matrix"
    for what, mine, theirs in (
        ("suite", first.suite, other.suite),
        ("device", first.device, other.device),
        ("commit", first.source.commit, other.source.commit),
        ("settings", replace(first.settings, shard=None), replace(other.settings, shard=None)),
    ):
        if mine != theirs:
            raise UsageError(f"{where} differ in {what}: {mine} vs {theirs}", fix)
    if fingerprint_key(first.environment) != fingerprint_key(other.environment):
        differences = "; ".join(fingerprint_differences(first.environment, other.environment))
        raise UsageError(f"{where} ran on different machine types ({differences})", fix)
