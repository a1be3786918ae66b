"""Every document perfgate writes, read back through its model; the shipped schemas against the
models; and the compatibility rule (``perfgate.documents.base``): a newer minor is read with its
unknown fields ignored, a newer major is refused with the fix, an older major is migrated."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import factories
import pytest
from pydantic import TypeAdapter

from perfgate.documents.advice import ADVICE
from perfgate.documents.base import DocumentKind
from perfgate.documents.bisect import BISECT
from perfgate.documents.calibration import CALIBRATION
from perfgate.documents.ceilings import CEILINGS, CEILINGS_STORE
from perfgate.documents.diagnosis import DIAGNOSIS
from perfgate.documents.kinds import KINDS
from perfgate.documents.refresh import REFRESH
from perfgate.documents.result import RESULT
from perfgate.documents.snapshot import SNAPSHOT
from perfgate.documents.verdict import ERROR, VERDICT
from perfgate.documents.worker import WORKER_REPORT, WORKER_SPEC
from perfgate.errors import UsageError

MAXIMAL: dict[str, Callable[[], Any]] = {
    RESULT.name: factories.run,
    VERDICT.name: factories.verdict,
    ERROR.name: factories.error,
    CALIBRATION.name: factories.calibration_report,
    CEILINGS.name: factories.ceilings_report,
    CEILINGS_STORE.name: factories.ceilings_store,
    SNAPSHOT.name: factories.snapshot,
    ADVICE.name: factories.advice_report,
    DIAGNOSIS.name: factories.diagnosis_report,
    WORKER_SPEC.name: factories.worker_spec,
    WORKER_REPORT.name: factories.worker_report,
    BISECT.name: factories.bisect_report,
    REFRESH.name: factories.refresh_report,
}
"""A maximal document of every format (every optional field set)."""

DERIVED = {
    RESULT.name: {"status"},
    VERDICT.name: {"exit_code"},
    DIAGNOSIS.name: {"workloads[].diagnosis.label"},
}
"""Properties a format writes that are computed from the model's fields, not fields of it
(by their path in the document: ``a.b`` a property of an object, ``a[]`` an item of a list)."""


def test_every_format_has_a_maximal_document() -> None:
    assert sorted(MAXIMAL) == sorted(kind.name for kind in KINDS)


def test_every_format_ships_its_schema_and_every_shipped_schema_is_a_format() -> None:
    shipped = resources.files("perfgate").joinpath("schema")
    names = sorted(p.name for p in shipped.iterdir() if p.name.endswith(".json"))
    assert names == sorted(kind.schema_file for kind in KINDS)


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)
def test_a_maximal_document_reads_back_as_the_same_model(kind: DocumentKind[Any]) -> None:
    model = MAXIMAL[kind.name]()
    written = json.loads(json.dumps(kind.dump(model), allow_nan=False))  # strict JSON on disk
    assert written["schema"] == kind.name and written["schema_version"] == kind.major
    assert written["schema_minor"] == kind.minor
    assert kind.read(written, "maximal") == model
    assert kind.dump(kind.read(written, "maximal")) == written


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)
def test_the_shipped_schema_describes_the_model(kind: DocumentKind[Any]) -> None:
    """The schema shipped in the wheel and the model's own (pydantic's JSON Schema of the
    dataclass) name the same properties with compatible types at every level, and the
    shipped one requires every property the model cannot do without. (It may require more:
    the fields of a format's first version are always written; the fields a later minor
    added must not be required, or an older document would be refused.)"""
    generated = TypeAdapter(kind.model).json_schema(mode="validation")
    shipped = kind.json_schema()
    header = {"schema", "schema_version", "schema_minor"}
    derived = DERIVED.get(kind.name, set()) | header
    problems = _differences(shipped, shipped, generated, generated, kind.name, derived)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)
def test_a_newer_minor_is_read_and_its_new_fields_ignored(kind: DocumentKind[Any]) -> None:
    model = MAXIMAL[kind.name]()
    newer = {**kind.dump(model), "schema_minor": kind.minor + 1, "added_later": {"x": [1, 2]}}
    assert kind.read(json.loads(json.dumps(newer)), "newer") == model


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)
def test_a_newer_major_is_refused_with_the_fix(kind: DocumentKind[Any]) -> None:
    newer = {**kind.dump(MAXIMAL[kind.name]()), "schema_version": kind.major + 1}
    with pytest.raises(UsageError) as raised:
        kind.read(newer, "newer.json")
    assert "newer.json was written by a newer perfgate" in raised.value.problem
    assert raised.value.fix == "upgrade perfgate to read it"


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)
def test_another_format_is_named_and_refused(kind: DocumentKind[Any]) -> None:
    other = {**kind.dump(MAXIMAL[kind.name]()), "schema": "perfgate.something-else"}
    with pytest.raises(UsageError, match=f"is not a {kind.name} document"):
        kind.read(other, "other.json")


def test_an_older_document_without_the_minor_is_read() -> None:
    """Documents written before the header had ``schema_minor`` (all of format 1.0) are read
    as minor 0: the committed snapshots, results and verdicts of earlier releases."""
    for kind in KINDS:
        if kind.major != 1:
            continue
        old = {k: v for k, v in kind.dump(MAXIMAL[kind.name]()).items() if k != "schema_minor"}
        assert kind.read(old, "old") == MAXIMAL[kind.name]()


def test_an_older_major_is_migrated() -> None:
    """The ceilings store of format 1 (no header; ``format`` in every entry) reads as format 2."""
    current = CEILINGS_STORE.dump(factories.ceilings_store())
    format_1 = {key: {**entry, "format": 1} for key, entry in current["entries"].items()}
    expected = dataclasses.replace(factories.ceilings_store(), fixes={})  # format 1 had none
    assert CEILINGS_STORE.read(format_1, "old store") == expected
    migrated = CEILINGS_STORE.upgrade(format_1, "old store")
    assert migrated["schema_version"] == 2 and set(migrated) >= {"schema", "entries"}


def test_a_major_without_a_migration_is_refused() -> None:
    ancient = {**CEILINGS_STORE.dump(factories.ceilings_store()), "schema_version": 0}
    with pytest.raises(UsageError, match="format 0, which this perfgate no longer reads"):
        CEILINGS_STORE.read(ancient, "ancient")


def test_scalars_of_a_union_keep_their_json_type() -> None:
    """Evidence and knob values are ``bool | int | float | str``: ``false`` stays a bool and
    ``32`` an int when read (``False == 0.0`` in Python, so equality alone would not tell)."""
    document = json.loads(json.dumps(ADVICE.dump(factories.advice_report())))
    read = ADVICE.read(document, "advice")
    pairs = zip(document["workloads"][0]["advice"], read.workloads[0].advice, strict=True)
    for written, model in pairs:
        for field in ("evidence", "verify_knobs"):
            typed = {k: type(v) for k, v in getattr(model, field).items()}
            assert typed == {k: type(v) for k, v in written[field].items()}


def test_advice_written_before_the_header_had_a_minor_is_read() -> None:
    """The H200's advice document of format 1.0: no ``schema_minor``, no diagnosis."""
    old = json.loads(
        (Path(__file__).parent / "data" / "h200" / "advice-inefficient.json").read_text()
    )
    report = ADVICE.read(old, "advice-inefficient.json")
    gpt, resnet = report.workloads
    assert (
        (gpt.name, resnet.name) == ("gpt", "resnet")
        and gpt.diagnosis is None
        and gpt.advice[0].rule_id == "optimizer-not-fused"
    )
    assert gpt.advice[0].evidence["optimizer_fused"] is False


