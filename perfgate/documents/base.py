"""What every persisted perfgate document shares: a name, a version, one reader, one writer.

A document is a frozen dataclass (its *model*) plus a :class:`DocumentKind` that knows the
format's name (``perfgate.result``), its version and how to turn the model into JSON and back.
Readers never take ``dict[str, Any]``: :meth:`DocumentKind.read` checks the name and version,
migrates an older format forward, validates against the format's JSON Schema (generated from
the model, ``perfgate/documents/schemas.py``, shipped in ``perfgate/schema/``) and builds the
model; renderers and the store take the model.

**The compatibility rule.** A document carries ``schema`` (its format), ``schema_version``
(the major version) and ``schema_minor`` (absent means 0):

- within a major version a format only grows: a new minor adds optional fields, never removes
  or changes one. A reader accepts every minor of its major; fields it does not know (from a
  newer minor) are ignored, so an older perfgate reads a newer document of the same major;
- a newer major is refused with one line: "written by a newer perfgate …; upgrade perfgate";
- an older major is migrated forward one version at a time (the kind's ``migrations``), then
  read as the current one.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from perfgate.errors import UsageError
from perfgate.files import read_json

T = TypeVar("T")

HEADER = ("schema", "schema_version", "schema_minor")
"""The keys every document starts with; not part of its model's fields."""

Migration = Callable[[dict[str, Any]], dict[str, Any]]
"""Turns a document of major version N into one of version N + 1 (header included)."""


@dataclass(frozen=True)
class DocumentKind(Generic[T]):
    """One document format: its name, current version, model, and who writes it."""

    name: str
    """``perfgate.<what>``: the ``schema`` field of every such document."""
    major: int
    minor: int
    model: type[T]
    produced_by: str
    """The command that writes it, for messages ("pass a file written by …")."""
    migrations: Mapping[int, Migration] = field(default_factory=dict)
    """Major version N → the function that migrates it to N + 1."""
    dump_model: Callable[[T], dict[str, Any]] | None = None
    """The model's JSON form, when it is not the plain ``dataclasses.asdict`` one."""
    legacy: Callable[[Any], Any] | None = None
    """Recognises a document of a format written before it had a header, and gives it the
    header of its old version (so that ``migrations`` take it from there)."""
    infinite_as_null: bool = False
    """The format writes an infinite float (an "unbounded" interval, a change that could never
    be detected) as null, which JSON can hold: its schema admits null for every number and the
    reader turns such a null back into infinity. Formats of measurements leave it off: a
    measured number is always finite."""

    @property
    def schema_file(self) -> str:
        """The file of the current version's JSON Schema in ``perfgate/schema``."""
        return f"{self.name.removeprefix('perfgate.')}-v{self.major}.json"

    @property
    def fix(self) -> str:
        return f"pass a file written by {self.produced_by}"

    def load(self, path: Path, what: str | None = None) -> T:
        """Read the document at ``path`` (every way the file can be wrong: one usage error)."""
        label = what or f"{self.name.removeprefix('perfgate.')} file"
        data = read_json(path, what=label, fix=self.fix, path_fix=self.fix)
        return self.read(data, f"{label} {path}")

    def read(self, data: Any, origin: str) -> T:
        """The model of a parsed document: name and version checked, an older major
        migrated, the schema validated, unknown fields of a newer minor ignored."""
        return build(self.model, self.validate(data, origin), infinite=self.infinite_as_null)

    def read_trusted(self, data: Any, origin: str) -> T:
        """The model of a document this perfgate wrote for itself: name and version checked,
        an older major migrated, the schema *not* validated. Only for a document handed from
        one of perfgate's processes to another (the worker's spec): the validator's import
        would cost every worker process 0.2 s, and the writer is perfgate's own code."""
        return build(self.model, self.upgrade(data, origin), infinite=self.infinite_as_null)

    def validate(self, data: Any, origin: str) -> dict[str, Any]:
        """The document as the current major version, checked against its schema."""
        body = self.upgrade(data, origin)
        problem = _schema_problem(self.json_schema(), body)
        if problem is not None:
            raise UsageError(f"{origin} does not match the {self.name} format: {problem}", self.fix)
        return body

    def upgrade(self, data: Any, origin: str) -> dict[str, Any]:
        """The document as the current major version (checked and migrated, not validated)."""
        if self.legacy is not None:
            data = self.legacy(data)
        if not isinstance(data, dict) or data.get("schema") != self.name:
            found = data.get("schema") if isinstance(data, dict) else type(data).__name__
            raise UsageError(
                f"{origin} is not a {self.name} document (schema: {found!r})", self.fix
            )
        major, minor = data.get("schema_version"), data.get("schema_minor", 0)
        if not isinstance(major, int) or not _is_count(major) or not _is_count(minor):
            raise UsageError(f"{origin} has no valid version ({major!r}.{minor!r})", self.fix)
        if major > self.major:
            raise UsageError(
                f"{origin} was written by a newer perfgate ({self.name} format {major}.{minor}; "
                f"this perfgate reads format {self.major})",
                "upgrade perfgate to read it",
            )
        while major < self.major:
            migrate = self.migrations.get(major)
            if migrate is None:
                raise UsageError(
                    f"{origin} is in {self.name} format {major}, which this perfgate no longer "
                    "reads",
                    f"re-create it with {self.produced_by}",
                )
            data = migrate(data)
            major = data["schema_version"]
        return data

    def dump(self, document: T) -> dict[str, Any]:
        """The JSON-ready document: the header, then the model's fields."""
        body = (
            self.dump_model(document)
            if self.dump_model is not None
            else json_ready(dataclasses.asdict(document))  # type: ignore[call-overload]
        )
        return {**self.header(), **{k: v for k, v in body.items() if k not in HEADER}}

    def header(self) -> dict[str, Any]:
        """The fields every document of this format starts with."""
        return {"schema": self.name, "schema_version": self.major, "schema_minor": self.minor}

    def json_schema(self) -> dict[str, Any]:
        """The current version's JSON Schema, as shipped in the package."""
        return _shipped_schema(self.schema_file)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@cache
