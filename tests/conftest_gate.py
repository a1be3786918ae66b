"""The pull-request gate's scratch repository, shared by the gate's tests.

The scratch project (``tests/fixtures/gate_project``) has one user workload whose step calls
the team's ``model.py``: a tiny MLP plus a 20 ms transform (a sleep). Every worker times its
steps on the deterministic step clock (``PERFGATE_TEST_STEP_CLOCK``: the sleeps, with seeded
noise), so each exit code is exact however busy the machine is. Main gets baselines the way the
nightly job makes them: three stored runs, ``baseline refresh``, ``baseline export`` into
``baselines/``, committed. A test then opens a pull request branch off main and runs the gate
exactly as the workflow does (``scripts/pr-gate.sh``, which runs ``perfgate gate``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GATE = ROOT / "scripts" / "pr-gate.sh"
FIXTURE = ROOT / "tests" / "fixtures" / "gate_project"
VIRTUAL = "virtual:between=0.02,within=0.01"
SLOWER = {"model.py": ("TRANSFORM_S = 0.020", "TRANSFORM_S = 0.025")}
"""The pull request that makes the team's transform 25 % slower."""


def git(repo: Path, *args: str) -> str:
    completed = subprocess.run(
        ["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return completed.stdout.strip()


def environment(**extra: str) -> dict[str, str]:
    """The job's environment: the deterministic clock, no database, no job summary of CI's."""
    env = {**os.environ, "COLUMNS": "200", "PERFGATE_TEST_STEP_CLOCK": VIRTUAL}
    for name in ("PERFGATE_DATABASE_URL", "GITHUB_STEP_SUMMARY", "GITHUB_BASE_REF"):
        env.pop(name, None)
    return {**env, **extra}


def perfgate(repo: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """``python -m perfgate ARGS`` in ``repo``, which must succeed."""
    completed = subprocess.run(
        [sys.executable, "-m", "perfgate", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
        env=environment(**extra),
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    return completed


def new_repository(where: Path) -> Path:
    """A git repository holding a copy of the gate project on branch main."""
    repo = where / "repo"
    shutil.copytree(FIXTURE, repo)
    git(repo, "init", "--quiet", "--initial-branch=main")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "the team's project")
    return repo


@pytest.fixture(scope="session")
def nightly_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Main with its baselines committed, measured once a session (5 CLI processes, ~18 s).

    Never handed to a test: each gate module gets its own copy (``gate_repo``)."""
    repo = new_repository(tmp_path_factory.mktemp("nightly"))
    for _ in range(3):
        perfgate(repo, "run", "--device", "cpu", "--repeats", "3")
    perfgate(repo, "baseline", "refresh", "--branch", "main")
    exported = perfgate(repo, "baseline", "export", "--branch", "main")
    assert "wrote" in exported.stdout
    git(repo, "add", "baselines")
    git(repo, "commit", "--quiet", "-m", "baselines from the nightly refresh")
    return repo


@pytest.fixture(scope="module")
def gate_repo(nightly_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scratch repository with main's baselines committed, as the nightly job leaves it.

    A module's own copy of the session's measured repository (its git history and database
    included), so no module sees another's pull-request branches or stored runs."""
    repo = tmp_path_factory.mktemp("gate") / "repo"
    shutil.copytree(nightly_repo, repo, symlinks=True)
    return repo


Edits = Mapping[str, "tuple[str | None, str] | list[tuple[str, str]]"]
"""File → (old text, new text), several such pairs, or (None, content) for a new file."""


def open_pr(repo: Path, name: str, edits: Edits) -> None:
    """A branch off main with ``edits`` committed."""
    git(repo, "checkout", "--quiet", "--force", "main")
    git(repo, "clean", "-fdq", "--exclude=.perfgate")
    git(repo, "checkout", "--quiet", "-b", name)
    for relative, change in edits.items():
        path = repo / relative
        pairs = change if isinstance(change, list) else [change]
        for old, new in pairs:
            if old is None:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(new)
                continue
            text = path.read_text()
            assert old in text, (relative, old)
            path.write_text(text.replace(old, new))
    git(repo, "add", "-A", "-f", *edits)
    git(repo, "commit", "--quiet", "-m", name)


def run_gate(repo: Path, *, advise: bool = False, **extra: str) -> tuple[int, str, str, Path]:
    """The gate script as the workflow runs it; (exit code, comment, log, output folder)."""
    out = repo / "perfgate-out"
    completed = subprocess.run(
        ["bash", str(GATE)],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=900,
        env=environment(
            PERFGATE_CMD=f"{sys.executable} -m perfgate",
            PERFGATE_BASE_REF="main",
            PERFGATE_DEVICE="cpu",
            PERFGATE_ADVISE="1" if advise else "0",
            GITHUB_STEP_SUMMARY=str(repo / "summary.md"),
            **extra,
        ),
    )
    log = completed.stdout + completed.stderr
    print(log[-4000:])
    comment = (out / "comment.md").read_text() if (out / "comment.md").exists() else ""
    return completed.returncode, comment, log, out


def compare_code(out: Path) -> int:
    """The verdict's own exit code (4 for inconclusive), as the gate recorded it."""
    return int((out / "compare-exit-code").read_text())
