"""The flake8 plugin, run by the real flake8: `flake8 --select CS` reports what `cslint
check FILE` reports (codes, lines, character columns, messages), with the same project
context and `[tool.cslint]` table, and flake8 applies `# noqa` itself.

flake8 finds the plugin through the package's entry point: the package must be installed
(`pip install -e '.[test]'`, as .ci/run does)."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from click.testing import CliRunner

from cslint.cli import main
from cslint.flake8_plugin import CslintChecker
from helpers import FIXTURES, REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

FLAKE8_LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<column>\d+): (?P<code>\w+) "
                         r"(?P<message>.*)$")

LAZY = '''\
import torch
import cerebras.pytorch as cstorch


class Lazy(cstorch.optim.Optimizer):
    def preinitialize(self):
        pass

    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if len(state) == 0:
                    state["m"] = torch.zeros_like(p)
                state["m"].mul_(0.9).add_(p.grad)
'''
FLOAT64 = "torch.set_default_dtype(torch.float64)"
# One CS403 per line from line 3; the comment decides whether flake8 and cslint show it.
NOQA_CASES = {
    3: "  # noqa: CS403",
    4: "  # noqa",
    5: "  # noqa:CS403",
    6: "  # NOQA: CS403",
    7: "  # noqa: CS4",
    8: "  # noqa: E501,CS403",
    9: "  # noqa: CS101",
    10: "",
}
SHOWN = {9, 10}


@pytest.fixture(scope="module", autouse=True)
def plugin_is_installed():
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"]["entry-points"]["flake8.extension"]
    assert declared == {"CS": "cslint.flake8_plugin:CslintChecker"}
    installed = {e.name: e.value for e in entry_points(group="flake8.extension")}
    assert installed.get("CS") == declared["CS"], (
        "flake8 finds the plugin through the installed package's entry point: run "
        "`python -m pip install -e '.[test]'`")


def flake8(args: list[str], cwd: Path, input: str | None = None
           ) -> subprocess.CompletedProcess:
    # --isolated: no flake8 configuration of the machine or the user leaks in.
    return subprocess.run([sys.executable, "-m", "flake8", "--isolated", *args], cwd=cwd,
                          input=input, capture_output=True, text=True)


def flake8_findings(stdout: str) -> set[tuple[str, int, int, str, str]]:
    found = set()
    for line in stdout.splitlines():
        match = FLAKE8_LINE.match(line)
        assert match, line
        found.add((os.path.normpath(match["path"]), int(match["line"]), int(match["column"]),
                   match["code"], match["message"]))
    return found


def cslint_findings(args: list[str], cwd: Path, input: str | None = None
                    ) -> set[tuple[str, int, int, str, str]]:
    """`cslint check --format json ARGS`, run from `cwd`."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, ["check", "--format", "json", *args], input=input,
                                    catch_exceptions=False)
    finally:
        os.chdir(old)
    assert result.exit_code in (0, 1), result.output
    return {(f["path"], f["line"], f["column"], f["code"], f["message"])
            for f in json.loads(result.stdout)}


