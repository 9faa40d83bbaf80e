"""Autofixes: fix fixtures (`x.in.py` -> `x.out.py`, exactly), every fixture fixed and
re-linted, the --fix / --diff / --unsafe-fixes command line, and faithful writing."""

from __future__ import annotations

import ast
import os
import shutil
import stat
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from cslint.cli import main
from cslint.deep_stack import with_deep_stack
from cslint.diagnostics import Finding, Location, Severity
from cslint.engine import lint
from cslint.fixes import cstorch_creation_fix, replace_call_fix, scale_first_argument_fix
from cslint.fixes.apply import fix_findings, fix_source
from cslint.fixes.write import write_fixed
from cslint.rules.program import optimizer_fix_plan
from cslint.source import SourceFile
from helpers import FIXTURES, REPO, config_for, options_in
from test_fixtures import fixture_units

FIX_FIXTURES = FIXTURES / "fixes"
BUILDER_FIXTURES = FIX_FIXTURES / "_builders"


def _pairs(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.in.py"))


def _out(path: Path) -> Path:
    return path.with_name(path.name[: -len(".in.py")] + ".out.py")


def _lint_file(path: Path, options: dict, root: Path):
    return lint([str(path)], config_for(options), project_root=root)


# ---- fix fixtures driven by the rules -----------------------------------------------------

@pytest.mark.parametrize("fixture", _pairs(FIX_FIXTURES), ids=lambda p: p.name)
def test_fix_fixture(fixture: Path, tmp_path: Path):
    target = tmp_path / fixture.name.replace(".in.py", ".py")
    shutil.copyfile(fixture, target)
    options = options_in(fixture.read_text(encoding="utf-8"))
    result = _lint_file(target, options, tmp_path)
    assert not result.errors, [e.render() for e in result.errors]
    report = fix_findings(result.sources, result.findings, unsafe=True)
    assert not report.errors
    (file,) = report.files
    assert file.new_raw.decode("utf-8") == _out(fixture).read_text(encoding="utf-8")
    # Fixing the fixed file changes nothing.
    write_fixed(file)
    again = _lint_file(target, options, tmp_path)
    second = fix_findings(again.sources, again.findings, unsafe=True)
    assert not any(f.changed for f in second.files)


# ---- fix fixtures driven by the fix builders (CS104's and CS205's rewrites) ---------------

def _builder_findings(source: SourceFile) -> list[Finding]:
    """Attach the builders' fixes to every call they apply to, as CS104 / CS205 would."""
    tree = source.parse()
    findings = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        fix = None
        if isinstance(node.func.value, ast.Name) and node.func.value.id == "torch":
            fix = cstorch_creation_fix(node)
        elif node.func.attr in ("add_", "sub_", "addcdiv_", "addcmul_"):
            keyword = "alpha" if node.func.attr in ("add_", "sub_") else "value"
            if any(k.arg == keyword for k in node.keywords):
                fix = scale_first_argument_fix(node.func.attr, keyword)
        if fix is None:
            continue
        end_col = source.character_column(node.end_lineno, node.end_col_offset)
        location = Location(node.lineno, source.character_column(node.lineno, node.col_offset),
                            node.end_lineno, end_col)
        findings.append(Finding(source.display_path, location, "CS104", "test", "test",
                                Severity.ERROR, fix))
    return findings


@pytest.mark.parametrize("fixture", _pairs(BUILDER_FIXTURES), ids=lambda p: p.name)
def test_builder_fixture(fixture: Path, tmp_path: Path):
    target = tmp_path / "module.py"
    shutil.copyfile(fixture, target)
    source = SourceFile.read(target, "module.py")
    findings = _builder_findings(source)
    assert findings
    fixed = fix_source(source, findings)
    assert not fixed.dropped, fixed.dropped
    assert fixed.new_raw.decode("utf-8") == _out(fixture).read_text(encoding="utf-8")
    write_fixed(fixed)
    again = SourceFile.read(target, "module.py")
    assert not fix_source(again, _builder_findings(again)).changed


def test_creation_fix_refuses_what_cstorch_does_not_take():
    def fix(code: str):
        return cstorch_creation_fix(ast.parse(code).body[0].value)

    assert fix("torch.zeros_like(p)").safe
    assert fix("torch.zeros_like(p, memory_format=torch.preserve_format)") is None
    assert fix("torch.zeros_like(p, device='cpu')") is None
    assert fix("torch.zeros(3, 4)") is None
    assert fix("torch.zeros(*shape)") is None
    assert fix("torch.full_like(p)") is None  # no value
    assert fix("torch.empty_like(p)") is None
    assert fix("torch.full(size=s, fill_value=1)").rename == (
        ("size", "shape"), ("fill_value", "value"))


# ---- CS401's plan from the data table -----------------------------------------------------

def _plan(code: str):
    call = ast.parse(code).body[0].value
    return optimizer_fix_plan(call.func.attr, call)


def test_optimizer_plan_writes_differing_torch_defaults():
    plan, _ = _plan("torch.optim.AdamW(params)")
    assert plan == {"drop": [], "add": [("eps", "1e-08"), ("weight_decay", "0.01")]}
    assert _plan("torch.optim.Adamax(params)")[0]["add"] == [("lr", "0.002"), ("eps", "1e-08")]
    assert _plan("torch.optim.Rprop(params)")[0]["add"] == [("lr", "0.01")]
    assert _plan("torch.optim.Adagrad(params)")[0]["add"] == [("eps", "1e-10")]
    assert _plan("torch.optim.RAdam(params)")[0]["add"] == [("eps", "1e-08")]
    assert _plan("torch.optim.SGD(params)")[0]["add"] == [("lr", "0.001")]  # required in cstorch
    assert _plan("torch.optim.NAdam(params)")[0]["add"] == []
    assert _plan("torch.optim.SGD(params, 0.1, fused=True, foreach=False)")[0]["drop"] == [
        "fused", "foreach"]


def test_optimizer_plan_refuses_what_it_cannot_translate():
    assert _plan("torch.optim.AdamW(params, 1e-3, (0.9, 0.999), 1e-8, 0.0, True)")[0] is None
    assert _plan("torch.optim.Adam(params, **kw)")[0] is None
    assert _plan("torch.optim.Adam(*args)")[0] is None
    assert _plan("torch.optim.Adam(params, maximize=True)")[0] is None
    assert _plan("torch.optim.Adam(params, decoupled_weight_decay=True)")[0] is None
    # ... but a torch-only keyword at its default (off) is simply left out.
    assert _plan("torch.optim.Adam(params, decoupled_weight_decay=False)")[0] == {
        "drop": ["decoupled_weight_decay"], "add": [("eps", "1e-08")]}
    assert _plan("torch.optim.Adafactor(params)")[0] is None
    assert _plan("torch.optim.LBFGS(params)")[0] is None


# ---- every fixture, fixed ----------------------------------------------------------------

def _files(unit: Path) -> list[Path]:
    return sorted(unit.rglob("*.py")) if unit.is_dir() else [unit]


@pytest.mark.parametrize("unit", fixture_units(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_fixture_fixes_cleanly(unit: Path, tmp_path: Path):
    """All fixes (unsafe included) applied to a copy: the result parses, the fixed findings
    are gone, nothing new appears, and a second pass changes nothing."""
    copy = tmp_path / unit.name
    if unit.is_dir():
        shutil.copytree(unit, copy)
    else:
        shutil.copyfile(unit, copy)
    options = {}
    for file in _files(copy):
        options.update(options_in(file.read_text(encoding="utf-8")))
    before = lint([str(copy)], config_for(options), project_root=tmp_path)
    assert not before.errors
    report = fix_findings(before.sources, before.findings, unsafe=True)
    assert not report.errors, report.errors
    for file in report.files:
        if file.changed:
            ast.parse(file.new_raw)
            write_fixed(file)
    after = lint([str(copy)], config_for(options), project_root=tmp_path)
    assert not after.errors, [e.render() for e in after.errors]
    expected = Counter(f.code for f in before.findings) - Counter(f.code for f in report.applied)
    assert Counter(f.code for f in after.findings) == expected
    second = fix_findings(after.sources, after.findings, unsafe=True)
    assert not any(f.changed for f in second.files)


# ---- the command line ----------------------------------------------------------------------

SCRIPT = '''\
"""Training script."""
import torch
import cerebras.pytorch as cstorch


def build(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-3)
'''
FIXED_SCRIPT = SCRIPT.replace("torch.optim.AdamW(model.parameters(), lr=1e-3)",
                              "cstorch.optim.AdamW(model.parameters(), lr=1e-3, eps=1e-08, "
                              "weight_decay=0.01)")


def run(args, cwd: Path, input: bytes | None = None):
    runner = CliRunner()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return runner.invoke(main, args, input=input, catch_exceptions=False)
    finally:
        os.chdir(old)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.cslint]\nselect = [\"CS4\"]\n")
    (tmp_path / "train.py").write_text(SCRIPT)
    return tmp_path


def test_diff_prints_and_writes_nothing(project: Path):
    result = run(["check", "train.py", "--diff", "--unsafe-fixes"], project)
    assert result.exit_code == 1
    assert "-    return torch.optim.AdamW(model.parameters(), lr=1e-3)" in result.stdout
    assert "+    return cstorch.optim.AdamW(" in result.stdout
    assert result.stdout.startswith("--- a/train.py\n+++ b/train.py\n")
    assert (project / "train.py").read_text() == SCRIPT


def test_diff_without_unsafe_fixes_has_nothing_to_do(project: Path):
    result = run(["check", "train.py", "--diff"], project)
    assert result.exit_code == 0 and result.stdout == ""


def test_fix_applies_unsafe_fixes_only_when_asked(project: Path):
    result = run(["check", "train.py", "--fix"], project)
    assert result.exit_code == 1
    assert (project / "train.py").read_text() == SCRIPT
    assert result.stdout.endswith("Found 1 problem in 1 file.\n")

    result = run(["check", "train.py", "--fix", "--unsafe-fixes"], project)
    assert result.exit_code == 0
    assert (project / "train.py").read_text() == FIXED_SCRIPT
    assert result.stdout.endswith("Found 1 problem (1 fixed, 0 remaining) in 1 file.\n")
    assert [p.name for p in project.iterdir() if "cslint-fix" in p.name] == []

    again = run(["check", "train.py", "--fix", "--unsafe-fixes"], project)
    assert again.exit_code == 0
    assert (project / "train.py").read_text() == FIXED_SCRIPT
    assert again.stdout.endswith("Found 0 problems in 1 file.\n")


def test_fix_counts_remaining_findings(project: Path):
    (project / "train.py").write_text(SCRIPT + "\n\ntorch.set_default_dtype(torch.float64)\n")
    result = run(["check", "train.py", "--fix", "--unsafe-fixes"], project)
    assert result.exit_code == 1
    assert "train.py:10:" in result.stdout  # the remaining finding, at its line after fixing
    assert result.stdout.endswith("Found 2 problems (1 fixed, 1 remaining) in 1 file.\n")


def test_fix_on_stdin_prints_the_fixed_code(project: Path):
    result = run(["check", "-", "--stdin-filename", "train.py", "--fix", "--unsafe-fixes"],
                 project, input=SCRIPT.encode())
    assert result.stdout == FIXED_SCRIPT
    assert result.exit_code == 0


def test_fix_keeps_mode_encoding_bom_and_line_endings(tmp_path: Path):
    text = ("# -*- coding: latin-1 -*-\r\n\"\"\"Caf\xe9.\"\"\"\r\nimport torch\r\n"
            "import cerebras.pytorch as cstorch\r\n\r\n\r\n"
            "opt = torch.optim.SGD(params, lr=0.1)  # r\xe9glage\r\n")
    path = tmp_path / "latin.py"
    path.write_bytes(text.encode("latin-1"))
    os.chmod(path, 0o640)
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + SCRIPT.replace("\n", "\r\n").encode("utf-8"))
    result = run(["check", "latin.py", "bom.py", "--select", "CS401", "--fix", "--unsafe-fixes",
                  "--no-config"], tmp_path)
    assert result.exit_code == 0, result.output
    fixed = path.read_bytes()
    assert fixed == text.replace("torch.optim.SGD", "cstorch.optim.SGD").encode("latin-1")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    fixed_bom = bom.read_bytes()
    assert fixed_bom.startswith(b"\xef\xbb\xbf")
    assert fixed_bom[3:].decode("utf-8") == FIXED_SCRIPT.replace("\n", "\r\n")


def test_added_import_uses_the_file_line_endings(tmp_path: Path):
    path = tmp_path / "crlf.py"
    path.write_bytes(b"import torch\r\nfrom cerebras.pytorch.optim import SGD\r\n\r\n"
                     b"opt = torch.optim.Adam(params)\r\n")
    result = run(["check", "crlf.py", "--select", "CS401", "--fix", "--unsafe-fixes",
                  "--no-config"], tmp_path)
    assert result.exit_code == 0, result.output
    assert path.read_bytes() == (
        b"import torch\r\nfrom cerebras.pytorch.optim import SGD\r\n"
        b"import cerebras.pytorch as cstorch\r\n\r\n"
        b"opt = cstorch.optim.Adam(params, eps=1e-08)\r\n")


def test_a_fix_that_breaks_parsing_is_dropped_and_reported(tmp_path: Path):
    path = tmp_path / "m.py"
    path.write_text("import cerebras.pytorch as cstorch\nx = torch.zeros_like(p)\n"
                    "y = torch.zeros_like(q)\n")
    source = SourceFile.read(path, "m.py")
    good = Finding("m.py", Location(2, 5, 2, 24), "CS104", "n", "m", Severity.INFO,
                   replace_call_fix("zeros_like", safe=True, description="d"))
    bad = Finding("m.py", Location(3, 5, 3, 24), "CS104", "n", "m", Severity.INFO,
                  replace_call_fix("zeros_like", safe=True, description="d",
                                   add=[("lambda", "1")]))
    fixed = fix_source(source, [good, bad])
    assert fixed.applied == [good]
    assert [f for f, _ in fixed.dropped] == [bad]
    assert fixed.new_raw.decode() == ("import cerebras.pytorch as cstorch\n"
                                     "x = cstorch.zeros_like(p)\ny = torch.zeros_like(q)\n")


@pytest.mark.parametrize("terms, fixed", [(1_000, True), (20_000, False)])
def test_a_file_nested_deeper_than_cpython_compiles_is_checked_not_fixed(
        tmp_path: Path, terms: int, fixed: bool):
    """libcst's parser slows with nesting faster than linearly (20,000 levels: minutes)."""
    source = "x = torch.zeros_like(p)\n\n\ndef deep(a):\n    return " + \
        " + ".join(["a"] * terms) + "\n"
    path = tmp_path / "m.py"
    path.write_text(source)
    finding = Finding("m.py", Location(1, 5, 1, 24), "CS104", "n", "m", Severity.INFO,
                      replace_call_fix("zeros_like", safe=True, description="d"))
    result = with_deep_stack(fix_source)(SourceFile.read(path, "m.py"), [finding])  # as run
    assert result.changed is fixed
    assert result.dropped == ([] if fixed else [
        (finding, "libcst cannot parse the file: nested more than 3,000 levels deep")])


def test_a_fix_whose_code_moved_is_dropped(tmp_path: Path):
    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    source = SourceFile.read(path, "m.py")
    finding = Finding("m.py", Location(1, 1, 1, 6), "CS104", "n", "m", Severity.INFO,
                      replace_call_fix("zeros_like", safe=True, description="d"))
    fixed = fix_source(source, [finding])
    assert not fixed.changed and fixed.dropped[0][0] is finding


def test_plain_check_does_not_import_libcst(tmp_path: Path):
    (tmp_path / "train.py").write_text(SCRIPT)
    code = ("import sys\nfrom cslint.cli import main\n"
            "try:\n    main(['check', 'train.py', '--no-config'])\nexcept SystemExit:\n    pass\n"
            "print('libcst' in sys.modules)\n")
    plain = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                           text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert plain.stdout.strip().splitlines()[-1] == "False", plain.stdout + plain.stderr
    fixing = subprocess.run([sys.executable, "-c", code.replace(
        "'--no-config'", "'--no-config', '--diff', '--unsafe-fixes'")],
                            cwd=tmp_path, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert fixing.stdout.strip().splitlines()[-1] == "True", fixing.stdout + fixing.stderr


def test_scale_fix_refuses_the_functional_form(tmp_path: Path):
    path = tmp_path / "m.py"
    path.write_text("import torch\nq = torch.add(p, g, alpha=-lr)\n")
    source = SourceFile.read(path, "m.py")
    finding = Finding("m.py", Location(2, 5, 2, 31), "CS205", "n", "m", Severity.ERROR,
                      scale_first_argument_fix("add", "alpha"))
    fixed = fix_source(source, [finding])
    assert not fixed.changed and "second argument" in fixed.dropped[0][1]
