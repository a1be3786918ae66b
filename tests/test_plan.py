"""The run plan: workload, preset, knob and shard resolution, checked before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfgate.config import load_config
from perfgate.documents.result import RunSettings
from perfgate.errors import UsageError
from perfgate.runner.plan import SMOKE_DEFAULTS, PlannedWorkload, Selection, make_plan
from perfgate.stats.power import minimum_repeats

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "user_project"


def plan(
    selection: Selection, root: Path | None = None
) -> tuple[list[PlannedWorkload], RunSettings]:
    return make_plan(load_config(cwd=root or Path("/")), selection)


def test_smoke_suite_has_the_four_builtins_with_smoke_defaults() -> None:
    planned, settings = plan(Selection(suite="smoke"))
    assert [p.definition.name for p in planned] == ["gpt", "resnet", "mlp", "datapipe"]
    assert {p.preset for p in planned} == {"smoke"}
    # Four workloads, two tested metrics each: the default must let one change among the 8
    # comparisons reach significance after correction, so more than the preset's 5.
    assert settings.repeats == max(SMOKE_DEFAULTS.repeats, minimum_repeats(8)) == 6


def test_knob_applies_to_the_workloads_that_honour_it() -> None:
    planned, _ = plan(Selection(suite="smoke", knobs=["attention=manual", "mlp.precision=bf16"]))
    by_name = {p.definition.name: p for p in planned}
    assert by_name["gpt"].knobs["attention"] == "manual"
    assert "attention" not in by_name["resnet"].knobs
    assert by_name["mlp"].knobs["precision"] == "bf16"
    assert by_name["resnet"].knobs["precision"] == "off"


def test_knob_values_change_the_definition_hash() -> None:
    base, _ = plan(Selection(workloads=["gpt"]))
    manual, _ = plan(Selection(workloads=["gpt"], knobs=["attention=manual"]))
    full, _ = plan(Selection(workloads=["gpt"], preset="full"))
    hashes = {base[0].definition_hash, manual[0].definition_hash, full[0].definition_hash}
    assert len(hashes) == 3


def test_shards_partition_the_selection() -> None:
    names = []
    for index in (1, 2, 3):
        planned, settings = plan(Selection(suite="smoke", shard=f"{index}/3"))
        names += [p.definition.name for p in planned]
        assert settings.shard == f"{index}/3"
    assert sorted(names) == sorted(["gpt", "resnet", "mlp", "datapipe"])


def test_user_workloads_from_config() -> None:
    planned, _ = plan(Selection(), root=EXAMPLE)
    by_name = {p.definition.name: p for p in planned}
    assert set(by_name) == {"regressor", "mlp"}
    regressor = by_name["regressor"]
    assert regressor.definition.kind == "user"
    assert regressor.preset == "smoke" and regressor.params["hidden"] == 48
    assert regressor.knobs == {"normalize_inputs": True, "optimizer": "foreach", "precision": "off"}
    assert regressor.definition.source_files[0].name == "workload.py"


@pytest.mark.parametrize(
    ("selection", "needle"),
    [
        (Selection(workloads=["bert"]), "unknown workload 'bert'"),
        (Selection(suite="nightly"), "unknown suite 'nightly'"),
        (Selection(workloads=["gpt"], preset="huge"), "has no preset 'huge'"),
        (Selection(workloads=["gpt"], knobs=["precision=fp8"]), "precision='fp8' is not allowed"),
        (
            Selection(workloads=["mlp"], knobs=["attention=manual"]),
            "no selected workload has a knob",
        ),
        (Selection(workloads=["mlp"], knobs=["mlp.attention=manual"]), "has no knob attention"),
        (Selection(workloads=["mlp"], knobs=["gpt.attention=manual"]), "not in this run"),
        (Selection(workloads=["mlp"], knobs=["precision"]), "is not KEY=VALUE"),
        (Selection(workloads=["mlp"], knobs=["compile=maybe"]), "is not a boolean"),
        (Selection(workloads=["mlp", "mlp"]), "selected twice"),
        (Selection(suite="smoke", shard="4/3"), "is not i/n"),
        (Selection(suite="smoke", shard="x"), "is not i/n"),
        (Selection(workloads=["mlp"], shard="2/2"), "has no workloads"),
        (Selection(workloads=["mlp"], warmup=0), "--warmup must be at least 1"),
        (Selection(workloads=["mlp"], repeats=0), "--repeats must be at least 1"),
    ],
)
def test_bad_selection_is_a_usage_error(selection: Selection, needle: str) -> None:
    with pytest.raises(UsageError) as caught:
        plan(selection)
    assert needle in caught.value.one_line()


def test_unimportable_user_factory_is_reported_before_running(faulty_project: Path) -> None:
    config = load_config(cwd=faulty_project)
    with pytest.raises(UsageError, match=r"cannot find workload module 'faulty\.no_such_module'"):
        make_plan(config, Selection(workloads=["healthy", "missing_module"]))
    # One broken entry in the config does not block running the others.
    planned, _ = make_plan(config, Selection(workloads=["healthy"]))
    assert [p.definition.name for p in planned] == ["healthy"]
