"""The layers import downwards: the trace layer under the advisor, distributed and the runner.

Read from the source, not from ``sys.modules``: every import statement counts, at module level,
inside a function or under ``TYPE_CHECKING`` alike, since a cycle dodged by an import inside a
function is still a cycle. One test runs a real timed repeat to check that the worker's timed
path never loads the profiling code.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "perfgate"

TRACE_MAY_IMPORT = ("perfgate.trace", "perfgate.workloads", "perfgate.telemetry")
"""Besides the package's own base modules (errors, files, and the documents' models: the worker's
profiling window writes its report through ``perfgate.documents.worker``)."""
BASE_MODULES = ("perfgate.errors", "perfgate.files", "perfgate.documents")
ACYCLIC = ("advise", "distributed", "runner", "trace")
"""Subpackages among which no import may go both ways, directly or through each other."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, list[tuple[str, int, str]]]:
    """Module → (imported perfgate module, line, source line) for every import statement."""
    found: dict[str, list[tuple[str, int, str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        lines = source.splitlines()
        edges = []
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name == "perfgate" or name.startswith("perfgate."):
                    edges.append((name, node.lineno, lines[node.lineno - 1]))
        found[_module_name(path)] = edges
    return found


def _function_level(path: Path) -> list[tuple[int, str]]:
    """Imports of perfgate modules inside a function body: (line, source line)."""
    source = path.read_text()
    lines = source.splitlines()
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            module = None
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                module = node.module
            elif isinstance(node, ast.Import):
                module = node.names[0].name
            if module and module.startswith("perfgate"):
                found.append((node.lineno, lines[node.lineno - 1]))  # type: ignore[attr-defined]
    return found


def _subpackage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else None


@pytest.mark.slow
def test_the_trace_layer_imports_nothing_above_it() -> None:
    allowed = (*TRACE_MAY_IMPORT, *BASE_MODULES)
    upward = [
        f"{module}:{line}: {text.strip()}"
        for module, edges in _imports().items()
        if module.startswith("perfgate.trace")
        for imported, line, text in edges
        if not any(imported == a or imported.startswith(a + ".") for a in allowed)
    ]
    assert upward == []


def test_the_report_renders_what_it_is_given() -> None:
    """The report (``perfgate.report``) turns documents into pages and text: it never runs the
    classifier or the advisor itself; its callers pass the diagnoses and advice in."""
    deciding = [
        f"{module}:{line}: {text.strip()}"
        for module, edges in _imports().items()
        if module == "perfgate.report" or module.startswith("perfgate.report.")
        for imported, line, text in edges
        if imported.startswith(("perfgate.diagnose", "perfgate.advise"))
    ]
    assert deciding == []


@pytest.mark.slow
def test_no_cycle_among_advise_distributed_runner_and_trace() -> None:
    graph: defaultdict[str, set[str]] = defaultdict(set)
    witness: dict[tuple[str, str], str] = {}
    for module, edges in _imports().items():
        source = _subpackage(module)
        for imported, line, _ in edges:
            target = _subpackage(imported)
            if source in ACYCLIC and target in ACYCLIC and source != target:
                graph[source].add(target)
                witness.setdefault((source, target), f"{module}:{line} imports {imported}")

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(graph[node])
        return False

    both_ways = [witness[(a, b)] for a in ACYCLIC for b in sorted(graph[a]) if reaches(b, a)]
    assert both_ways == []


def test_imports_inside_functions_say_why() -> None:
    """In the layers this test guards, a perfgate import kept inside a function says why."""
    silent = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text.strip()}"
        for package in ACYCLIC
        for path in sorted((PACKAGE / package).rglob("*.py"))
        for line, text in _function_level(path)
        if "# lazy:" not in text
    ]
    assert silent == []


PROBE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from perfgate.config import load_config
    from perfgate.documents.worker import WORKER_SPEC
    from perfgate.runner.orchestrator import worker_spec
    from perfgate.runner.plan import Selection, make_plan
    from perfgate.runner.worker import main

    selection = Selection(workloads=["mlp"], steps=2, warmup=1, threads=1)
    [planned], settings = make_plan(load_config(), selection)
    spec = worker_spec(planned, settings, "cpu", count_flops=False)
    folder = Path(sys.argv[1])
    (folder / "spec.json").write_text(json.dumps(WORKER_SPEC.dump(spec)))
    code = main([str(folder / "spec.json"), str(folder / "out.json")])
    loaded = sorted(m for m in sys.modules if m.startswith(("perfgate.trace", "perfgate.advise")))
    print("EXIT", code, "PROFILING-MODULES:", loaded, "VALIDATOR:", "jsonschema" in sys.modules)
    """
)


@pytest.mark.slow
def test_a_timed_repeat_never_loads_the_profiling_code(tmp_path: Path) -> None:
    """Nor the schema validator: the worker reads its spec (which perfgate wrote) unvalidated
    (``perfgate.documents.worker``), so a spawned worker never pays for jsonschema's import."""
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    assert "EXIT 0 PROFILING-MODULES: [] VALIDATOR: False" in completed.stdout, completed.stdout
