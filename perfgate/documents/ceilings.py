"""Measured ceilings as documents: ``perfgate doctor --peak --json`` (``perfgate.ceilings``) and
the per-project store of them, ``.perfgate/ceilings.json`` (``perfgate.ceilings-store``).

The store holds one entry per environment fingerprint key: ceilings describe a machine, not a
run, so a new ``doctor --peak`` replaces its environment's entry and keeps the others.

Format history of the store:

- 1 (perfgate 0.1, 2026-12-01): a bare JSON object of fingerprint key → entry, each entry
  carrying ``"format": 1``; no document header.
- 2.0 (2026-12-02): the document header, the entries under ``entries``, no per-entry
  ``format``. A format-1 file is migrated when read (and written back as format 2 by the
  next ``doctor --peak``).
- 2.1 (2026-12-04): ``fixes``: per environment, the speed-ups of fixes measured by
  microbenchmarks at a workload's shapes (``perfgate advise``: SDPA against explicit
  attention, a fused against the current optimizer step), which the advice's estimates use.

Format history of the ``--json`` document: 1.0 (2026-12-01); 1.1 (2026-12-02) the header's
``schema_minor``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perfgate.documents.base import DocumentKind


@dataclass(frozen=True, kw_only=True)
class RateSamples:
    """Repeated samples of one rate (TFLOP/s for a matmul, bytes/s for a copy)."""

    median: float
    min: float
    max: float
    samples: tuple[float, ...]
    size: int
    """The matrix side n of an n×n product, or the bytes of one copy."""


@dataclass(frozen=True, kw_only=True)
class CeilingValues:
    """What ``doctor --peak`` measured on one device."""

    device: str
    device_name: str | None
    threads: int | None
    matmul_tflops: dict[str, RateSamples]
    """Dense matmul rate per dtype (a CPU has ``fp32`` only)."""
    bandwidth_bytes_per_s: dict[str, RateSamples] = field(default_factory=dict)
    unsupported: dict[str, str] = field(default_factory=dict)
    """What was not measured, and why (e.g. bf16 on a GPU without bf16 support)."""
    seed: int = 0
    wall_s: float = 0.0


@dataclass(frozen=True, kw_only=True)
class CeilingsEntry:
    """One environment's ceilings in the store."""

    measured_at: str
    perfgate_version: str
    device: str
    fingerprint: dict[str, Any]
    """The facts a reader needs to recognise the environment (device, models, threads, torch);
    the key the entry is filed under is the full fingerprint's."""
    values: CeilingValues


@dataclass(frozen=True, kw_only=True)
class FixSpeedup:
    """A fix's speed-up measured on this machine by a microbenchmark at a workload's shapes."""

    benchmark: str
    """``sdpa`` or ``fused_optimizer`` (``perfgate.ceilings.fixes``)."""
    signature: str
    """What was run, e.g. ``sdpa cpu fp32 32x64x64x16 causal p=0``: the cache key."""
    speedup: float
    """Median over the paired samples of the unchanged time over the fixed time."""
    low: float
    high: float
    """The smallest and largest paired ratio."""
    ratios: tuple[float, ...]
    basis: str
    """What it measured, in words, for the advice to say what its estimate rests on."""
    measured_at: str


@dataclass(frozen=True, kw_only=True)
class CeilingsStore:
    """``.perfgate/ceilings.json``: fingerprint key → that environment's ceilings."""

    entries: dict[str, CeilingsEntry] = field(default_factory=dict)
    fixes: dict[str, dict[str, FixSpeedup]] = field(default_factory=dict)
    """Fingerprint key → signature → the fix measured there (format 2.1)."""


@dataclass(frozen=True, kw_only=True)
class CeilingsReport:
    """``doctor --peak --json``: the entry just stored, with its key."""

    perfgate_version: str
    fingerprint_key: str
    measured_at: str
    fingerprint: dict[str, Any]
    values: CeilingValues


def _store_from_format_1(data: dict[str, Any]) -> dict[str, Any]:
    """Format 1 (bare entries, each with ``format``) → format 2."""
    entries = {
        key: {k: v for k, v in entry.items() if k != "format"}
        for key, entry in data.items()
        if key not in ("schema", "schema_version", "schema_minor")
    }
    return {"schema": CEILINGS_STORE.name, "schema_version": 2, "entries": entries}


def _headerless_store(data: Any) -> Any:
    """A format-1 store has no header: it is recognised by its entries' ``format``."""
    if isinstance(data, dict) and "schema" not in data:
        legacy = all(isinstance(e, dict) and e.get("format") == 1 for e in data.values())
        if legacy:
            return {**data, "schema": "perfgate.ceilings-store", "schema_version": 1}
    return data


CEILINGS_STORE: DocumentKind[CeilingsStore] = DocumentKind(
    name="perfgate.ceilings-store",
    major=2,
    minor=1,
    model=CeilingsStore,
    produced_by="perfgate doctor --peak",
    migrations={1: _store_from_format_1},
    legacy=_headerless_store,
)

CEILINGS: DocumentKind[CeilingsReport] = DocumentKind(
    name="perfgate.ceilings",
    major=1,
    minor=1,
    model=CeilingsReport,
    produced_by="perfgate doctor --peak --json",
)
