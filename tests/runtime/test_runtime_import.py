"""Import boundaries: cslint works without torch; cslint.cstorch says what to install
and imports without cycles."""

from __future__ import annotations

import ast
import importlib.util
import pathlib
import subprocess
import sys

import cslint

PACKAGE_ROOT = pathlib.Path(cslint.__file__).parent
CSTORCH_ROOT = PACKAGE_ROOT / "cstorch"
EXPECTED_MESSAGE = (
    "ImportError: cslint.cstorch needs PyTorch, which is not installed: "
    "pip install 'cslint[runtime]'"
)

BLOCK_BY_SYS_MODULES = "import sys; sys.modules['torch'] = None\n"
BLOCK_BY_META_PATH = """
import sys
class BlockTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, BlockTorch())
"""


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )


def test_import_without_torch_names_the_extra_to_install():
    for blocker in (BLOCK_BY_SYS_MODULES, BLOCK_BY_META_PATH):
        result = run_python(blocker + "import cslint.cstorch\n")
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert lines[-1] == EXPECTED_MESSAGE
        # One error, not a chain through torch's own ImportError.
        assert "During handling" not in result.stderr
        assert "ModuleNotFoundError" not in result.stderr


def test_linter_package_imports_without_torch():
    result = run_python(
        BLOCK_BY_META_PATH
        + "import cslint, cslint.codes\n"
        + "assert 'torch' not in sys.modules and 'cslint.cstorch' not in sys.modules\n"
        + "print(len(cslint.codes.CODES))\n"
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 0


def _imported_modules(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_only_cstorch_imports_torch_or_cstorch():
    offenders = []
    for path in PACKAGE_ROOT.rglob("*.py"):
        # `cslint port --verify` runs the port on the runtime in a subprocess of its own.
        if "cstorch" in path.relative_to(PACKAGE_ROOT).parts \
                or path.relative_to(PACKAGE_ROOT).as_posix() == "port/verify.py":
            continue
        for module in _imported_modules(path):
            if module == "torch" or module.startswith(("torch.", "cslint.cstorch")):
                offenders.append(f"{path.relative_to(PACKAGE_ROOT)} imports {module}")
    assert offenders == []


def test_advice_imports_nothing():
    # The linter's messages and the runtime's errors both read it.
    tree = ast.parse((PACKAGE_ROOT / "advice.py").read_text(encoding="utf-8"))
    imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert imports == []


def test_runtime_codes_come_from_the_shared_table():
    from cslint.codes import CODES

    import cslint.cstorch as cstorch

    runtime_codes = {code for code, entry in CODES.items() if entry.runtime}
    assert runtime_codes == {
        "CS101", "CS102", "CS201", "CS202", "CS203", "CS204", "CS205", "CS206", "CS305",
        "CS403", "CS501",
    }
    error = cstorch.StateError("CS101", "problem", "fix")
    assert str(error).startswith("CS101 state-outside-preinitialize: problem")


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(CSTORCH_ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("cslint.cstorch", *parts))


def _cstorch_imports(node: ast.AST, module: str, is_package: bool, modules) -> list[str]:
    """The cstorch modules `node` imports. `from x import y` imports the module
    x.y where there is one, else x; relative imports resolve against `module`."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = module if is_package else module.rpartition(".")[0]
            base = importlib.util.resolve_name("." * node.level + base, package)
        submodules = [f"{base}.{alias.name}" for alias in node.names]
        names = [name if name in modules else base for name in submodules]
    else:
        names = []
    return [name for name in names if name in modules and name != module]


def cstorch_import_graph() -> dict[str, set[str]]:
    """Each cstorch module -> the cstorch modules it imports. Imports inside
    functions count: deferring an import hides a cycle, it does not remove one."""
    paths = sorted(CSTORCH_ROOT.rglob("*.py"))
    modules = {_module_name(path): path for path in paths}
    graph = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_package = path.name == "__init__.py"
        graph[module] = {
            name
            for node in ast.walk(tree)
            for name in _cstorch_imports(node, module, is_package, modules)
        }
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (its modules, the first repeated at the end), or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        if module in path:
            return path[path.index(module) :] + [module]
        if module in done:
            return None
        path.append(module)
        for imported in sorted(graph[module]):
            cycle = visit(imported)
            if cycle:
                return cycle
        path.pop()
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = visit(module)
        if cycle:
            return cycle
    return None


def test_import_graph_follows_imports_of_submodules():
    graph = cstorch_import_graph()
    assert "cslint.cstorch.optim.scheduler" in graph["cslint.cstorch.optim"]
    assert "cslint.cstorch.optim" in graph["cslint.cstorch"]


def test_cstorch_modules_import_no_cycle():
    cycle = find_cycle(cstorch_import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_find_cycle_reports_one():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
