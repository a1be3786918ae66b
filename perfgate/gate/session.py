"""``perfgate gate``: the pull-request gate in one process that the pull request cannot reach.

The gate used to be three commands chained by a shell script — ``run`` wrote ``head.json``,
``advise`` executed the pull request's workloads again, ``compare`` read ``head.json`` back —
so code of the pull request ran between the measurement and the judgement and could rewrite
the measurement (issue 16). Here the measuring parent keeps the head's numbers in memory from
the worker processes to the verdict, and the files are written once, at the end, after every
process the pull request started has been killed. What decides comes from the base ref, never
from the checkout under test (``perfgate.compare.trusted``):

1. the base ref is checked out; its configuration names the gated workloads, their definitions
   (presets, knobs), the settings, thresholds, policy, budgets, rules and the database;
   the head's own configuration is never read;
2. the head's code is measured with the base's definitions (``head_view``); a gated workload
   that cannot even be planned at head (its module gone, its factory renamed) is *missing*;
3. advice is profiled from the head (optional; never part of the verdict);
4. the head is judged against the base's baselines (snapshots or the trusted database) and
   every gated workload must be judged (``perfgate.compare.membership``); anything flagged,
   changed or without a baseline is settled by an interleaved A/B of base against head;
5. the outputs are written, each with its SHA-256 in ``SHA256SUMS`` and in the log.

Inconclusive is neutral: the gate's own exit code is 0 for it unless the base's configuration
says ``inconclusive = "fail"``; the verdict document keeps compare's code (4).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from perfgate import __version__
from perfgate._rules_path import builtin_rules_folder
from perfgate.advise.session import advice_report, advise_workloads
from perfgate.ceilings.store import lookup_ceilings
from perfgate.compare.membership import GatedWorkload, base_plan
from perfgate.compare.outputs import (
    advice_lines,
    write_error_comment,
    write_html,
    write_outputs,
)
from perfgate.compare.sequential import ab_budget
from perfgate.compare.session import (
    ABLimits,
    BaselineChoice,
    Judgement,
    judge_with_trusted,
    policy_from,
)
from perfgate.compare.trusted import TrustedInputs, head_view, trusted_from
from perfgate.compare.worktrees import checked_out, repository_root
from perfgate.config import Config, load_config
from perfgate.documents.advice import ADVICE, AdviceReport
from perfgate.documents.result import RunResult, write_result
from perfgate.documents.verdict import ERROR, ErrorDocument
from perfgate.errors import ExitCode, PerfgateError, UsageError
from perfgate.files import write_json_atomic, write_text_atomic
from perfgate.names import check_name
from perfgate.run import run_fingerprint, utc_now
from perfgate.runner.device import resolve_device
from perfgate.runner.interleave import InterleaveObserver
from perfgate.runner.orchestrator import RunObserver, run_workloads, warm_launcher
from perfgate.runner.plan import PlannedWorkload, Selection, prepare
from perfgate.runner.source import collect_source
from perfgate.runner.strays import adopt_orphans, descendants, kill_strays

PROFILE_STEPS = 3
"""Steps in the advice's profiling window (``perfgate advise``'s default)."""


@dataclass(frozen=True, kw_only=True)
class GateRequest:
    """What the CI job asks of the gate (its flags; none of it comes from the pull request)."""

    base_ref: str
    out_dir: Path
    suite: str | None = None
    workloads: Sequence[str] = ()
    config: Path | None = None
    """The configuration file, as a path in the checkout; read at the base ref."""
    baseline_dir: Path | None = None
    """The snapshot folder, as a path in the checkout; read at the base ref."""
    branch: str = "main"
    device: str | None = None
    advise: bool = True
    report_url: str | None = None
    rounds: int | None = None
    budget_s: float | None = None
    inconclusive: str | None = None


@dataclass(frozen=True, kw_only=True)
class GateObservers:
    """Progress callbacks: the head's repeats and the A/B's rounds."""

    run: RunObserver | None = None
    rounds: InterleaveObserver | None = None


@dataclass(frozen=True, kw_only=True)
class GateOutcome:
    """What the gate decided and wrote."""

    exit_code: int
    """The gate's own code: compare's, with inconclusive neutral (0) unless the policy fails it."""
    compare_exit_code: int
    """The verdict's code as ``perfgate compare`` would exit (4 for inconclusive)."""
    judgement: Judgement | None
    """None when nothing could be judged (``error`` says why)."""
    error: PerfgateError | None = None
    written: list[Path] = field(default_factory=list)
    digests: dict[str, str] = field(default_factory=dict)
    """File name → SHA-256 of every output, as written (also in ``SHA256SUMS``)."""
    notes: list[str] = field(default_factory=list)


