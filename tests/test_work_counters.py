"""Exact work counters (issue 20, item 1): counted on a real step, judged exactly, shown.

In process: the dispatch-mode counter on real torch steps (a ``.item()`` is one host sync, a
``.t().contiguous()`` one ``aten.clone`` and one allocation, a view or an in-place op none),
the exact comparison, the pooled series of a stored baseline, and every renderer. In the slow
tier, on the A/B scratch project under the deterministic step clock: two runs of the same code
count the same in separate processes, and a commit that adds one small copy per step — far
below any timing threshold — is reported as "work changed" with the operator it added, by
``compare --baseline`` and by ``compare --ab``, while the timing verdict stays what it was.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import factories
import pytest
import torch
from fixture_types import CliRun
from rich.console import Console
from scratch_repo import VIRTUAL, commit_edit, committed_project

from perfgate.compare.baseline_source import baseline_workload
from perfgate.compare.work import work_changes
from perfgate.documents.result import WorkCounters, WorkloadResult
from perfgate.documents.snapshot import MetricStatistics
from perfgate.documents.verdict import WorkChange
from perfgate.metrics import WORK_PREFIX, work_from_series, work_values
from perfgate.report.compare_markdown import verdict_markdown
from perfgate.report.compare_table import VerdictView
from perfgate.report.formatting import work_change_text
from perfgate.workloads.work import counting_work


def counted(step: Any) -> WorkCounters:
    with counting_work() as counter:
        step()
    return counter.counters()


def training_step() -> tuple[Any, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs = torch.randn(8, 16)

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = model(inputs).square().mean()
        loss.backward()
        optimizer.step()
        return loss

    return step, inputs


def test_the_same_step_counts_the_same_every_time() -> None:
    step, _ = training_step()
    first, second = counted(step), counted(step)
    assert first == second
    assert first.operators == sum(first.by_operator.values()) > 10
    assert first.by_operator["aten.mm"] >= 3  # forward and backward matmuls
    assert first.allocations > 0 and first.allocated_bytes > 0
    assert first.host_syncs == 0 and first.collectives == 0
    assert first.host_to_device_bytes == first.device_to_host_bytes == 0  # all on the CPU


def test_an_item_is_a_host_sync_and_a_copy_an_allocation() -> None:
    step, inputs = training_step()
    plain = counted(step)
    with_item = counted(lambda: step().item())
    assert with_item.host_syncs == plain.host_syncs + 1
    assert with_item.by_operator["aten._local_scalar_dense"] == 1
    with_copy = counted(lambda: (step(), inputs.t().contiguous()))
    changes = work_changes(plain, with_copy)
    assert [(c.counter, c.base, c.head) for c in changes] == [
        ("operators", plain.operators, plain.operators + 2),  # aten.t, then aten.clone
        ("allocations", plain.allocations, plain.allocations + 1),
        ("allocated_bytes", plain.allocated_bytes, plain.allocated_bytes + 8 * 16 * 4),
        ("aten.clone", 0, 1),
        ("aten.t", plain.by_operator["aten.t"], plain.by_operator["aten.t"] + 1),
    ]


def test_a_view_or_an_in_place_op_allocates_nothing() -> None:
    tensor = torch.ones(4, 4)
    work = counted(lambda: (tensor.view(16), tensor.add_(1), tensor.contiguous()))
    assert work.allocations == 0 and work.allocated_bytes == 0
    assert work.by_operator == {"aten.add_": 1, "aten.view": 1}  # contiguous() of one: nothing


def test_equal_work_or_an_uncounted_side_is_no_change() -> None:
    work = factories.work_counters()
    assert work_changes(work, work) == []
    assert work_changes(None, work) == work_changes(work, None) == []


def test_a_stored_baseline_keeps_the_counts_its_runs_agree_on() -> None:
    work = factories.work_counters()
    series = {name.removeprefix(WORK_PREFIX): v for name, v in work_values(workload(work)).items()}
    assert work_from_series(series) == replace(work, by_operator={})
    assert work_from_series({**series, "host_syncs": [2.0, 3.0]}) is None  # runs disagree
    assert work_from_series({k: v for k, v in series.items() if k != "collectives"}) is None
    stats = {
        name: MetricStatistics(
            median=values[0], run_medians=values, repeat_values=values * 3, runs=1, repeats=3
        )
        for name, values in {**work_values(workload(work)), "step_time_s": [0.01]}.items()
    }
    baseline = baseline_workload(
        workload="gpt", definition_hash="ab" * 32, knobs={}, environment={}, metrics=stats,
        origin="snapshot", identity="k@t",
    )  # fmt: skip
    assert set(baseline.metrics) == {"step_time_s"}  # the counts are never judged as timings
    assert baseline.work is not None and baseline.work.host_syncs == work.host_syncs


def workload(work: WorkCounters) -> WorkloadResult:
    return replace(factories.workload(), work=work)


def test_every_surface_shows_the_changed_work() -> None:
    verdict = factories.verdict()
    assert work_change_text("host_syncs", 2, 3) == "host syncs 2 → 3 (+1, +50 %)"
    assert work_change_text("aten.clone", 0, 1) == "aten.clone 0 → 1 (+1, new)"
    assert work_change_text("allocated_bytes", 2048, 1024) == (
        "bytes allocated 2.0 KiB → 1.0 KiB (-1.0 KiB, -50 %)"
    )
    for width in (80, 200):
        with open(os.devnull, "w") as sink:
            console = Console(width=width, record=True, color_system=None, file=sink)
            console.print(VerdictView(verdict))
        text = console.export_text()
        assert "work changed" in text and "host syncs 2 → 3 (+1, +50 %)" in text, width
    markdown = verdict_markdown(verdict)
    assert "**Work changed** per step" in markdown
    assert "| gpt | host syncs | 2 | 3 | +1, +50 % |" in markdown
    assert "| gpt | aten.\\_local\\_scalar\\_dense | 1 | 2 | +1, +100 % |" in markdown


def test_a_maximal_change_list_orders_totals_before_operators() -> None:
    base = factories.work_counters()
    head = replace(
        base,
        operators=base.operators + 5,
        by_operator={**base.by_operator, "aten.mm": 40, "aten.clone": 1},
    )
    assert work_changes(base, head) == [
        WorkChange(counter="operators", base=412, head=417),
        WorkChange(counter="aten.mm", base=36, head=40),
        WorkChange(counter="aten.clone", base=0, head=1),
    ]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The A/B scratch project, committed, then a commit adding one small copy per step."""
    return committed_project(tmp_path / "repo")


