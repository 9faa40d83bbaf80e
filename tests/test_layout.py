"""The linter's layout holds: analyses produce facts and never import rules or fixes,
output formats see only the diagnostics, and the linter's modules import without cycles."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cslint

PACKAGE = Path(cslint.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# `cslint port --verify` runs its checks in a subprocess (`python -m cslint.port.verify`),
# which runs the port on the runtime: that module is the runtime's side, not the linter's.
RUNTIME_SIDE = {"cslint.port.verify"}
LINTER = {module_name(p): p for p in PACKAGE.rglob("*.py")
          if "cstorch" not in p.relative_to(PACKAGE).parts
          and module_name(p) not in RUNTIME_SIDE}


def imports(path: Path, every_level: bool = True) -> set[str]:
    """The cslint modules `path` imports (`from a import b` counts `a.b` when that is a
    module); with `every_level` False, only module-level imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = ast.walk(tree) if every_level else iter(tree.body)
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names
                      if f"{node.module}.{a.name}" in LINTER}
    return {name for name in found if name.split(".")[0] == "cslint"}


def under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


@pytest.mark.parametrize("name", sorted(n for n in LINTER if under(n, "cslint.semantic")))
def test_analyses_import_no_rules_fixes_or_output(name):
    forbidden = ("cslint.rules", "cslint.fixes", "cslint.diagnostics", "cslint.output",
                 "cslint.engine", "cslint.app", "cslint.cli", "cslint.advice")
    assert not {i for i in imports(LINTER[name]) if any(under(i, f) for f in forbidden)}


@pytest.mark.parametrize("name", sorted(n for n in LINTER if under(n, "cslint.output")))
def test_output_formats_see_only_the_diagnostics(name):
    allowed = ("cslint.diagnostics", "cslint.codes", "cslint.output")
    assert not {i for i in imports(LINTER[name]) if not any(under(i, a) for a in allowed)}


def test_the_linter_never_imports_the_runtime():
    offenders = {name: sorted(i for i in imports(path) if under(i, "cslint.cstorch"))
                 for name, path in LINTER.items()}
    assert not {name: found for name, found in offenders.items() if found}


def test_the_linter_imports_without_cycles():
    graph = {name: {i for i in imports(path, every_level=False) if i in LINTER and i != name}
             for name, path in LINTER.items()}
    # A package's __init__ runs before its modules: importing `a.b` imports `a` first,
    # which is no cycle, so edges into one's own parent packages are left out.
    for name in graph:
        graph[name] = {i for i in graph[name] if not under(name, i)}
    visiting, done, cycles = set(), set(), []

    def visit(node: str, path: list[str]) -> None:
        if node in done:
            return
        if node in visiting:
            cycles.append(path[path.index(node):] + [node])
            return
        visiting.add(node)
        for target in sorted(graph[node]):
            visit(target, path + [target])
        visiting.discard(node)
        done.add(node)

    for start in sorted(graph):
        visit(start, [start])
    assert cycles == []
