"""Autofixes: fix fixtures (`x.in.py` -> `x.out.py`, exactly), every fixture fixed and
re-linted, the --fix / --diff / --unsafe-fixes command line, and faithful writing."""

from __future__ import annotations

import ast
import os
import re
import shutil
import stat
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from cslint.cli import main
from cslint.config import DEFAULT_MAX_FILE_SIZE
from cslint.deep_stack import with_deep_stack
from cslint.diagnostics import Finding, Location, Severity
from cslint.engine import lint
from cslint.fixes import cstorch_creation_fix, fold_deprecated_scale_fix, multiply_ones_fix, \
    replace_call_fix, \
    scale_first_argument_fix, \
    scale_foreach_argument_fix, stack_tensors_fix, weight_list_fix
from cslint.semantic.torch_api import FOREACH_NUMBER_ARGUMENTS, FOREACH_SCALAR_ARGUMENTS
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
    write_fixed(file.source, file.new_raw)
    again = _lint_file(target, options, tmp_path)
    second = fix_findings(again.sources, again.findings, unsafe=True)
    assert not any(f.changed for f in second.files)


# ---- fix fixtures driven by the fix builders (CS104's and CS205's rewrites) ---------------

def _builder_findings(source: SourceFile, builder: str) -> list[Finding]:
    """Attach the fixes of `builder` (the fixture's name: the builder it tests) to every
    call they apply to, as CS104 / CS205 would (CS205's on Tensor methods, on
    `torch._foreach_*` ops and on fill values)."""
    tree = source.parse()
    findings = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        fix = None
        where = node  # CS104 spans the call, CS205 the scale's value
        if isinstance(node.func.value, ast.Name) and node.func.value.id == "torch" \
                and node.func.attr in FOREACH_SCALAR_ARGUMENTS:
            keyword = FOREACH_SCALAR_ARGUMENTS[node.func.attr]
            scale = [k.value for k in node.keywords if k.arg == keyword]
            if scale:
                fix = scale_foreach_argument_fix(node.func.attr, keyword)
                where = scale[0]
        elif isinstance(node.func.value, ast.Name) and node.func.value.id == "torch" \
                and node.func.attr in FOREACH_NUMBER_ARGUMENTS:
            keyword, index = FOREACH_NUMBER_ARGUMENTS[node.func.attr]
            weight = next((k.value for k in node.keywords if k.arg == keyword),
                          node.args[index] if len(node.args) > index else None)
            given_list = isinstance(weight, ast.List) or (
                isinstance(weight, ast.BinOp) and isinstance(weight.left, ast.List))
            if weight is not None and not isinstance(weight, ast.Constant) and not given_list:
                fix = weight_list_fix(node.func.attr, keyword, index)
                where = weight
        elif isinstance(node.func.value, ast.Name) and node.func.value.id == "torch" \
                and node.func.attr in ("full", "full_like") and \
                not isinstance(fill := _fill_value(node), (ast.Constant, type(None))):
            fix = multiply_ones_fix(node.func.attr)  # (a fill value that is a tensor)
            where = fill
        elif isinstance(node.func.value, ast.Name) and node.func.value.id == "torch" \
                and node.func.attr in ("tensor", "as_tensor", "asarray") \
                and builder.startswith("stack_tensors"):
            fix = stack_tensors_fix(node.func.attr)  # (a list of device tensors)
            where = node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg == "data"), None)
        elif isinstance(node.func.value, ast.Name) and node.func.value.id == "torch":
            fix = cstorch_creation_fix(node)
        elif node.func.attr in ("add_", "sub_", "addcdiv_", "addcmul_"):
            keyword = "alpha" if node.func.attr in ("add_", "sub_") else "value"
            scale = [k.value for k in node.keywords if k.arg == keyword]
            deprecated_arity = 2 if node.func.attr in ("add_", "sub_") else 3
            if scale:
                fix = scale_first_argument_fix(node.func.attr, keyword)
                where = scale[0]
            elif len(node.args) == deprecated_arity and not node.keywords:
                fix = fold_deprecated_scale_fix(node.func.attr)  # (`p.add_(-lr, g)`)
                where = node.args[0]
        if fix is None or not builder.startswith(_BUILDER_OF_KIND[type(fix).__name__]):
            continue
        end_col = source.character_column(where.end_lineno, where.end_col_offset)
        location = Location(where.lineno,
                            source.character_column(where.lineno, where.col_offset),
                            where.end_lineno, end_col)
        findings.append(Finding(source.display_path, location, "CS104", "test", "test",
                                Severity.ERROR, fix))
    return findings


# Each kind of fix by the name of the builder fixtures that test it.
_BUILDER_OF_KIND = {"ReplaceCall": "creation_ops", "ScaleFirstArgument": "scale_first_argument",
                    "FoldDeprecatedScale": "fold_deprecated_scale",
                    "ScaleForeachArgument": "scale_foreach_argument",
                    "MultiplyOnes": "multiply_ones", "WeightList": "weight_list",
                    "StackTensors": "stack_tensors"}


