"""``perfgate gate``: thin command over ``perfgate.gate.session`` (the pull-request gate)."""

from __future__ import annotations

from pathlib import Path

import typer

from perfgate.cli.console import console, errors, guarded, say
from perfgate.errors import ExitCode


def gate_command(
    base_ref: str | None = typer.Option(
        None, help="the trusted base ref (default: origin/$GITHUB_BASE_REF in a PR job)"
    ),
    suite: str | None = typer.Option(
        None, help="the base's suite to gate (default: the base's configured suite)"
    ),
    workload: list[str] = typer.Option(
        [], "--workload", "-w", help="gate only these base workloads (repeatable)"
    ),
    baseline_dir: Path | None = typer.Option(
        None, help="snapshot folder, read at the base ref (default: baselines/ if the base has one)"
    ),
    branch: str = typer.Option("main", help="branch whose baselines are used"),
    device: str | None = typer.Option(None, help="cpu, cuda or auto (default: the base's config)"),
    advise: bool = typer.Option(True, help="profile the head and attach ranked advice"),
    out: Path = typer.Option(Path("perfgate-out"), "--out", "-o", help="output folder"),
    report_url: str | None = typer.Option(
        None, help="where the HTML report will be published (the comment links to it)"
    ),
    rounds: int | None = typer.Option(
        None, help="most A/B rounds a workload gets (default: the base's ab_rounds)"
    ),
    budget: float | None = typer.Option(
        None, help="seconds allowed for the A/B (default: the base's confirm_budget_s)"
    ),
    inconclusive: str | None = typer.Option(
        None, help="exit4, pass or fail (default: the base's inconclusive)"
    ),
    config: Path | None = typer.Option(
        None, "--config", help="perfgate.toml or pyproject.toml, read at the base ref"
    ),
) -> None:
    """The pull-request gate in one process: measure the head with the base's suite, advise,
    judge against the base's baselines (confirming by interleaved A/B), write the verdict, the
    comment, the report and their digests. Inconclusive is neutral (exit 0) unless the base's
    configuration says inconclusive = "fail"."""
    from perfgate.cli.progress import (  # lazy: rich's progress display, to measure
        RoundProgress,
        RunProgress,
    )
    from perfgate.gate.session import (  # lazy: the measuring and judging stacks, to gate
        GateObservers,
        GateOutcome,
        GateRequest,
        default_base_ref,
        run_gate,
    )
    from perfgate.report.compare_table import VerdictView  # lazy: the verdict's renderer

    def action() -> GateOutcome:
        request = GateRequest(
            base_ref=base_ref or default_base_ref(),
            out_dir=out,
            suite=suite,
            workloads=workload,
            config=config,
            baseline_dir=baseline_dir,
            branch=branch,
            device=device,
            advise=advise,
            report_url=report_url,
            rounds=rounds,
            budget_s=budget,
            inconclusive=inconclusive,
        )
        with RunProgress(console) as runs, RoundProgress(console) as rounds_seen:
            return run_gate(request, GateObservers(run=runs, rounds=rounds_seen))

    outcome = guarded(action)
    if outcome.judgement is not None:
        console.print(VerdictView(outcome.judgement.verdict))
    for note in outcome.notes:
        say(note)
    for path in outcome.written:
        say(f"{path}  sha256 {outcome.digests.get(path.name, '?')}")
    if outcome.error is not None:
        say(f"error: {outcome.error.one_line()}", to=errors)
    elif outcome.compare_exit_code == ExitCode.INCONCLUSIVE:
        say("perfgate: inconclusive (neutral): the comment says what would decide")
    raise typer.Exit(outcome.exit_code)
