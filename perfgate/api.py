"""perfgate from Python — a notebook, a script, another tool: measure, judge, render.

The command line's workflows as functions that take plain values and return the typed
documents the CLI writes, so a notebook reaches the same verdict as ``perfgate compare`` from
the same inputs: the same configuration (``[tool.perfgate]`` found upwards from the working
directory, or ``config=``), the same thresholds and stored calibrations, the same seeded
statistics, a fresh process per repeat. Nothing here prints or exits: a problem is raised as
perfgate's own error (``perfgate.errors.UsageError``, ``InfrastructureError``: each carries a
one-line message and its fix), and the verdict's exit code is a value to read.

    from perfgate import api

    base = api.run(["mlp"], preset="smoke", repeats=5)
    head = api.run(["mlp"], preset="smoke", repeats=5, knobs={"precision": "bf16"})
    comparison = api.compare_runs(head, base)
    comparison.overall            # "pass", "regression" or "inconclusive"
    comparison                    # in Jupyter: the PR comment's table

    api.compare_refs("main", "HEAD", workloads=["mlp"])   # interleaved A/B of two git refs
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from perfgate.cli.options import build_selection
from perfgate.compare.ab import with_workload_notes
from perfgate.compare.baseline_source import from_result
from perfgate.compare.gate import compare_runs as judge_runs
from perfgate.compare.outputs import write_html
from perfgate.compare.session import (
    ABLimits,
    Judgement,
    calibrated_for,
    default_ab_folder,
    explained,
    judge_refs,
    policy_from,
)
from perfgate.config import Config, load_config
from perfgate.documents.result import RunResult, write_result
from perfgate.documents.result import load_result as read_result
from perfgate.documents.verdict import CompareVerdict, InconclusivePolicy, Overall
from perfgate.documents.verdict import verdict_document as verdict_dict
from perfgate.errors import UsageError
from perfgate.files import write_json_atomic
from perfgate.report.compare_markdown import verdict_markdown
from perfgate.run import execute_run

ResultLike = RunResult | str | Path
"""A result: the document itself, or the path of its JSON file."""

KnobValues = Mapping[str, str | int | float | bool | None]
"""Knob settings, ``{"precision": "bf16"}``; ``"mlp.precision"`` sets one workload's only."""


@dataclass(frozen=True)
class Comparison:
    """A verdict with what it judged: the typed verdict document, the head run, and how an
    inconclusive verdict counts (the governing configuration's ``inconclusive`` policy)."""

    verdict: CompareVerdict
    head: RunResult
    policy: InconclusivePolicy
    config: Config

    @property
    def overall(self) -> Overall:
        """``pass``, ``regression`` or ``inconclusive``."""
        return self.verdict.overall

    @property
    def exit_code(self) -> int:
        """What ``perfgate compare`` would exit with for this verdict (README, "Exit codes")."""
        return int(self.verdict.exit_code(self.policy))

    def markdown(self, report_url: str | None = None) -> str:
        """The PR comment's markdown for this verdict (``report_url``: where a report lives)."""
        return verdict_markdown(
            self.verdict, inconclusive_policy=self.policy, report_link=report_url
        )

    def _repr_markdown_(self) -> str:  # Jupyter and IPython render a comparison as its comment
        return self.markdown()

    def write_json(self, path: str | Path) -> Path:
        """The verdict document (``perfgate compare --json``), written atomically."""
        target = Path(path)
        write_json_atomic(target, verdict_dict(self.verdict, self.policy))
        return target

    def write_html(self, path: str | Path, branch: str = "main") -> Path:
        """The self-contained HTML report (``perfgate compare --html``), with the stored
        history of ``branch`` when the configuration's database has one."""
        target = Path(path)
        write_html(
            target,
            self.verdict,
            self.policy,
            self.head,
            None,
            branch,
            (self.config.database_url, self.config.root),
        )
        return target


def load_result(path: str | Path) -> RunResult:
    """A result document (``perfgate run --out``), checked against its schema."""
    return read_result(Path(path))


def run(
    workloads: Sequence[str] = (),
    *,
    suite: str | None = None,
    preset: str | None = None,
    repeats: int | None = None,
    steps: int | None = None,
    warmup: int | None = None,
    knobs: KnobValues | None = None,
    device: str | None = None,
    seed: int | None = None,
    threads: int | None = None,
    timeout_s: float | None = None,
    inject_slowdown: str | None = None,
    nproc_per_node: int | None = None,
    config: str | Path | None = None,
    out: str | Path | None = None,
    store: bool = False,
) -> RunResult:
    """``perfgate run``: measure the workloads (or the suite; neither: the configured suite),
    each repeat in a fresh process, and return the result document.

    The document is also written (atomically) to ``out``, by default
    ``.perfgate/results/<time>-<id>.json`` under the project root. ``store=True`` stores the
    run in the configured database as ``perfgate run`` does; the default leaves the database
    alone, so exploring in a notebook never adds to the history the gate judges against.
    ``inject_slowdown`` is the canary, in percent (``"10%"``).
    """
    selection = build_selection(
        suite=suite,
        workloads=tuple(workloads),
        preset=preset,
        knobs=knob_assignments(knobs or {}),
        repeats=repeats,
        steps=steps,
        warmup=warmup,
        timeout=timeout_s,
        threads=threads,
        seed=seed,
        inject_slowdown=inject_slowdown,
        nproc_per_node=nproc_per_node,
    )
    settings = load_config(_path(config))
    outcome = execute_run(
        settings,
        selection,
        device=device or settings.device,
        out=_path(out),
        store=store,
        trigger="manual",
    )
    return outcome.result


