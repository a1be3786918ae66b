"""``perfgate compare``: thin command over ``perfgate.compare``.

Two ways in: a head result document judged against a baseline (database, ``baselines/``
snapshots or another document), optionally confirmed by an interleaved A/B re-run; or
``--ab BASE HEAD``, two git refs measured interleaved in this job.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer
from rich.table import Table

from perfgate.compare.gate import CompareVerdict, InconclusivePolicy
from perfgate.config import Config
from perfgate.errors import PerfgateError
from perfgate.result import RunResult
from perfgate.runner.plan import Selection
from perfgate.thresholds import Thresholds

if TYPE_CHECKING:
    from perfgate.calibration.model import Calibration
    from perfgate.report.compare_markdown import AdviceLine


def compare(
    head: Path | None = typer.Argument(
        None, help="the head result document (perfgate run --out); omit with --ab"
    ),
    baseline: Path | None = typer.Option(None, help="judge against this result document"),
    baseline_dir: Path | None = typer.Option(None, help="judge against baselines/ snapshots"),
    branch: str = typer.Option("main", help="branch whose baselines are used (snapshots, DB)"),
    ab: tuple[str, str] | None = typer.Option(
        None, "--ab", metavar="BASE_REF HEAD_REF", help="measure two git refs interleaved"
    ),
    confirm: bool = typer.Option(
        False, help="re-measure flagged workloads as an interleaved A/B against --base-ref"
    ),
    base_ref: str | None = typer.Option(
        None, help="git ref for --confirm (default: origin/$GITHUB_BASE_REF in a PR job)"
    ),
    rounds: int | None = typer.Option(
        None, help="most A/B rounds a workload gets; it stops when decided (config ab_rounds)"
    ),
    budget: float | None = typer.Option(
        None, help="seconds allowed for the A/B measuring (config confirm_budget_s)"
    ),
    ab_out: Path | None = typer.Option(None, help="folder for the A/B result documents"),
    suite: str | None = typer.Option(None, help="--ab: suite to measure"),
    workload: list[str] = typer.Option([], "--workload", "-w", help="--ab: workload (repeatable)"),
    preset: str | None = typer.Option(None, help="--ab: preset for every workload"),
    knob: list[str] = typer.Option([], "--knob", "-k", help="--ab: KEY=VALUE (repeatable)"),
    steps: int | None = typer.Option(None, help="--ab: measured steps per repeat"),
    warmup: int | None = typer.Option(None, help="--ab: warm-up steps per repeat"),
    device: str | None = typer.Option(None, help="--ab/--confirm: cpu, cuda or auto"),
    nproc_per_node: int | None = typer.Option(
        None, "--nproc-per-node", help="--ab: ranks per distributed workload (torchrun)"
    ),
    inject_slowdown: str | None = typer.Option(
        None, "--inject-slowdown", help="--ab canary: slow the head side by this much (e.g. 10%)"
    ),
    allow_env_drift: bool = typer.Option(False, help="compare across different environments"),
    inconclusive: str | None = typer.Option(
        None, help="exit4 (default), pass or fail (config: inconclusive)"
    ),
    json_out: Path | None = typer.Option(None, "--json", help="write the verdict document here"),
    markdown: Path | None = typer.Option(None, help="write the PR-comment markdown here"),
    advice: Path | None = typer.Option(
        None, help="add the top advice of this perfgate advise --json file to the outputs"
    ),
    html: Path | None = typer.Option(None, help="write the HTML report here"),
    report_url: str | None = typer.Option(
        None, help="where the HTML report will be published (the markdown links to it)"
    ),
    config: Path | None = typer.Option(None, "--config", help="perfgate.toml or pyproject.toml"),
) -> None:
    """Judge a head run against its baseline, or two refs A/B: table, documents, exit code."""
    from perfgate.cli_console import console, guarded, say
    from perfgate.report.compare_table import verdict_table

    notes: list[str] = []

    def action() -> tuple[Table, int, list[str]]:
        from perfgate.compare.ab import with_workload_notes
        from perfgate.config import load_config
        from perfgate.result import load_result

        settings = load_config(config)
        policy = _policy(inconclusive or settings.inconclusive)
        advice_lines = _advice_lines(advice)  # a bad file fails before anything is measured
        out_dir = ab_out or _default_ab_folder(settings.root)
        if ab is not None:
            if head is not None or baseline is not None or baseline_dir is not None or confirm:
                raise _usage(
                    "--ab measures both sides itself",
                    "drop the head document, --baseline, --baseline-dir and --confirm",
                )
            verdict, head_run = _compare_refs(
                settings,
                ab,
                Selection(
                    suite=suite,
                    workloads=workload,
                    preset=preset,
                    knobs=knob,
                    steps=steps,
                    warmup=warmup,
                    inject_slowdown=_slowdown(inject_slowdown),
                    nproc_per_node=nproc_per_node,
                ),
                device or settings.device,
                rounds,
                budget,
                out_dir,
            )
        else:
            if head is None:
                raise _usage("no head result document given", "pass HEAD.json, or use --ab")
            head_run = load_result(head)
            trusted_ref = base_ref or (_default_base_ref() if confirm else None)
            calibrate = _calibrator(settings, device or head_run.device, rounds, budget)
            governing = settings
            if trusted_ref is None:
                thresholds, calibrated = calibrate(settings, head_run)
                verdict = _judge(
                    head_run, baseline, baseline_dir, branch, allow_env_drift, settings,
                    thresholds, confirm,
                )  # fmt: skip
            else:
                verdict, policy, governing, thresholds, calibrated = _judge_trusted(
                    head_run, baseline, baseline_dir, branch, allow_env_drift, settings,
                    trusted_ref, inconclusive, confirm, calibrate,
                )  # fmt: skip
            if confirm:
                assert trusted_ref is not None
                verdict = _confirm(
                    verdict,
                    head_run,
                    settings,
                    governing,
                    thresholds,
                    trusted_ref,
                    device or settings.device,
                    rounds,
                    budget,
                    out_dir,
                )
            verdict = with_workload_notes(verdict, calibrated)
        verdict = _explained(verdict, head_run, settings)
        notes.extend(verdict.notes)
        written = _write_outputs(
            verdict, policy, json_out, markdown, advice_lines, report_url or _local(html)
        )
        if html is not None:
            written.append(_write_html(html, verdict, policy, head_run, advice, branch, settings))
        return verdict_table(verdict), int(verdict.exit_code(policy)), written

    def action_or_error_comment() -> tuple[Table, int, list[str]]:
        try:
            return action()
        except PerfgateError as error:
            _write_error_comment(error, markdown)
            raise

    table, code, written = guarded(action_or_error_comment)
    console.print(table)
    for note in notes:
        say(note)
    for line in written:
        say(line)
    raise typer.Exit(code)


def _compare_refs(
    config: Config,
    refs: tuple[str, str],
    selection: Selection,
    device: str,
    rounds: int | None,
    budget_s: float | None,
    out_dir: Path,
) -> tuple[CompareVerdict, RunResult]:
    from perfgate.calibration.thresholds import calibrated_thresholds
    from perfgate.cli_console import console
    from perfgate.cli_progress import RoundProgress
    from perfgate.compare.ab import compare_refs
    from perfgate.compare.sequential import ab_budget
    from perfgate.run import resolve_device

    device = resolve_device(device)
    budget = ab_budget(config, device, rounds=rounds, budget_s=budget_s)

    def thresholds_for(
        thresholds: Thresholds,
        workloads: Sequence[tuple[str, str]],
        environment: Mapping[str, Any],
    ) -> tuple[Thresholds, dict[str, str]]:
        found = _stored_calibrations(config, workloads, environment)
        return calibrated_thresholds(thresholds, found, budget.max_rounds)

    with RoundProgress(console) as progress:
        outcome = compare_refs(
            config,
            selection,
            refs[0],
            refs[1],
            device=device,
            budget=budget,
            out_dir=out_dir,
            observer=progress,
            thresholds_for=thresholds_for,
        )
    return outcome.verdict, outcome.head


def _confirm(
    verdict: CompareVerdict,
    head: RunResult,
    config: Config,
    governing: Config,
    thresholds: Thresholds,
    base_ref: str,
    device: str,
    rounds: int | None,
    budget_s: float | None,
    out_dir: Path,
) -> CompareVerdict:
    """The A/B re-run of flagged workloads; its budget comes from ``governing``, the base
    ref's configuration, which the pull request under test cannot have edited."""
    from perfgate.cli_console import console
    from perfgate.cli_progress import RoundProgress
    from perfgate.compare.ab import confirm_alerts
    from perfgate.compare.sequential import ab_budget
    from perfgate.run import resolve_device

    device = resolve_device(device)
    budget = ab_budget(governing, device, rounds=rounds, budget_s=budget_s)
    with RoundProgress(console) as progress:
        return confirm_alerts(
            verdict,
            head,
            config,
            base_ref,
            thresholds=thresholds,
            device=device,
            budget=budget,
            out_dir=out_dir,
            observer=progress,
        )


