"""``perfgate bisect`` (issue 20, item 3): the search on simulated probes, and the command on a
scratch repository of eight commits where one adds a host sync per step.

The search is pure (``perfgate.bisect.search``): exact on probes that always decide, never
wrong and honest about it (``narrowed``) when the probes near the change cannot decide. The
command runs real interleaved A/B probes on git worktrees, timed on the deterministic step
clock (the culprit's cost is a wait standing for the device time a ``.item()`` blocks on), and
must name the culprit with its effect and the exact work it changed.
"""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
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
from perfgate.documents.refresh import REFRESH
from perfgate.documents.result import load_result, write_result
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
        "--markdown", str(repo / "bisect.md"), cwd=repo, env=VIRTUAL,
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
    markdown = (repo / "bisect.md").read_text()
    assert f"**Culprit: `{commits[CULPRIT][:12]}`** commit {CULPRIT}" in markdown


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


@pytest.fixture
def library_history(tmp_path: Path) -> tuple[Path, list[str]]:
    """Eight commits of the A/B scratch project whose step calls into a module of the user's
    own library (``hooks.py``); commit 5 makes that call a host sync.

    The workload's own file never changes, so every commit's runs share one baseline key (a
    change to the workload's file is a new definition, and starts a new history)."""
    repo = committed_project(tmp_path / "repo", message="commit 0")
    (repo / "hooks.py").write_text(
        '"""The library code the training step calls after the optimizer."""\n\n'
        "import time\n\n\ndef after_step(loss):\n    return None\n"
    )
    (repo / "NOTES.md").write_text("notes\n")
    source = repo / "costly.py"
    text = source.read_text().replace("import torch\n", "import hooks\nimport torch\n", 1)
    source.write_text(
        text.replace(
            "        optimizer.step()\n",
            "        optimizer.step()\n        hooks.after_step(loss)\n",
        )
    )
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "--amend", "--no-edit")
    commits = [git(repo, "rev-parse", "HEAD")]
    for index in range(1, 8):
        if index == CULPRIT:
            commits.append(
                commit_edit(
                    repo,
                    "    return None\n",
                    "    time.sleep(0.004)  # the device time the sync waits for\n"
                    "    loss.item()  # a host sync per step\n",
                    f"commit {index}",
                    "hooks.py",
                )
            )
        else:
            commits.append(
                commit_edit(repo, "notes", f"notes {index}", f"commit {index}", "NOTES.md")
            )
    return repo, commits


@pytest.mark.slow
def test_the_nightly_bisects_the_step_its_refresh_found(
    library_history: tuple[Path, list[str]], perfgate_cli: CliRun
) -> None:
    """Eight nights stored at commit 0 and eight at commit 7 (tonight's): ``baseline refresh``
    finds the step and writes it down with its commits, ``bisect-steps`` searches 0..7 and
    names commit 5, and the night's summary says so. (Eight a side: the refresh's rank test
    cannot reach p < 0.001 with fewer than seven runs on each side of a step.)"""
    repo, commits = library_history
    quick = ["--steps", "4", "--warmup", "1", "--repeats", "3", "--device", "cpu", "--no-store"]
    measured = {}
    for night, commit in (("before", commits[0]), ("after", commits[-1])):
        git(repo, "checkout", "--quiet", "-B", "main", commit)
        out = repo / f"{night}.json"
        done = perfgate_cli("run", *quick, "--out", str(out), cwd=repo, env=VIRTUAL)
        assert done.returncode == ExitCode.OK, done.stdout + done.stderr
        measured[night] = load_result(out)
    nights = []
    for index in range(16):  # the history: the same measurements under sixteen nights' names
        stored = dataclasses.replace(
            measured["before" if index < 8 else "after"],
            run_id=str(uuid.UUID(int=index + 1)),
            started_at=f"2026-11-{index + 10}T03:17:00+00:00",
            finished_at=f"2026-11-{index + 10}T03:47:00+00:00",
        )
        nights.append(repo / f"night-{index}.json")
        write_result(nights[-1], stored)
    ingested = perfgate_cli("ingest", *map(str, nights), cwd=repo)
    assert ingested.returncode == ExitCode.OK, ingested.stderr
    refreshed = perfgate_cli(
        "baseline", "refresh", "--branch", "main", "--json", str(repo / "refresh.json"), cwd=repo
    )
    assert refreshed.returncode == ExitCode.OK, refreshed.stdout + refreshed.stderr
    ((_, step),) = REFRESH.load(repo / "refresh.json").new_slowdowns()
    assert (step.commit_before, step.commit_after) == (commits[0], commits[-1])
    summary = repo / "bisect.md"
    completed = perfgate_cli(
        "bisect-steps", str(repo / "refresh.json"), "--out-dir", str(repo / "bisect"),
        "--summary", str(summary), "--steps", "4", "--warmup", "1", "--device", "cpu",
        "--rounds", "10", cwd=repo, env=VIRTUAL,
    )  # fmt: skip
    assert completed.returncode == ExitCode.OK, completed.stdout + completed.stderr
    (document,) = (repo / "bisect").glob("*.json")
    report = BISECT.load(document)
    assert report.conclusion == "found" and report.first_bad == commits[CULPRIT]
    text = summary.read_text()
    assert text.startswith("## perfgate nightly: training got slower on main")
    assert f"**Culprit: `{commits[CULPRIT][:12]}`** commit {CULPRIT}" in text
    assert "| host syncs |" in text
