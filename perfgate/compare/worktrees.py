"""Git worktrees for interleaved A/B runs: each ref checked out beside the working tree.

A worktree shares the repository's object store, so checking out a ref takes a second and
needs no network, and the user's own checkout (with its uncommitted changes) is never touched.
Worktrees are removed again however the run ends.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from perfgate.errors import InfrastructureError, UsageError
from perfgate.runner.source import GIT

GIT_TIMEOUT_S = 120


@dataclass(frozen=True)
class Checkout:
    """One ref, the commit it resolved to, and where it is checked out."""

    ref: str
    commit: str
    path: Path


def repository_root(start: Path) -> Path:
    """The top of the git repository holding ``start``."""
    top = _git(start, "rev-parse", "--show-toplevel", check=False)
    if top is None:
        raise UsageError(
            f"{start} is not inside a git repository",
            "run perfgate from inside the repository whose refs it compares",
        )
    return Path(top)


def resolve_commit(repo: Path, ref: str) -> str:
    """The full commit id ``ref`` names; a usage error naming the ref when it names none."""
    commit = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    if commit is None:
        raise UsageError(
            f"git ref {ref!r} names no commit in {repo}",
            "fetch it first (e.g. git fetch origin main) or give a branch, tag or commit id",
        )
    return commit


def first_parent_range(repo: Path, good: str, bad: str) -> list[str]:
    """``good``, then every commit after it on ``bad``'s first-parent line, ``bad`` last: the
    range a bisection searches (a merged branch counts as its merge commit)."""
    first, last = resolve_commit(repo, good), resolve_commit(repo, bad)
    if first == last:
        raise UsageError(f"{good} and {bad} are the same commit", "give GOOD before BAD")
    if _git(repo, "merge-base", "--is-ancestor", first, last, check=False) is None:
        raise UsageError(
            f"{good} is not an ancestor of {bad}", "give the older, good commit first: GOOD BAD"
        )
    listed = _git(repo, "rev-list", "--first-parent", "--reverse", f"{first}..{last}") or ""
    after = listed.split()
    if not after or _git(repo, "rev-parse", f"{after[0]}^1", check=False) != first:
        raise UsageError(
            f"{good} is not on {bad}'s first-parent history",
            "give a GOOD commit of the branch itself (e.g. a merge commit of main)",
        )
    return [first, *after]


def commit_subject(repo: Path, commit: str) -> str | None:
    """The first line of the commit's message (None when git cannot say)."""
    return _git(repo, "log", "-1", "--format=%s", commit, check=False)


@contextlib.contextmanager
def checked_out(repo: Path, refs: Sequence[str]) -> Iterator[list[Checkout]]:
    """Check each ref out into a temporary worktree (detached); remove them all afterwards."""
    commits = [resolve_commit(repo, ref) for ref in refs]
    scratch = Path(tempfile.mkdtemp(prefix="perfgate-worktrees-"))
    checkouts: list[Checkout] = []
    try:
        for index, (ref, commit) in enumerate(zip(refs, commits, strict=True)):
            path = scratch / f"{index}-{commit[:12]}"
            _git(repo, "worktree", "add", "--detach", "--quiet", str(path), commit)
            checkouts.append(Checkout(ref=ref, commit=commit, path=path))
        yield checkouts
    finally:
        for checkout in checkouts:
            _git(repo, "worktree", "remove", "--force", str(checkout.path), check=False)
        _git(repo, "worktree", "prune", check=False)
        shutil.rmtree(scratch, ignore_errors=True)


def _git(cwd: Path, *args: str, check: bool = True) -> str | None:
    """Run git; stdout on success. ``check`` turns a failure into an infrastructure error."""
    try:
        completed = subprocess.run(
            [*GIT, *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise UsageError("git is not installed", "install git to use compare --ab") from None
    except subprocess.TimeoutExpired:
        raise InfrastructureError(
            f"git {' '.join(args[:2])} did not finish within {GIT_TIMEOUT_S} s",
            "check the repository (locks, a network filesystem) and retry",
        ) from None
    if completed.returncode == 0:
        return completed.stdout.strip()
    if check:
        message = completed.stderr.strip().splitlines()
        raise InfrastructureError(
            f"git {' '.join(args[:2])} failed: {message[-1] if message else completed.returncode}",
            "check that the repository is healthy (git worktree list) and retry",
        )
    return None
