"""Measured ceilings on disk: ``<project root>/.perfgate/ceilings.json``, one entry per
environment fingerprint key.

A JSON file beside the default database (``.perfgate/perfgate.db``) rather than a table in it:
``perfgate run --no-store`` must read the ceilings, and it imports no database code (GPU images
may not ship it). Ceilings describe a machine, not a run, so they need no history: a new
``doctor --peak`` replaces its environment's entry and keeps the others. The file is rewritten
atomically (temporary file, fsync, rename), so a reader sees the old file or the new one.

The file maps a fingerprint key to::

    {"format": 1, "measured_at": ISO time, "perfgate_version": "0.1.0", "device": "cpu",
     "fingerprint": {"device", "gpu_model", "cpu_model", "threads", "torch"},
     "values": {"device", "device_name", "threads", "matmul_tflops": {dtype: measurement},
                "bandwidth_bytes_per_s": {name: measurement}, "unsupported", "seed", "wall_s"}}

where a measurement is ``{"median", "min", "max", "samples", "size"}``.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.errors import UsageError
from perfgate.telemetry.fingerprint import fingerprint_key
from perfgate.telemetry.peaks import normalize_dtype

if TYPE_CHECKING:
    from perfgate.ceilings.bench import Ceilings

ENTRY_FORMAT = 1


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


def read_ceilings_file(path: Path) -> dict[str, dict[str, Any]]:
    """Every stored entry by fingerprint key; empty when the file does not exist.

    A file that cannot be read as ceilings is a one-line UsageError naming it and the fix,
    never a silent reset (the user may want to look at it before deleting it)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise _corrupt(path, f"cannot read it: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _corrupt(path, f"not valid JSON: {exc}") from None
    except RecursionError:
        raise _corrupt(path, "nested too deeply to be a ceilings file") from None
    if not isinstance(data, dict):
        raise _corrupt(path, "not a JSON object of fingerprint keys")
    for key, entry in data.items():
        problem = _entry_problem(entry)
        if problem:
            raise _corrupt(path, f"entry {key[:12]}: {problem}")
    return data


def save_ceilings(root: Path, ceilings: Ceilings) -> Path:
    """Store ``ceilings`` under their fingerprint key (other environments' entries are kept);
    returns the file's path."""
    from perfgate import __version__
    from perfgate.documents.base import json_ready
    from perfgate.result import write_json_atomic

    path = ceilings_path(root)
    entries = read_ceilings_file(path)
    entries[ceilings.fingerprint_key] = {
        "format": ENTRY_FORMAT,
        "measured_at": ceilings.measured_at,
        "perfgate_version": __version__,
        "device": ceilings.device,
        "fingerprint": dict(ceilings.fingerprint),
        "values": ceilings.values(),
    }
    write_json_atomic(path, json_ready(entries))
    return path


def lookup_ceilings(root: Path, environment: Mapping[str, Any]) -> StoredCeilings | None:
    """The stored ceilings of the environment a run records; None when none are stored.

    A corrupt file raises the UsageError of :func:`read_ceilings_file`."""
    return stored_ceilings(root, environment_key(environment))


def stored_ceilings(root: Path, key: str) -> StoredCeilings | None:
    """The entry filed under ``key``, or None."""
    entry = read_ceilings_file(ceilings_path(root)).get(key)
    if entry is None:
        return None
    values = entry["values"]
    return StoredCeilings(
        key=key,
        measured_at=entry["measured_at"],
        device=entry["device"],
        threads=values.get("threads"),
        matmul_tflops={k: float(m["median"]) for k, m in values["matmul_tflops"].items()},
        bandwidth_bytes_per_s={
            k: float(m["median"]) for k, m in values.get("bandwidth_bytes_per_s", {}).items()
        },
    )


def _entry_problem(entry: Any) -> str | None:
    """What makes ``entry`` unusable, or None when it is a valid ceilings entry."""
    if not isinstance(entry, dict):
        return "not an object"
    for name in ("measured_at", "device"):
        if not isinstance(entry.get(name), str):
            return f"no {name}"
    values = entry.get("values")
    if not isinstance(values, dict) or not isinstance(values.get("matmul_tflops"), dict):
        return "no values.matmul_tflops"
    bandwidth = values.get("bandwidth_bytes_per_s", {})
    if not isinstance(bandwidth, dict):
        return "values.bandwidth_bytes_per_s is not an object"
    rates = [*values["matmul_tflops"].items(), *bandwidth.items()]
    for name, measurement in rates:
        median = measurement.get("median") if isinstance(measurement, dict) else None
        if not _positive(median):
            return f"{name} has no positive median"
    return None


def _positive(value: Any) -> bool:
    """A finite number above zero (not a bool, not a string)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value > 0


def _corrupt(path: Path, why: str) -> UsageError:
    return UsageError(
        f"{path} is not a valid perfgate ceilings file ({why})",
        "delete it and rerun `perfgate doctor --peak`",
    )
