"""Which revision was measured: git in a real scratch repository, and GitHub Actions' variables."""

from __future__ import annotations

import subprocess
from pathlib import Path

from perfgate.runner.source import collect_source


def git(cwd: Path, *args: str) -> str:
    completed = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return completed.stdout.strip()


def scratch_repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "-b", "feature/x")
    (tmp_path / "train.py").write_text("print(1)\n")
    git(tmp_path, "add", "train.py")
    git(tmp_path, "commit", "-qm", "first")
    git(tmp_path, "remote", "add", "origin", "https://user:secret@example.com/team/model.git")
    return tmp_path


def test_local_git_checkout(tmp_path: Path) -> None:
    repo = scratch_repo(tmp_path)
    source = collect_source(repo, {})
    assert source.commit == git(repo, "rev-parse", "HEAD")
    assert source.branch == "feature/x"
    assert source.subject == "first"
    assert source.dirty is False
    assert source.repository == "https://example.com/team/model.git"  # credentials never kept
    assert (source.trigger, source.pr_number, source.ci) == ("manual", None, None)

    (repo / "train.py").write_text("print(2)\n")
    assert collect_source(repo, {}).dirty is True


def test_github_pull_request_job(tmp_path: Path) -> None:
    repo = scratch_repo(tmp_path)
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_REF": "refs/pull/42/merge",
        "GITHUB_REF_NAME": "42/merge",
        "GITHUB_HEAD_REF": "speed-up-attention",
        "GITHUB_SHA": "f" * 40,
        "GITHUB_REPOSITORY": "team/model",
    }
    source = collect_source(repo, env)
    assert source.branch == "speed-up-attention"
    assert source.pr_number == 42
    assert source.trigger == "pr"
    assert source.commit == "f" * 40
    assert source.repository == "team/model"
    assert source.ci == "github-actions"


def test_scheduled_job_is_nightly_and_flag_wins(tmp_path: Path) -> None:
    env = {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "schedule", "GITHUB_REF_NAME": "main"}
    assert collect_source(tmp_path, env).trigger == "nightly"
    assert collect_source(tmp_path, env).branch == "main"
    assert collect_source(tmp_path, env, trigger="manual").trigger == "manual"


def test_outside_git(tmp_path: Path) -> None:
    source = collect_source(tmp_path, {})
    assert (source.commit, source.branch, source.dirty) == (None, None, None)
