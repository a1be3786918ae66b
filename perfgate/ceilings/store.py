"""Measured ceilings on disk: ``<project root>/.perfgate/ceilings.json``, one entry per
environment fingerprint key.

A JSON file beside the default database (``.perfgate/perfgate.db``) rather than a table in it:
``perfgate run --no-store`` must read the ceilings, and it imports no database code (GPU images
may not ship it). Ceilings describe a machine, not a run, so they need no history: a new
``doctor --peak`` replaces its environment's entry and keeps the others. The file is rewritten
atomically (temporary file, fsync, rename), so a reader sees the old file or the new one.

The file is a ``perfgate.ceilings-store`` document (``perfgate.documents.ceilings``): fingerprint
key → the environment's entry. A file of the format before the document header is migrated
when read.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate import __version__
from perfgate.documents.ceilings import CEILINGS_STORE, CeilingsEntry, CeilingsStore, FixSpeedup
from perfgate.errors import UsageError
from perfgate.files import write_json_atomic
from perfgate.telemetry.fingerprint import fingerprint_key
from perfgate.telemetry.peaks import normalize_dtype

if TYPE_CHECKING:
    from perfgate.ceilings.bench import Ceilings


def ceilings_path(root: Path) -> Path:
    """Where the project at ``root`` (``Config.root``) keeps its measured ceilings."""
    return Path(root) / ".perfgate" / "ceilings.json"


@dataclass(frozen=True, kw_only=True)
class StoredCeilings:
    """One environment's stored ceilings, as a run needs them."""

    key: str
    measured_at: str
    device: str
    threads: int | None
    matmul_tflops: dict[str, float]
    bandwidth_bytes_per_s: dict[str, float]

    def matmul_ceiling(self, compute_dtype: str | None) -> float | None:
        """The measured matmul TFLOP/s a workload of ``compute_dtype`` is held against: the
        fp32 figure on a CPU (the only one measured there), else the dtype's own (None when
        that dtype was not measured, e.g. bf16 on a GPU without it)."""
        if self.device == "cpu":
            return self.matmul_tflops.get("fp32")
        dtype = normalize_dtype(compute_dtype or "fp32")
        return self.matmul_tflops.get(dtype) if dtype else None


def environment_key(environment: Mapping[str, Any]) -> str:
    """The fingerprint key ceilings are filed under: the run's key without a distributed run's
    world size and backend (a GPU's ceiling does not change with the number of ranks)."""
    section = environment.get("distributed")
    if not isinstance(section, Mapping) or not ({"world_size", "backend"} & set(section)):
        return fingerprint_key(environment)
    single = copy.deepcopy(dict(environment))
    single["distributed"] = {k: v for k, v in section.items() if k not in {"world_size", "backend"}}
    return fingerprint_key(single)


def fingerprint_summary(environment: Mapping[str, Any]) -> dict[str, Any]:
    """The facts a reader of the ceilings file needs to recognise the environment."""
    gpu = environment.get("gpu") or {}
    return {
        "device": environment.get("device"),
        "gpu_model": gpu.get("model"),
        "cpu_model": (environment.get("cpu") or {}).get("model"),
        "threads": (environment.get("threads") or {}).get("intra_op"),
        "torch": (environment.get("torch") or {}).get("version"),
    }


def read_ceilings_file(path: Path) -> CeilingsStore:
    """The store at ``path``; empty when the file does not exist.

    A file that cannot be read as ceilings is a one-line UsageError naming it and the fix,
    never a silent reset (the user may want to look at it before deleting it)."""
    if not path.exists():
        return CeilingsStore()
    try:
        return CEILINGS_STORE.load(path, "ceilings file")
    except UsageError as exc:
        raise UsageError(exc.problem, "delete it and rerun `perfgate doctor --peak`") from None


def save_ceilings(root: Path, ceilings: Ceilings) -> Path:
    """Store ``ceilings`` under their fingerprint key (other environments' entries are kept);
    returns the file's path."""
    path = ceilings_path(root)
    store = read_ceilings_file(path)
    entry = CeilingsEntry(
        measured_at=ceilings.measured_at,
        perfgate_version=__version__,
        device=ceilings.device,
        fingerprint=dict(ceilings.fingerprint),
        values=ceilings.values(),
    )
    entries = {**store.entries, ceilings.fingerprint_key: entry}
    write_json_atomic(path, CEILINGS_STORE.dump(CeilingsStore(entries=entries, fixes=store.fixes)))
    return path


def stored_fix(root: Path, key: str, signature: str) -> FixSpeedup | None:
    """The fix microbenchmark ``signature`` measured in environment ``key``, or None."""
    return read_ceilings_file(ceilings_path(root)).fixes.get(key, {}).get(signature)


def save_fix(root: Path, key: str, fix: FixSpeedup) -> None:
    """File ``fix`` under environment ``key`` (the rest of the store is kept)."""
    path = ceilings_path(root)
    store = read_ceilings_file(path)
    fixes = {**store.fixes, key: {**store.fixes.get(key, {}), fix.signature: fix}}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, CEILINGS_STORE.dump(CeilingsStore(entries=store.entries, fixes=fixes)))


def lookup_ceilings(root: Path, environment: Mapping[str, Any]) -> StoredCeilings | None:
    """The stored ceilings of the environment a run records; None when none are stored.

    A corrupt file raises the UsageError of :func:`read_ceilings_file`."""
    return stored_ceilings(root, environment_key(environment))


def stored_ceilings(root: Path, key: str) -> StoredCeilings | None:
    """The entry filed under ``key``, or None."""
    entry = read_ceilings_file(ceilings_path(root)).entries.get(key)
    if entry is None:
        return None
    values = entry.values
    return StoredCeilings(
        key=key,
        measured_at=entry.measured_at,
        device=entry.device,
        threads=values.threads,
        matmul_tflops={k: m.median for k, m in values.matmul_tflops.items()},
        bandwidth_bytes_per_s={k: m.median for k, m in values.bandwidth_bytes_per_s.items()},
    )