def add_a_copy(repo: Path) -> None:
    commit_edit(
        repo,
        "        loss.backward()\n",
        "        loss.backward()\n        inputs.t().contiguous()  # one small copy per step\n",
        "head: a transposed copy of the inputs",
    )


FAST = ("--steps", "6", "--warmup", "2", "--device", "cpu")


def workload_verdict(path: Path) -> dict[str, Any]:
    (found,) = json.loads(path.read_text())["workloads"]
    return dict(found)


@pytest.mark.slow
def test_a_small_copy_per_step_is_work_changed_by_both_compares(
    repo: Path, perfgate_cli: CliRun
) -> None:
    runs = []
    for name in ("base", "same", "head"):
        if name == "head":
            add_a_copy(repo)
        out = repo / f"{name}.json"
        ran = perfgate_cli("run", *FAST, "--no-store", "--out", str(out), cwd=repo, env=VIRTUAL)
        assert ran.returncode == 0, ran.stderr
        runs.append(json.loads(out.read_text())["workloads"][0]["work"])
    base, same, head = runs
    assert base == same  # separate processes, the same code: the same counts, exactly
    assert head["by_operator"]["aten.clone"] == base["by_operator"].get("aten.clone", 0) + 1

    def compare(head_name: str) -> tuple[Any, dict[str, Any]]:
        out = repo / f"verdict-{head_name}.json"
        done = perfgate_cli(
            "compare", f"{head_name}.json", "--baseline", "base.json", "--json", str(out),
            cwd=repo, env={**VIRTUAL, "COLUMNS": "80"},
        )  # fmt: skip
        return done, workload_verdict(out)

    _, unchanged = compare("same")
    assert unchanged["work_changes"] == []
    completed, changed = compare("head")
    moved = {c["counter"]: (c["base"], c["head"]) for c in changed["work_changes"]}
    assert "aten.clone" not in base["by_operator"]  # the base step copies nothing
    assert moved["aten.clone"] == (0, 1)
    assert moved["allocations"] == (base["allocations"], base["allocations"] + 1)
    step = next(c for c in changed["comparisons"] if c["metric"] == "step_time_s")
    assert step["verdict"] != "regression"  # microseconds against a 9 ms step: no timing signal
    assert "work changed" in completed.stdout and "aten.clone 0 → 1 (+1, new)" in completed.stdout

    verdict = repo / "ab.json"
    ab = perfgate_cli(
        "compare", "--ab", "HEAD~1", "HEAD", *FAST, "--rounds", "6", "--ab-out", str(repo / "ab"),
        "--json", str(verdict), "--markdown", str(repo / "comment.md"), cwd=repo, env=VIRTUAL,
    )  # fmt: skip
    assert ab.returncode in (0, 4), ab.stdout + ab.stderr
    interleaved = workload_verdict(verdict)
    assert {"counter": "aten.clone", "base": 0, "head": 1} in interleaved["work_changes"]
    assert "| costly | aten.clone | 0 | 1 | +1, new |" in (repo / "comment.md").read_text()
