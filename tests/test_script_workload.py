"""An unchanged training script as a workload (``workloads.session``, ``workloads.scripted``).

The fast tests run a small real script in this process through the worker's own step programs
(timed steps, the FLOP count) and its failure paths; the slow ones take the example nanoGPT
script (``examples/nanogpt/train.py``, a copy) through ``perfgate run``, ``advise`` and
``compare --ab`` in real worker processes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fixture_types import CliRun

import perfgate
from perfgate.config import load_config
from perfgate.errors import ExitCode, UsageError
from perfgate.runner.worker import timed_steps
from perfgate.workloads.protocol import WorkloadContext
from perfgate.workloads.scripted import run_script
from perfgate.workloads.setup import counted_step
from perfgate.workloads.user import user_definition

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "nanogpt"

TRAIN = """
import sys
import torch
import perfgate

iterations = int(sys.argv[1])
ctx = perfgate.script_context()
width = int(ctx.knobs.get("width", 8))
model = torch.nn.Linear(width, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
session = perfgate.Session(model=model, optimizer=optimizer, samples_per_step=4)
seen = []
for index in range(iterations):
    x = torch.randn(4, width)
    with session.step() as step:
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        step.loss = loss
    seen.append(index)
print("trained", len(seen), "measuring" if session.measuring else "alone")
"""


def context(**knobs: Any) -> WorkloadContext:
    return WorkloadContext(device="cpu", preset="default", params={}, knobs=knobs, seed=0)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    return path


def test_outside_perfgate_the_script_trains_as_it_always_did(script: Path) -> None:
    completed = subprocess.run(
        [sys.executable, str(script), "7"], capture_output=True, text=True, check=True
    )
    assert completed.stdout.strip() == "trained 7 alone"


def test_the_timed_steps_are_taken_by_the_scripts_own_loop(script: Path) -> None:
    phases: dict[str, float] = {}
    setup, measured = run_script(
        [str(script), "1000"],
        context(width=16),
        lambda setup: timed_steps("cpu", 2, 5, phases),
        steps_needed=7,
    )
    assert len(measured.step_times_s) == 5 and len(measured.warmup_times_s) == 2
    assert all(t > 0 for t in measured.step_times_s)
    assert len(measured.losses) == 7 and all(loss is not None for loss in measured.losses)
    assert len(measured.dataloader_wait_s) == 5
    assert setup.samples_per_step == 4
    assert setup.model.in_features == 16  # the knob reached the script
    assert {"measure_start", "measure_end"} <= set(phases)
    assert sys.argv[0] != str(script)  # restored


def test_the_first_step_is_counted_under_the_flop_counter(script: Path) -> None:
    _, counted = run_script([str(script), "5"], context(), lambda _: counted_step(), 1)
    # One Linear(8, 1) on a batch of 4: forward 2·4·8, backward the weight's gradient 2·4·8
    # (the input needs none) = 128.
    assert counted.counted_per_step == 128
    assert counted.by_operator == {"aten.addmm": 64, "aten.mm": 64}


def test_a_script_that_ends_too_early_says_how_many_steps_it_took(script: Path) -> None:
    with pytest.raises(UsageError) as raised:
        run_script([str(script), "3"], context(), lambda _: timed_steps("cpu", 2, 5, {}), 7)
    assert "ended after 3 steps; perfgate needs 7" in raised.value.one_line()


def test_a_script_without_a_session_is_told_what_to_add(tmp_path: Path) -> None:
    path = tmp_path / "plain.py"
    path.write_text("print('no session here')\n")
    with pytest.raises(UsageError, match=r"without creating a perfgate\.Session"):
        run_script([str(path)], context(), lambda _: timed_steps("cpu", 1, 1, {}), 2)


def test_finishing_is_not_swallowed_by_the_scripts_except_exception(tmp_path: Path) -> None:
    path = tmp_path / "guarded.py"
    path.write_text(
        TRAIN.replace("for index in range(iterations):", "try:\n  for index in range(iterations):")
        .replace("\n    ", "\n      ")
        .replace("\nprint(", "\nexcept Exception:\n  print('swallowed')\nprint(")
    )
    _, measured = run_script(
        [str(path), "1000000"], context(), lambda _: timed_steps("cpu", 1, 3, {}), 4
    )
    assert len(measured.step_times_s) == 3


def test_a_script_that_raises_fails_the_repeat_with_its_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text(TRAIN.replace("loss.backward()", "raise ValueError('diverged')"))
    with pytest.raises(ValueError, match="diverged"):
        run_script([str(path), "10"], context(), lambda _: timed_steps("cpu", 1, 3, {}), 4)
    assert perfgate.script_context().knobs == {}  # the driver was removed


def test_the_example_gains_only_marked_lines_and_trains_alone() -> None:
    """The nanoGPT example runs as a plain script, perfgate's lines doing nothing."""
    added = [line for line in (EXAMPLE / "train.py").read_text().splitlines() if "perfgate" in line]
    assert added and all(line.rstrip().endswith("# perfgate") for line in added if "import" in line)
    completed = subprocess.run(
        [sys.executable, "train.py", "--max_iters=3", "--device=cpu", "--log_interval=1"],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert completed.stdout.count("iter ") == 4


def test_a_script_workload_is_configured_and_hashed_with_its_arguments(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project)
    config = load_config(project / "pyproject.toml")
    definition = user_definition(config.workloads["nanogpt"], config.root)
    assert definition.script[0] == str((project / "train.py").resolve())
    assert definition.script[1:] == tuple(config.workloads["nanogpt"].args)
    before = definition.definition_hash("default", {})
    text = (project / "pyproject.toml").read_text().replace("--max_iters=100000", "--max_iters=9")
    (project / "pyproject.toml").write_text(text)
    changed = user_definition(load_config(project / "pyproject.toml").workloads["nanogpt"], project)
    assert changed.definition_hash("default", {}) != before


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('factory = "m:f"\nscript = "train.py"', "has both a factory and a script"),
        ('args = ["--x"]', "has no factory or script"),
        ('factory = "m:f"\nargs = ["--x"]', "has args but no script"),
        ('script = "train.py"\ndistributed = true', "distributed script"),
    ],
)
def test_a_misconfigured_script_workload_is_a_usage_error(
    tmp_path: Path, table: str, message: str
) -> None:
    (tmp_path / "perfgate.toml").write_text(f"[workloads.w]\n{table}\n")
    with pytest.raises(UsageError, match=message):
        load_config(tmp_path / "perfgate.toml")