def _fill_value(call: ast.Call) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == "fill_value"),
                call.args[1] if len(call.args) > 1 else None)


@pytest.mark.parametrize("fixture", _pairs(BUILDER_FIXTURES), ids=lambda p: p.name)
def test_builder_fixture(fixture: Path, tmp_path: Path):
    target = tmp_path / "module.py"
    shutil.copyfile(fixture, target)
    source = SourceFile.read(target, "module.py", DEFAULT_MAX_FILE_SIZE)
    findings = _builder_findings(source, fixture.name)
    assert findings
    fixed = fix_source(source, findings)
    assert not fixed.dropped, fixed.dropped
    assert fixed.new_raw.decode("utf-8") == _out(fixture).read_text(encoding="utf-8")
    write_fixed(fixed.source, fixed.new_raw)
    again = SourceFile.read(target, "module.py", DEFAULT_MAX_FILE_SIZE)
    assert not fix_source(again, _builder_findings(again, fixture.name)).changed


def test_stack_fix_refuses_numbers_in_the_list_and_other_arguments(tmp_path: Path):
    target = tmp_path / "stack_tensors_refused.py"
    target.write_text("import torch\n\n\ndef f(norms):\n"
                      "    a = torch.tensor([norms[0], 1.0])\n"
                      "    b = torch.tensor([norms[0], -1])\n"
                      "    c = torch.tensor(norms, pin_memory=False)\n"
                      "    d = torch.tensor(data=norms)\n"
                      "    return a, b, c, d\n")
    source = SourceFile.read(target, "module.py", DEFAULT_MAX_FILE_SIZE)
    fixed = fix_source(source, _builder_findings(source, "stack_tensors"))
    assert not fixed.changed
    assert [reason for _, reason in fixed.dropped] == [
        "a Python number in the list", "a Python number in the list",
        "arguments other than dtype= and device=", "no positional data argument"]


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
            write_fixed(file.source, file.new_raw)
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
    assert result.stdout.startswith("--- train.py\n+++ train.py\n")
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
    source = SourceFile.read(path, "m.py", DEFAULT_MAX_FILE_SIZE)
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


@pytest.mark.parametrize("terms", [1_000, 20_000])
def test_a_deeply_nested_file_is_fixed_without_libcst_reading_the_depth(
        tmp_path: Path, terms: int):
    """libcst's parser slows with nesting faster than linearly (20,000 levels: minutes),
    so it reads only the call a fix rewrites."""
    source = "x = torch.zeros_like(p)\n\n\ndef deep(a):\n    return " + \
        " + ".join(["a"] * terms) + "\n"
    path = tmp_path / "m.py"
    path.write_text(source)
    finding = Finding("m.py", Location(1, 5, 1, 24), "CS104", "n", "m", Severity.INFO,
                      replace_call_fix("zeros_like", safe=True, description="d"))
    source_file = SourceFile.read(path, "m.py", DEFAULT_MAX_FILE_SIZE)
    result = with_deep_stack(fix_source)(source_file, [finding])  # as run
    # Only the fixed call goes through libcst: the depth elsewhere costs it nothing.
    assert result.changed and not result.dropped


def test_a_fix_whose_code_moved_is_dropped(tmp_path: Path):
    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    source = SourceFile.read(path, "m.py", DEFAULT_MAX_FILE_SIZE)
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
    source = SourceFile.read(path, "m.py", DEFAULT_MAX_FILE_SIZE)
    finding = Finding("m.py", Location(2, 27, 2, 30), "CS205", "n", "m", Severity.ERROR,
                      scale_first_argument_fix("add", "alpha"))  # at `-lr`
    fixed = fix_source(source, [finding])
    assert not fixed.changed and "second argument" in fixed.dropped[0][1]


# ---- fixes located by exact span, linear in the file ---------------------------------------

def _optimizers(count: int, distinct: bool = True) -> str:
    """A module of `count` cstorch optimizers, each creating three states eagerly (three
    CS104 fixes each)."""
    classes = []
    for number in range(count):
        fill = f"{number}.5" if distinct else "7.0"
        classes.append(f'''

class Opt{number}(cstorch.optim.Optimizer):
    def __init__(self, params, lr=1e-3):
        super().__init__(params, dict(lr=lr))

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["a"] = torch.full_like(p, {fill})
                self.state[p]["b"] = torch.zeros_like(p)
                self.state[p]["c"] = torch.ones_like(p)

    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.sub_(self.state[p]["a"] * group["lr"])
''')
    return "import torch\n\nimport cerebras.pytorch as cstorch\n" + "".join(classes)


