"""Configuration: ``[tool.perfgate]`` in pyproject.toml (or a perfgate.toml), then environment
variables, then CLI flags, each overriding the one before.

Validated when loaded: a typo in a key or a wrong type is a usage error naming the file and
the key, never a silently ignored setting.
"""

from __future__ import annotations

import difflib
import math
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from perfgate.errors import UsageError
from perfgate.files import check_json_values, read_text
from perfgate.names import check_name
from perfgate.thresholds import Thresholds, parse_thresholds

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

DEFAULT_DATABASE_URL = "sqlite:///.perfgate/perfgate.db"
MAX_SECONDS = 7 * 86_400.0
"""The longest timeout or budget accepted: a week. More is a typo, and waits far longer
(1e10 s) overflow the operating system's clock in the worker's timers."""


@dataclass(frozen=True, kw_only=True)
class UserWorkloadConfig:
    """One ``[tool.perfgate.workloads.NAME]`` table: a team's own workload."""

    name: str
    factory: str | None = None
    """``module:function`` returning a ``perfgate.TrainingSetup`` (or ``script``: one of them)."""
    script: str | None = None
    """A training script (relative to the config's folder) that marks its steps with a
    ``perfgate.Session`` (``perfgate.workloads.session``), run as ``python SCRIPT ARGS``."""
    args: tuple[str, ...] = ()
    """The script's command-line arguments."""
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
    worker_env: tuple[str, ...] = ()
    """Environment variables (names or ``fnmatch`` patterns) workers get beyond the built-in
    allow-list (``perfgate.runner.environment``); secrets are never passed on."""
    pushgateway_url: str | None = None
    """A Prometheus Pushgateway that ``perfgate ingest`` pushes every stored run of a branch
    to (``perfgate.monitoring.push``); None: no push."""


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
    "pushgateway_url": str,
}


ENVIRONMENT_OVERRIDES = {f"PERFGATE_{key.upper()}": key for key in _SCALARS}
"""Every scalar key has an environment variable (``PERFGATE_STEPS`` for ``steps``) that wins
over the file: CI systems configure jobs by variables. The CLI's own flags win over both."""


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean `steps`?)`` for a near miss of a known key, else ""."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.7)
    return f" (did you mean `{close[0]}`?)" if close else ""


def _from_environment(variable: str, text: str, kind: type | tuple[type, ...]) -> Any:
    """An environment variable's text as its key's type, or a usage error naming both."""
    if kind is str:
        return text
    try:
        return int(text) if kind is int else float(text)
    except ValueError:
        expected = "an integer" if kind is int else "a number"
        raise UsageError(
            f"environment variable {variable}={text!r} is not {expected}",
            f"set {variable} to {expected}, or unset it",
        ) from None


def absolute_sqlite_url(url: str, root: Path) -> str:
    """``url`` with a relative SQLite file path made absolute from ``root`` (other URLs as
    given): where the database is no longer depends on which folder reads the URL. Pure text
    (the store's engine parses URLs fully; a run without the database stays without it)."""
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        return url
    path, query, options = url[len(prefix) :].partition("?")
    if not path or path.startswith("/") or path == ":memory:" or path.startswith("file:"):
        return url
    return f"{prefix}{(root / path).resolve()}{query}{options}"


def find_config_file(start: Path) -> Path | None:
    """The nearest perfgate.toml, or pyproject.toml with a [tool.perfgate] table, upwards."""
    for folder in (start, *start.parents):
        candidate = folder / "perfgate.toml"
        if candidate.is_file():
            return candidate
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and _perfgate_table(_read_toml(candidate), candidate) is not None:
            return candidate
    return None


def load_config(path: Path | None = None, cwd: Path | None = None) -> Config:
    """Load and validate configuration; the embedded defaults when there is no file."""
    cwd = cwd or Path.cwd()
    path = path or find_config_file(cwd)
    table: dict[str, Any] = {}
    if path is not None:
        document = _read_toml(path)
        # perfgate.toml holds the keys at its top level; pyproject.toml under [tool.perfgate].
        found = document if path.name == "perfgate.toml" else _perfgate_table(document, path)
        if found is None:
            raise UsageError(
                f"{path} has no [tool.perfgate] table",
                "add one, or point --config at a perfgate.toml (keys at its top level)",
            )
        table = found
        check_json_values(table, str(path), "fix the value in the configuration")
    root = path.parent if path is not None else cwd
    return _build(table, root, path, dict(os.environ))


def check_seconds(name: str, value: float, fix: str) -> float:
    """``value`` as a finite, positive number of seconds, at most ``MAX_SECONDS``: an infinite
    or NaN timeout would be accepted by every comparison and crash only when the result is
    written, after all the measuring."""
    if not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
        raise UsageError(
            f"{name} {value!r} is not a number of seconds in (0, {MAX_SECONDS:g}]", fix
        )
    return float(value)


def _read_toml(path: Path) -> dict[str, Any]:
    fix = "fix the file (UTF-8 TOML)"
    text = read_text(path, what="config file", fix=fix, path_fix="check the --config path")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML ({exc})", "fix the syntax") from None
    except RecursionError:
        raise UsageError(f"{path} is nested too deeply to be a configuration", fix) from None


