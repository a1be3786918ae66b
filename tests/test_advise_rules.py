"""Rule files (loading, lint positions), ranking of advice, and the ``perfgate rules`` CLI."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfgate._rules_path import builtin_rules_folder
from perfgate.advise.catalogue import EVIDENCE
from perfgate.advise.expr import Value
from perfgate.advise.ranking import (
    Advice,
    AdviceContext,
    NotFired,
    advise,
    evaluate_rule,
    rank,
    tier_of,
    with_status,
)
from perfgate.advise.rules import Formula, Problem, Rule, lint, load_rules
from perfgate.cli import app
from perfgate.config import load_config
from perfgate.errors import UsageError


@dataclass(frozen=True)
class Spec:
    kind: str
    devices: tuple[str, ...] = ("cpu", "cuda")


CATALOGUE = {
    "share": Spec("number"),
    "other_share": Spec("number"),
    "count": Spec("number"),
    "flag": Spec("bool"),
    "mode": Spec("text"),
    "gpu_only": Spec("number", ("cuda",)),
}

BASE = {
    "title": '"A sample rule"',
    "category": '"testing"',
    "confidence": '"high"',
    "requires": '["share", "flag"]',
    "when": '"share >= 0.1"',
    "affected": '"share"',
    "speedup": "2.0",
    "already_on": '"flag"',
    "fix": '"Do the thing."',
}


def rule_text(
    rule_id: str, tables: str = "[verify]\nknobs = { compile = true }\n", **fields: str
) -> str:
    """A rule file: BASE fields overridden by ``fields`` (raw TOML values; "" drops one)."""
    values = {"id": f'"{rule_id}"', **BASE, **fields}
    lines = [f"{key} = {value}" for key, value in values.items() if value != ""]
    return "\n".join(lines) + "\n\n" + tables


def write_rule(folder: Path, rule_id: str, text: str | None = None, **fields: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{rule_id}.toml"
    path.write_text(text if text is not None else rule_text(rule_id, **fields))
    return path


def only_problem(folder: Path) -> Problem:
    problems = lint([folder], CATALOGUE)
    assert len(problems) == 1, problems
    return problems[0]


# --- the built-in library ------------------------------------------------------------------------

BUILTIN_IDS = {
    "communication-exposed",
    "dataparallel-not-ddp",
    "rank-imbalance",
    "non-nccl-backend-gpu",
    "bf16-autocast-missing",
    "fp16-gradscaler-missing",
    "tf32-disabled",
    "manual-attention",
    "compile-elementwise-fusion",
    "optimizer-not-fused",
    "non-contiguous-copies",
    "channels-last-conv",
    "batch-size-headroom",
    "matmul-dims-misaligned",
    "dataloader-starvation",
    "dataloader-cpu-saturated",
    "pageable-h2d-copies",
    "host-sync-in-step",
    "cudnn-benchmark-off",
    "memory-near-limit",
    "gc-pauses",
    "launch-bound-small-kernels",
}


def test_every_builtin_rule_loads_cleanly_against_the_catalogue() -> None:
    folder = builtin_rules_folder()
    assert lint([folder]) == []
    rules = load_rules([folder])
    assert {rule.id for rule in rules} == BUILTIN_IDS
    for rule in rules:
        assert rule.references and all(url.startswith("https://") for url in rule.references)
        assert rule.evidence_names <= set(EVIDENCE), rule.id


def test_builtin_rules_fire_on_an_fp32_transformer_on_an_a100() -> None:
    rules = load_rules([builtin_rules_folder()])
    evidence: dict[str, Value] = {
        "device": "cuda",
        "compute_capability": "8.0",
        "matmul_share": 0.5,
        "conv_share": 0.0,
        "attention_share": 0.2,
        "fp32_matmul_fraction": 1.0,
        "autocast_enabled": False,
        "tf32_matmul": False,
        "manual_attention_detected": True,
    }
    fired = [a.rule_id for a in advise(rules, evidence)]
    assert fired == ["bf16-autocast-missing", "tf32-disabled", "manual-attention"]
    bf16 = advise(rules, evidence)[0]
    assert bf16.saving == pytest.approx(0.25) and bf16.tier == "high"
    assert bf16.verify_knobs == {"precision": "bf16"}
    assert bf16.evidence["fp32_matmul_fraction"] == 1.0  # the claim's numbers travel with it
    # The DLProf failure: with autocast already on, mixed precision is not advised again.
    with_amp = advise(rules, {**evidence, "autocast_enabled": True, "tf32_matmul": True})
    assert [a.rule_id for a in with_amp] == ["manual-attention"]
    # A pre-Ampere GPU gets the fp16 + GradScaler rule instead of bf16 and TF32.
    volta = advise(rules, {**evidence, "compute_capability": "7.0"})
    assert [a.rule_id for a in volta] == ["fp16-gradscaler-missing", "manual-attention"]


def test_builtin_dataloader_rules_split_on_free_cores() -> None:
    rules = load_rules([builtin_rules_folder()])
    evidence: dict[str, Value] = {
        "device": "cpu",
        "dataloader_wait_share": 0.4,
        "dataloader_num_workers": 2,
        "cpu_cores_available": 16,
    }
    (starving,) = advise(rules, evidence)
    assert starving.rule_id == "dataloader-starvation"
    assert starving.verify_knobs == {"num_workers": 4}
    # From no workers, two: a training process that mostly waits leaves its core to them.
    (first,) = advise(rules, {**evidence, "dataloader_num_workers": 0, "cpu_cores_available": 2})
    assert first.rule_id == "dataloader-starvation" and first.verify_knobs == {"num_workers": 2}
    (saturated,) = advise(rules, {**evidence, "cpu_cores_available": 2})
    assert saturated.rule_id == "dataloader-cpu-saturated" and saturated.verify_knobs == {}


# --- lint: problems with file:line:col ----------------------------------------------------------


def test_malformed_toml_is_reported_at_its_line(tmp_path: Path) -> None:
    path = write_rule(tmp_path, "broken", text='id = "broken"\ntitle = \nfix = "x"\n')
    problem = only_problem(tmp_path)
    assert (problem.path, problem.line, problem.column) == (path, 2, 9)
    assert str(problem).startswith(f"{path}:2:9: not valid TOML")


def test_unknown_evidence_in_an_expression_is_at_its_column(tmp_path: Path) -> None:
    path = write_rule(tmp_path, "r", when='"share >= 0.1 and shares > 2"')
    problem = only_problem(tmp_path)
    # line 6 is `when = "share >= 0.1 and shares > 2"`; `shares` starts at column 26
    assert str(problem) == f"{path}:6:26: when: unknown evidence 'shares'"


def test_attribute_access_is_at_its_column(tmp_path: Path) -> None:
    path = write_rule(tmp_path, "r", affected='"share.real"')
    problem = only_problem(tmp_path)
    assert (problem.line, problem.column) == (7, 18)
    assert str(problem).startswith(f"{path}:7:18: affected: attribute access")


def test_a_forbidden_call_is_at_its_column(tmp_path: Path) -> None:
    write_rule(tmp_path, "r", when="'share > 0 or __import__(\"os\")'")
    problem = only_problem(tmp_path)
    assert (problem.line, problem.column) == (6, 22)
    assert "unknown function '__import__'" in problem.message


def test_columns_follow_escapes_and_multiline_strings(tmp_path: Path) -> None:
    write_rule(tmp_path, "r", when='"mode == \\"bf16\\" and nope"')
    problem = only_problem(tmp_path)
    assert (problem.line, problem.column) == (6, 30) and "nope" in problem.message
    write_rule(tmp_path, "r", when='"""\nshare >= 0.1 and\n    flag.x"""')
    problem = only_problem(tmp_path)
    assert (problem.line, problem.column) == (8, 9) and "attribute access" in problem.message


def test_names_outside_requires_must_be_guarded(tmp_path: Path) -> None:
    write_rule(tmp_path, "r", when='"share >= 0.1 and count > 2"')
    problem = only_problem(tmp_path)
    assert (problem.line, problem.column) == (6, 26)
    assert "'count', which is not in requires" in problem.message
    write_rule(tmp_path, "r", when='"share >= 0.1 and (not present(count) or count > 2)"')
    assert lint([tmp_path], CATALOGUE) == []


@pytest.mark.parametrize(
    ("fields", "line", "fragment"),
    [
        ({"confidence": '"sure"'}, 4, "confidence 'sure' is not high, medium or low"),
        ({"requires": '["share", "flag", "nope"]'}, 5, "unknown evidence 'nope'"),
        ({"requires": '["share", "share", "flag"]'}, 5, "'share' is required twice"),
        ({"when": '"share"'}, 6, "when should give a bool, it gives a number"),
        ({"speedup": "true"}, 8, "should be an expression (text) or a number"),
        ({"speedup": "-1"}, 8, "should be a finite number >= 0"),
        ({"fix": '""'}, 10, "fix is empty"),
        ({"category": '"Not Kebab"'}, 3, "not kebab-case"),
        ({"title": "3"}, 2, "title should be text, got number 3"),
        ({"references": '["ftp:/x"]'}, 11, "is not a URL"),
        ({"when": ""}, 1, "missing field 'when'"),
        ({"whenn": '"true"'}, 11, "unknown field 'whenn' (did you mean 'when'?)"),
    ],
)
def test_field_problems(tmp_path: Path, fields: dict[str, str], line: int, fragment: str) -> None:
    write_rule(tmp_path, "r", **fields)
    problem = only_problem(tmp_path)
    assert problem.line == line and fragment in problem.message, problem


@pytest.mark.parametrize(
    ("tables", "line", "fragment"),
    [
        ("[verify]\nknobs = { warp_drive = true }\n", 13, "'warp_drive' is not a standard knob"),
        ('[verify]\nknobs = { precision = "fp8" }\n', 13, "knob precision='fp8' is not allowed"),
        ('[verify]\nknobs = { num_workers = { expr = "flag" } }\n', 13, "should give a number"),
        ('[verify]\nknobs = { num_workers = { expr = "count" } }\n', 13, "not in requires"),
        ("[verify]\n", 12, "missing field [verify] 'knobs'"),
        ("", 1, "missing field 'verify'"),
        ('[applies]\ndevices = ["tpu"]\n[verify]\nknobs = {}\n', 13, "'tpu' is not cpu or cuda"),
        (
            "[applies]\nmin_compute_capability = 8.0\n[verify]\nknobs = {}\n",
            12,
            'need devices = ["cuda"]',
        ),
        (
            '[applies]\ndevices = ["cuda"]\nmin_compute_capability = 9.0\n'
            "max_compute_capability = 8.0\n[verify]\nknobs = {}\n",
            15,
            "exceeds max",
        ),
    ],
)
def test_table_problems(tmp_path: Path, tables: str, line: int, fragment: str) -> None:
    write_rule(tmp_path, "r", text=rule_text("r", tables=tables))
    problem = only_problem(tmp_path)
    assert problem.line == line and fragment in problem.message, problem


def test_knob_expression_problems_point_into_the_inline_table(tmp_path: Path) -> None:
    tables = '[verify]\nknobs = { num_workers = { expr = "share + nope" } }\n'
    write_rule(tmp_path, "r", text=rule_text("r", tables=tables))
    problem = only_problem(tmp_path)
    assert (problem.line, problem.column) == (
        13,
        43,
    ) and "unknown evidence 'nope'" in problem.message


def test_requiring_evidence_never_measured_on_the_rule_devices(tmp_path: Path) -> None:
    tables = '[applies]\ndevices = ["cpu"]\n[verify]\nknobs = {}\n'
    write_rule(
        tmp_path, "r", text=rule_text("r", tables=tables, requires='["share", "flag", "gpu_only"]')
    )
    problem = only_problem(tmp_path)
    assert (problem.line, problem.column) == (5, 30)
    assert "'gpu_only' is never measured on cpu" in problem.message


def test_ids_are_unique_and_match_the_file_name(tmp_path: Path) -> None:
    first = write_rule(tmp_path / "a", "same")
    second = write_rule(tmp_path / "b", "same")
    problems = lint([tmp_path / "a", tmp_path / "b"], CATALOGUE)
    assert [str(p) for p in problems] == [f"{second}:1:1: id 'same' is already used by {first}"]
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "file.toml").write_text(rule_text("other"))
    assert "differs from the file name" in only_problem(tmp_path / "c").message


def test_a_missing_folder_is_a_problem(tmp_path: Path) -> None:
    assert [str(p) for p in lint([tmp_path / "nope"], CATALOGUE)] == [
        f"{tmp_path / 'nope'}: no such folder of rule files"
    ]


def test_load_rules_raises_a_usage_error_listing_problems(tmp_path: Path) -> None:
    write_rule(tmp_path, "r", when='"nope > 1"')
    with pytest.raises(UsageError, match=r"1 problem in rule files: .*r\.toml:6:9"):
        load_rules([tmp_path], CATALOGUE)


# --- ranking --------------------------------------------------------------------------------------


def make_rule(tmp_path: Path, rule_id: str, **fields: str) -> Rule:
    folder = tmp_path / rule_id
    write_rule(folder, rule_id, **fields)
    (rule,) = load_rules([folder], CATALOGUE)
    return rule


def test_tiers() -> None:
    assert [tier_of(s) for s in (0.2, 0.05, 0.0499, 0.03, 0.0299, 0.0)] == [
        "high",
        "high",
        "medium",
        "medium",
        "low",
        "low",
    ]


def test_advice_is_ranked_by_saving_then_confidence_then_id(tmp_path: Path) -> None:
    rules = [
        make_rule(tmp_path, "small", affected="0.04"),  # saving 0.02
        make_rule(tmp_path, "big-b", affected="0.2", confidence='"medium"'),  # 0.1
        make_rule(tmp_path, "big-a", affected="0.2", confidence='"medium"'),  # 0.1
        make_rule(tmp_path, "big-high", affected="0.2", confidence='"low"', speedup="4"),  # 0.15
        make_rule(tmp_path, "tie-high", affected="0.2"),  # 0.1, high confidence
        make_rule(tmp_path, "mid", affected='"share * 0.35"'),  # 0.035
    ]
    advice = advise(rules, {"share": 0.2, "flag": False})
    assert [(a.rule_id, a.tier) for a in advice] == [
        ("big-high", "high"),
        ("tie-high", "high"),
        ("big-a", "high"),
        ("big-b", "high"),
        ("mid", "medium"),
        ("small", "low"),
    ]
    assert advice[0].saving == pytest.approx(0.15)
    refuted = rank([with_status(advice[0], "refuted"), *advice[1:]])
    assert refuted[-1].rule_id == "big-high" and refuted[-1].status == "refuted"
    assert refuted[0].rule_id == "tie-high"


def test_already_on_suppresses_the_advice(tmp_path: Path) -> None:
    rule = make_rule(tmp_path, "r")
    assert evaluate_rule(rule, {"share": 0.5, "flag": True}, AdviceContext()) == NotFired(
        "r", "the fix is already on"
    )
    assert isinstance(evaluate_rule(rule, {"share": 0.5, "flag": False}, AdviceContext()), Advice)


@pytest.mark.parametrize(
    ("evidence", "reason"),
    [
        ({"share": 0.5}, "no evidence flag"),
        ({"share": 0.05, "flag": False}, "when is false"),
    ],
)
def test_reasons_for_not_firing(tmp_path: Path, evidence: dict[str, Value], reason: str) -> None:
    assert evaluate_rule(make_rule(tmp_path, "r"), evidence, AdviceContext()) == NotFired(
        "r", reason
    )


def test_division_by_zero_does_not_fire(tmp_path: Path) -> None:
    rule = make_rule(tmp_path, "r", speedup='"1 / (share - share)"')
    outcome = evaluate_rule(rule, {"share": 0.5, "flag": False}, AdviceContext())
    assert outcome == NotFired("r", "speedup is undefined: division by zero")


def test_saving_is_bounded(tmp_path: Path) -> None:
    evidence: dict[str, Value] = {"share": 0.5, "flag": False}
    capped = make_rule(tmp_path, "capped", speedup="100", max_saving="0.1")
    assert advise([capped], evidence)[0].saving == pytest.approx(0.1)
    slower = make_rule(tmp_path, "slower", speedup="0.5")
    (advice,) = advise([slower], evidence)
    assert advice.saving == 0.0 and "below 1" in advice.notes[0]
    clamped = make_rule(tmp_path, "clamped", affected="3", speedup="2")
    assert advise([clamped], evidence)[0].saving == pytest.approx(0.5)


def test_applies_device_capability_and_kind(tmp_path: Path) -> None:
    tables = (
        '[applies]\ndevices = ["cuda"]\nmin_compute_capability = 8.0\n'
        'workload_kinds = ["transformer"]\n[verify]\nknobs = {}\n'
    )
    folder = tmp_path / "applies"
    write_rule(folder, "r", text=rule_text("r", tables=tables))
    (rule,) = load_rules([folder], CATALOGUE)
    evidence: dict[str, Value] = {"share": 0.5, "flag": False, "device": "cuda"}
    context = AdviceContext(compute_capability=9.0, workload_kind="transformer")
    assert isinstance(evaluate_rule(rule, evidence, context), Advice)
    assert "not cpu" in _reason(rule, {**evidence, "device": "cpu"}, context)
    assert "unknown" in _reason(rule, evidence, replace(context, compute_capability=None))
    assert "7.5 is outside" in _reason(
        rule, {**evidence, "compute_capability": "7.5"}, replace(context, compute_capability=None)
    )
    assert "not convnet" in _reason(rule, evidence, replace(context, workload_kind="convnet"))


def _reason(rule: Rule, evidence: dict[str, Value], context: AdviceContext) -> str:
    outcome = evaluate_rule(rule, evidence, context)
    assert isinstance(outcome, NotFired)
    return outcome.reason


def test_knob_formulas_are_computed_or_the_advice_is_unverifiable(tmp_path: Path) -> None:
    tables = '[verify]\nknobs = { num_workers = { expr = "2 / share" }, pin_memory = true }\n'
    folder = tmp_path / "k"
    write_rule(folder, "k", text=rule_text("k", tables=tables))
    (rule,) = load_rules([folder], CATALOGUE)
    assert isinstance(rule.verify_knobs["num_workers"], Formula)
    (advice,) = advise([rule], {"share": 0.5, "flag": False})
    assert advice.verify_knobs == {"num_workers": 4, "pin_memory": True}
    assert advice.evidence == {"share": 0.5, "flag": False}
    (fraction,) = advise([rule], {"share": 0.3, "flag": False})
    assert fraction.verify_knobs == {} and "not a whole number" in fraction.notes[0]


# --- CLI ------------------------------------------------------------------------------------------

runner = CliRunner()
REAL = {
    "requires": '["matmul_share", "compiled"]',
    "affected": '"matmul_share"',
    "already_on": '"compiled"',
}


def test_cli_lint_prints_positions_and_exits_2(tmp_path: Path) -> None:
    path = write_rule(tmp_path, "r", when='"matmul_share >= 0.1 and nope_share > 2"', **REAL)
    result = runner.invoke(app, ["rules", "lint", str(tmp_path)])
    assert result.exit_code == 2
    assert f"{path}:6:33: when: unknown evidence 'nope_share'" in result.stdout


def test_cli_lint_default_folders_include_config_rule_paths(tmp_path: Path) -> None:
    (tmp_path / "perfgate.toml").write_text('rule_paths = ["team-rules"]\n')
    write_rule(tmp_path / "team-rules", "bad", when='"nope > 1"', **REAL)
    result = runner.invoke(app, ["rules", "lint", "--config", str(tmp_path / "perfgate.toml")])
    assert result.exit_code == 2 and "bad.toml:6:9" in result.stdout
    (tmp_path / "team-rules" / "bad.toml").unlink()
    result = runner.invoke(app, ["rules", "lint", "--config", str(tmp_path / "perfgate.toml")])
    assert result.exit_code == 0, result.stdout
    assert f"{len(BUILTIN_IDS)} rule file(s) in 2 folder(s): no problems" in result.stdout


def test_cli_list_filters_by_device_and_prints_json(tmp_path: Path) -> None:
    (tmp_path / "perfgate.toml").write_text("")
    config = ["--config", str(tmp_path / "perfgate.toml")]
    result = runner.invoke(app, ["rules", "list", "--device", "cpu", "--json", *config])
    assert result.exit_code == 0, result.stdout
    listed = {rule["id"]: rule for rule in json.loads(result.stdout)}
    assert "dataloader-starvation" in listed and "tf32-disabled" not in listed
    assert listed["optimizer-not-fused"]["verify_knobs"] == {"optimizer": "fused"}
    table = runner.invoke(app, ["rules", "list", *config])
    assert table.exit_code == 0 and "tf32-disabled" in table.stdout and "cc ≥ 8.0" in table.stdout
    bad = runner.invoke(app, ["rules", "list", "--device", "tpu", *config])
    assert bad.exit_code == 2


def test_config_rule_paths_is_validated(tmp_path: Path) -> None:
    (tmp_path / "perfgate.toml").write_text('rule_paths = "rules"\n')
    with pytest.raises(UsageError, match="rule_paths should be list"):
        load_config(cwd=tmp_path)
    (tmp_path / "perfgate.toml").write_text('rule_paths = ["a", "b"]\n')
    assert load_config(cwd=tmp_path).rule_paths == ("a", "b")
