"""perfgate's import graph keeps to its layers (``docs/layers.toml``, DESIGN §1).

Three rules, read from the source (``tests/import_graph.py``): no cycle of modules or of
subpackages, at module level or inside functions; no import of a higher floor; and a perfgate
module imported inside a function says why on that line (``# lazy: <reason>``). The checker is
first shown to catch each kind of break on a small package of its own, so a green run of the
real check means something.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from import_graph import Layers, build_graph, read_layers, violations

FLOORS = Layers(
    [("low", ["perfgate", "perfgate.base"]), ("high", ["perfgate.app", "perfgate.tools"])]
)


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    package = tmp_path / "perfgate"
    for name, text in {"__init__.py": "", **files}.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def test_a_clean_package_has_no_violation(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "base.py": "X = 1\n",
            "app.py": (
                "from perfgate.base import X\n\n"
                "def f():\n    from perfgate.tools import g  # lazy: only when asked\n"
            ),
            "tools/__init__.py": "",
            "tools/g.py": "from perfgate.base import X\n",
        },
    )
    assert violations(build_graph(package), FLOORS) == []


BROKEN = {
    "module cycle, inside a function": (
        {
            "base.py": "def f():\n    import perfgate.app  # lazy: a cycle all the same\n",
            "app.py": "import perfgate.base\n",
        },
        "module cycle: perfgate.app → perfgate.base",
    ),
    "subpackage cycle": (
        {
            "base.py": "",
            "app.py": "from perfgate.tools.one import y\n",
            "tools/__init__.py": "",
            "tools/one.py": "from perfgate.app import x\n",
        },
        "subpackage cycle: perfgate.app → perfgate.tools",
    ),
    "higher floor": (
        {"base.py": "def f():\n    from perfgate.app import g  # lazy: late\n", "app.py": ""},
        "perfgate.base:2 imports perfgate.app, a higher floor (high over low)",
    ),
    "silent lazy import": (
        {"base.py": "", "app.py": "def f():\n    from perfgate.base import g\n"},
        "perfgate.app:2 imports perfgate.base inside a function with no '# lazy: <reason>' "
        "on that line",
    ),
    "no floor": ({"base.py": "", "stray.py": ""}, "perfgate.stray is on no floor of layers.toml"),
}


@pytest.mark.parametrize(("files", "expected"), BROKEN.values(), ids=BROKEN.keys())
def test_each_kind_of_break_is_found(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    found = violations(build_graph(_package(tmp_path, files)), FLOORS)
    assert expected in found, found


def test_perfgate_keeps_to_its_layers() -> None:
    found = violations(build_graph(), read_layers())
    assert found == [], "\n".join(found)
