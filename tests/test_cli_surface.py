"""The command line's surface, snapshotted: every command and sub-command, each parameter's
names, type, default, required/flag/multiple and help text, and the order each group lists its
commands in, against ``tests/data/cli_surface.json``.

A change to an option (renamed, a new default, a help text reworded) shows up in that file as
a reviewed diff; a refactor of ``perfgate.cli`` must leave it untouched. Regenerate it with::

    PERFGATE_UPDATE_CLI_SURFACE=1 python -m pytest tests/test_cli_surface.py

Read from the command tree typer builds (``typer.main.get_command``), never from ``--help``
pages, whose layout depends on the terminal. A parameter's ``type`` is the Python annotation
typer builds it from (``list[str]``, ``Path | None``): the name of the click type made from it
differs between typer releases, the annotation does not.
"""

from __future__ import annotations

import difflib
import inspect
import json
import os
import types
import typing
from pathlib import PurePath
from typing import Any

import typer
import typer.main

from perfgate.cli import app

SNAPSHOT = os.path.join(os.path.dirname(__file__), "data", "cli_surface.json")
UPDATE = "PERFGATE_UPDATE_CLI_SURFACE"


def _annotation_text(annotation: Any) -> str:
    """``str | None``, ``list[str]``, ``tuple[str, str] | None``: the same on every Python."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join(_annotation_text(arg) for arg in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(_annotation_text(arg) for arg in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation))


def _annotations(command: Any) -> dict[str, str]:
    """Parameter name → annotation text, from the function the command calls."""
    function = inspect.unwrap(command.callback) if command.callback is not None else None
    if function is None:
        return {}
    hints = typing.get_type_hints(function)  # Annotated[...] reads as the type it annotates
    return {name: _annotation_text(hint) for name, hint in hints.items() if name != "return"}


def _plain(value: Any) -> Any:
    """A default as JSON: paths as text, tuples as lists, anything else exotic as its repr."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return repr(value)


def _bound(param: Any, which: str) -> Any:
    """``min=``/``max=`` of a ranged number, wherever this typer release keeps it."""
    if hasattr(param, which):
        return getattr(param, which)
    return getattr(getattr(param, "type", None), which, None)


def _parameter(param: Any, annotations: dict[str, str]) -> dict[str, Any]:
    kind = "argument" if param.param_type_name == "argument" else "option"
    return {
        "name": param.name,
        "kind": kind,
        "opts": list(param.opts),
        "secondary_opts": list(param.secondary_opts),
        "type": annotations.get(param.name or "", "?"),
        "default": _plain(param.default),
        "required": bool(param.required),
        "is_flag": bool(getattr(param, "is_flag", False)),
        "multiple": bool(param.multiple),
        "nargs": param.nargs,
        "metavar": param.metavar,
        "min": _bound(param, "min"),
        "max": _bound(param, "max"),
        "help": getattr(param, "help", None),
    }


def surface() -> dict[str, Any]:
    """Command path (``perfgate db prune``) → its help and its parameters, every command."""
    found: dict[str, Any] = {}

    def visit(path: str, command: Any) -> None:
        annotations = _annotations(command)
        found[path] = {
            "help": command.help,
            "params": [_parameter(p, annotations) for p in command.params],
        }
        children = getattr(command, "commands", None)
        if children is not None:  # a group: its commands in the order --help lists them
            found[path]["commands"] = command.list_commands(typer.Context(command))
            for name, child in sorted(children.items()):
                visit(f"{path} {name}", child)

    visit("perfgate", typer.main.get_command(app))
    return found


def _text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_the_command_line_surface_matches_its_snapshot() -> None:
    live = _text(surface())
    if os.environ.get(UPDATE):
        with open(SNAPSHOT, "w", encoding="utf-8") as handle:
            handle.write(live)
    with open(SNAPSHOT, encoding="utf-8") as handle:
        stored = handle.read()
    if live != stored:
        diff = "".join(
            difflib.unified_diff(
                stored.splitlines(keepends=True),
                live.splitlines(keepends=True),
                fromfile="tests/data/cli_surface.json (snapshot)",
                tofile="perfgate.cli (live)",
            )
        )
        raise AssertionError(
            f"the CLI surface changed; if that is intended, rerun with {UPDATE}=1 and review "
            f"the snapshot's diff:\n{diff}"
        )


def test_every_command_is_in_the_snapshot() -> None:
    """Sanity: the walk reaches the sub-commands (db, baseline, rules), not only the top."""
    paths = set(surface())
    assert {"perfgate run", "perfgate compare", "perfgate db prune", "perfgate rules lint"} <= paths
