"""Configuration: ``[tool.perfgate]`` in pyproject.toml (or a perfgate.toml), then environment
variables, then CLI flags, each overriding the one before.

Validated when loaded: a typo in a key or a wrong type is a usage error naming the file and
the key, never a silently ignored setting.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from perfgate.errors import UsageError
from perfgate.thresholds import Thresholds, parse_thresholds

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

DEFAULT_DATABASE_URL = "sqlite:///.perfgate/perfgate.db"
ENVIRONMENT_OVERRIDES = {
    "PERFGATE_DATABASE_URL": "database_url",
    "PERFGATE_DEVICE": "device",
}


@dataclass(frozen=True, kw_only=True)
class UserWorkloadConfig:
    """One ``[tool.perfgate.workloads.NAME]`` table: a team's own workload."""

    name: str
    factory: str
    """``module:function`` returning a ``perfgate.TrainingSetup``."""
    version: int = 1
    description: str = ""
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: {"default": {}})
    """Preset name → parameters passed to the factory as ``ctx.params``."""
    knobs: Mapping[str, Any] = field(default_factory=dict)
    """Knobs the factory honours, with their default values (types inferred from them)."""
    source_files: tuple[str, ...] = ()
    """Extra files whose content enters the definition hash (the factory's module always does)."""
    distributed: bool = False
    """The factory trains under ``torch.distributed`` (it wraps its model in DDP or FSDP):
    with ``--nproc-per-node N`` each repeat runs on N ranks under torchrun."""