def default_base_ref() -> str:
    """The pull request's base, ``origin/$GITHUB_BASE_REF``: the gate's default base ref."""
    base = os.environ.get("GITHUB_BASE_REF")
    if not base:
        raise UsageError(
            "the gate needs the base revision to judge against",
            "pass --base-ref (e.g. origin/main), or run in a pull_request job",
        )
    return f"origin/{base}"


def run_gate(request: GateRequest, observers: GateObservers | None = None) -> GateOutcome:
    """The whole gate; a perfgate error becomes an outcome with an error comment, never a
    verdict (and never exit 1)."""
    observers = observers or GateObservers()
    request.out_dir.mkdir(parents=True, exist_ok=True)
    for name in OUTPUTS:
        (request.out_dir / name).unlink(missing_ok=True)
    adopt_orphans()
    spared = descendants()  # the caller's own children (a test harness's) are not ours to kill
    try:
        return _gate(request, observers, spared)
    except PerfgateError as error:
        kill_strays(spared)
        write_error_comment(error, request.out_dir / "comment.md")
        write_json_atomic(request.out_dir / "error.json", ERROR.dump(ErrorDocument.of(error)))
        written = [request.out_dir / "error.json", request.out_dir / "comment.md"]
        code = int(error.exit_code)
        return GateOutcome(
            exit_code=code,
            compare_exit_code=code,
            judgement=None,
            error=error,
            written=written,
            digests=_digests(request.out_dir, written),
        )


OUTPUTS = (
    "error.json",
    "head.json",
    "advice.json",
    "verdict.json",
    "comment.md",
    "perfgate-report.html",
    "compare-exit-code",
    "SHA256SUMS",
)
"""Everything the gate writes into its output folder (removed first: no file of an earlier
run, nor one planted there, survives to be read as this run's)."""


def _gate(request: GateRequest, observers: GateObservers, spared: set[int]) -> GateOutcome:
    _check_flags(request)
    cwd = Path.cwd()
    repo = repository_root(cwd)
    with checked_out(repo, [request.base_ref]) as (base,):
        base_config = _base_config(repo, base.path, cwd, request.config)
        snapshots = request.baseline_dir
        if snapshots is None and (base.path / _relative(cwd, repo) / "baselines").is_dir():
            snapshots = cwd / "baselines"  # the base has committed snapshots: judge by them
        trusted = trusted_from(repo, base, base_config, cwd, snapshots)
        gated = base_plan(trusted.config, request.suite, request.workloads)
        device = resolve_device(request.device or trusted.config.device)
        head, unmeasurable = _measure_head(trusted, gated, request, device, observers.run)
        notes = []
        advice = None
        if request.advise and head.workloads:
            advice, note = _advise(trusted, head, device)
            notes += [note] if note else []
        kill_strays(spared)  # nothing the pull request started outlives its measurement
        judgement = judge_with_trusted(
            head,
            trusted,
            BaselineChoice(directory=snapshots, branch=request.branch),
            gated=gated,
            confirm=True,
            inconclusive=request.inconclusive,
            limits=ABLimits(
                device=device,
                rounds=request.rounds,
                budget_s=request.budget_s,
                out_dir=request.out_dir / "ab",
                observer=observers.rounds,
            ),
            unmeasurable=unmeasurable,
        )
    kill_strays(spared)
    return _write(request, judgement, advice, notes)


def _check_flags(request: GateRequest) -> None:
    """The command line's own values, refused before anything is checked out or measured."""
    if request.suite is not None:
        check_name(request.suite, "--suite")
    for entry in request.workloads:
        for part in entry.split("@", 1):
            check_name(part, "--workload")
    if request.inconclusive is not None:
        policy_from(request.inconclusive)
    ab_budget(Config(root=Path.cwd()), "cpu", rounds=request.rounds, budget_s=request.budget_s)


def _base_config(repo: Path, base: Path, cwd: Path, config: Path | None) -> Config:
    """The configuration at the base ref: ``config`` (a path in the checkout under test) at the
    same place in the base checkout, else the one found upwards from the same folder there."""
    folder = base / _relative(cwd, repo)
    if config is None:
        return load_config(None, cwd=folder)
    absolute = config if config.is_absolute() else cwd / config
    try:
        relative = absolute.resolve().relative_to(repo.resolve())
    except ValueError:
        raise UsageError(
            f"--config {config} is outside the repository {repo}",
            "give the configuration file of the repository under test",
        ) from None
    path = base / relative
    if not path.is_file():
        raise UsageError(
            f"--config {config} does not exist at the base ref",
            "the gate reads its configuration from the base branch: add it there first",
        )
    return load_config(path)


def _relative(path: Path, repo: Path) -> Path:
    """``path`` (a folder of the checkout under test) relative to the repository's top."""
    return path.resolve().relative_to(repo.resolve())


