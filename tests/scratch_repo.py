"""Scratch git repositories for the tests that measure commits (A/B, bisect, attribution).

A fixture project (``tests/fixtures/ab_project`` by default: one user workload whose cost is
module constants and a wait) is copied, ``git init``-ed and committed; an edit of its
``costly.py`` becomes the next commit. One place, so every such test builds its history the
same way.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` as a fixed committer; its stdout, stripped."""
    completed = subprocess.run(
        ["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci", *args],
        cwd=repo, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return completed.stdout.strip()


def committed_project(repo: Path, fixture: str = "ab_project", message: str = "base") -> Path:
    """``fixture`` copied to ``repo`` and committed on ``main``; the repository."""
    shutil.copytree(FIXTURES / fixture, repo)
    git(repo, "init", "--quiet", "--initial-branch=main")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", message)
    return repo


def commit_edit(repo: Path, old: str, new: str, message: str, file: str = "costly.py") -> str:
    """Replace ``old`` by ``new`` in ``file`` (it must be there) and commit; the new commit."""
    source = repo / file
    text = source.read_text()
    assert old in text, f"{old!r} is not in {file}"
    source.write_text(text.replace(old, new))
    git(repo, "commit", "--quiet", "-am", message)
    return git(repo, "rev-parse", "HEAD")


VIRTUAL = {"PERFGATE_TEST_STEP_CLOCK": "virtual:between=0.02,within=0.01"}
"""The deterministic step clock (perfgate.runner.step_clock): each repeat's step is its sleeps,
with seeded noise, so every exit code is exact whatever else the machine is doing."""
