"""``perfgate compare``: thin command over ``perfgate.compare``.

Two ways in: a head result document judged against a baseline (database, ``baselines/``
snapshots or another document), optionally confirmed by an interleaved A/B re-run; or
``--ab BASE HEAD``, two git refs measured interleaved in this job.
"""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import typer
from rich.table import Table

from perfgate.cli.options import ConfigFile, build_selection
from perfgate.errors import PerfgateError


def compare_command(
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
    suite: str | None = typer.Option(
        None,
        help="--ab: suite to measure; --base-ref: the base's suite whose every workload is "
        "judged (default: the base's configured suite)",
    ),
    workload: list[str] = typer.Option(
        [],
        "--workload",
        "-w",
        help="--ab: workload to measure; --base-ref: judge only these (repeatable)",
    ),
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
    config: ConfigFile = None,
) -> None:
    """Judge a head run against its baseline, or two refs A/B: table, documents, exit code."""
    from perfgate.cli.console import console, guarded, say
    from perfgate.cli.progress import RoundProgress
    from perfgate.compare import outputs, session
    from perfgate.config import load_config
    from perfgate.report.compare_table import verdict_table
    from perfgate.result import load_result

    notes: list[str] = []

    def action() -> tuple[Table, int, list[str]]:
        settings = load_config(config)
        if inconclusive is not None:
            session.policy_from(inconclusive)
        advice_lines = outputs.advice_lines(advice)  # a bad file fails before anything runs
        choice = session.BaselineChoice(
            document=baseline,
            directory=baseline_dir,
            branch=branch,
            allow_env_drift=allow_env_drift,
        )
        with RoundProgress(console) as progress:
            limits = session.ABLimits(
                device=device or settings.device,
                rounds=rounds,
                budget_s=budget,
                out_dir=ab_out or _default_ab_folder(settings.root),
                observer=progress,
            )
            if ab is not None:
                if head is not None or baseline is not None or baseline_dir is not None or confirm:
                    raise _usage(
                        "--ab measures both sides itself",
                        "drop the head document, --baseline, --baseline-dir and --confirm",
                    )
                selection = build_selection(
                    suite=suite,
                    workloads=workload,
                    preset=preset,
                    knobs=knob,
                    steps=steps,
                    warmup=warmup,
                    inject_slowdown=inject_slowdown,
                    nproc_per_node=nproc_per_node,
                )
                judgement = session.judge_refs(
                    settings, ab, selection, inconclusive=inconclusive, limits=limits
                )
            else:
                if head is None:
                    raise _usage("no head result document given", "pass HEAD.json, or use --ab")
                head_run = load_result(head)
                trusted_ref = base_ref or (_default_base_ref() if confirm else None)
                if trusted_ref is None:
                    judgement = session.judge_stored(
                        head_run, settings, choice, inconclusive=inconclusive, limits=limits
                    )
                else:
                    limits = replace(limits, device=device or head_run.device)
                    judgement = session.judge_against_base(
                        head_run,
                        settings,
                        choice,
                        trusted_ref,
                        confirm=confirm,
                        suite=suite,
                        workloads=workload,
                        inconclusive=inconclusive,
                        limits=limits,
                    )
        judgement = session.explained(judgement)
        verdict, policy = judgement.verdict, judgement.policy
        notes.extend(verdict.notes)
        written = outputs.write_outputs(
            verdict,
            policy,
            json_out,
            markdown,
            advice_lines,
            report_url or outputs.local_link(html),
        )
        if html is not None:
            database = (judgement.database_url, judgement.database_root)
            written.append(
                outputs.write_html(html, verdict, policy, judgement.head, advice, branch, database)
            )
        return verdict_table(verdict), int(verdict.exit_code(policy)), written

    def action_or_error_comment() -> tuple[Table, int, list[str]]:
        try:
            return action()
        except PerfgateError as error:
            outputs.write_error_comment(error, markdown)
            raise

    table, code, written = guarded(action_or_error_comment)
    console.print(table)
    for note in notes:
        say(note)
    for line in written:
        say(line)
    raise typer.Exit(code)


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
