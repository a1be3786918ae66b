"""Attribution (issue 20, item 2): what moved per operator and kernel, base against head.

On real traces first: two A100 runs of one training job (``tests/data/advise``, the second
with more copies) are attributed as the gate would attribute two sides — GPU kernels by their
names, host ops by their self time — and one trace against itself moves nothing. Then, in the
slow tier, the real thing on the A/B scratch project: a commit that adds transposed copies to
every step regresses (the deterministic step clock sees its wait), and the A/B's verdict names
the added operator in the terminal, the verdict document and the PR comment.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
from fixture_types import CliRun
from scratch_repo import VIRTUAL, commit_edit, committed_project

from perfgate.trace.attribution import attribute
from perfgate.trace.loader import load_trace
from perfgate.trace.timeline import Timeline, build_timeline

TRACES = Path(__file__).resolve().parent / "data" / "advise"


@cache
def timeline(name: str) -> Timeline:
    return build_timeline(load_trace(TRACES / f"{name}.json.gz"))


def test_a_trace_against_itself_moves_nothing() -> None:
    control = timeline("a100-train-control")
    found = attribute([control, control], [control, control])
    assert found.movers == [] and found.omitted == 0
    assert found.base_step_ms == found.head_step_ms > 0


def test_two_runs_of_one_job_name_the_kernels_and_ops_that_moved() -> None:
    found = attribute([timeline("a100-train-control")], [timeline("a100-train-test")], top=12)
    assert found.windows == 1 and found.movers
    kernels = [m for m in found.movers if m.side == "kernel"]
    assert kernels, found.movers  # GPU kernels, by the names the profiler wrote
    assert any("copy" in m.name.lower() or "memcpy" in m.name.lower() for m in found.movers)
    for mover in found.movers:
        assert mover.delta_low_us <= mover.head_us - mover.base_us <= mover.delta_high_us
        if mover.change == "slower":
            assert mover.delta_low_us > 0
        if mover.change == "added":
            assert mover.base_calls == 0 < mover.head_calls
    shares = [abs(m.head_us - m.base_us) for m in found.movers]
    assert shares == sorted(shares, reverse=True)  # the largest movers first


@pytest.mark.slow
def test_a_confirmed_regression_names_the_operator_it_added(
    tmp_path: Path, perfgate_cli: CliRun
) -> None:
    repo = committed_project(tmp_path / "repo")
    commit_edit(
        repo,
        "        loss.backward()\n",
        "        loss.backward()\n"
        "        for _ in range(8):\n"
        "            inputs.t().contiguous()  # transposed copies of the inputs\n"
        "        time.sleep(BASE_WAIT_S / 4)  # and the time they cost on the step clock\n",
        "head: copies",
    )
    verdict, comment = repo / "verdict.json", repo / "comment.md"
    completed = perfgate_cli(
        "compare", "--ab", "HEAD~1", "HEAD", "--steps", "6", "--warmup", "2", "--device", "cpu",
        "--rounds", "12", "--ab-out", str(repo / "ab"), "--json", str(verdict),
        "--markdown", str(comment), cwd=repo, env={**VIRTUAL, "COLUMNS": "100"},
    )  # fmt: skip
    assert completed.returncode == 1, completed.stdout + completed.stderr
    (workload,) = json.loads(verdict.read_text())["workloads"]
    attribution = workload["attribution"]
    assert attribution["windows"] == 3
    movers = {m["name"]: m for m in attribution["movers"]}
    assert movers["aten::clone"]["change"] == "added", movers
    assert movers["aten::clone"]["head_calls"] == 8 and movers["aten::clone"]["base_calls"] == 0
    assert "what moved (profiled, 3 windows a side)" in completed.stdout
    assert "aten::clone (added)" in completed.stdout
    assert "**What moved** inside the step" in comment.read_text()
    assert "| costly | aten::clone (added) | op |" in comment.read_text()