def test_flake8_reports_what_cslint_check_reports_for_each_file(tmp_path):
    # The fixtures hold every rule, files whose findings need their neighbours (a base
    # class, a caller in another module), and packages; a table selects a release-gated
    # rule, ignores one rule and another in one folder.
    shutil.copytree(FIXTURES, tmp_path / "fixtures")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo"\n\n[tool.cslint]\ncstorch-version = "2.4"\n'
        'ignore = ["CS104"]\nper-file-ignores = { "fixtures/traced/*" = ["CS204"] }\n')
    (tmp_path / "unicode.py").write_text(
        f'import torch\n\nLABEL = "été"; {FLOAT64}\n\n\ndef f():\n\t{FLOAT64}\n',
        encoding="utf-8")
    (tmp_path / "latin.py").write_text(
        f'# -*- coding: latin-1 -*-\nimport torch\n\nLABEL = "été"; {FLOAT64}\n',
        encoding="latin-1")
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.py"))

    result = flake8(["--select", "CS", "."], tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stderr == ""
    reported = flake8_findings(result.stdout)
    expected = set().union(*(cslint_findings([file], tmp_path) for file in files))
    assert reported == expected
    codes = {code for _, _, _, code, _ in reported}
    assert {"CS101", "CS106", "CS201", "CS204", "CS301", "CS403"} <= codes
    assert "CS104" not in codes
    assert not [f for f in reported if f[0].startswith("fixtures/traced/") and f[3] == "CS204"]
    # Character columns, not bytes ("été" is 5 bytes, 3 characters); a tab is one.
    assert {f[:3] for f in reported if f[0] == "unicode.py"} == {
        ("unicode.py", 3, 40), ("unicode.py", 7, 26)}
    assert {f[:3] for f in reported if f[0] == "latin.py"} == {("latin.py", 4, 40)}


def test_noqa_suppresses_the_same_findings_in_both(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    lines = ["import torch", ""] + [FLOAT64 + NOQA_CASES[n] for n in sorted(NOQA_CASES)]
    (tmp_path / "noqa.py").write_text("\n".join(lines) + "\n")

    result = flake8(["--select", "CS", "noqa.py"], tmp_path)
    reported = flake8_findings(result.stdout)
    assert reported == cslint_findings(["noqa.py"], tmp_path)
    assert {line for _, line, _, _, _ in reported} == SHOWN
    # The plugin leaves every `# noqa` to flake8, so --disable-noqa shows them all.
    result = flake8(["--select", "CS", "--disable-noqa", "noqa.py"], tmp_path)
    assert {line for _, line, _, _, _ in flake8_findings(result.stdout)} == set(NOQA_CASES)


def test_stdin_is_checked_as_its_display_name(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo"\n\n[tool.cslint]\nselect = ["CS1"]\n')
    result = flake8(["--select", "CS", "--stdin-display-name", "opt.py", "-"], tmp_path,
                    input=LAZY)
    reported = flake8_findings(result.stdout)
    assert reported == cslint_findings(["-", "--stdin-filename", "opt.py"], tmp_path,
                                       input=LAZY)
    assert {(path, line, code) for path, line, _, code, _ in reported} == {
        ("opt.py", 14, "CS101")}


def test_a_file_flake8_cannot_parse_is_its_e999_and_the_others_are_checked(tmp_path):
    (tmp_path / "broken.py").write_text("def f(:\n    pass\n")
    (tmp_path / "lazy.py").write_text(LAZY)
    result = flake8(["--select", "CS,E999", "broken.py", "lazy.py"], tmp_path)
    assert result.stderr == ""
    assert [line.split(": ", 1)[0] for line in result.stdout.splitlines()] == [
        "broken.py:1:8", "lazy.py:14:21"]
    assert " E999 SyntaxError" in result.stdout and " CS101 " in result.stdout


def test_a_bad_cslint_table_stops_flake8_naming_the_key(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.cslint]\nbogus = 1\n")
    (tmp_path / "lazy.py").write_text(LAZY)
    result = flake8(["--select", "CS", "lazy.py"], tmp_path)
    assert result.returncode == 1
    assert "unknown key `bogus` in [tool.cslint]" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "CS101" not in result.stdout


def test_the_plugin_analyses_a_sum_of_487_terms(tmp_path, capsys):
    # pyflakes fails on this file (as on the next test's), so the plugin is called
    # directly; cslint went no deeper than about 300 terms in 1,000 frames.
    deep_sum = " + ".join(["g"] * 487)
    source = LAZY.replace('state["m"].mul_(0.9).add_(p.grad)',
                          f'g = p.grad\n                g = {deep_sum}\n                g.item()')
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    path = tmp_path / "deep.py"
    path.write_text(source)
    lines = source.splitlines(keepends=True)
    found = list(CslintChecker(ast.parse(source), str(path), lines).run())
    assert [(line, message.split()[0]) for line, _, message, _ in found] == [
        (14, "CS101"), (17, "CS204")]
    assert capsys.readouterr().err == ""


def test_a_file_cslint_cannot_analyse_goes_to_stderr_without_stopping(tmp_path, capsys):
    # flake8's own parse fails on this file, so the plugin is called directly here.
    deep_sum = " + ".join(["g"] * 30_000)  # parses, but deeper than the analyses' stack
    source = LAZY.replace('state["m"].mul_(0.9).add_(p.grad)',
                          f'g = state["m"]\n                g = {deep_sum}')
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    path = tmp_path / "deep.py"
    path.write_text(source)
    lines = source.splitlines(keepends=True)
    list(CslintChecker(ast.Module(body=[], type_ignores=[]), str(path), lines).run())  # unread
    assert capsys.readouterr().err == f"cslint: error: {path}: too deeply nested to analyse\n"


def test_the_plugin_imports_neither_torch_nor_libcst(tmp_path):
    (tmp_path / "lazy.py").write_text(LAZY)
    probe = (
        "import ast, sys\n"
        "from cslint.flake8_plugin import CslintChecker\n"
        "lines = open('lazy.py').readlines()\n"
        "found = list(CslintChecker(ast.parse(''.join(lines)), 'lazy.py', lines).run())\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'libcst')\n"
        "               or m.startswith('cslint.cstorch'))\n"
        "print('FOUND', [f[2].split()[0] for f in found], 'HEAVY', heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                            text=True, check=True)
    assert "FOUND ['CS101'] HEAVY []" in result.stdout, result.stdout + result.stderr