def test_fixing_a_large_file_costs_about_as_much_as_checking_it(tmp_path: Path):
    """Each fix finds its call by span in an index built once, and parses only that call:
    not every call of the file for every finding (which took minutes on a 3 MB file)."""
    import gc
    import time

    path = tmp_path / "many.py"
    path.write_text(_optimizers(300))
    gc.collect()
    started = time.process_time()
    result = lint([str(path)], config_for({"select": ["CS104"]}), project_root=tmp_path)
    checked = time.process_time()
    report = fix_findings(result.sources, result.findings, unsafe=False)
    fixed = time.process_time()
    assert len(report.applied) == 900 and not report.dropped and not report.errors
    assert fixed - checked < 4 * (checked - started), (checked - started, fixed - checked)


DRIFT = '''\
import torch

import cerebras.pytorch as cstorch


class A(cstorch.optim.Optimizer):
    def __init__(self, params):
        super().__init__(params, {})

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["a"] = p.detach().clone()
                \\
                self.state[p]["b"] = torch.zeros_like(p)
                self.state[p]["c"] = torch.full_like(p, 7.0)

    def step(self, closure=None):
        pass
'''


def test_a_backslash_line_does_not_move_a_fix_onto_another_call(tmp_path: Path):
    """libcst numbers the lines after a line holding only a backslash one less than
    Python does: the fixes are placed by Python's spans, and the line is kept."""
    (tmp_path / "drift.py").write_text(DRIFT)
    result = run(["check", "drift.py", "--no-config", "--fix"], tmp_path)
    assert (tmp_path / "drift.py").read_text() == DRIFT.replace(
        "torch.zeros_like(p)", "cstorch.zeros_like(p)").replace(
        "torch.full_like(p, 7.0)", "cstorch.full_like(p, 7.0)")
    assert "(2 fixed, 0 remaining)" in result.stdout


def test_a_finding_that_is_not_exactly_a_call_rewrites_nothing(tmp_path: Path):
    path = tmp_path / "m.py"
    path.write_text("import cerebras.pytorch as cstorch\nx = torch.zeros_like(p)\n"
                    "y = torch.zeros_like(q)\n")
    source = SourceFile.read(path, "m.py", DEFAULT_MAX_FILE_SIZE)
    fix = replace_call_fix("zeros_like", safe=True, description="d")
    near_misses = [Location(2, 5, 2, 23),  # one character short of the call
                   Location(2, 5, 3, 24),  # on to the next line
                   Location(2, 6, 2, 24),  # `orch.zeros_like(p)`
                   Location(3, 5, 3, 23)]  # the next line's call, but for its end
    findings = [Finding("m.py", span, "CS104", "n", "m", Severity.INFO, fix)
                for span in near_misses]
    fixed = fix_source(source, findings)
    assert not fixed.changed and [f for f, _ in fixed.dropped] == findings
    exact = Finding("m.py", Location(3, 5, 3, 24), "CS104", "n", "m", Severity.INFO, fix)
    assert fix_source(source, [exact]).new_raw.decode() == (
        "import cerebras.pytorch as cstorch\nx = torch.zeros_like(p)\n"
        "y = cstorch.zeros_like(q)\n")


def test_nested_fixable_calls_are_fixed_from_the_inside_out(tmp_path: Path):
    path = tmp_path / "m.py"
    path.write_text("p.add_(g.add_(h, alpha=a), alpha=b)\n")
    source = SourceFile.read(path, "m.py", DEFAULT_MAX_FILE_SIZE)
    outer = Finding("m.py", Location(1, 34, 1, 35), "CS205", "n", "m", Severity.ERROR,
                    scale_first_argument_fix("add_", "alpha"))
    inner = Finding("m.py", Location(1, 24, 1, 25), "CS205", "n", "m", Severity.ERROR,
                    scale_first_argument_fix("add_", "alpha"))
    fixed = fix_source(source, [outer, inner])
    assert fixed.applied == [outer, inner]
    assert fixed.new_raw == b"p.add_(b * g.add_(a * h))\n"


SCHEDULED_STEP = '''\
import torch

import cerebras.pytorch as cstorch


class A(cstorch.optim.Optimizer):
    def __init__(self, params):
        super().__init__(params, {})

    def preinitialize(self):
        pass

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.add_(p.grad, alpha=-group["lr"])
'''


def test_a_fixable_call_inside_140_nested_calls_is_fixed(tmp_path: Path):
    """Only the call itself is parsed with libcst (the whole file was: too deep for it)."""
    call = 'p.add_(p.grad, alpha=-group["lr"])'
    code = SCHEDULED_STEP.replace(call, "f(" * 140 + call + ")" * 140)
    (tmp_path / "deep.py").write_text(code)
    result = run(["check", "deep.py", "--no-config", "--diff", "--unsafe-fixes"], tmp_path)
    assert result.exit_code == 1, result.output
    assert "+" + " " * 16 + "f(" * 140 + 'p.add_(-group["lr"] * p.grad)' in result.stdout