def test_a_schema_violation_names_the_place() -> None:
    document = VERDICT.dump(factories.verdict())
    document["workloads"][0]["comparisons"][0]["ratio"] = "big"
    with pytest.raises(UsageError, match="at workloads/0/comparisons/0/ratio"):
        VERDICT.read(document, "verdict.json")


# --- comparing the shipped schema with the model's ----------------------------------------------


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        node = root["$defs"][name]
    return node


def _types(node: dict[str, Any], root: dict[str, Any]) -> set[str]:
    """The JSON types a (sub)schema admits; ``anyOf`` branches united; enums and consts by the
    types of their values."""
    node = _resolve(node, root)
    for combined in ("anyOf", "oneOf"):
        if combined in node:
            return set().union(*(_types(branch, root) for branch in node[combined]))
    if "type" in node:
        kinds = node["type"]
        found = {kinds} if isinstance(kinds, str) else set(kinds)
        return found
    values = node.get("enum", [node["const"]] if "const" in node else [])
    names = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}
    return {names[type(v)] for v in values} or {"any"}


def _object(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any] | None:
    """The object schema inside ``node`` (through refs and a nullable ``anyOf``), if any."""
    node = _resolve(node, root)
    for branch in [*node.get("anyOf", []), *node.get("oneOf", [])]:
        found = _object(branch, root)
        if found is not None:
            return found
    return node if "properties" in node else None


