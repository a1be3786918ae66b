"""perfgate's import graph, read from the source (never by importing it): which module imports
which, at module level and inside functions, and the reason a function-level import gives.

``tests/test_import_graph.py`` holds the graph to three rules; ``python tests/import_graph.py``
prints what breaks them (handy while fixing).
"""

from __future__ import annotations

import ast
import sys
import sys as _sys

if _sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "perfgate"
LAYERS = ROOT / "docs" / "layers.toml"
LAZY_MARK = "# lazy:"


@dataclass(frozen=True)
class Import:
    """One import of a perfgate module by another."""

    importer: str
    imported: str
    line: int
    function_level: bool
    reason: str | None
    """The text after ``# lazy:`` on the import's first line, if any."""


@dataclass
class Graph:
    modules: dict[str, Path] = field(default_factory=dict)
    imports: list[Import] = field(default_factory=list)

    def edges(self, *, function_level: bool = True) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {m: set() for m in self.modules}
        for item in self.imports:
            if item.importer != item.imported and (function_level or not item.function_level):
                found[item.importer].add(item.imported)
        return found


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def build_graph(package: Path = PACKAGE) -> Graph:
    root = package.parent
    graph = Graph(modules={module_name(p, root): p for p in sorted(package.rglob("*.py"))})
    for name, path in graph.modules.items():
        source = path.read_text()
        lines = source.splitlines()
        tree = ast.parse(source)
        inside = _function_nodes(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if _type_checking_only(tree, node):
                continue
            line = lines[node.lineno - 1]
            reason = line.split(LAZY_MARK, 1)[1].strip() if LAZY_MARK in line else None
            for target in _targets(node, name, path, graph.modules):
                graph.imports.append(
                    Import(name, target, node.lineno, id(node) in inside, reason or None)
                )
    return graph


def _function_nodes(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            found |= {id(child) for child in ast.walk(node) if child is not node}
    return found


def _type_checking_only(tree: ast.Module, target: ast.AST) -> bool:
    return any(
        isinstance(node, ast.If)
        and "TYPE_CHECKING" in ast.unparse(node.test)
        and any(child is target for stmt in node.body for child in ast.walk(stmt))
        for node in ast.walk(tree)
    )


def _targets(
    node: ast.Import | ast.ImportFrom, importer: str, path: Path, modules: Mapping[str, Path]
) -> Iterable[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        names = [
            f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
            for alias in node.names
        ]
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name.startswith("perfgate") and name:
            yield name


def cycles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def unit(module: str, modules: Mapping[str, Path]) -> str:
    """The subpackage a module belongs to (``perfgate.compare``), or the module itself for a
    top-level module (``perfgate.run``)."""
    parts = module.split(".")
    package = ".".join(parts[:2])
    if len(parts) >= 2 and package in modules and modules[package].name == "__init__.py":
        return package
    return module


def unit_edges(graph: Graph) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for importer, targets in graph.edges().items():
        source = unit(importer, graph.modules)
        found.setdefault(source, set())
        for target in targets:
            if unit(target, graph.modules) != source:
                found[source].add(unit(target, graph.modules))
    return found


@dataclass(frozen=True)
class Layers:
    floors: list[tuple[str, list[str]]]
    """(floor name, module prefixes), lowest first."""

    def floor_of(self, module: str) -> int:
        best, best_length = -1, -1
        for number, (_, prefixes) in enumerate(self.floors):
            for prefix in prefixes:
                inside = module.startswith(prefix + ".") and prefix != "perfgate"
                if (module == prefix or inside) and len(prefix) > best_length:
                    best, best_length = number, len(prefix)
        return best


def read_layers(path: Path = LAYERS) -> Layers:
    table = tomllib.loads(path.read_text())
    return Layers([(floor["name"], floor["modules"]) for floor in table["floor"]])


def violations(graph: Graph, layers: Layers) -> list[str]:
    """Every rule broken: cycles of modules and of subpackages, imports reaching a higher
    floor, modules on no floor, and function-level imports without a recorded reason."""
    problems = [f"module cycle: {' → '.join(c)}" for c in cycles(graph.edges())]
    problems += [f"subpackage cycle: {' → '.join(c)}" for c in cycles(unit_edges(graph))]
    for module in sorted(graph.modules):
        if layers.floor_of(module) < 0:
            problems.append(f"{module} is on no floor of {LAYERS.name}")
    for item in sorted(set(graph.imports), key=lambda i: (i.importer, i.line, i.imported)):
        upper, lower = layers.floor_of(item.imported), layers.floor_of(item.importer)
        if upper > lower >= 0:
            problems.append(
                f"{item.importer}:{item.line} imports {item.imported}, a higher floor "
                f"({layers.floors[upper][0]} over {layers.floors[lower][0]})"
            )
        if item.function_level and item.reason is None:
            problems.append(
                f"{item.importer}:{item.line} imports {item.imported} inside a function with "
                f"no '{LAZY_MARK} <reason>' on that line"
            )
    return problems


if __name__ == "__main__":
    found = violations(build_graph(), read_layers())
    print("\n".join(found))
    print(f"{len(found)} problems", file=sys.stderr)