def _measure_head(
    trusted: TrustedInputs,
    gated: Sequence[GatedWorkload],
    request: GateRequest,
    device: str,
    observer: RunObserver | None,
) -> tuple[RunResult, dict[str, str]]:
    """Measure the head's code under the base's definitions; gated workloads that cannot be
    planned there are returned with the reason instead of stopping the others."""
    config = head_view(trusted)
    # Read before any code of the pull request runs: what it could write must not decide.
    source = collect_source(config.root, os.environ, "pr")
    unmeasurable: dict[str, str] = {}
    names = []
    for workload in gated:
        entry = f"{workload.name}@{workload.preset}"
        try:
            prepare(config, Selection(workloads=[entry]))
        except UsageError as exc:
            unmeasurable[workload.name] = exc.problem
            continue
        names.append(entry)
    plan: list[PlannedWorkload] = []
    if names:
        plan, settings = prepare(config, Selection(workloads=names))
    else:  # nothing measurable: the base's settings, for the document
        everything = [f"{w.name}@{w.preset}" for w in gated]
        settings = prepare(trusted.config, Selection(workloads=everything))[1]
    with warm_launcher(plan, settings, device) as launcher:  # one fork server for them all
        environment = run_fingerprint(plan, settings, device)
        ceilings = lookup_ceilings(config.root, environment)
        started = utc_now()
        workloads = []
        for planned in plan:  # one at a time: a factory broken at head stops only its workload
            try:
                workloads += run_workloads(
                    [planned], settings, device, environment, observer, ceilings, launcher
                )
            except UsageError as exc:
                unmeasurable[planned.definition.name] = exc.problem
    head = RunResult(
        run_id=str(uuid.uuid4()),
        perfgate_version=__version__,
        started_at=started,
        finished_at=utc_now(),
        suite=None if request.workloads else (request.suite or trusted.config.suite),
        device=device,
        settings=settings,
        source=source,
        environment=environment,
        workloads=workloads,
    )
    return head, unmeasurable


def _advise(
    trusted: TrustedInputs, head: RunResult, device: str
) -> tuple[AdviceReport | None, str | None]:
    """The head's advice (the base's rules), or None and why: it never decides the verdict."""
    config = head_view(trusted)
    entries = [f"{w.name}@{w.preset}" for w in head.workloads if w.status == "ok"]
    if not entries:
        return None, None
    folders = [builtin_rules_folder(), *(trusted.config.root / f for f in config.rule_paths)]
    try:
        results = advise_workloads(
            config,
            Selection(workloads=entries, threads=head.settings.threads),
            folders,
            device=device,
            profile_steps=PROFILE_STEPS,
        )
    except PerfgateError as exc:
        return (
            None,
            f"advice could not be collected ({exc.one_line()}); the verdict does not use it",
        )
    return advice_report(results, device), None


def _write(
    request: GateRequest,
    judgement: Judgement,
    advice: AdviceReport | None,
    notes: list[str],
) -> GateOutcome:
    """Every output, once, atomically, after the last worker is gone."""
    out = request.out_dir
    verdict, policy = judgement.verdict, judgement.policy
    written: list[Path] = []
    if judgement.head.workloads:
        write_result(out / "head.json", judgement.head)
        written.append(out / "head.json")
    else:  # a result document records measurements; with none, the verdict says why
        notes = [*notes, "head.json is not written: no gated workload could be measured at head"]
    advice_path = None
    if advice is not None:
        advice_path = out / "advice.json"
        write_json_atomic(advice_path, ADVICE.dump(advice))
        written.append(advice_path)
    lines = advice_lines(advice)
    link = request.report_url or "perfgate-report.html (job artifact)"
    write_outputs(verdict, policy, out / "verdict.json", out / "comment.md", lines, link)
    write_html(
        out / "perfgate-report.html",
        verdict,
        policy,
        judgement.head,
        advice,
        request.branch,
        (judgement.database_url, judgement.database_root),
        advice_path,
    )
    written += [out / "verdict.json", out / "comment.md", out / "perfgate-report.html"]
    compare_code = int(verdict.exit_code(policy))
    write_text_atomic(out / "compare-exit-code", f"{compare_code}\n", option="--out")
    written.append(out / "compare-exit-code")
    gate_code = compare_code
    if compare_code == ExitCode.INCONCLUSIVE:
        gate_code = int(ExitCode.OK)  # neutral; policy "fail" already made it 1
    return GateOutcome(
        exit_code=gate_code,
        compare_exit_code=compare_code,
        judgement=judgement,
        written=written,
        digests=_digests(out, written),
        notes=[*notes, *verdict.notes],
    )


def _digests(out: Path, written: list[Path]) -> dict[str, str]:
    """SHA-256 of each output, also written to ``SHA256SUMS`` (``sha256sum -c`` reads it)."""
    digests = {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in written}
    text = "".join(f"{digest}  {name}\n" for name, digest in digests.items())
    write_text_atomic(out / "SHA256SUMS", text, option="--out")
    return digests