def test_a_fixable_call_holding_140_nested_calls_is_fixed(tmp_path: Path):
    call = "torch.full_like(p, " + "f(" * 140 + "7.0" + ")" * 141
    code = DRIFT.replace('p.detach().clone()\n                \\\n', f"{call}\n")
    (tmp_path / "deep.py").write_text(code)
    result = run(["check", "deep.py", "--no-config", "--select", "CS104", "--fix"], tmp_path)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "deep.py").read_text() == code.replace(" torch.", " cstorch.")


@pytest.mark.parametrize("mode", ["--diff", "--fix"])
def test_a_fix_that_fails_is_an_error(tmp_path: Path, monkeypatch, mode: str):
    from cslint.fixes.kinds import ReplaceCall

    def fails(self, call, context):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(ReplaceCall, "rewrite", fails)
    (tmp_path / "drift.py").write_text(DRIFT)
    (tmp_path / "other.py").write_text(SCRIPT)
    result = run(["check", "drift.py", "other.py", "--no-config", "--select", "CS104,CS401",
                  "--unsafe-fixes", mode], tmp_path)
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "cslint: error: drift.py:15:38: CS104 could not be fixed (nested too deeply)\n"
        "cslint: error: drift.py:16:38: CS104 could not be fixed (nested too deeply)\n"
        "cslint: error: other.py:7:12: CS401 could not be fixed (nested too deeply)\n")
    assert (tmp_path / "drift.py").read_text() == DRIFT


# ---- bytes kept: encodings, BOM, line endings, odd characters --------------------------------

# A torch program that CS104's fix makes a cstorch program (it adds the import).
PROGRAM = '''\
import torch


class Lazy(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["m"] = torch.zeros_like(p)

    def step(self, closure=None):
        pass


def build(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)
'''
ADDED_IMPORT = "import cerebras.pytorch as cstorch\n"


ENCODED = '''\
{cookie}import torch
import cerebras.pytorch as cstorch


class Opt(cstorch.optim.Optimizer):
    def __init__(self, params):
        super().__init__(params, {{}})

    def preinitialize(self):
        # {special} marks{special}inside a line
        for group in self.param_groups:
            for p in group["params"]:
                note = "{accent}"; self.state[p]["a"] = torch.zeros_like(p)
                self.state[p]["b"] = torch.full_like(p, 7.0)  # {accent}

    def step(self, closure=None):
        pass
'''
LATIN_COOKIE = "# -*- coding: latin-1 -*-\n"
# Characters str.splitlines breaks at and Python does not.
ODD_BREAKS = "\x0c\x1c\x85\u2028"
ENCODINGS = {
    # name: (encoding, BOM, line end, coding cookie, odd characters, final line end)
    "utf8": ("utf-8", False, "\n", "", "", True),
    "bom": ("utf-8", True, "\n", "", "", True),
    "bom_crlf": ("utf-8", True, "\r\n", "", "", True),
    "crlf": ("utf-8", False, "\r\n", "", "", True),
    "cr": ("utf-8", False, "\r", "", "", True),
    "latin1": ("latin-1", False, "\n", LATIN_COOKIE, "\x0c\x1c\x85", True),
    "odd_breaks": ("utf-8", False, "\n", "", ODD_BREAKS, True),
    "odd_breaks_crlf": ("utf-8", False, "\r\n", "", ODD_BREAKS, True),
    "no_final_newline": ("utf-8", False, "\n", "", "", False),
    "cr_no_final_newline": ("utf-8", False, "\r", "", "", False),
}


def _encoded_module(name: str, fixed: bool = False) -> bytes:
    encoding, bom, newline, cookie, special, final = ENCODINGS[name]
    text = ENCODED.format(cookie=cookie, special=special, accent="\xe9t\xe9")
    if fixed:
        text = text.replace("torch.zeros_like(", "cstorch.zeros_like(").replace(
            "torch.full_like(", "cstorch.full_like(")
    if not final:
        text = text[:-1]
    raw = text.replace("\n", newline).encode(encoding)
    return b"\xef\xbb\xbf" + raw if bom else raw


@pytest.mark.parametrize("name", ENCODINGS)
def test_fix_keeps_every_byte_outside_the_fixed_calls(tmp_path: Path, name: str):
    path = tmp_path / "m.py"
    path.write_bytes(_encoded_module(name))
    result = run(["check", "m.py", "--no-config", "--select", "CS104", "--fix"], tmp_path)
    assert result.exit_code == 0, result.output
    assert path.read_bytes() == _encoded_module(name, fixed=True)


