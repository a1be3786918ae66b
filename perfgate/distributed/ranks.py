"""One repeat from its ranks' documents: the slowest rank decides, the spread is kept.

Every rank of a distributed repeat times its own steps. A data-parallel step is over only when
the last rank is done, so the repeat's step times are those of the **slowest rank** (the rank
with the highest steady median) and compare's verdict is on that rank. The other ranks stay in
the document: their step times, their communication window, and the spread of the rank medians.

A failed rank fails the repeat with its own error text. The order of precedence says what to
show when several ranks ended badly, because one failure usually causes the others: torchrun
stops the healthy ranks once one fails, so they never write a document, or their collective
fails first ("connection closed by peer") and they report that. So bad input (usage error) beats
a rank's own error, which beats a rank that wrote nothing (a crash), which beats an error that
only reports a vanished peer; among ranks that failed alike the first to fail (by the time it
wrote down) is the cause.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfgate.files import rank_output_path

_PER_RANK_KEYS = (
    "step_times_s",
    "steady_start",
    "dataloader_wait_s",
    "peak_memory",
    "first_step_s",
    "communication",
)


def read_rank_documents(out_path: Path, world_size: int) -> dict[int, dict[str, Any]]:
    """The documents the ranks wrote (a rank that wrote none, or garbage, is absent)."""
    documents = {}
    for rank in range(world_size):
        try:
            data = json.loads(rank_output_path(out_path, rank).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            documents[rank] = data
    return documents


def combine_ranks(documents: dict[int, dict[str, Any]], world_size: int) -> dict[str, Any]:
    """The repeat's document: merged when every rank is ok, else the deciding rank's failure.

    A failure is ``{"status": "usage_error" | "error" | "crashed", "error": text}``; the text
    names the rank that caused it and, briefly, the ranks that failed because of it.
    """
    usage = _first_failed(documents, lambda d: d.get("status") == "usage_error")
    if usage is not None:
        return {"status": "usage_error", "error": _failure_text(documents, usage)}
    errored = [r for r, d in documents.items() if d.get("status") == "error"]
    own = _first_failed(
        documents, lambda d: d.get("status") == "error" and not _peer_failure(d["error"])
    )
    if own is not None:
        return {"status": "error", "error": _failure_text(documents, own)}
    missing = [rank for rank in range(world_size) if rank not in documents]
    if missing:
        text = f"rank {', '.join(map(str, missing))} wrote no result (crashed or was killed)"
        if errored:
            first = min(errored, key=lambda rank: _failed_at(documents[rank]))
            text += f"; rank {first} then failed: {_last_line(documents[first]['error'])}"
        return {"status": "crashed", "error": text}
    if errored:
        first = min(errored, key=lambda rank: _failed_at(documents[rank]))
        return {"status": "error", "error": _failure_text(documents, first)}
    return merge_ok_ranks([documents[rank] for rank in range(world_size)])


_PEER_FAILURE = re.compile(
    r"connection (?:reset|closed) by peer|remote worker|DistBackendError|communicator was aborted"
    r"|NCCL (?:error|communicator)|process group .* (?:aborted|timed out)",
    re.IGNORECASE,
)


def _peer_failure(error: str) -> bool:
    """A rank's error that is another rank's failure seen from here (its peer went away)."""
    return bool(_PEER_FAILURE.search(error or ""))


def _first_failed(
    documents: dict[int, dict[str, Any]], matches: Callable[[dict[str, Any]], bool]
) -> int | None:
    """The rank that failed first (by the time it wrote down) among those that ``match``."""
    ranks = [rank for rank, document in documents.items() if matches(document)]
    return min(ranks, key=lambda rank: _failed_at(documents[rank])) if ranks else None


def _failed_at(document: dict[str, Any]) -> float:
    return float(document.get("failed_at") or 0.0)


def _failure_text(documents: dict[int, dict[str, Any]], rank: int) -> str:
    others = sorted(r for r, d in documents.items() if r != rank and d.get("status") != "ok")
    then = f" (then rank {', '.join(map(str, others))} failed too)" if others else ""
    return f"rank {rank}{then}: {documents[rank]['error']}"


def _last_line(text: str) -> str:
    lines = (text or "").strip().splitlines()
    return lines[-1] if lines else ""


def merge_ok_ranks(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """The slowest rank's document, with every rank's samples and the slowest rank's index."""
    medians = [steady_median(d) for d in documents]
    slowest = max(range(len(documents)), key=lambda rank: medians[rank])
    merged = dict(documents[slowest])
    merged["slowest_rank"] = slowest
    merged["ranks"] = [
        {"rank": rank, "median_step_s": medians[rank], **{k: d.get(k) for k in _PER_RANK_KEYS}}
        for rank, d in enumerate(documents)
    ]
    return merged


def steady_median(document: dict[str, Any]) -> float:
    """Median of a rank's steady steps (all measured steps when none were judged steady)."""
    steps = document.get("step_times_s") or [0.0]
    steady = steps[int(document.get("steady_start", 0)) :] or steps
    return statistics.median(steady)
