"""``perfgate bisect`` (issue 20, item 3): the search on simulated probes, and the command on a
scratch repository of eight commits where one adds a host sync per step.

The search is pure (``perfgate.bisect.search``): exact on probes that always decide, never
wrong and honest about it (``narrowed``) when the probes near the change cannot decide. The
command runs real interleaved A/B probes on git worktrees, timed on the deterministic step
clock (the culprit's cost is a wait standing for the device time a ``.item()`` blocks on), and
must name the culprit with its effect and the exact work it changed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from fixture_types import CliRun
from hypothesis import given
from hypothesis import strategies as st
from scratch_repo import VIRTUAL, commit_edit, committed_project, git

from perfgate.bisect.search import bisect_range
from perfgate.documents.bisect import BISECT, ProbeState
from perfgate.errors import ExitCode
from perfgate.report.bisect_text import bisect_lines


@dataclass(frozen=True)
class Simulated:
    state: ProbeState


def step_at(
    culprit: int, undecided: frozenset[tuple[int, int]] = frozenset()
) -> Callable[[int, int], Simulated]:
    """Probes of a range whose commits from ``culprit`` on are slower; ``undecided`` pairs
    come out inconclusive."""

    def probe(base: int, head: int) -> Simulated:
        if (base, head) in undecided:
            return Simulated("inconclusive")
        return Simulated("regressed" if base < culprit <= head else "unchanged")

    return probe


@given(st.integers(2, 300).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n - 1))))
def test_decided_probes_find_the_culprit_in_log2_probes(case: tuple[int, int]) -> None:
    count, culprit = case
    search = bisect_range(count, step_at(culprit))
    assert search.conclusion == "found"
    assert (search.last_good, search.first_bad) == (culprit - 1, culprit)
    assert len(search.probes) <= math.ceil(math.log2(count - 1)) + 2


@given(st.integers(3, 100))
def test_a_range_without_a_step_is_no_regression_after_one_probe(count: int) -> None:
    search = bisect_range(count, lambda base, head: Simulated("unchanged"))
    assert search.conclusion == "no_regression" and len(search.probes) == 1


def test_undecided_probes_narrow_the_range_and_never_guess() -> None:
    # 16 commits, the step at 11: 0-15 regressed, 0-7 unchanged, then neither half of 7-15
    # decides, so the search stops there rather than guess.
    search = bisect_range(16, step_at(11, frozenset({(7, 11), (11, 15)})))
    assert search.conclusion == "narrowed"
    assert [(base, head) for base, head, _ in search.probes] == [(0, 15), (0, 7), (7, 11), (11, 15)]
    assert (search.last_good, search.first_bad) == (7, 15)  # the range holds the culprit
    # Undecided only next to it: narrowed to the pair.
    near = bisect_range(16, step_at(11, frozenset({(10, 11)})))
    assert near.conclusion == "narrowed" and (near.last_good, near.first_bad) == (10, 11)


def test_an_adjacent_pair_that_does_not_regress_is_narrowed() -> None:
    search = bisect_range(2, lambda base, head: Simulated("inconclusive"))
    assert search.conclusion == "narrowed" and (search.last_good, search.first_bad) == (0, 1)
    assert bisect_range(2, lambda b, h: Simulated("unchanged")).conclusion == "no_regression"


CULPRIT = 5


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, list[str]]:
    """Eight commits of the A/B scratch project; commit 5 adds a host sync per step."""
    repo = committed_project(tmp_path / "repo", message="commit 0")
    (repo / "NOTES.md").write_text("notes\n")
    git(repo, "add", "NOTES.md")
    git(repo, "commit", "--quiet", "--amend", "--no-edit")
    commits = [git(repo, "rev-parse", "HEAD")]
    for index in range(1, 8):
        if index == CULPRIT:
            old = "        optimizer.step()\n"
            new = (
                "        optimizer.step()\n"
                "        time.sleep(BASE_WAIT_S / 2)  # the device time the sync waits for\n"
                "        loss.item()  # a host sync per step\n"
            )
            commits.append(commit_edit(repo, old, new, f"commit {index}"))
        else:  # no cost
            commits.append(
                commit_edit(repo, "notes", f"notes {index}", f"commit {index}", "NOTES.md")
            )
    return repo, commits


@pytest.mark.slow
def test_bisect_names_the_commit_that_added_a_host_sync(
    history: tuple[Path, list[str]], perfgate_cli: CliRun
) -> None:
    repo, commits = history
    out = repo / "bisect.json"
    completed = perfgate_cli(
        "bisect", commits[0], "HEAD", "--steps", "4", "--warmup", "1", "--device", "cpu",
        "--rounds", "10", "--ab-out", str(repo / "ab"), "--json", str(out),
        cwd=repo, env=VIRTUAL,
    )  # fmt: skip
    assert completed.returncode == ExitCode.OK, completed.stdout + completed.stderr
    report = BISECT.load(out, "bisect")
    assert report.conclusion == "found"
    assert report.first_bad == commits[CULPRIT] and report.last_good == commits[CULPRIT - 1]
    assert report.culprit_subject == f"commit {CULPRIT}"
    assert report.effect is not None and report.effect.state == "regressed"
    assert report.effect.ci_low is not None and report.effect.ci_low > 1.15
    changed = {c.counter: (c.base, c.head) for c in report.work_changes}
    assert changed["host_syncs"][1] == changed["host_syncs"][0] + 1
    assert changed["aten._local_scalar_dense"] == (0, 1)
    assert len(report.probes) <= 5  # GOOD..BAD, three halvings at most, the culprit's own
    lines = completed.stdout.splitlines()
    assert f"culprit: {commits[CULPRIT][:12]} commit {CULPRIT}" in lines
    assert bisect_lines(report)[1] == f"culprit: {commits[CULPRIT][:12]} commit {CULPRIT}"
    assert json.loads(out.read_text())["schema"] == "perfgate.bisect"


@pytest.mark.slow
def test_a_range_that_is_not_a_line_is_a_usage_error(
    history: tuple[Path, list[str]], perfgate_cli: CliRun
) -> None:
    repo, commits = history
    backwards = perfgate_cli("bisect", "HEAD", commits[0], cwd=repo, env=VIRTUAL)
    assert backwards.returncode == ExitCode.USAGE
    assert "is not an ancestor of" in backwards.stderr and "Traceback" not in backwards.stderr
    unknown = perfgate_cli("bisect", "no-such-ref", "HEAD", cwd=repo, env=VIRTUAL)
    assert unknown.returncode == ExitCode.USAGE and "names no commit" in unknown.stderr