def _write_outputs(
    verdict: CompareVerdict,
    policy: InconclusivePolicy,
    json_out: Path | None,
    markdown_out: Path | None,
    advice: list[AdviceLine],
    report_link: str | None,
) -> list[str]:
    """The verdict document, the markdown file, and the GitHub job summary when set."""
    from perfgate.compare.document import verdict_document
    from perfgate.report.compare_markdown import (
        append_step_summary,
        verdict_markdown,
        write_markdown,
    )
    from perfgate.result import write_json_atomic

    written = []
    if json_out is not None:
        write_json_atomic(json_out, verdict_document(verdict, policy))
        written.append(f"verdict: {json_out}")
    text = verdict_markdown(
        verdict, inconclusive_policy=policy, advice=advice, report_link=report_link
    )
    if markdown_out is not None:
        write_markdown(markdown_out, text)
        written.append(f"markdown: {markdown_out}")
    summary = append_step_summary(text)
    if summary is not None:
        written.append(f"job summary: appended to {summary}")
    return written


def _write_error_comment(error: PerfgateError, markdown_out: Path | None) -> None:
    """When nothing could be judged, the comment and job summary say so (an error is never
    left looking like the last run's verdict, nor like a regression)."""
    from perfgate.report.compare_markdown import (
        append_step_summary,
        error_markdown,
        write_markdown,
    )

    text = error_markdown(error)
    if markdown_out is not None:
        write_markdown(markdown_out, text)
    append_step_summary(text)


