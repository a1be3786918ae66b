"""``perfgate compare``: thin command over ``perfgate.compare``.

Two ways in: a head result document judged against a baseline (database, ``baselines/``
snapshots or another document), optionally confirmed by an interleaved A/B re-run; or
``--ab BASE HEAD``, two git refs measured interleaved in this job.
"""

from __future__ import annotations

from pathlib import Path

import typer

from perfgate.cli.console import console, guarded, say
from perfgate.cli.options import ConfigFile, build_selection


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
    from perfgate.cli.progress import RoundProgress  # lazy: rich's progress display, for an A/B
    from perfgate.compare.session import (  # lazy: the judging stack loads only to compare
        BaselineChoice,
        CompareRequest,
        compare_session,
    )
    from perfgate.report.compare_table import VerdictView  # lazy: the verdict's renderer

    request = CompareRequest(
        config=config,
        head=head,
        refs=ab,
        baseline=BaselineChoice(
            document=baseline,
            directory=baseline_dir,
            branch=branch,
            allow_env_drift=allow_env_drift,
        ),
        confirm=confirm,
        base_ref=base_ref,
        selection=build_selection(
            suite=suite,
            workloads=workload,
            preset=preset,
            knobs=knob,
            steps=steps,
            warmup=warmup,
            nproc_per_node=nproc_per_node,
        ),
        inject_slowdown=inject_slowdown,
        device=device,
        rounds=rounds,
        budget_s=budget,
        ab_out=ab_out,
        inconclusive=inconclusive,
        json_out=json_out,
        markdown=markdown,
        advice=advice,
        html=html,
        report_url=report_url,
    )
    outcome = guarded(lambda: compare_session(request, lambda: RoundProgress(console)))
    console.print(VerdictView(outcome.judgement.verdict))
    for note in outcome.judgement.verdict.notes:
        say(note)
    for line in outcome.written:
        say(line)
    raise typer.Exit(outcome.exit_code)
