"""The nightly job (``scripts/nightly.sh``): shards merged, stored, baselines refreshed, the
canary caught, snapshots exported; and a canary that is not caught fails the job loudly.

That a refresh moves a baseline after a real step and never after a single spike is proven on
synthetic histories in ``tests/test_baseline.py`` (SQLite and PostgreSQL); here the whole job
runs for real on the scratch project of ``tests/test_pr_gate.py``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from perfgate.documents.result import load_result, write_result
from perfgate.merge import merge_shards

ROOT = Path(__file__).resolve().parent.parent
NIGHTLY = ROOT / "scripts" / "nightly.sh"
FIXTURE = ROOT / "tests" / "fixtures" / "gate_project"


VIRTUAL = {"PERFGATE_TEST_STEP_CLOCK": "virtual:between=0.02,within=0.01"}
"""The deterministic step clock: the canary's verdict below is exact on a busy machine."""


def environment(**extra: str) -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "200"}
    for name in ("PERFGATE_DATABASE_URL", "GITHUB_STEP_SUMMARY"):
        env.pop(name, None)
    return {**env, **extra}


def test_a_canary_the_gate_misses_fails_the_job_before_anything_is_exported(
    tmp_path: Path,
) -> None:
    log = tmp_path / "calls.log"
    fake = tmp_path / "perfgate"
    # A perfgate whose compare says "pass" to everything: the nightly must not believe it.
    fake.write_text(f'#!/usr/bin/env bash\necho "$*" >> {log}\nexit 0\n')
    fake.chmod(0o755)
    completed = subprocess.run(
        ["bash", str(NIGHTLY), "shard-1.json", "shard-2.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=environment(PERFGATE_CMD=str(fake), PERFGATE_CANARY="25%"),
    )
    assert completed.returncode == 1
    assert "the canary (head slowed by 25%) was NOT caught" in completed.stderr
    assert "exited 0, not 1" in completed.stderr
    calls = [line.split()[0:2] for line in log.read_text().splitlines()]
    assert calls == [["merge", "shard-1.json"], ["ingest", "perfgate-nightly/nightly.json"],
                     ["baseline", "refresh"], ["compare", "--ab"]]  # fmt: skip


@pytest.mark.slow
def test_the_nightly_job_on_real_shards(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE, repo)
    git = ["git", "-c", "user.name=ci", "-c", "user.email=ci@example.com"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "x"]):
        subprocess.run([*git, *args], cwd=repo, check=True)
    perfgate = [sys.executable, "-m", "perfgate"]
    quick = ["--suite", "nightly", "--device", "cpu", "--repeats", "3", "--steps", "4"]

    def run(*args: str) -> None:
        done = subprocess.run(
            [*perfgate, *args], cwd=repo, capture_output=True, text=True,
            env=environment(**VIRTUAL),
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    for shard in (1, 2):  # tonight, in two shards (one workload each)
        run("run", *quick, "--shard", f"{shard}/2", "--no-store", "--out", f"shard-{shard}.json")
    # Two earlier nights, already stored: tonight's numbers under earlier run ids and dates
    # (the refresh needs three runs of history; measuring them again would only cost minutes).
    tonight = merge_shards([load_result(repo / f"shard-{i}.json") for i in (1, 2)])
    for night in (1, 2):
        earlier = dataclasses.replace(
            tonight,
            run_id=str(uuid.UUID(int=night)),
            started_at=f"2026-11-2{night}T03:17:00+00:00",
            finished_at=f"2026-11-2{night}T03:47:00+00:00",
        )
        write_result(repo / f"night-{night}.json", earlier)
        run("ingest", f"night-{night}.json")
    completed = subprocess.run(
        ["bash", str(NIGHTLY), "shard-1.json", "shard-2.json"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=900,
        env=environment(
            PERFGATE_CMD=" ".join(perfgate),
            PERFGATE_CANARY="25%",
            PERFGATE_CANARY_SUITE="pr",
            PERFGATE_DEVICE="cpu",
            **VIRTUAL,
        ),
    )
    print(completed.stdout[-4000:], completed.stderr[-2000:])
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    assert "the canary (25% slower) was caught" in completed.stdout
    merged = json.loads((repo / "perfgate-nightly" / "nightly.json").read_text())
    assert sorted(w["name"] for w in merged["workloads"]) == ["mlp", "sleepy"]
    canary = json.loads((repo / "perfgate-nightly" / "canary.json").read_text())
    assert canary["overall"] == "regression" and canary["method"] == "interleaved"
    (step,) = [c for c in canary["workloads"][0]["comparisons"] if c["metric"] == "step_time_s"]
    assert step["ratio"] == pytest.approx(1.25, rel=0.05)  # the head side was slowed by 25 %
    assert step["method"] == "sequential"
    (sides,) = (repo / ".perfgate" / "ab").iterdir()
    slowed = {
        side: json.loads((sides / f"{side}.json").read_text())["settings"]["inject_slowdown"]
        for side in ("base", "head")
    }
    assert slowed == {"base": None, "head": 0.25}
    snapshots = sorted((repo / "baselines").rglob("*.json"))
    assert len(snapshots) == 2  # one live baseline per workload, three nights each


@pytest.mark.parametrize("opted_in", [True, False])
def test_a_caught_canary_goes_on_to_bisect_and_the_issue_is_opt_in(
    tmp_path: Path, opted_in: bool
) -> None:
    log = tmp_path / "calls.log"
    fake = tmp_path / "bin" / "perfgate"
    fake.parent.mkdir()
    # compare exits 1 (the canary caught); bisect-steps writes a summary with one culprit.
    fake.write_text(
        f'#!/usr/bin/env bash\necho "$*" >> {log}\n'
        '[ "$1" = compare ] && exit 1\n'
        'if [ "$1" = bisect-steps ]; then\n'
        '  while [ "$#" -gt 0 ]; do [ "$1" = --summary ] && summary="$2"; shift; done\n'
        '  printf "## perfgate nightly: training got slower on main\\n" > "$summary"\n'
        "fi\nexit 0\n"
    )
    fake.chmod(0o755)
    gh = tmp_path / "bin" / "gh"
    gh.write_text(f'#!/usr/bin/env bash\necho "gh $1 $2 $3" >> {log}\n')
    gh.chmod(0o755)
    extra = {"PERFGATE_BISECT_ISSUE": "1", "GITHUB_REPOSITORY": "team/model"} if opted_in else {}
    completed = subprocess.run(
        ["bash", str(NIGHTLY), "shard-1.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=environment(
            PERFGATE_CMD=str(fake),
            PATH=f"{fake.parent}:{os.environ['PATH']}",
            PERFGATE_BISECT_MAX="2",
            **extra,
        ),
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    calls = log.read_text().splitlines()
    assert [c.split()[0] for c in calls if not c.startswith("gh ")] == [
        "merge", "ingest", "baseline", "compare", "bisect-steps", "baseline",
    ]  # fmt: skip
    (bisect,) = [c for c in calls if c.startswith("bisect-steps")]
    assert bisect.startswith("bisect-steps perfgate-nightly/refresh.json --out-dir")
    assert "--max-steps 2" in bisect and "--summary perfgate-nightly/bisect.md" in bisect
    issue_calls = [c for c in calls if c.startswith("gh api")]
    assert bool(issue_calls) == opted_in  # without PERFGATE_BISECT_ISSUE=1 no gh call at all