def test_a_file_whose_bytes_would_change_elsewhere_is_not_fixed(tmp_path: Path):
    """cp932 reads both 87 90 and 81 e0 as U+2252 and writes 81 e0: encoding the text
    again would change a comment the fix does not touch."""
    code = ENCODED.format(cookie="# -*- coding: cp932 -*-\n", special="", accent="\u2252")
    raw = code.encode("cp932").replace(b"\x81\xe0", b"\x87\x90")
    (tmp_path / "m.py").write_bytes(raw)
    result = run(["check", "m.py", "--no-config", "--select", "CS104", "--fix"], tmp_path)
    assert result.exit_code == 2
    assert result.stderr == ("cslint: error: m.py: could not apply fixes (its cp932 bytes "
                             "would not be kept as they are)\n")
    assert (tmp_path / "m.py").read_bytes() == raw


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_the_added_import_ends_as_the_file_lines_end(tmp_path: Path, newline: str):
    path = tmp_path / "prog.py"
    path.write_bytes(PROGRAM.replace("\n", newline).encode())
    run(["check", "prog.py", "--no-config", "--select", "CS104", "--fix"], tmp_path)
    expected = PROGRAM.replace("import torch\n", "import torch\n" + ADDED_IMPORT).replace(
        "torch.zeros_like", "cstorch.zeros_like")
    assert path.read_bytes() == expected.replace("\n", newline).encode()


# ---- --diff applies, giving exactly what --fix writes -----------------------------------------

def _apply_patch(tool: list[str], folder: Path, patch: bytes) -> None:
    applied = subprocess.run(tool, cwd=folder, input=patch, capture_output=True)
    assert applied.returncode == 0, applied.stdout + applied.stderr


PATCH_TOOLS = {"patch": ["patch", "-p0", "--quiet", "--no-backup-if-mismatch"],
               "git": ["git", "apply", "-p0", "--whitespace=nowarn"]}


@pytest.mark.parametrize("tool", PATCH_TOOLS)
def test_diff_applies_to_give_what_fix_writes(tmp_path: Path, tool: str):
    if shutil.which(tool) is None:
        pytest.skip(f"no `{tool}` here")
    original = tmp_path / "original"
    original.mkdir()
    names = []
    for name in ENCODINGS:
        (original / f"{name}.py").write_bytes(_encoded_module(name))
        names.append(f"{name}.py")
    (original / "adds_import.py").write_bytes(PROGRAM.replace("\n", "\r").encode())
    names.append("adds_import.py")
    args = ["check", *names, "--no-config", "--select", "CS104,CS401", "--unsafe-fixes"]
    diff = run([*args, "--diff"], original)
    assert diff.exit_code == 1, diff.output
    # One section per file; "no newline" only where the file does not end with one.
    sections = re.split(rb"(?m)^(?=--- )", diff.stdout_bytes)[1:]
    assert sorted(re.match(rb"--- (\S+)\n", section)[1].decode() for section in sections) \
        == sorted(names)
    for section in sections:
        name = re.match(rb"--- (\S+)\n", section)[1].decode()
        ends_with_newline = (original / name).read_bytes().endswith(b"\n")
        assert (b"\\ No newline at end of file\n" in section) != ends_with_newline, name
    patched, fixed = tmp_path / "patched", tmp_path / "fixed"
    shutil.copytree(original, patched)
    shutil.copytree(original, fixed)
    _apply_patch(PATCH_TOOLS[tool], patched, diff.stdout_bytes)
    assert run([*args, "--fix"], fixed).exit_code == 0
    for name in names:
        assert (patched / name).read_bytes() == (fixed / name).read_bytes(), name
        assert (fixed / name).read_bytes() != (original / name).read_bytes(), name


def test_diff_of_a_latin1_file_is_in_latin1(tmp_path: Path):
    (tmp_path / "m.py").write_bytes(_encoded_module("latin1"))
    result = run(["check", "m.py", "--no-config", "--select", "CS104", "--diff"], tmp_path)
    assert b'+                self.state[p]["b"] = cstorch.full_like(p, 7.0)  # \xe9t\xe9\n' \
        in result.stdout_bytes


# ---- writing: concurrent edits, links, modes, folders that cannot be written -----------------

def _edit_while_fixing(monkeypatch, edit) -> None:
    """Make `edit()` happen after the fixes are computed and before they are written."""
    import cslint.fixes.apply as apply_module

    fix = apply_module.fix_findings

    def fix_then_edit(*args, **kwargs):
        report = fix(*args, **kwargs)
        edit()
        return report

    monkeypatch.setattr(apply_module, "fix_findings", fix_then_edit)


def test_an_edit_made_while_fixing_is_kept(tmp_path: Path, monkeypatch):
    (tmp_path / "drift.py").write_text(DRIFT)
    (tmp_path / "other.py").write_text(DRIFT)
    edited = DRIFT + "# edited meanwhile\n"
    done = []

    def edit():
        if not done:
            done.append(True)
            (tmp_path / "drift.py").write_text(edited)

    _edit_while_fixing(monkeypatch, edit)
    result = run(["check", "drift.py", "other.py", "--no-config", "--select", "CS104", "--fix"],
                 tmp_path)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "cslint: error: drift.py: changed while fixing; not written\n" in result.stderr
    assert (tmp_path / "drift.py").read_text() == edited
    assert "cstorch.full_like(p, 7.0)" in (tmp_path / "other.py").read_text()
    # What is reported is what the files hold: the edited file's findings are all left.
    assert "(2 fixed, 2 remaining)" in result.stdout