def _advice_lines(path: Path | None) -> list[AdviceLine]:
    """The top advice of a ``perfgate advise --json`` file; a bad file is a usage error."""
    if path is None:
        return []
    from perfgate.advise.session import ADVICE_SCHEMA
    from perfgate.errors import UsageError
    from perfgate.report.compare_markdown import top_advice
    from perfgate.report.documents import read_document

    fix = "pass a file written by perfgate advise --json"
    document = read_document(path, ADVICE_SCHEMA, "perfgate advise --json")
    try:
        return top_advice(document)
    except UsageError as exc:
        raise _usage(f"--advice file {path}: {exc.problem}", fix) from None


def _write_html(
    out: Path,
    verdict: CompareVerdict,
    policy: InconclusivePolicy,
    head: RunResult,
    advice: Path | None,
    branch: str,
    settings: Config,
) -> str:
    """The HTML report of this comparison, with the baseline branch's stored history."""
    from perfgate.compare.document import verdict_document
    from perfgate.report.html_report import stored_histories, write_report
    from perfgate.run import utc_now

    histories, note = stored_histories(settings.database_url, settings.root, [head], branch, 100)
    write_report(
        out,
        [head],
        verdict=verdict_document(verdict, policy),
        advice_paths=[advice] if advice is not None else [],
        histories=histories,
        history_note=note,
        generated_at=utc_now(),
        inputs=[f"run {head.run_id}"],
    )
    return f"report: {out.resolve()}"


def _local(html: Path | None) -> str | None:
    """The pointer a comment shows when the report is a file (a CI artifact), not a URL."""
    return f"{html.name} (job artifact)" if html is not None else None


def _policy(text: str) -> InconclusivePolicy:
    if text not in ("exit4", "pass", "fail"):
        raise _usage(f"--inconclusive {text!r} is not allowed", "use exit4, pass or fail")
    return cast(InconclusivePolicy, text)


def _slowdown(text: str | None) -> float | None:
    from perfgate.runner.plan import parse_slowdown

    return None if text is None else parse_slowdown(text)


def _default_base_ref() -> str:
    base = os.environ.get("GITHUB_BASE_REF")
    if not base:
        raise _usage(
            "--confirm needs the base revision to measure against",
            "pass --base-ref (e.g. origin/main)",
        )
    return f"origin/{base}"


def _default_ab_folder(root: Path) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return root / ".perfgate" / "ab" / stamp


def _usage(problem: str, fix: str) -> Exception:
    from perfgate.errors import UsageError

    return UsageError(problem, fix)