def _shipped_schema(file: str) -> dict[str, Any]:
    text = resources.files("perfgate").joinpath(f"schema/{file}").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def _schema_problem(schema: Mapping[str, Any], data: Any) -> str | None:
    """Where and why ``data`` does not fit ``schema`` (the first error), or None."""
    import jsonschema  # lazy: jsonschema's import (0.2 s) only when a document is read

    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(data)
    )
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(top)"
    return f"at {where}: {error.message}"


def json_ready(value: Any) -> Any:
    """``value`` with paths as text, tuples as lists and non-finite floats as null: strict JSON
    has no inf or NaN (an infinite "smallest detectable change" means "never"), and every
    document perfgate writes is strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value


def build(model: type[T], data: Mapping[str, Any], *, infinite: bool = False) -> T:
    """The dataclass ``model`` from validated JSON ``data``: nested dataclasses, lists, tuples,
    dicts and optionals rebuilt from their type hints; keys the model does not have (a newer
    minor's) ignored; with ``infinite``, a null where a float is due is infinity
    (:attr:`DocumentKind.infinite_as_null`)."""
    hints = _hints(model)  # type: ignore[arg-type]  # classes are hashable
    values = {
        f.name: _value(hints[f.name], data[f.name], infinite)
        for f in dataclasses.fields(model)  # type: ignore[arg-type]
        if f.name in data and f.init
    }
    return model(**values)


@cache
def _hints(model: type) -> dict[str, Any]:
    return get_type_hints(model)


def _value(hint: Any, value: Any, infinite: bool) -> Any:
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _value(options[0], value, infinite)
        return _first_fit(options, value, infinite)
    if value is None:
        return math.inf if hint is float and infinite else None
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return build(hint, value, infinite=infinite)
    if origin is list:
        return [_value(args[0], v, infinite) for v in value]
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_value(args[0], v, infinite) for v in value)
        return tuple(_value(a, v, infinite) for a, v in zip(args, value, strict=True))
    if origin in (dict, Mapping) and args:
        return {k: _value(args[1], v, infinite) for k, v in value.items()}
    if hint is float and isinstance(value, int):
        return float(value)
    if hint is Path:
        return Path(value)
    return value


def _first_fit(options: Sequence[Any], value: Any, infinite: bool) -> Any:
    """A union of several types: a scalar of one of them as it is (``True`` stays a bool and
    ``3`` an int where ``bool | int | float`` is due); else the first dataclass whose fields the
    value has; else as is."""
    if any(type(value) is option for option in options):
        return value
    for option in options:
        if (
            dataclasses.is_dataclass(option)
            and isinstance(option, type)
            and isinstance(value, dict)
        ):
            names = {f.name for f in dataclasses.fields(option)}
            if set(value) <= names | set(HEADER):
                return build(option, value, infinite=infinite)
        if get_origin(option) is list and isinstance(value, list):
            return _value(option, value, infinite)
        if option is float and isinstance(value, (int, float)):
            return float(value)
        if get_origin(option) is Literal and value in get_args(option):
            return value
    return value