def test_a_file_removed_while_fixing_is_not_made_again(tmp_path: Path, monkeypatch):
    (tmp_path / "drift.py").write_text(DRIFT)
    _edit_while_fixing(monkeypatch, lambda: (tmp_path / "drift.py").unlink(missing_ok=True))
    result = run(["check", "drift.py", "--no-config", "--select", "CS104", "--fix"], tmp_path)
    assert result.exit_code == 2
    assert "drift.py: changed while fixing (removed); not written" in result.stderr
    assert not (tmp_path / "drift.py").exists()
    assert list(tmp_path.iterdir()) == []


def test_a_linked_file_is_fixed_through_its_link(tmp_path: Path):
    target = tmp_path / "real" / "drift.py"
    target.parent.mkdir()
    target.write_text(DRIFT)
    os.chmod(target, 0o640)
    link = tmp_path / "link.py"
    link.symlink_to(target)
    result = run(["check", "link.py", "--no-config", "--select", "CS104", "--fix"], tmp_path)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert "cstorch.full_like(p, 7.0)" in target.read_text()
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert sorted(p.name for p in target.parent.iterdir()) == ["drift.py"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="only root may give a file to another user")
def test_fix_keeps_the_file_owner(tmp_path: Path):
    path = tmp_path / "drift.py"
    path.write_text(DRIFT)
    os.chown(path, 4321, 8765)
    os.chmod(path, 0o604)
    run(["check", "drift.py", "--no-config", "--select", "CS104", "--fix"], tmp_path)
    status = os.stat(path)
    assert "cstorch.zeros_like" in path.read_text()
    assert (status.st_uid, status.st_gid, stat.S_IMODE(status.st_mode)) == (4321, 8765, 0o604)


def test_a_folder_that_cannot_be_written_is_one_error_and_the_rest_is_fixed(
        tmp_path: Path, monkeypatch):
    import tempfile

    locked, free = tmp_path / "locked", tmp_path / "free"
    locked.mkdir()
    free.mkdir()
    (locked / "a.py").write_text(DRIFT)
    (free / "b.py").write_text(DRIFT)
    make_temporary = tempfile.mkstemp

    def refuse_in_locked(*args, dir=None, **kwargs):
        # chmod cannot lock out root, who runs these tests in some containers.
        if Path(dir) == locked:
            raise PermissionError(13, "Permission denied")
        return make_temporary(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", refuse_in_locked)
    result = run(["check", "locked/a.py", "free/b.py", "--no-config", "--select", "CS104",
                  "--fix"], tmp_path)
    assert result.exit_code == 2
    assert result.stderr == "cslint: error: locked/a.py: cannot write: Permission denied\n"
    assert (locked / "a.py").read_text() == DRIFT
    assert "cstorch.full_like(p, 7.0)" in (free / "b.py").read_text()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root writes in read-only folders")
def test_a_read_only_folder_is_one_error_and_the_rest_is_fixed(tmp_path: Path):
    locked, free = tmp_path / "locked", tmp_path / "free"
    locked.mkdir()
    free.mkdir()
    (locked / "a.py").write_text(DRIFT)
    (free / "b.py").write_text(DRIFT)
    os.chmod(locked, 0o555)
    try:
        result = run(["check", "locked/a.py", "free/b.py", "--no-config", "--select", "CS104",
                      "--fix"], tmp_path)
    finally:
        os.chmod(locked, 0o755)
    assert result.exit_code == 2
    assert result.stderr == "cslint: error: locked/a.py: cannot write: Permission denied\n"
    assert "cstorch.full_like(p, 7.0)" in (free / "b.py").read_text()


def test_stale_temporary_files_of_a_killed_fix_are_removed(tmp_path: Path):
    (tmp_path / "drift.py").write_text(DRIFT)
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True)
    dead = int(finished.stdout)
    alive = os.getpid()
    left = {
        f".drift.py.{dead}.abcd_123.cslint-fix": False,  # its writer is gone
        f".drift.py.{alive}.old12345.cslint-fix": False,  # a minute old
        f".drift.py.{alive}.new12345.cslint-fix": True,  # being written now, maybe
        f".other.py.{dead}.abcd_123.cslint-fix": True,  # not a file this run fixes
        ".drift.py.cslint-fix": True,  # not named as a temporary file is
    }
    for name in left:
        (tmp_path / name).write_text("partial")
    old = os.stat(tmp_path / f".drift.py.{alive}.old12345.cslint-fix").st_mtime - 120
    os.utime(tmp_path / f".drift.py.{alive}.old12345.cslint-fix", (old, old))
    result = run(["check", "drift.py", "--no-config", "--select", "CS104", "--fix"], tmp_path)
    assert result.exit_code == 0, result.output
    assert {p.name for p in tmp_path.iterdir()} == {"drift.py"} | {
        name for name, kept in left.items() if kept}


# ---- a fixpoint in one run --------------------------------------------------------------------

