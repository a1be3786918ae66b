"""Bad input: one line naming the problem and the fix, exit code 2, no traceback, no file.

``perfgate run`` is invoked in process (``cli_in_process``): every one of these is refused
before a worker starts, so no process is needed to see it; ``test_cli_fuzz`` keeps the two
end-to-end checks in a real process.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_in_process import Ended, invoke

from perfgate.errors import ExitCode


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """CI's own database, device and job summary never leak into a test's command."""
    for variable in ("PERFGATE_DATABASE_URL", "PERFGATE_DEVICE", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(variable, raising=False)
    yield


def assert_usage_error(completed: Ended, needle: str, out: Path | None = None) -> None:
    assert completed.code == ExitCode.USAGE, completed.stdout + completed.stderr
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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], needle: str
) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "r.json"
    completed = invoke("run", *QUICK, *args, "--out", str(out))
    assert_usage_error(completed, needle, out)


def test_malformed_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "perfgate.toml").write_text("repeats = 'many'\n")
    out = tmp_path / "r.json"
    completed = invoke("run", "-w", "mlp", "--out", str(out))
    assert_usage_error(completed, "repeats should be int", out)


def test_unwritable_output_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("")
    completed = invoke("run", *QUICK, "-w", "mlp", "--out", str(blocker / "r.json"))
    assert_usage_error(completed, "choose a writable --out path")


@pytest.mark.slow  # each starts a worker that imports torch to call the factory
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
    faulty_project: Path, monkeypatch: pytest.MonkeyPatch, workload: str, needle: str
) -> None:
    monkeypatch.chdir(faulty_project)
    out = faulty_project / "r.json"
    completed = invoke(
        "run",
        *QUICK,
        "-w",
        "healthy",
        "-w",
        workload,
        "--no-store",
        "--out",
        str(out),
    )
    assert_usage_error(completed, needle, out)
