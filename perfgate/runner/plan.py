"""The run plan: which workloads, at which preset, with which knobs and settings.

Everything that can be checked before a process starts is checked here — unknown workloads,
presets and knobs, an unimportable user factory, a bad shard — so bad input fails in a second
with exit code 2 instead of after minutes of measuring.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from perfgate.config import Config
from perfgate.documents.result import RunSettings
from perfgate.errors import UsageError
from perfgate.names import check_name
from perfgate.stats.power import minimum_repeats
from perfgate.telemetry.host import default_thread_count
from perfgate.workloads.builtin import BUILTIN_WORKLOADS, SUITES
from perfgate.workloads.definition import WorkloadDefinition
from perfgate.workloads.knobs import parse_knob_assignments, resolve_knobs
from perfgate.workloads.protocol import KnobValue
from perfgate.workloads.user import user_definition


@dataclass(frozen=True, kw_only=True)
class PlannedWorkload:
    """One workload to measure, fully resolved."""

    definition: WorkloadDefinition
    preset: str
    params: Mapping[str, Any]
    knobs: Mapping[str, KnobValue]
    definition_hash: str
    worker_env: tuple[str, ...] = ()
    """Environment variables the worker gets beyond the built-in allow-list (config
    ``worker_env``; ``perfgate.runner.environment``)."""


@dataclass(frozen=True, kw_only=True)
class Defaults:
    """Measurement defaults for a preset family (CLI and config override them)."""

    repeats: int
    steps: int
    warmup: int
    timeout_s: float


SMOKE_DEFAULTS = Defaults(repeats=5, steps=12, warmup=3, timeout_s=180.0)
FULL_DEFAULTS = Defaults(repeats=5, steps=50, warmup=10, timeout_s=900.0)
TESTED_METRICS_PER_WORKLOAD = 2
"""What compare tests per workload: the step time (or time per sample) and peak memory; the
rates computed from the step time are shown beside it, not tested again."""


@dataclass(frozen=True, kw_only=True)
class Selection:
    """What the user asked for on the command line."""

    suite: str | None = None
    workloads: Sequence[str] = ()
    preset: str | None = None
    knobs: Sequence[str] = ()
    repeats: int | None = None
    steps: int | None = None
    warmup: int | None = None
    timeout_s: float | None = None
    threads: int | None = None
    seed: int | None = None
    shard: str | None = None
    inject_slowdown: float | None = None
    """Canary: extra cost per measured step as a fraction of the step time (see parse_slowdown)."""
    nproc_per_node: int | None = None
    """Ranks per distributed workload; only workloads that train under torch.distributed take it."""


MAX_SLOWDOWN_PERCENT = 1000.0


def parse_slowdown(text: str) -> float:
    """``--inject-slowdown`` text (``5%`` or ``5``, both percent) as a fraction (0.05).

    A bare number is always percent, never a fraction: ``0.05`` meaning 5% in one place and
    0.05% in another is how a canary ends up injecting nothing visible. 0 < N <= 1000.
    """
    number = text.strip().removesuffix("%").strip()
    try:
        percent = float(number)
    except ValueError:
        percent = math.nan
    if not 0 < percent <= MAX_SLOWDOWN_PERCENT:  # also rejects nan and inf
        raise UsageError(
            f"--inject-slowdown {text!r} is not a percentage in (0, 1000]",
            "write e.g. --inject-slowdown 5%",
        )
    return percent / 100


def available_workloads(
    config: Config, names: Sequence[str] | None = None
) -> dict[str, WorkloadDefinition]:
    """Built-in workloads plus the configured user workloads (a user name may not shadow one).

    With ``names``, only those user workloads are located, so one broken entry in the config
    does not block running the others.
    """
    clashes = sorted(set(config.workloads) & set(BUILTIN_WORKLOADS))
    if clashes:
        raise UsageError(
            f"user workload {', '.join(clashes)} has the name of a built-in workload",
            "rename it in [tool.perfgate.workloads]",
        )
    wanted = (
        config.workloads
        if names is None
        else {n: config.workloads[n] for n in names if n in config.workloads}
    )
    user = {name: user_definition(spec, config.root) for name, spec in wanted.items()}
    return {**BUILTIN_WORKLOADS, **user}


def make_plan(config: Config, selection: Selection) -> tuple[list[PlannedWorkload], RunSettings]:
    """Resolve the selection against the configuration into workloads and settings."""
    requested = _shard(_requested(config, selection), selection.shard)
    definitions = available_workloads(config, [name for name, _ in requested])
    knob_sets = parse_knob_assignments(selection.knobs)
    _check_knob_scopes(knob_sets, requested, definitions)
    planned = []
    for name, preset in requested:
        definition = definitions[name]
        overrides = {**definition.default_knobs}
        for scope in ("*", name):
            for key, value in knob_sets.get(scope, {}).items():
                if scope == name or key in definition.knobs:
                    overrides[key] = value
        knobs = resolve_knobs(name, definition.knobs, overrides)
        planned.append(
            PlannedWorkload(
                definition=definition,
                preset=preset,
                params=definition.preset_params(preset),
                knobs=knobs,
                definition_hash=definition.definition_hash(preset, knobs),
                worker_env=config.worker_env,
            )
        )
    _check_distributed(planned, selection.nproc_per_node)
    return planned, _settings(config, selection, planned)


def _check_distributed(planned: Sequence[PlannedWorkload], nproc_per_node: int | None) -> None:
    """``--nproc-per-node`` above 1 needs a workload that trains under torch.distributed.

    Launching a single-process workload N times would measure N independent trainings fighting
    over the machine, not data-parallel training: refused, naming the workloads that can.
    """
    if nproc_per_node is None or nproc_per_node == 1:
        return
    if nproc_per_node < 1:
        raise UsageError(
            f"--nproc-per-node {nproc_per_node} is not a positive number of ranks",
            "use --nproc-per-node 2 or more",
        )
    single = [p.definition.name for p in planned if not p.definition.distributed]
    if single:
        raise UsageError(
            f"--nproc-per-node {nproc_per_node}: workload {', '.join(single)} does not train "
            "under torch.distributed",
            "select ddp (or a user workload with distributed = true), or drop --nproc-per-node",
        )


def _requested(config: Config, selection: Selection) -> list[tuple[str, str]]:
    """(name, preset) pairs asked for, names checked; user workloads not yet located."""
    known = {*BUILTIN_WORKLOADS, *config.workloads}
    if selection.workloads:
        entries = list(selection.workloads)
    else:
        suite = check_name(selection.suite or config.suite, "suite")
        if suite in config.suites:
            entries = list(config.suites[suite])
        elif suite in SUITES:
            entries = [f"{name}@{preset}" for name, preset in SUITES[suite]]
        else:
            suites = ", ".join(sorted({*SUITES, *config.suites}))
            raise UsageError(f"unknown suite {suite!r}", f"use one of: {suites}")
    requested: list[tuple[str, str]] = []
    for entry in entries:
        name, _, preset = entry.partition("@")
        if name not in known:
            raise UsageError(
                f"unknown workload {name!r}",
                f"use one of: {', '.join(sorted(known))} (user workloads are declared "
                "in [tool.perfgate.workloads])",
            )
        chosen = _preset_for(config, name, selection.preset or preset or "smoke")
        if any(name == seen for seen, _ in requested):
            raise UsageError(f"workload {name} is selected twice", "name each workload once")
        requested.append((name, chosen))
    return requested


def _preset_for(config: Config, name: str, wanted: str) -> str:
    """``wanted`` if the workload has it; a user workload falls back to its ``default`` preset."""
    user = config.workloads.get(name)
    presets = user.presets if user else BUILTIN_WORKLOADS[name].presets
    if wanted in presets:
        return wanted
    if user and "default" in presets:
        return "default"
    raise UsageError(
        f"workload {name} has no preset {wanted!r}", f"use one of: {', '.join(sorted(presets))}"
    )


def _shard(requested: list[tuple[str, str]], shard: str | None) -> list[tuple[str, str]]:
    """Workloads of shard ``i/n`` (1-based), dealt round-robin in plan order."""
    if shard is None:
        return requested
    index_text, sep, count_text = shard.partition("/")
    try:
        index, count = int(index_text), int(count_text)
    except ValueError:
        index, count = 0, 0
    if not sep or count < 1 or not 1 <= index <= count:
        raise UsageError(f"--shard {shard!r} is not i/n with 1 <= i <= n", "write e.g. --shard 1/2")
    chosen = requested[index - 1 :: count]
    if not chosen:
        raise UsageError(
            f"shard {shard} has no workloads ({len(requested)} selected)", "use fewer shards"
        )
    return chosen


def _check_knob_scopes(
    knob_sets: Mapping[str, Mapping[str, str]],
    requested: Sequence[tuple[str, str]],
    definitions: Mapping[str, WorkloadDefinition],
) -> None:
    names = {name for name, _ in requested}
    for scope in knob_sets:
        if scope != "*" and scope not in names:
            raise UsageError(
                f"--knob {scope}.… names a workload that is not in this run",
                f"selected workloads: {', '.join(sorted(names))}",
            )
    for key in knob_sets.get("*", {}):
        if not any(key in definitions[name].knobs for name in names):
            raise UsageError(
                f"no selected workload has a knob {key!r}",
                "see perfgate workloads for each workload's knobs",
            )


def _settings(
    config: Config, selection: Selection, planned: Sequence[PlannedWorkload]
) -> RunSettings:
    defaults = SMOKE_DEFAULTS if all(p.preset == "smoke" for p in planned) else FULL_DEFAULTS

    # A default repeat count must be able to conclude: at least what the test needs for one
    # change among every metric the run's comparison will test (perfgate.stats.power).
    needed = minimum_repeats(TESTED_METRICS_PER_WORKLOAD * max(len(planned), 1))
    defaults = replace(defaults, repeats=max(defaults.repeats, needed))

    def pick(name: str) -> Any:
        for value in (getattr(selection, name), getattr(config, name), getattr(defaults, name)):
            if value is not None:
                return value
        return None

    settings = RunSettings(
        repeats=pick("repeats"),
        steps=pick("steps"),
        warmup=pick("warmup"),
        timeout_s=float(pick("timeout_s")),
        threads=selection.threads or config.threads,
        seed=selection.seed if selection.seed is not None else config.seed,
        shard=selection.shard,
        inject_slowdown=selection.inject_slowdown,
        nproc_per_node=selection.nproc_per_node or 1,
    )
    _check_settings(settings)
    return settings


def _check_settings(settings: RunSettings) -> None:
    checks = [
        (settings.repeats >= 1, "--repeats must be at least 1", "use --repeats 3 or more"),
        (settings.steps >= 1, "--steps must be at least 1", "use --steps 10 or more"),
        (
            settings.warmup >= 1,
            "--warmup must be at least 1: the first step always carries one-off costs",
            "use --warmup 1 or more",
        ),
        (settings.timeout_s > 0, "--timeout must be positive", "give seconds, e.g. --timeout 600"),
        (
            settings.threads is None or settings.threads >= 1,
            "--threads must be at least 1",
            "omit it to use the physical cores",
        ),
        (
            settings.inject_slowdown is None
            or 0 < settings.inject_slowdown <= MAX_SLOWDOWN_PERCENT / 100,
            "--inject-slowdown must be more than 0% and at most 1000%",
            "write e.g. --inject-slowdown 5%",
        ),
    ]
    for ok, problem, fix in checks:
        if not ok:
            raise UsageError(problem, fix)


def prepare(config: Config, selection: Selection) -> tuple[list[PlannedWorkload], RunSettings]:
    """The plan and settings, threads pinned to the physical cores unless configured."""
    if selection.threads is None and config.threads is None:
        selection = replace(selection, threads=default_thread_count())
    return make_plan(config, selection)