def test_fixes_that_enable_more_fixes_are_applied_in_one_run(tmp_path: Path):
    """CS104's fix adds `import cerebras.pytorch as cstorch`, which makes the file a
    cstorch program, where CS401 then fixes the torch optimizer."""
    expected = PROGRAM.replace("import torch\n", "import torch\n" + ADDED_IMPORT).replace(
        "torch.zeros_like", "cstorch.zeros_like").replace("torch.optim.SGD", "cstorch.optim.SGD")
    (tmp_path / "prog.py").write_text(PROGRAM)
    diff = run(["check", "prog.py", "--no-config", "--diff", "--unsafe-fixes"], tmp_path)
    assert "+    return cstorch.optim.SGD(" in diff.stdout
    assert diff.stderr.endswith("Would fix 2 problem(s) in 1 file(s).\n")
    first = run(["check", "prog.py", "--no-config", "--fix", "--unsafe-fixes"], tmp_path)
    assert (tmp_path / "prog.py").read_text() == expected
    assert first.stdout.endswith("(2 fixed, 1 remaining) in 1 file.\n")
    second = run(["check", "prog.py", "--no-config", "--fix", "--unsafe-fixes"], tmp_path)
    assert (tmp_path / "prog.py").read_text() == expected
    assert second.stdout.endswith("Found 1 problem in 1 file.\n")


def _fixed_all(unit: Path, options: dict) -> tuple[int, list[bytes]]:
    from cslint.app import FixMode, run as run_cslint

    result = run_cslint([str(unit)], config_for(options), fix_mode=FixMode.FIX,
                        unsafe_fixes=True)
    assert not result.report.errors, [str(e) for e in result.report.errors]
    return result.report.fixed, [p.read_bytes() for p in _files(unit)]


@pytest.mark.parametrize("unit", fixture_units() + _pairs(FIX_FIXTURES),
                         ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixing_every_fixture_twice_changes_nothing_the_second_time(unit: Path, tmp_path: Path):
    copy = tmp_path / unit.name
    if unit.is_dir():
        shutil.copytree(unit, copy)
    else:
        shutil.copyfile(unit, copy)
    options = {}
    for file in _files(copy):
        options.update(options_in(file.read_text(encoding="utf-8")))
    options["select"] = ["ALL"]
    _, once = _fixed_all(copy, options)
    fixed_again, twice = _fixed_all(copy, options)
    assert fixed_again == 0 and twice == once


# ---- --fix killed at any moment: each file is old or new, never half written ----------------

def _kill_fix_at_random_moments(tmp_path: Path, trials: int) -> None:
    """Run --fix over 40 files and SIGKILL it at a random moment of its writing (which
    starts when the folder changes: the first temporary file), again and again."""
    import random
    import signal
    import time

    folder = tmp_path / "files"
    folder.mkdir()
    old = DRIFT.encode()
    new = DRIFT.replace(" torch.", " cstorch.").encode()
    paths = [folder / f"m{number:02}.py" for number in range(40)]
    modes = [0o600 + number % 2 * 0o40 for number in range(40)]
    command = [sys.executable, "-m", "cslint", "check", "--no-config", "--select", "CS104",
               "--fix", str(folder)]
    environment = {**os.environ, "PYTHONPATH": str(REPO / "src")}

    def start_and_wait_for_writing() -> subprocess.Popen:
        for path, mode in zip(paths, modes):
            path.write_bytes(old)
            os.chmod(path, mode)
        listed = os.stat(folder).st_mtime_ns
        process = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        while process.poll() is None and os.stat(folder).st_mtime_ns == listed:
            time.sleep(0.0002)
        return process

    process = start_and_wait_for_writing()
    writing_started = time.monotonic()
    process.wait()
    writing = time.monotonic() - writing_started
    assert all(path.read_bytes() == new for path in paths)
    generator = random.Random(9)
    partly_written = 0
    for _ in range(trials):
        process = start_and_wait_for_writing()
        time.sleep(writing * generator.random())
        process.send_signal(signal.SIGKILL)
        process.wait()
        contents = [path.read_bytes() for path in paths]
        assert all(content in (old, new) for content in contents)
        assert [stat.S_IMODE(os.stat(path).st_mode) for path in paths] == modes
        partly_written += 0 < contents.count(new) < len(paths)
    assert partly_written, "no kill landed while the files were being written"
    # A run to the end (after removing the temporary files the kills left) fixes every
    # file and leaves nothing else behind.
    subprocess.run(command, env=environment, capture_output=True, check=False)
    assert sorted(folder.iterdir()) == paths
    assert all(path.read_bytes() == new for path in paths)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="SIGKILL is POSIX")
def test_fix_killed_at_random_moments_leaves_each_file_old_or_new(tmp_path: Path):
    _kill_fix_at_random_moments(tmp_path, trials=5)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="SIGKILL is POSIX")
def test_fix_killed_at_many_random_moments_leaves_each_file_old_or_new(tmp_path: Path):
    _kill_fix_at_random_moments(tmp_path, trials=20)