def compare_runs(
    head: ResultLike,
    baseline: ResultLike,
    *,
    config: str | Path | None = None,
    allow_env_drift: bool = False,
    inconclusive: str | None = None,
) -> Comparison:
    """``perfgate compare HEAD --baseline BASELINE``: every head workload against the same
    workload of the baseline run, with the configuration's thresholds (and this machine's
    stored calibrations). ``inconclusive``: exit4, pass or fail (default: the configuration's).

    Two runs measured one after the other are only as comparable as the machine was steady
    between them: the verdict says inconclusive (or names the disturbance) rather than guess;
    :func:`compare_refs` measures both sides interleaved instead.
    """
    settings = load_config(_path(config))
    head_run, _ = _result(head, "head")
    base_run, base_origin = _result(baseline, "baseline")
    limits = ABLimits(device=settings.device, out_dir=default_ab_folder(settings.root))
    thresholds, calibrated = calibrated_for(settings, settings, head_run, limits)
    verdict = judge_runs(
        head_run,
        from_result(base_run, base_origin),
        allow_env_drift=allow_env_drift,
        thresholds=thresholds,
    )
    judgement = Judgement(
        verdict=with_workload_notes(verdict, calibrated),
        policy=policy_from(inconclusive or settings.inconclusive),
        head=head_run,
        database_url=settings.database_url,
        database_root=settings.root,
    )
    return _comparison(judgement, settings)


def compare_refs(
    base_ref: str,
    head_ref: str,
    *,
    workloads: Sequence[str] = (),
    suite: str | None = None,
    preset: str | None = None,
    knobs: KnobValues | None = None,
    steps: int | None = None,
    warmup: int | None = None,
    device: str | None = None,
    rounds: int | None = None,
    budget_s: float | None = None,
    inject_slowdown: str | None = None,
    config: str | Path | None = None,
    out_dir: str | Path | None = None,
    inconclusive: str | None = None,
) -> Comparison:
    """``perfgate compare --ab BASE HEAD``: both git refs checked out and measured interleaved,
    round after round, until the sequential test decides or the rounds (``rounds``) or seconds
    (``budget_s``) run out. The base ref's configuration governs thresholds, budget and policy.
    Both result documents go to ``out_dir`` (default ``.perfgate/ab/<time>``)."""
    settings = load_config(_path(config))
    selection = build_selection(
        suite=suite,
        workloads=tuple(workloads),
        preset=preset,
        knobs=knob_assignments(knobs or {}),
        steps=steps,
        warmup=warmup,
        inject_slowdown=inject_slowdown,
    )
    limits = ABLimits(
        device=device or settings.device,
        rounds=rounds,
        budget_s=budget_s,
        out_dir=_path(out_dir) or default_ab_folder(settings.root),
    )
    judgement = judge_refs(
        settings, (base_ref, head_ref), selection, inconclusive=inconclusive, limits=limits
    )
    return _comparison(judgement, settings)


def save_result(result: RunResult, path: str | Path) -> Path:
    """Write a result document (atomically), e.g. one returned by :func:`run` to keep it."""
    target = Path(path)
    write_result(target, result)
    return target


def knob_assignments(knobs: KnobValues) -> tuple[str, ...]:
    """``{"precision": "bf16", "compile": True}`` as the command line's ``KEY=VALUE`` items."""
    assignments = []
    for key, value in knobs.items():
        if not isinstance(key, str) or not key.strip() or "=" in key:
            raise UsageError(f"knob name {key!r} is not a name", 'write e.g. {"precision": "bf16"}')
        text = "none" if value is None else str(value).lower() if isinstance(value, bool) else value
        assignments.append(f"{key}={text}")
    return tuple(assignments)


def _result(value: ResultLike, side: str) -> tuple[RunResult, str]:
    """The run, and where it came from as the verdict names a baseline (its file, as
    ``perfgate compare --baseline FILE`` does; an object: its run id)."""
    if isinstance(value, RunResult):
        return value, f"run {value.run_id}"
    if isinstance(value, str | Path):
        return read_result(Path(value)), str(value)
    raise UsageError(
        f"the {side} is a {type(value).__name__}, not a result",
        "pass the RunResult that api.run returned, or the path of a result document",
    )


def _comparison(judgement: Judgement, settings: Config) -> Comparison:
    """The judgement with inconclusive timings explained by the stored calibration, as
    ``perfgate compare`` prints it."""
    judgement = explained(judgement)
    return Comparison(
        verdict=judgement.verdict, head=judgement.head, policy=judgement.policy, config=settings
    )


def _path(value: str | Path | None) -> Path | None:
    return None if value is None else Path(value)


__all__ = [
    "Comparison",
    "KnobValues",
    "ResultLike",
    "compare_refs",
    "compare_runs",
    "knob_assignments",
    "load_result",
    "run",
    "save_result",
]
