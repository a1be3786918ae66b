"""Bad input: one line naming the problem and the fix, exit code 2, no traceback, no file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from fixture_types import CliRun

from perfgate.errors import ExitCode

pytestmark = pytest.mark.slow


def assert_usage_error(
    completed: subprocess.CompletedProcess[str], needle: str, out: Path | None = None
) -> None:
    assert completed.returncode == ExitCode.USAGE, completed.stdout + completed.stderr
    lines = [line for line in completed.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, completed.stderr
    assert needle in lines[0]
    assert "Traceback" not in completed.stdout + completed.stderr
    if out is not None:
        assert not out.exists()
        assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")]


QUICK = ("--repeats", "1", "--steps", "2", "--warmup", "1")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("-w", "bert"), "unknown workload 'bert'"),
        (("-w", "gpt", "--preset", "huge"), "has no preset 'huge'"),
        (("--suite", "weekly"), "unknown suite 'weekly'"),
        (("-w", "gpt", "--knob", "precision=fp8"), "is not allowed"),
        (("-w", "mlp", "--device", "tpu"), "unknown device 'tpu'"),
        (
            ("-w", "mlp", "--device", "cuda"),
            "--device cuda was requested but torch sees no CUDA GPU",
        ),
        (("-w", "mlp", "--shard", "3/2"), "is not i/n"),
        (("-w", "mlp", "--warmup", "0"), "--warmup must be at least 1"),
    ],
)
def test_bad_arguments(
    tmp_path: Path, perfgate_cli: CliRun, args: tuple[str, ...], needle: str
) -> None:
    out = tmp_path / "r.json"
    completed = perfgate_cli("run", *QUICK, *args, "--out", str(out), cwd=tmp_path)
    assert_usage_error(completed, needle, out)


def test_malformed_config(tmp_path: Path, perfgate_cli: CliRun) -> None:
    (tmp_path / "perfgate.toml").write_text("repeats = 'many'\n")
    out = tmp_path / "r.json"
    completed = perfgate_cli("run", "-w", "mlp", "--out", str(out), cwd=tmp_path)
    assert_usage_error(completed, "repeats should be int", out)


def test_unwritable_output_path(tmp_path: Path, perfgate_cli: CliRun) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    completed = perfgate_cli(
        "run", *QUICK, "-w", "mlp", "--out", str(blocker / "r.json"), cwd=tmp_path
    )
    assert_usage_error(completed, "choose a writable --out path")


@pytest.mark.parametrize(
    ("workload", "needle"),
    [
        ("missing_module", "cannot find workload module 'faulty.no_such_module'"),
        ("missing_function", "has no attribute 'no_such_function'"),
        ("wrong_return", "returned dict, not a TrainingSetup"),
        ("broken_setup", "samples_per_step is not a positive integer"),
    ],
)
def test_broken_user_factories(
    faulty_project: Path, perfgate_cli: CliRun, workload: str, needle: str
) -> None:
    out = faulty_project / "r.json"
    completed = perfgate_cli(
        "run",
        *QUICK,
        "-w",
        "healthy",
        "-w",
        workload,
        "--no-store",
        "--out",
        str(out),
        cwd=faulty_project,
    )
    assert_usage_error(completed, needle, out)