# --- the example through perfgate's CLI, in real worker processes ------------------------------

FAST = ("--steps", "6", "--warmup", "2", "--device", "cpu", "--threads", "1")


@pytest.fixture
def nanogpt(tmp_path: Path) -> Path:
    project = tmp_path / "nanogpt"
    shutil.copytree(EXAMPLE, project)
    return project


@pytest.mark.slow
def test_perfgate_runs_the_unchanged_script_as_a_workload(
    nanogpt: Path, perfgate_cli: CliRun
) -> None:
    out = nanogpt / "run.json"
    completed = perfgate_cli(
        "run", "-w", "nanogpt", "--repeats", "2", *FAST, "--no-store", "--out", str(out),
        "--inject-slowdown", "10%", cwd=nanogpt,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    (workload,) = json.loads(out.read_text())["workloads"]
    assert workload["status"] == "ok" and workload["factory"] == "script:train.py"
    assert [len(r["step_times_s"]) for r in workload["repeats"]] == [6, 6]
    assert workload["flops"]["counted_per_step"] > 0
    assert workload["tokens_per_step"] == 8 * 64
    assert workload["setup_info"]["optimizer"]["class"] == "AdamW"
    assert all(r["injected_s_per_step"] > 0 for r in workload["repeats"])
    telemetry = workload["repeats"][0]["telemetry"]
    assert telemetry["host"]["process_rss_bytes"], "telemetry sampled the script's process"


@pytest.mark.slow
def test_advise_profiles_the_script_and_finds_its_hand_written_attention(
    nanogpt: Path, perfgate_cli: CliRun
) -> None:
    out = nanogpt / "advice.json"
    completed = perfgate_cli(
        "advise", "-w", "nanogpt", "--device", "cpu", "--threads", "1", "--json", str(out),
        cwd=nanogpt,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    (workload,) = json.loads(out.read_text())["workloads"]
    rules = [item["rule_id"] for item in workload["advice"]]
    assert "manual-attention" in rules, rules
    attention = next(a for a in workload["advice"] if a["rule_id"] == "manual-attention")
    assert "train.py" in json.dumps(attention), "the advice names the script's attention module"


@pytest.mark.slow
def test_compare_ab_judges_two_commits_of_the_script(nanogpt: Path, perfgate_cli: CliRun) -> None:
    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci", *args],
            cwd=nanogpt, check=True, capture_output=True,
        )  # fmt: skip

    git("init", "--quiet", "--initial-branch=main")
    git("add", "-A")
    git("commit", "--quiet", "-m", "base")
    train = nanogpt / "train.py"
    train.write_text(train.read_text().replace("n_layer = 2", "n_layer = 4"))
    git("commit", "--quiet", "-am", "twice the layers")
    verdict = nanogpt / "verdict.json"
    completed = perfgate_cli(
        "compare", "--ab", "HEAD~1", "HEAD", "--rounds", "8", *FAST[:-2],
        "--ab-out", str(nanogpt / "ab"), "--json", str(verdict), cwd=nanogpt,
    )  # fmt: skip
    # Twice the layers is slower: a regression or, on a very noisy machine, inconclusive —
    # never a pass or an improvement.
    assert completed.returncode in (ExitCode.REGRESSION, ExitCode.INCONCLUSIVE), completed.stderr
    document = json.loads(verdict.read_text())
    (workload,) = document["workloads"]
    step_time = next(c for c in workload["comparisons"] if c["metric"] == "step_time_s")
    assert step_time["verdict"] in ("regression", "inconclusive")
    # A regression's estimate is a slowdown; an inconclusive one under two busy loops can sit
    # anywhere in its wide interval (0.50 seen, interval 0.40-6.8), but a slowdown is never
    # excluded by it.
    if step_time["verdict"] == "regression":
        assert step_time["ratio"] > 1.0
    assert step_time["ci_high"] > 1.0
