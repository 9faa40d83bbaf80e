"""Import boundaries: cslint works without torch; cslint.cstorch says what to install."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import cslint

PACKAGE_ROOT = pathlib.Path(cslint.__file__).parent
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
        if "cstorch" in path.relative_to(PACKAGE_ROOT).parts:
            continue
        for module in _imported_modules(path):
            if module == "torch" or module.startswith(("torch.", "cslint.cstorch")):
                offenders.append(f"{path.relative_to(PACKAGE_ROOT)} imports {module}")
    assert offenders == []


def test_runtime_codes_come_from_the_shared_table():
    from cslint.codes import CODES

    import cslint.cstorch as cstorch

    runtime_codes = {code for code, entry in CODES.items() if entry.runtime}
    assert runtime_codes == {
        "CS101", "CS102", "CS201", "CS202", "CS203", "CS204", "CS205", "CS206", "CS305", "CS501"
    }
    error = cstorch.StateError("CS101", "problem", "fix")
    assert str(error).startswith("CS101 state-outside-preinitialize: problem")