def _judge_trusted(
    head: RunResult,
    baseline_path: Path | None,
    baseline_dir: Path | None,
    branch: str,
    allow_env_drift: bool,
    settings: Config,
    base_ref: str,
    inconclusive: str | None,
    confirm: bool,
    calibrate: Calibrator,
) -> tuple[CompareVerdict, InconclusivePolicy, Config, Thresholds, dict[str, str]]:
    """The verdict with the base ref's thresholds, policy and ``baselines/``: what the pull
    request under test cannot have edited (``perfgate.compare.trusted``); also the base ref's
    configuration, which governs the A/B that confirms it, and its (calibrated) thresholds."""

    from perfgate.compare.trusted import trusted_inputs

    with trusted_inputs(settings, base_ref, baseline_dir) as trusted:
        thresholds, calibrated = calibrate(trusted.config, head)
        verdict = _judge(
            head,
            baseline_path,
            trusted.baseline_dir,
            branch,
            allow_env_drift,
            trusted.config,
            thresholds,
            confirm,
        )
        policy = _policy(inconclusive or trusted.config.inconclusive)
    verdict = replace(verdict, notes=[*verdict.notes, trusted.note])
    return verdict, policy, trusted.config, thresholds, calibrated


def _judge(
    head: RunResult,
    baseline_path: Path | None,
    baseline_dir: Path | None,
    branch: str,
    allow_env_drift: bool,
    settings: Config,
    thresholds: Thresholds,
    confirm: bool,
) -> CompareVerdict:
    """The head against its baseline; with ``confirm`` a missing baseline is left for the
    interleaved A/B to judge instead of failing."""
    from perfgate.compare.baseline_source import from_database, from_result, from_snapshots
    from perfgate.compare.gate import compare_runs
    from perfgate.result import load_result

    if baseline_path is not None and baseline_dir is not None:
        raise _usage("--baseline and --baseline-dir exclude each other", "give one of them")
    if baseline_path is not None:
        baselines = from_result(load_result(baseline_path), str(baseline_path))
    elif baseline_dir is not None:
        baselines = from_snapshots(baseline_dir, head, branch)
    else:
        baselines = from_database(settings.database_url, settings.root, head, branch)
    return compare_runs(
        head,
        baselines,
        allow_env_drift=allow_env_drift,
        thresholds=thresholds,
        require_baseline=not confirm,
    )


Calibrator = Callable[[Config, RunResult], "tuple[Thresholds, dict[str, str]]"]
"""(governing configuration, head run) → its thresholds with calibrated bands, and notes."""


def _calibrator(
    settings: Config, device: str, rounds: int | None, budget_s: float | None
) -> Calibrator:
    """How thresholds are calibrated for this comparison: the stored calibrations of the head's
    workloads on its environment, at the A/B round budget the governing configuration allows."""

    def calibrate(governing: Config, head: RunResult) -> tuple[Thresholds, dict[str, str]]:
        from perfgate.calibration.thresholds import calibrated_thresholds
        from perfgate.compare.sequential import ab_budget

        found = _stored_calibrations(
            settings, [(w.name, w.definition_hash) for w in head.workloads], head.environment
        )
        budget = ab_budget(governing, device, rounds=rounds, budget_s=budget_s)
        return calibrated_thresholds(governing.thresholds, found, budget.max_rounds)

    return calibrate


def _stored_calibrations(
    settings: Config, workloads: Sequence[tuple[str, str]], environment: Mapping[str, Any]
) -> dict[str, Calibration]:
    """The newest calibration of each workload on this environment, best effort: no database
    (a file not created yet, a GPU box without the database libraries, an unreachable server)
    means none."""
    try:
        from perfgate.calibration.store import calibrations_for
        from perfgate.store.engine import StoreUnavailable, database_exists
    except ImportError:  # `perfgate run --no-store` machines may lack sqlmodel/sqlalchemy
        return {}
    try:
        if not database_exists(settings.database_url, settings.root):
            return {}
        return calibrations_for(settings.database_url, settings.root, workloads, environment)
    except StoreUnavailable:
        return {}


def _explained(verdict: CompareVerdict, head: RunResult, settings: Config) -> CompareVerdict:
    """Inconclusive timing verdicts explained by this machine's stored calibration, if any."""
    if not any(c.verdict == "inconclusive" for w in verdict.workloads for c in w.comparisons):
        return verdict
    from perfgate.calibration.explain import annotate_inconclusive

    found = _stored_calibrations(
        settings, [(w.name, w.definition_hash) for w in head.workloads], head.environment
    )
    return annotate_inconclusive(verdict, found)
