"""Configuration loading: [tool.perfgate] and perfgate.toml, environment overrides, validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from perfgate.config import DEFAULT_DATABASE_URL, find_config_file, load_config
from perfgate.errors import ExitCode, UsageError
from perfgate.metrics import METRICS
from perfgate.thresholds import Thresholds


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_defaults_without_a_file(tmp_path: Path) -> None:
    config = load_config(cwd=tmp_path)
    assert config.source is None
    assert config.database_url == DEFAULT_DATABASE_URL
    assert config.suite == "smoke"
    assert config.root == tmp_path


def test_pyproject_table_is_found_from_a_subfolder(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.perfgate]\nrepeats = 7\nsuite = "full"\n')
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    config = load_config(cwd=sub)
    assert config.repeats == 7 and config.suite == "full" and config.root == tmp_path


def test_pyproject_without_perfgate_table_is_skipped(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[project]\nname = 'x'\n")
    assert find_config_file(tmp_path) is None


def test_perfgate_toml_holds_keys_at_top_level(tmp_path: Path) -> None:
    write(tmp_path / "perfgate.toml", "steps = 33\n")
    assert load_config(cwd=tmp_path).steps == 33


def test_environment_overrides_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "perfgate.toml", 'database_url = "sqlite:///a.db"\n')
    monkeypatch.setenv("PERFGATE_DATABASE_URL", "sqlite:///b.db")
    assert load_config(cwd=tmp_path).database_url == "sqlite:///b.db"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("repeat = 3\n", "unknown [tool.perfgate] key repeat"),
        ('repeats = "3"\n', "repeats should be int"),
        ("repeats = true\n", "repeats should be int"),
        ("repeats = [\n", "not valid TOML"),
        ("[workloads.x]\nversion = 1\n", "has no factory"),
        ('[workloads.x]\nfactory = "m:f"\ncolour = 1\n', "unknown key colour"),
        ('[suites]\npr = "gpt"\n', "suites.pr should be list"),
    ],
)
def test_malformed_config_is_a_usage_error(tmp_path: Path, text: str, needle: str) -> None:
    write(tmp_path / "perfgate.toml", text)
    with pytest.raises(UsageError) as caught:
        load_config(cwd=tmp_path)
    assert needle in caught.value.one_line()
    assert caught.value.exit_code == ExitCode.USAGE
    assert "\n" not in caught.value.one_line()


def test_missing_explicit_config_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        load_config(tmp_path / "nope.toml")


def test_thresholds_per_metric_and_per_workload(tmp_path: Path) -> None:
    write(
        tmp_path / "perfgate.toml",
        "[thresholds]\nstep_time_s = 0.1\npeak_memory_bytes = 0.03\n"
        "[thresholds.gpt]\nstep_time_s = 0.2\ntflops = 0.07\n",
    )
    thresholds = load_config(cwd=tmp_path).thresholds
    assert thresholds.threshold("gpt", "step_time_s") == 0.2
    assert thresholds.threshold("gpt", "tflops") == 0.07  # its own band wins
    assert thresholds.threshold("gpt", "tokens_per_s") == 0.2  # inherits the step-time band
    assert thresholds.threshold("mlp", "samples_per_s") == 0.1  # the global step-time band
    assert thresholds.threshold("mlp", "peak_memory_bytes") == 0.03
    assert thresholds.threshold("resnet", "peak_memory_bytes") == 0.03
    assert Thresholds().threshold("x", "step_time_s") == METRICS["step_time_s"].threshold


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[thresholds]\nstep_tme_s = 0.1\n", "thresholds.step_tme_s names no gated metric"),
        ("[thresholds]\nstep_time_s = 5\n", "is not a relative change in (0, 1)"),
        ("[thresholds.gpt]\nstep_time_s = true\n", "thresholds.gpt.step_time_s = True"),
        ('inconclusive = "maybe"\n', "inconclusive = 'maybe'"),
        ("ab_rounds = 2.5\n", "ab_rounds should be int"),
    ],
)
def test_bad_thresholds_and_policies(tmp_path: Path, text: str, needle: str) -> None:
    write(tmp_path / "perfgate.toml", text)
    with pytest.raises(UsageError) as error:
        load_config(cwd=tmp_path)
    assert needle in str(error.value)


def test_a_misspelt_key_gets_a_suggestion(tmp_path: Path) -> None:
    write(tmp_path / "perfgate.toml", "repeat = 5\n")
    with pytest.raises(UsageError) as caught:
        load_config(cwd=tmp_path)
    assert "unknown [tool.perfgate] key repeat (did you mean `repeats`?)" in caught.value.one_line()
    write(tmp_path / "perfgate.toml", '[workloads.w]\nfactori = "m:f"\n')
    with pytest.raises(UsageError, match="did you mean `factory`"):
        load_config(cwd=tmp_path)


@pytest.mark.parametrize(
    ("variable", "text", "key", "value"),
    [
        ("PERFGATE_STEPS", "40", "steps", 40),
        ("PERFGATE_TIMEOUT_S", "90.5", "timeout_s", 90.5),
        ("PERFGATE_SUITE", "nightly", "suite", "nightly"),
        ("PERFGATE_INCONCLUSIVE", "fail", "inconclusive", "fail"),
        ("PERFGATE_AB_ROUNDS", "12", "ab_rounds", 12),
    ],
)
def test_every_scalar_key_has_an_environment_variable_that_wins_over_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, text: str, key: str, value: Any
) -> None:
    write(tmp_path / "perfgate.toml", 'steps = 10\ntimeout_s = 60\nsuite = "pr"\n')
    monkeypatch.setenv(variable, text)
    assert getattr(load_config(cwd=tmp_path), key) == value


@pytest.mark.parametrize(
    ("variable", "text", "needle"),
    [
        ("PERFGATE_STEPS", "many", "PERFGATE_STEPS='many' is not an integer"),
        ("PERFGATE_TIMEOUT_S", "inf", "environment variable PERFGATE_TIMEOUT_S: inf is not"),
        ("PERFGATE_SUITE", "../etc", "suite"),
    ],
)
def test_a_bad_environment_value_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, text: str, needle: str
) -> None:
    monkeypatch.setenv(variable, text)
    with pytest.raises(UsageError) as caught:
        load_config(cwd=tmp_path)
    assert needle in caught.value.one_line()