def test_the_added_import_goes_before_a_fixed_call_that_starts_the_file(tmp_path: Path):
    path = tmp_path / "m.py"
    path.write_text("torch.zeros_like(p)\n")
    source = SourceFile.read(path, "m.py", DEFAULT_MAX_FILE_SIZE)
    finding = Finding("m.py", Location(1, 1, 1, 20), "CS104", "n", "m", Severity.INFO,
                      replace_call_fix("zeros_like", safe=True, description="d"))
    assert fix_source(source, [finding]).new_raw == (
        b"import cerebras.pytorch as cstorch\n\ncstorch.zeros_like(p)\n")


def test_a_call_in_a_decorator_is_found_by_its_span(tmp_path: Path):
    path = tmp_path / "m.py"
    path.write_text("import cerebras.pytorch as cstorch\n\n\n@keep(torch.zeros_like(p))\n"
                    "def f():\n    pass\n")
    source = SourceFile.read(path, "m.py", DEFAULT_MAX_FILE_SIZE)
    finding = Finding("m.py", Location(4, 7, 4, 26), "CS104", "n", "m", Severity.INFO,
                      replace_call_fix("zeros_like", safe=True, description="d"))
    fixed = fix_source(source, [finding])
    assert fixed.applied == [finding]
    assert b"@keep(cstorch.zeros_like(p))\n" in fixed.new_raw


def test_a_fill_value_with_a_comment_is_not_moved(tmp_path: Path):
    """The fill value moves into `.mul_()`: a comment beside it would be lost, so the fix
    is refused there (and made where there is none)."""
    target = tmp_path / "module.py"
    target.write_text("import torch\n\n\ndef f(p, lr):\n"
                      "    a = torch.full(\n        (2,),\n        lr,  # the lr\n    )\n"
                      "    b = torch.full_like(p, lr)\n    return a, b\n")
    source = SourceFile.read(target, "module.py", DEFAULT_MAX_FILE_SIZE)
    fixed = fix_source(source, _builder_findings(source, "multiply_ones"))
    assert len(fixed.dropped) == 1
    assert "lr,  # the lr" in fixed.new_raw.decode()
    assert "b = torch.ones_like(p).mul_(lr)" in fixed.new_raw.decode()


def test_a_weight_list_is_not_made_from_a_list_it_would_compute_again(tmp_path: Path):
    """`[w] * len(xs)` reads the first list again: only a name (or a constant entry or
    attribute of one) is read so; a comprehension is not, and the fix is refused there."""
    target = tmp_path / "module.py"
    target.write_text("import torch\n\n\ndef f(ps, gs, w):\n"
                      "    torch._foreach_lerp_([p.grad for p in ps], gs, weight=w)\n"
                      "    torch._foreach_lerp_(ps, gs, weight=w)\n")
    source = SourceFile.read(target, "module.py", DEFAULT_MAX_FILE_SIZE)
    fixed = fix_source(source, _builder_findings(source, "weight_list"))
    assert [reason for _, reason in fixed.dropped] == ["the first list is not a plain name"]
    assert "torch._foreach_lerp_(ps, gs, [w] * len(ps))" in fixed.new_raw.decode()


FOREACH_WEIGHTS = '''\
import torch
import cerebras.pytorch as cstorch


class Averaged(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def preinitialize(self):
        for group in self.param_groups:
            group["step"] = cstorch.zeros(())
            for p in group["params"]:
                self.state[p]["avg"] = cstorch.zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            group["step"].add_(1)
            params = [p for p in group["params"] if p.grad is not None]
            avgs = [self.state[p]["avg"] for p in params]
            torch._foreach_lerp_(avgs, [p.grad for p in params], weight=1.0 / group["step"])
            torch._foreach_lerp_(params, avgs, group["lr"])
'''


def test_a_tensor_weight_of_a_foreach_lerp_is_fixed_as_a_list(tmp_path: Path):
    """CS204 (a step tensor) and CS205 (the lr) on `torch._foreach_lerp_`'s weight carry
    the fix that gives it as a list of tensors; fixed, neither is found again."""
    path = tmp_path / "averaged.py"
    path.write_text(FOREACH_WEIGHTS)
    config = config_for({"select": ["ALL"]})
    before = lint([str(path)], config, project_root=tmp_path)
    assert sorted((f.code, type(f.fix).__name__) for f in before.findings) == \
        [("CS204", "WeightList"), ("CS205", "WeightList")]
    report = fix_findings(before.sources, before.findings, unsafe=True)
    (file,) = report.files
    fixed = file.new_raw.decode()
    assert "weight=1.0 / group[\"step\"]" not in fixed
    assert "[p.grad for p in params], [1.0 / group[\"step\"]] * len(avgs))" in fixed
    assert 'torch._foreach_lerp_(params, avgs, [group["lr"]] * len(params))' in fixed
    write_fixed(file.source, file.new_raw)
    assert not lint([str(path)], config, project_root=tmp_path).findings