def _perfgate_table(document: dict[str, Any], path: Path) -> dict[str, Any] | None:
    """``[tool.perfgate]`` of a pyproject.toml; None when absent. ``tool = 1`` or
    ``[tool] perfgate = 3`` is a usage error, not a crash of the lookup."""
    tool = document.get("tool", {})
    if not isinstance(tool, dict):
        raise UsageError(
            f"{path}: tool should be a table, got {type(tool).__name__} {tool!r}",
            "make tool a TOML table ([tool.perfgate] …)",
        )
    table = tool.get("perfgate")
    if table is not None and not isinstance(table, dict):
        raise UsageError(
            f"{path}: [tool.perfgate] should be a table, got {type(table).__name__} {table!r}",
            "write the perfgate settings under a [tool.perfgate] table",
        )
    return table


def _build(
    table: Mapping[str, Any], root: Path, path: Path | None, env: Mapping[str, str]
) -> Config:
    origin = f"{path}" if path else "configuration"
    known = {f.name for f in fields(Config)} - {"root", "source"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise UsageError(
            f"{origin}: unknown [tool.perfgate] key {', '.join(unknown)}"
            + did_you_mean(unknown[0], known),
            f"known keys: {', '.join(sorted(known))}",
        )
    values: dict[str, Any] = {}
    for key, kind in _SCALARS.items():
        if key in table:
            values[key] = _check_type(origin, key, table[key], kind)
    given = {key: (f"{origin}: {key} =", "fix the value in [tool.perfgate]") for key in values}
    for variable, key in ENVIRONMENT_OVERRIDES.items():
        if env.get(variable):
            values[key] = _from_environment(variable, env[variable], _SCALARS[key])
            given[key] = (f"environment variable {variable}:", f"set {variable} or unset it")
    for key in ("timeout_s", "confirm_budget_s"):
        if key in values:
            name, fix = given[key]
            check_seconds(name, values[key], fix)
    if "suite" in values:
        check_name(values["suite"], "suite", origin)
    workloads = {
        check_name(name, "workload", origin): _user_workload(origin, name, spec)
        for name, spec in _table(origin, "workloads", table.get("workloads", {})).items()
    }
    suites = {
        check_name(name, "suite", origin): tuple(
            _suite_member(origin, name, item)
            for item in _check_type(origin, f"suites.{name}", members, list)
        )
        for name, members in _table(origin, "suites", table.get("suites", {})).items()
    }
    rule_paths, worker_env = (
        tuple(
            _check_type(origin, f"{key}[]", item, str)
            for item in _check_type(origin, key, table.get(key, []), list)
        )
        for key in ("rule_paths", "worker_env")
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
        worker_env=worker_env,
        thresholds=thresholds,
        **values,
    )


def _suite_member(origin: str, suite: str, item: Any) -> str:
    """One ``NAME`` or ``NAME@preset`` entry of a suite, both parts valid names."""
    entry = _check_type(origin, f"suites.{suite}[]", item, str)
    name, at, preset = entry.partition("@")
    check_name(name, f"workload in suite {suite}", origin)
    if at:
        check_name(preset, f"preset of {name} in suite {suite}", origin)
    return str(entry)


def _user_workload(origin: str, name: str, spec: Any) -> UserWorkloadConfig:
    spec = _table(origin, f"workloads.{name}", spec)
    allowed = {f.name for f in fields(UserWorkloadConfig)} - {"name"}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise UsageError(
            f"{origin}: unknown key {', '.join(unknown)} in [tool.perfgate.workloads.{name}]"
            + did_you_mean(unknown[0], allowed),
            f"known keys: {', '.join(sorted(allowed))}",
        )
    if ("factory" in spec) == ("script" in spec):
        raise UsageError(
            f"{origin}: [tool.perfgate.workloads.{name}] "
            + (
                "has both a factory and a script"
                if "factory" in spec
                else "has no factory or script"
            ),
            'add factory = "module:function" or script = "train.py"',
        )
    if "script" in spec and spec.get("distributed"):
        raise UsageError(
            f"{origin}: [tool.perfgate.workloads.{name}] is a distributed script; perfgate "
            "runs distributed training from factories only",
            "drop distributed = true, or wrap the training in a factory (README, "
            "'Your own workloads')",
        )
    if "args" in spec and "script" not in spec:
        raise UsageError(
            f"{origin}: [tool.perfgate.workloads.{name}] has args but no script",
            "args are a script's command-line arguments: remove them or add script = ...",
        )
    presets = {
        check_name(preset, f"preset of workload {name}", origin): _table(
            origin, f"workloads.{name}.presets.{preset}", params
        )
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
        factory=(
            _check_type(origin, f"workloads.{name}.factory", spec["factory"], str)
            if "factory" in spec
            else None
        ),
        script=(
            _check_type(origin, f"workloads.{name}.script", spec["script"], str)
            if "script" in spec
            else None
        ),
        args=tuple(
            _check_type(origin, f"workloads.{name}.args[]", item, str)
            for item in _check_type(origin, f"workloads.{name}.args", spec.get("args", []), list)
        ),
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
