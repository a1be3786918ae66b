"""Which revision of the code under test was measured: from GitHub Actions' variables or git."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

from perfgate.documents.result import SourceInfo

GIT = ("git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")
"""git, with the settings that run programs turned off: the code under test runs as the same
user and could have written ``core.fsmonitor`` (run by ``git status``) into ``.git/config``."""

_TRIGGERS = {"pull_request": "pr", "pull_request_target": "pr", "schedule": "nightly"}


def collect_source(cwd: Path, env: Mapping[str, str], trigger: str | None = None) -> SourceInfo:
    """Commit, branch, dirtiness, repository, PR number and trigger of this run.

    In a pull-request job GitHub checks out a merge commit on a detached head, so the branch and
    PR number come from its variables (``GITHUB_HEAD_REF``, ``GITHUB_REF``), not from git.
    """
    on_actions = env.get("GITHUB_ACTIONS") == "true"
    pr_match = re.fullmatch(r"refs/pull/(\d+)/(merge|head)", env.get("GITHUB_REF", ""))
    branch = (
        env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME")
        if on_actions
        else _git(cwd, "rev-parse", "--abbrev-ref", "HEAD")
    )
    status = _git(cwd, "status", "--porcelain", "--untracked-files=no")
    return SourceInfo(
        commit=(env.get("GITHUB_SHA") if on_actions else None) or _git(cwd, "rev-parse", "HEAD"),
        branch=None if branch == "HEAD" else branch,
        dirty=None if status is None else bool(status),
        repository=env.get("GITHUB_REPOSITORY") or _origin(cwd),
        pr_number=int(pr_match.group(1)) if pr_match else None,
        trigger=trigger or _TRIGGERS.get(env.get("GITHUB_EVENT_NAME", ""), "manual"),  # type: ignore[arg-type]
        ci="github-actions" if on_actions else ("ci" if env.get("CI") else None),
        subject=_git(cwd, "log", "-1", "--format=%s"),
    )


def _origin(cwd: Path) -> str | None:
    url = _git(cwd, "config", "--get", "remote.origin.url")
    if not url:
        return None
    # Never record credentials embedded in a remote URL.
    return re.sub(r"//[^/@]+@", "//", url)


def _git(cwd: Path, *args: str) -> str | None:
    try:
        completed = subprocess.run(
            [*GIT, *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return completed.stdout.strip() if completed.returncode == 0 else None