def _items(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any] | None:
    node = _resolve(node, root)
    for branch in [*node.get("anyOf", []), *node.get("oneOf", [])]:
        found = _items(branch, root)
        if found is not None:
            return found
    items = node.get("items") or node.get("additionalProperties")
    return items if isinstance(items, dict) else None


def _differences(
    shipped: dict[str, Any],
    shipped_root: dict[str, Any],
    model: dict[str, Any],
    model_root: dict[str, Any],
    where: str,
    derived: set[str],
    path: str = "",
) -> list[str]:
    """Where the two schemas disagree; ``derived``: the paths (``DERIVED``) of properties only
    the shipped schema has; ``path``: where in the document ``shipped`` and ``model`` are."""
    problems: list[str] = []
    s_obj, m_obj = _object(shipped, shipped_root), _object(model, model_root)
    if (s_obj is None) != (m_obj is None):
        return [f"{where}: an object in one schema only"]
    if s_obj is not None and m_obj is not None:
        here = {p.removeprefix(path).removeprefix(".") for p in derived if _below(p, path)}
        s_props, m_props = set(s_obj["properties"]) - here, set(m_obj["properties"])
        if s_props != m_props:
            problems.append(
                f"{where}: properties differ (schema only: {sorted(s_props - m_props)}, "
                f"model only: {sorted(m_props - s_props)})"
            )
        unrequired = set(m_obj.get("required", [])) - set(s_obj.get("required", []))
        if unrequired:
            problems.append(f"{where}: the model requires {sorted(unrequired)}, the schema not")
        for name in sorted(s_props & m_props):
            problems += _differences(
                s_obj["properties"][name],
                shipped_root,
                m_obj["properties"][name],
                model_root,
                f"{where}.{name}",
                derived,
                f"{path}.{name}" if path else name,
            )
        return problems
    s_types, m_types = _types(shipped, shipped_root), _types(model, model_root)
    if "any" not in s_types | m_types and not s_types <= m_types | {"null", "integer"}:
        problems.append(f"{where}: schema types {sorted(s_types)}, model types {sorted(m_types)}")
    s_items, m_items = _items(shipped, shipped_root), _items(model, model_root)
    if s_items is not None and m_items is not None:
        problems += _differences(
            s_items, shipped_root, m_items, model_root, f"{where}[]", derived, f"{path}[]"
        )
    return problems


def _below(derived: str, path: str) -> bool:
    """``derived`` names a property of the object at ``path`` (not one deeper)."""
    if not path:
        return "." not in derived and "[" not in derived
    rest = derived.removeprefix(path)
    return rest != derived and rest.startswith(".") and "." not in rest[1:] and "[" not in rest
