"""Options several commands share, declared once with one help text each.

The workload selection (which workloads, how they are measured) is the same question for every
command that measures one (``run``, ``calibrate``, ``diagnose``, ``advise``): each declares its
parameters with these ``Annotated`` aliases and builds its ``Selection`` with
:func:`build_selection`, so the options read and behave alike everywhere. A command whose
option means something else (``calibrate --repeats``: A/A repeats, 10 by default; ``compare``'s
options, which only ``--ab`` measures) declares its own.

A list option's default is written in the signature (``= []``, never mutated): with
``Annotated``, typer reads it from there.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from perfgate.config import check_seconds
from perfgate.runner.plan import Selection, parse_slowdown

ConfigFile = Annotated[
    Path | None,
    typer.Option("--config", help="perfgate.toml or pyproject.toml (default: nearest one upwards)"),
]

Suite = Annotated[
    str | None,
    typer.Option(help="suite: smoke, full, or one from config (default: the config's suite)"),
]
Workloads = Annotated[
    list[str],
    typer.Option(
        "--workload",
        "-w",
        help="workload (repeatable; NAME or NAME@preset); overrides --suite",
    ),
]
Preset = Annotated[str | None, typer.Option(help="preset for every selected workload")]
Knobs = Annotated[
    list[str],
    typer.Option("--knob", "-k", help="KEY=VALUE or WORKLOAD.KEY=VALUE (repeatable)"),
]
Repeats = Annotated[int | None, typer.Option(help="fresh processes per workload")]
Steps = Annotated[int | None, typer.Option(help="measured steps per repeat")]
Warmup = Annotated[
    int | None,
    typer.Option(help="discarded warm-up steps before measuring or profiling (>= 1)"),
]
Timeout = Annotated[float | None, typer.Option(help="seconds allowed per repeat process")]
Threads = Annotated[
    int | None, typer.Option(help="intra-op CPU threads (default: config, else physical cores)")
]
Seed = Annotated[int | None, typer.Option(help="seed for weights and synthetic data")]
Shard = Annotated[str | None, typer.Option(help="run shard i/n of the selected workloads")]
NprocPerNode = Annotated[
    int | None,
    typer.Option("--nproc-per-node", help="ranks per distributed workload (torchrun; e.g. ddp)"),
]
InjectSlowdown = Annotated[
    str | None,
    typer.Option(
        "--inject-slowdown",
        help="canary: add this much honest extra cost per step (e.g. 5%)",
    ),
]
Device = Annotated[str | None, typer.Option(help="cpu, cuda or auto (default: config, else auto)")]


def build_selection(
    *,
    suite: str | None = None,
    workloads: Sequence[str] = (),
    preset: str | None = None,
    knobs: Sequence[str] = (),
    repeats: int | None = None,
    steps: int | None = None,
    warmup: int | None = None,
    timeout: float | None = None,
    threads: int | None = None,
    seed: int | None = None,
    shard: str | None = None,
    inject_slowdown: str | None = None,
    nproc_per_node: int | None = None,
) -> Selection:
    """The ``Selection`` the options describe. A malformed ``--inject-slowdown``, then a
    malformed ``--timeout``, is a usage error (raised: the caller guards it)."""
    slowdown = None if inject_slowdown is None else parse_slowdown(inject_slowdown)
    if timeout is not None:
        check_seconds("--timeout", timeout, "give seconds, e.g. --timeout 600")
    return Selection(
        suite=suite,
        workloads=workloads,
        preset=preset,
        knobs=knobs,
        repeats=repeats,
        steps=steps,
        warmup=warmup,
        timeout_s=timeout,
        threads=threads,
        seed=seed,
        shard=shard,
        inject_slowdown=slowdown,
        nproc_per_node=nproc_per_node,
    )