@dataclass(frozen=True, kw_only=True)
class Config:
    """Validated perfgate configuration."""

    root: Path
    """Folder of the config file (or the working directory): relative paths start here."""
    source: Path | None = None
    database_url: str = DEFAULT_DATABASE_URL
    device: str = "auto"
    suite: str = "smoke"
    repeats: int | None = None
    steps: int | None = None
    warmup: int | None = None
    timeout_s: float | None = None
    threads: int | None = None
    seed: int = 0
    workloads: Mapping[str, UserWorkloadConfig] = field(default_factory=dict)
    suites: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Custom suites: name → workload names (``NAME`` or ``NAME@preset``)."""
    thresholds: Thresholds = field(default_factory=Thresholds)
    inconclusive: str = "exit4"
    """How ``compare`` exits on an inconclusive verdict: exit4, pass or fail."""
    ab_rounds: int | None = None
    """The most interleaved rounds a workload gets in ``compare --ab`` and ``--confirm`` (the
    sequential design's horizon; it stops sooner when decided). None: the device's default
    (``perfgate.compare.sequential.DEFAULT_MAX_ROUNDS``)."""
    confirm_budget_s: float | None = None
    """Wall-time budget of one interleaved A/B (``--ab`` or ``--confirm``), all workloads.
    None: the device's default (``DEFAULT_BUDGET_S``)."""
    rule_paths: tuple[str, ...] = ()
    """Folders of extra advisor rule files (relative to the config file), read after the
    built-in ``rules/``."""


_SCALARS: dict[str, type | tuple[type, ...]] = {
    "database_url": str,
    "device": str,
    "suite": str,
    "repeats": int,
    "steps": int,
    "warmup": int,
    "timeout_s": (int, float),
    "threads": int,
    "seed": int,
    "inconclusive": str,
    "ab_rounds": int,
    "confirm_budget_s": (int, float),
}


def find_config_file(start: Path) -> Path | None:
    """The nearest perfgate.toml, or pyproject.toml with a [tool.perfgate] table, upwards."""
    for folder in (start, *start.parents):
        candidate = folder / "perfgate.toml"
        if candidate.is_file():
            return candidate
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and "perfgate" in _read_toml(candidate).get("tool", {}):
            return candidate
    return None


def load_config(path: Path | None = None, cwd: Path | None = None) -> Config:
    """Load and validate configuration; the embedded defaults when there is no file."""
    cwd = cwd or Path.cwd()
    if path is not None and not path.is_file():
        raise UsageError(f"config file {path} does not exist", "check the --config path")
    path = path or find_config_file(cwd)
    table: dict[str, Any] = {}
    if path is not None:
        document = _read_toml(path)
        # perfgate.toml holds the keys at its top level; pyproject.toml under [tool.perfgate].
        table = document if path.name == "perfgate.toml" else document["tool"]["perfgate"]
    root = path.parent if path is not None else cwd
    return _build(table, root, path, dict(os.environ))


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML ({exc})", "fix the syntax") from None


def _build(
    table: Mapping[str, Any], root: Path, path: Path | None, env: Mapping[str, str]
) -> Config:
    origin = f"{path}" if path else "configuration"
    known = {f.name for f in fields(Config)} - {"root", "source"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise UsageError(
            f"{origin}: unknown [tool.perfgate] key {', '.join(unknown)}",
            f"known keys: {', '.join(sorted(known))}",
        )
    values: dict[str, Any] = {}
    for key, kind in _SCALARS.items():
        if key in table:
            values[key] = _check_type(origin, key, table[key], kind)
    for variable, key in ENVIRONMENT_OVERRIDES.items():
        if env.get(variable):
            values[key] = env[variable]
    workloads = {
        name: _user_workload(origin, name, spec)
        for name, spec in _table(origin, "workloads", table.get("workloads", {})).items()
    }
    suites = {
        name: tuple(
            _check_type(origin, f"suites.{name}[]", item, str)
            for item in _check_type(origin, f"suites.{name}", members, list)
        )
        for name, members in _table(origin, "suites", table.get("suites", {})).items()
    }
    rule_paths = tuple(
        _check_type(origin, "rule_paths[]", item, str)
        for item in _check_type(origin, "rule_paths", table.get("rule_paths", []), list)
    )
    thresholds = parse_thresholds(origin, _table(origin, "thresholds", table.get("thresholds", {})))
    if values.get("inconclusive", "exit4") not in ("exit4", "pass", "fail"):
        raise UsageError(
            f"{origin}: inconclusive = {values['inconclusive']!r}", "use exit4, pass or fail"
        )
    return Config(
        root=root,
        source=path,
        workloads=workloads,
        suites=suites,
        rule_paths=rule_paths,
        thresholds=thresholds,
        **values,
    )


def _user_workload(origin: str, name: str, spec: Any) -> UserWorkloadConfig:
    spec = _table(origin, f"workloads.{name}", spec)
    allowed = {f.name for f in fields(UserWorkloadConfig)} - {"name"}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise UsageError(
            f"{origin}: unknown key {', '.join(unknown)} in [tool.perfgate.workloads.{name}]",
            f"known keys: {', '.join(sorted(allowed))}",
        )
    if "factory" not in spec:
        raise UsageError(
            f"{origin}: [tool.perfgate.workloads.{name}] has no factory",
            'add factory = "module:function"',
        )
    presets = {
        preset: _table(origin, f"workloads.{name}.presets.{preset}", params)
        for preset, params in _table(
            origin, f"workloads.{name}.presets", spec.get("presets", {"default": {}})
        ).items()
    }
    if not presets:
        raise UsageError(
            f"{origin}: workloads.{name}.presets is empty", "define at least one preset"
        )
    return UserWorkloadConfig(
        name=name,
        factory=_check_type(origin, f"workloads.{name}.factory", spec["factory"], str),
        version=_check_type(origin, f"workloads.{name}.version", spec.get("version", 1), int),
        description=_check_type(
            origin, f"workloads.{name}.description", spec.get("description", ""), str
        ),
        presets=presets,
        knobs=_table(origin, f"workloads.{name}.knobs", spec.get("knobs", {})),
        distributed=_check_type(
            origin, f"workloads.{name}.distributed", spec.get("distributed", False), bool
        ),
        source_files=tuple(
            _check_type(origin, f"workloads.{name}.source_files[]", item, str)
            for item in _check_type(
                origin, f"workloads.{name}.source_files", spec.get("source_files", []), list
            )
        ),
    )


def _table(origin: str, key: str, value: Any) -> dict[str, Any]:
    return dict(_check_type(origin, key, value, dict))


def _check_type(origin: str, key: str, value: Any, kind: type | tuple[type, ...]) -> Any:
    if isinstance(value, bool) and kind in (int, (int, float)):
        value_ok = False
    else:
        value_ok = isinstance(value, kind)
    if not value_ok:
        expected = (
            kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        )
        raise UsageError(
            f"{origin}: {key} should be {expected}, got {type(value).__name__} {value!r}",
            "fix the value in [tool.perfgate]",
        )
    return value
