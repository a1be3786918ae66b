"""``perfgate rules``: list the advisor's rules and lint rule files.

The rules come from the built-in ``rules/`` folder plus the folders named by ``rule_paths`` in
the configuration (relative to the config file). ``lint`` prints one ``file:line:col: problem``
line per problem — the format editors and CI annotations read — and exits 2 when there is any.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from perfgate.advise.rules import (
    Applies,
    Formula,
    KnobSetting,
    Rule,
    configured_rule_folders,
    configured_rules,
    lint,
    rule_files,
)
from perfgate.cli.console import console, guarded
from perfgate.errors import ExitCode
from perfgate.report.terminal import PlainTable

rules_app = typer.Typer(
    no_args_is_help=True, help="The advisor's rule library: list the rules, lint rule files."
)
_CONFIG = typer.Option(None, "--config", help="perfgate.toml or pyproject.toml (for rule_paths)")


@rules_app.command("list")
def list_rules(
    device: str | None = typer.Option(None, help="only rules that can apply on cpu or cuda"),
    as_json: bool = typer.Option(False, "--json", help="print the rules as JSON"),
    config: Path | None = _CONFIG,
) -> None:
    """The rules: id, category, where they apply, confidence, the knobs that verify them."""
    rules = guarded(lambda: configured_rules(config, device))
    if as_json:
        typer.echo(json.dumps([rule_document(rule) for rule in rules], indent=2))
    else:
        console.print(rules_table(rules))


@rules_app.command("lint")
def lint_rules(
    folders: list[Path] | None = typer.Argument(
        None, help="folders of rule files (default: built-in rules/ and config rule_paths)"
    ),
    config: Path | None = _CONFIG,
) -> None:
    """Check rule files; print file:line:col: problem for each, exit 2 when there is any."""
    chosen = folders or guarded(lambda: configured_rule_folders(config))
    problems = lint(chosen)
    for problem in problems:
        typer.echo(str(problem))
    files = len(rule_files(chosen))
    if problems:
        typer.echo(f"{len(problems)} problem(s) in {files} rule file(s)", err=True)
        raise typer.Exit(int(ExitCode.USAGE))
    typer.echo(f"{files} rule file(s) in {len(chosen)} folder(s): no problems")


def rules_table(rules: list[Rule]) -> Table:
    """One row per rule, for the terminal."""
    table = PlainTable(title=f"{len(rules)} rules", title_justify="left")
    for header in ("id", "category", "applies", "confidence", "verify knobs"):
        table.add_column(header)
    for rule in rules:
        table.add_row(
            rule.id,
            rule.category,
            applies_text(rule.applies),
            rule.confidence,
            knobs_text(rule.verify_knobs),
        )
    return table


def rule_document(rule: Rule) -> dict[str, Any]:
    """A rule as JSON-ready data (expressions as their source text)."""
    applies = rule.applies
    return {
        "id": rule.id,
        "title": rule.title,
        "category": rule.category,
        "confidence": rule.confidence,
        "applies": {
            "devices": list(applies.devices),
            "min_compute_capability": applies.min_compute_capability,
            "max_compute_capability": applies.max_compute_capability,
            "workload_kinds": list(applies.workload_kinds),
        },
        "requires": list(rule.requires),
        "when": rule.when.source,
        "already_on": rule.already_on.source,
        "affected": rule.affected.source,
        "speedup": rule.speedup.source,
        "max_saving": rule.max_saving.source if rule.max_saving else None,
        "verify_knobs": {
            name: {"expr": value.source} if isinstance(value, Formula) else value
            for name, value in rule.verify_knobs.items()
        },
        "references": list(rule.references),
        "path": str(rule.path),
    }


def applies_text(applies: Applies) -> str:
    """``cuda, cc 8.0+``, ``any device``, …: where a rule applies, in a few words."""
    parts = ["/".join(applies.devices) or "any device"]
    low, high = applies.min_compute_capability, applies.max_compute_capability
    if low is not None and high is not None:
        parts.append(f"cc {low:.1f}–{high:.1f}")
    elif low is not None:
        parts.append(f"cc ≥ {low:.1f}")
    elif high is not None:
        parts.append(f"cc ≤ {high:.1f}")
    if applies.workload_kinds:
        parts.append(" or ".join(applies.workload_kinds))
    return ", ".join(parts)


def knobs_text(knobs: Mapping[str, KnobSetting]) -> str:
    """``precision=bf16 compile=true``; ``unverifiable`` when there are none."""
    if not knobs:
        return "unverifiable"
    shown = []
    for name, value in knobs.items():
        if isinstance(value, Formula):
            shown.append(f"{name}=({value.source})")
        else:
            shown.append(f"{name}={str(value).lower() if isinstance(value, bool) else value}")
    return " ".join(shown)
