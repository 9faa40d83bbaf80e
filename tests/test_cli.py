"""The command line: formats, exit codes, selection, configuration, suppressions, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cslint import __version__
from cslint.cli import main
from helpers import REPO, SOURCES_VARIABLE

LAZY = '''\
import torch
import cerebras.pytorch as cstorch


class Lazy(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

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
CLEAN = '''\
import cerebras.pytorch as cstorch


class Clean(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["m"] = cstorch.zeros_like(p)

    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["m"].mul_(0.9).add_(p.grad)
'''
NO_STEP = '''\
import cerebras.pytorch as cstorch


class NoStep(cstorch.optim.Optimizer):
    def preinitialize(self):
        pass
'''


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
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "lazy.py").write_text(LAZY)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def test_findings_exit_1_and_text_format(project):
    result = run(["check", "lazy.py", "clean.py"], project)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("lazy.py:17:21: CS101 state \"m\" is created")
    assert "preinitialize()" in lines[0]
    assert lines[-1] == "Found 1 problem in 2 files."


def test_clean_exit_0(project):
    result = run(["check", "clean.py"], project)
    assert result.exit_code == 0
    assert result.stdout == "Found 0 problems in 1 file.\n"


def test_exit_zero(project):
    assert run(["check", "--exit-zero", "lazy.py"], project).exit_code == 0


def test_default_path_is_current_folder(project):
    result = run(["check"], project)
    assert result.exit_code == 1
    assert "lazy.py:17:21: CS101" in result.stdout


def test_json_format_has_exactly_the_documented_keys(project):
    result = run(["check", "--format", "json", "lazy.py"], project)
    data = json.loads(result.stdout)
    assert len(data) == 1
    assert set(data[0]) == {"path", "line", "column", "end_line", "end_column", "code", "name",
                            "message", "severity", "fixable"}
    assert data[0]["path"] == "lazy.py"
    assert (data[0]["line"], data[0]["column"]) == (17, 21)
    assert (data[0]["end_line"], data[0]["end_column"]) == (17, 31)
    assert data[0]["severity"] == "error" and data[0]["fixable"] is False
    assert data[0]["name"] == "state-outside-preinitialize"


def test_columns_are_characters_not_bytes(tmp_path):
    source = LAZY.replace('                    state["m"] = torch.zeros_like(p)',
                          '                    état = 1; state["m"] = torch.zeros_like(p)')
    (tmp_path / "u.py").write_text(source, encoding="utf-8")
    data = json.loads(run(["check", "--format", "json", "u.py"], tmp_path).stdout)
    line = source.splitlines()[data[0]["line"] - 1]
    assert line[data[0]["column"] - 1:].startswith('state["m"]')


def test_relative_paths_stay_relative_and_findings_are_sorted(project):
    sub = project / "pkg"
    sub.mkdir()
    (sub / "b.py").write_text(LAZY)
    (sub / "a.py").write_text(LAZY)
    result = run(["check", "pkg", "lazy.py"], project)
    paths = [line.split(":")[0] for line in result.stdout.splitlines()[:-1]]
    assert paths == ["lazy.py", os.path.join("pkg", "a.py"), os.path.join("pkg", "b.py")]


def test_statistics_and_quiet(project):
    (project / "nostep.py").write_text(NO_STEP)
    result = run(["check", "--statistics", "--quiet", "."], project)
    assert result.stdout.split() == ["1", "CS101", "state-outside-preinitialize",
                                     "1", "CS103", "missing-optimizer-method"]


@pytest.mark.parametrize("args, expected", [
    (["--select", "CS103"], {"CS103"}),
    (["--select", "CS1", "--ignore", "CS101"], {"CS103"}),
    (["--ignore", "CS1"], set()),
    (["--ignore", "CS1", "--extend-select", "CS101"], {"CS101"}),
    (["--select", "ALL"], {"CS101", "CS103"}),
    (["--select", "CS101,CS103"], {"CS101", "CS103"}),
])
def test_selection(project, args, expected):
    (project / "nostep.py").write_text(NO_STEP)
    result = run(["check", "--format", "json", *args, "."], project)
    assert {f["code"] for f in json.loads(result.stdout)} == expected


def test_unknown_selector_is_a_usage_error(project):
    result = run(["check", "--select", "CS999", "."], project)
    assert result.exit_code == 2
    assert "CS999" in result.stderr


def test_version_gated_rule_needs_its_release_or_its_full_code(project):
    (project / "old.py").write_text(CLEAN)
    assert "CS106" not in run(["check", "old.py"], project).stdout
    assert "CS106" not in run(["check", "--select", "ALL", "old.py"], project).stdout
    assert "CS106" not in run(["check", "--select", "CS1", "old.py"], project).stdout
    assert "CS106" in run(["check", "--select", "CS106", "old.py"], project).stdout
    assert "CS106" in run(["check", "--cstorch-version", "2.4", "old.py"], project).stdout
    assert "CS106" not in run(["check", "--cstorch-version", "2.10", "old.py"], project).stdout


def test_bad_cstorch_version_option(project):
    result = run(["check", "--cstorch-version", "two", "."], project)
    assert result.exit_code == 2


def test_config_file_is_read_and_cli_overrides_it(project):
    (project / "pyproject.toml").write_text(
        "[tool.cslint]\nignore = ['CS101']\ncstorch-version = '2.4'\n")
    (project / "nostep.py").write_text(NO_STEP)
    data = json.loads(run(["check", "--format", "json", "."], project).stdout)
    assert {f["code"] for f in data} == {"CS103", "CS106"}
    data = json.loads(run(["check", "--format", "json", "--no-config", "."], project).stdout)
    assert {f["code"] for f in data} == {"CS101", "CS103"}
    data = json.loads(run(["check", "--format", "json", "--cstorch-version", "2.10", "."],
                          project).stdout)
    assert {f["code"] for f in data} == {"CS103"}


def test_config_in_a_parent_folder_is_found(project):
    (project / "pyproject.toml").write_text("[tool.cslint]\nignore = ['CS101']\n")
    sub = project / "deep" / "er"
    sub.mkdir(parents=True)
    (sub / "lazy.py").write_text(LAZY)
    assert run(["check", "deep/er/lazy.py"], project).exit_code == 0


@pytest.mark.parametrize("table, problem", [
    ("colour = 'blue'", "unknown key `colour`"),
    ("select = 'CS1'", "`select` must be a list of strings"),
    ("select = 5", "`select` must be a list of strings"),
    ("select = ['XX1']", "`XX1` is not a rule code"),
    ("ignore = [1]", "`ignore` must be a list of strings"),
    ("extend-select = { CS1 = true }", "`extend-select` must be a list of strings"),
    ("exclude = 'build'", "`exclude` must be a list of strings"),
    ("cstorch-version = 'latest'", "`cstorch-version`"),
    ("cstorch-version = 2.10", "`cstorch-version` must be a string like \"2.10\""),
    ("cstorch-version = 2", "`cstorch-version` must be a string"),
    ("cstorch-version = ['2.4']", "`cstorch-version` must be a string"),
    ("cstorch-version = '２.４'", "`cstorch-version`: not a release number like '2.4': '２.４'"),
    ("cstorch-version = '٢.٤'", "`cstorch-version`: not a release number"),
    ("cstorch-version = '2_4'", "`cstorch-version`: not a release number"),
    ("optimizer-bases = ['not a name']", "`optimizer-bases`"),
    ("scheduler-bases = 'pkg.Base'", "`scheduler-bases` must be a list of strings"),
    ("traced-decorators = true", "`traced-decorators` must be a list of strings"),
    ("traced-functions = [['f']]", "`traced-functions` must be a list of strings"),
    ("tensor-hyperparameters = [0.1]", "`tensor-hyperparameters` must be a list of strings"),
    ("baseline = 5", "`baseline` must be a file path"),
    ("per-file-ignores = ['x']", "`per-file-ignores`"),
    ("per-file-ignores = { 'x.py' = 'CS101' }", "`per-file-ignores.x.py` must be a list"),
    ("exclude = ['[']", "`exclude`: glob '[' has an unclosed `[` at character 1"),
    ("exclude = ['legacy/[!]']", "`exclude`: glob 'legacy/[!]' has an unclosed `[`"),
    ("exclude = ['[z-a]']", "`exclude`: glob '[z-a]' has a reversed range `z-a`"),
    ("exclude = ['v[0-9z-a].py']", "has a reversed range `z-a`"),
    ("per-file-ignores = { 'tests/[' = ['CS101'] }",
     "`per-file-ignores`: glob 'tests/[' has an unclosed `[`"),
    ("per-file-ignores = { '[9-0]*.py' = ['CS101'] }",
     "`per-file-ignores`: glob '[9-0]*.py' has a reversed range `9-0`"),
])
def test_bad_config_is_exit_2_naming_the_key(project, table, problem):
    (project / "pyproject.toml").write_text(f"[tool.cslint]\n{table}\n", encoding="utf-8")
    result = run(["check", "."], project)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"cslint: error: {project / 'pyproject.toml'}: ")
    assert problem in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("content, problem", [
    ("tool = 'cslint'\n", "`tool` must be a table"),
    ("[[tool]]\nname = 'x'\n", "`tool` must be a table"),
    ("[tool]\ncslint = 3\n", "`tool.cslint` must be a table"),
    ("[[tool.cslint]]\nselect = ['CS1']\n", "`tool.cslint` must be a table"),
    ("[tool.cslint]\nselect = ['CS1'\n", "not valid TOML: "),
    ("[tool.cslint]\nselect = " + "[" * 5000 + "]" * 5000 + "\n",
     "not valid TOML: arrays or tables nested too deeply"),
])
def test_a_malformed_pyproject_is_one_line_naming_the_file(project, content, problem):
    (project / "pyproject.toml").write_text(content)
    result = run(["check", "--config", str(project / "pyproject.toml"), "."], project)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"cslint: error: {project / 'pyproject.toml'}: ")
    assert problem in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_pyproject_not_in_utf8_names_the_byte_and_its_line(project):
    (project / "pyproject.toml").write_bytes(b"[tool.cslint]\n# caf\xe9\nselect = ['CS1']\n")
    result = run(["check", "."], project)
    assert result.exit_code == 2
    assert result.stderr == (f"cslint: error: {project / 'pyproject.toml'}: not valid UTF-8 "
                             "(byte 0xe9 on line 2), as TOML must be\n")


def test_well_formed_globs_are_accepted(project):
    (project / "pyproject.toml").write_text(
        "[tool.cslint]\nexclude = ['[]]x.py', '[!a-c]*.py', 'a[-]b.py', '[a-]*.py']\n"
        "per-file-ignores = { '[a-z]azy.py' = ['CS101'] }\n")
    assert run(["check", "lazy.py"], project).exit_code == 0


def test_a_huge_cstorch_version_is_echoed_cut_short(project):
    huge = "2." + "4" * 5000
    result = run(["check", "--cstorch-version", huge, "."], project)
    assert result.exit_code == 2
    assert "'2.444444444444444444…'" in result.stderr and len(result.stderr) < 500
    (project / "pyproject.toml").write_text(f"[tool.cslint]\ncstorch-version = '{huge}'\n")
    result = run(["check", "."], project)
    assert result.exit_code == 2
    assert result.stderr.endswith("`cstorch-version`: not a release number like '2.4': "
                                  "'2.444444444444444444…'\n")


def test_explicit_config_path(project, tmp_path_factory):
    other = tmp_path_factory.mktemp("cfg") / "settings.toml"
    other.write_text("[tool.cslint]\nselect = ['CS103']\n")
    assert run(["check", "--config", str(other), "lazy.py"], project).exit_code == 0
    result = run(["check", "--config", str(other.parent / "missing.toml"), "."], project)
    assert result.exit_code == 2 and "missing.toml" in result.stderr


def test_exclude_and_per_file_ignores(project):
    (project / "pyproject.toml").write_text(
        "[tool.cslint]\nexclude = ['legacy/**']\n"
        "per-file-ignores = { 'tests/*' = ['CS101'] }\n")
    for folder in ("legacy", "tests"):
        (project / folder).mkdir()
        (project / folder / "opt.py").write_text(LAZY)
    result = run(["check", "."], project)
    assert "legacy" not in result.stdout and "tests" not in result.stdout
    assert "lazy.py:17" in result.stdout
    # A file named explicitly is checked even when excluded, unless --force-exclude (the
    # pre-commit hooks' entry: they name every staged file).
    assert "legacy" in run(["check", "legacy/opt.py"], project).stdout
    forced = run(["check", "--force-exclude", "legacy/opt.py", "lazy.py"], project)
    assert "legacy" not in forced.stdout and "lazy.py:17" in forced.stdout


def test_skipped_folders(project):
    for folder in (".git", "__pycache__", "build", "dist", ".tox", "node_modules", "venv"):
        (project / folder).mkdir(exist_ok=True)
        (project / folder / "opt.py").write_text(LAZY)
    venv = project / "myenv"
    venv.mkdir()
    (venv / "pyvenv.cfg").write_text("home = /usr\n")
    (venv / "opt.py").write_text(LAZY)
    result = run(["check", "--format", "json", "."], project)
    assert {f["path"] for f in json.loads(result.stdout)} == {"lazy.py"}


@pytest.mark.parametrize("comment, suppressed", [
    ("# noqa: CS101", True),
    ("# noqa: CS102,CS101", True),
    ("# noqa:CS101 CS103", True),
    ("# noqa", True),
    ("# NOQA: cs101", True),
    ("# noqa: CS102", False),
])
def test_noqa(tmp_path, comment, suppressed):
    source = LAZY.replace('state["m"] = torch.zeros_like(p)',
                          f'state["m"] = torch.zeros_like(p)  {comment}')
    (tmp_path / "opt.py").write_text(source)
    result = run(["check", "opt.py"], tmp_path)
    assert (result.exit_code == 0) == suppressed


def test_noqa_inside_a_string_does_not_count(tmp_path):
    source = LAZY.replace('state["m"] = torch.zeros_like(p)',
                          'state["m"] = torch.zeros_like(p, names="# noqa")')
    (tmp_path / "opt.py").write_text(source)
    assert run(["check", "opt.py"], tmp_path).exit_code == 1


@pytest.mark.parametrize("separator", ["\x0c", "\x85", "\u2028"])
def test_noqa_after_a_character_splitlines_breaks_at(tmp_path, separator):
    # Python does not end a line at a form feed (GNU page breaks), NEL or U+2028; a
    # suppression after one is still read on its own line.
    source = f'PAGE = "{separator}"  # {separator}\n' + LAZY.replace(
        'state["m"] = torch.zeros_like(p)', 'state["m"] = torch.zeros_like(p)  # noqa: CS101')
    (tmp_path / "opt.py").write_text(source, encoding="utf-8")
    result = run(["check", "opt.py"], tmp_path)
    assert result.exit_code == 0, result.stdout


def test_skip_file(tmp_path):
    (tmp_path / "opt.py").write_text("# cslint: skip-file\n" + LAZY)
    assert run(["check", "opt.py"], tmp_path).exit_code == 0


def test_stdin(project):
    result = run(["check", "-", "--stdin-filename", "piped.py"], project, input=LAZY.encode())
    assert result.exit_code == 1
    assert result.stdout.startswith("piped.py:17:21: CS101")
    result = run(["check", "-"], project, input=CLEAN.encode())
    assert result.exit_code == 0


def test_missing_path_others_still_checked(project):
    result = run(["check", "nope.py", "lazy.py"], project)
    assert result.exit_code == 2
    assert result.stderr.strip() == "cslint: error: nope.py: no such file or directory"
    assert "lazy.py:17:21: CS101" in result.stdout


def test_syntax_error_reports_line_and_column(project):
    (project / "broken.py").write_text("def f(:\n    pass\n")
    result = run(["check", "broken.py", "lazy.py"], project)
    assert result.exit_code == 2
    assert result.stderr.startswith("cslint: error: broken.py:1:7: syntax error:")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "lazy.py:17:21: CS101" in result.stdout


def test_not_utf8_without_cookie(project):
    (project / "latin.py").write_bytes(b"name = '\xe9t\xe9'\n")
    result = run(["check", "latin.py", "lazy.py"], project)
    assert result.exit_code == 2
    assert "latin.py: not valid utf-8" in result.stderr
    assert "Traceback" not in result.stderr
    assert "lazy.py:17:21: CS101" in result.stdout


def test_coding_cookie_is_honoured(project):
    source = "# -*- coding: latin-1 -*-\n# caf\xe9\n" + LAZY
    (project / "latin.py").write_bytes(source.encode("latin-1"))
    result = run(["check", "--format", "json", "latin.py"], project)
    assert result.exit_code == 1
    assert json.loads(result.stdout)[0]["line"] == 19


def test_utf8_bom(project):
    (project / "bom.py").write_bytes(b"\xef\xbb\xbf" + LAZY.encode())
    result = run(["check", "bom.py"], project)
    assert result.exit_code == 1 and "bom.py:17:21: CS101" in result.stdout


@pytest.mark.parametrize("source", ["-" * 100000 + "1\n", "x = " + "(" * 5000 + ")" * 5000 + "\n"],
                         ids=["100,000 minus signs", "5,000 parentheses"])
def test_too_deeply_nested_to_parse(project, source):
    (project / "deep.py").write_text(source)
    result = run(["check", "deep.py", "lazy.py"], project)
    assert result.exit_code == 2
    assert result.stderr.strip() == "cslint: error: deep.py: too deeply nested to parse"
    assert "lazy.py:17:21: CS101" in result.stdout


def _deep(expression: str) -> str:
    """LAZY, its step reading `p.grad` through `expression` of `g`, then on the host."""
    return LAZY.replace('state["m"].mul_(0.9).add_(p.grad)',
                        f'g = p.grad\n                g = {expression}\n                g.item()')


@pytest.mark.parametrize("expression", [
    " + ".join(["g"] * 487),  # these three were too deep to analyse in 1,000 frames
    "g" + ".abs()" * 324,
    " + ".join(["g"] * 2_900),  # near the deepest CPython compiles
    "g" + ".abs()" * 1_400,
    "-" * 2_900 + "g",
], ids=["sum of 487", "324 calls", "sum of 2,900", "1,400 calls", "2,900 minus signs"])
def test_what_cpython_compiles_is_analysed(project, expression):
    (project / "deep.py").write_text(_deep(expression))
    result = run(["check", "--select", "CS204", "deep.py"], project)
    assert result.stderr == ""
    assert "deep.py:20:17: CS204" in result.stdout


def test_too_deeply_nested_to_analyse(project):
    (project / "deep.py").write_text(_deep(" + ".join(["g"] * 60_000)))  # CPython: 2,990
    result = run(["check", "deep.py", "clean.py"], project)
    assert result.exit_code == 2
    assert result.stderr == "cslint: error: deep.py: too deeply nested to analyse\n"


def test_deep_nesting_never_crashes_the_interpreter(project):
    """The recursion limit is raised only in a thread with the stack to hold it: a limit
    higher than the stack holds ends the process with a segmentation fault."""
    for name, expression in [("sum1000", " + ".join(["g"] * 1_000)),
                             ("sum100000", " + ".join(["g"] * 100_000)),
                             ("calls20000", "g" + ".abs()" * 20_000),
                             ("parens5000", "(" * 5_000 + "g" + ")" * 5_000)]:
        (project / f"{name}.py").write_text(_deep(expression))
    result = subprocess.run([sys.executable, "-m", "cslint", "check", "--select", "CS204",
                             "."], cwd=project, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert sorted(result.stderr.splitlines()) == [
        "cslint: error: calls20000.py: too deeply nested to analyse",
        "cslint: error: parens5000.py: too deeply nested to parse",
        "cslint: error: sum100000.py: too deeply nested to analyse",
    ]
    assert "sum1000.py:20:17: CS204" in result.stdout


def test_unreadable_file(project, monkeypatch):
    target = project / "secret.py"
    target.write_text(LAZY)
    real_open = os.open

    def refuse(path, *args, **kwargs):  # as root, file modes do not stop reads
        if Path(path).name == "secret.py":
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    result = run(["check", "secret.py", "lazy.py"], project)
    assert result.exit_code == 2
    assert result.stderr.strip() == "cslint: error: secret.py: cannot read: Permission denied"
    assert "lazy.py:17:21: CS101" in result.stdout


def test_folder_without_python_files_is_a_notice(tmp_path):
    (tmp_path / "empty").mkdir()
    result = run(["check", "empty"], tmp_path)
    assert result.exit_code == 0
    assert "no Python files" in result.stderr


def test_rules_and_explain_and_version(project):
    result = run(["rules"], project)
    assert result.exit_code == 0
    assert "CS106  missing-state-names-to-sparsify  optimizer-state  on for cstorch-version < 2.5" \
        in result.stdout
    result = run(["explain", "cs101"], project)
    assert result.exit_code == 0 and result.stdout.startswith("# CS101 state-outside-preinitialize")
    assert run(["explain", "CS999"], project).exit_code == 2
    assert run(["--version"], project).stdout.strip() == f"cslint, version {__version__}"


def test_python_dash_m_and_no_torch_import(project):
    """A plain check imports neither torch nor libcst nor the runtime reference."""
    probe = (
        "import sys\n"
        "from cslint.cli import main\n"  # (`python -m cslint` ends with os._exit)
        "sys.argv = ['cslint', 'check', 'lazy.py']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exit:\n"
        "    code = exit.code\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'libcst')\n"
        "               or m.startswith('cslint.cstorch'))\n"
        "print('EXIT', code, 'HEAVY', heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=project, capture_output=True,
                            text=True, check=True)
    assert "EXIT 1 HEAVY []" in result.stdout, result.stdout + result.stderr
    timing = subprocess.run([sys.executable, "-X", "importtime", "-m", "cslint", "check",
                             "lazy.py"], cwd=project, capture_output=True, text=True)
    assert timing.returncode == 1
    imported = {line.rsplit("|", 1)[-1].strip() for line in timing.stderr.splitlines()
                if line.startswith("import time:")}
    assert not {m for m in imported if m.split(".")[0] in ("torch", "libcst")}


def test_readme_rule_table_is_in_sync():
    from cslint.rule_pages import rules_markdown

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = readme.index("<!-- rules-table:start -->\n") + len("<!-- rules-table:start -->\n")
    end = readme.index("<!-- rules-table:end -->")
    assert readme[start:end] == rules_markdown(), "run `python scripts/sync_rule_docs.py`"


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    command = "python -m pip install 'torch==2.13.0' -e '.[test]' && python -m pytest -q -n auto"
    assert command in readme
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert command in ci
    # ... with the released sources that tests/conftest.py's `cerebras_pytorch` reads.
    assert f"export {SOURCES_VARIABLE}=" in ci and SOURCES_VARIABLE in readme


@pytest.mark.parametrize("args", [[], ["."], ["lazy.py"]])
def test_configuration_is_found_from_a_subfolder(tmp_path, args):
    """Run inside a subfolder of the project (`cslint check`, `.` or a file there), the
    project's [tool.cslint] table applies, as it does from the project root."""
    (tmp_path / "pyproject.toml").write_text('[tool.cslint]\nignore = ["CS101"]\n')
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "lazy.py").write_text(LAZY)
    assert run(["check", "pkg"], tmp_path).exit_code == 0  # the table ignores CS101
    result = run(["check", *args], package)
    assert result.exit_code == 0, result.stdout


def test_server_without_pygls_names_the_extra_to_install():
    # pygls made unimportable, as in a plain install without `cslint[lsp]`.
    code = ("import sys; sys.modules['pygls'] = None\n"
            "from cslint.cli import main; main(['server'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)
    assert done.returncode == 2
    assert done.stderr == ("cslint: error: `cslint server` needs pygls: "
                           "pip install 'cslint[lsp]'\n")


def _raise(error: BaseException):
    def raising(*args, **kwargs):
        raise error
    return raising


@pytest.mark.parametrize("command, patched", [
    (["check", "lazy.py"], "cslint.app.run"),
    (["check", "--write-baseline", "base.json", "lazy.py"], "cslint.app.run"),
    (["rules"], "cslint.cli.rules_table"),
    (["explain", "CS101"], "cslint.rule_pages.read_page"),
])
def test_a_bug_of_ours_is_one_line_and_exit_2_in_every_command(project, monkeypatch, command,
                                                                 patched):
    monkeypatch.setattr(patched, _raise(TypeError("'NoneType' object\nis not iterable")))
    result = run(command, project)
    assert result.exit_code == 2
    assert result.stderr == ("cslint: internal error (TypeError: 'NoneType' object is not "
                             "iterable); please report this\n")


def test_ctrl_c_exits_130_without_a_traceback(project, monkeypatch):
    monkeypatch.setattr("cslint.app.run", _raise(KeyboardInterrupt()))
    result = run(["check", "lazy.py"], project)
    assert result.exit_code == 130
    assert result.stderr == ""


@pytest.mark.parametrize("output_format", ["text", "json"])
def test_a_closed_stdout_ends_the_run_quietly(project, output_format):
    """`cslint check | head -1`: the reader is gone (here before the first write)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run([sys.executable, "-m", "cslint", "check", "--format",
                                 output_format, "lazy.py"], cwd=project, stdout=write_end,
                                stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(write_end)
    assert result.stderr == b""
    assert result.returncode == 1


@pytest.fixture
def badly_named(project: Path) -> Path:
    """lazy.py's code in a file whose name is not UTF-8 (byte 0xff), beside a folder
    whose name is not either, holding a file with a syntax error."""
    try:
        (project / os.fsdecode(b"bad\xff.py")).write_text(LAZY)
        (project / os.fsdecode(b"dir\xfe")).mkdir()
    except (OSError, UnicodeError):
        pytest.skip("the file system takes only UTF-8 names")
    (project / os.fsdecode(b"dir\xfe") / "broken.py").write_text("x = (\n")
    for name in ("lazy.py", "clean.py"):
        (project / name).unlink()
    return project


def _check_strict_utf8(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cslint", "check", *args], cwd=cwd,
                          capture_output=True, text=True, encoding="utf-8",
                          env={**os.environ, "PYTHONIOENCODING": "utf-8:strict"})


@pytest.mark.parametrize("output_format, shown", [
    ("text", "bad\\xff.py:17:21: CS101"),
    ("github", "::error file=bad\\xff.py,line=17,col=21,"),
    ("json", '"path": "bad\\\\xff.py"'),
    ("gitlab", '"path": "bad\\\\xff.py"'),
    ("sarif", '"uri": "bad%FF.py"'),
])
def test_names_that_are_not_utf8_are_shown_escaped_in_every_format(badly_named, output_format,
                                                                    shown):
    result = _check_strict_utf8(badly_named, "--format", output_format, ".")
    assert result.returncode == 2  # findings, and the broken file
    assert result.stderr == "cslint: error: dir\\xfe/broken.py:1:5: syntax error: '(' was " \
                            "never closed\n"
    assert shown in result.stdout
    if output_format in ("json", "gitlab", "sarif"):
        json.loads(result.stdout)
    if output_format == "sarif":
        assert '"uri": "dir%FE/broken.py"' in result.stdout


def test_a_baseline_records_names_that_are_not_utf8(badly_named):
    written = _check_strict_utf8(badly_named, "--write-baseline", "baseline.json", "bad\udcff.py")
    assert written.returncode == 0
    assert '"path": "bad\\udcff.py"' in (badly_named / "baseline.json").read_text("utf-8")
    result = _check_strict_utf8(badly_named, "--baseline", "baseline.json", "bad\udcff.py")
    assert result.returncode == 0
    assert "Found 0 problems in 1 file (1 baselined)." in result.stdout


def test_control_characters_in_names_are_shown_escaped(project):
    (project / "two\nlines.py").write_text(LAZY)
    result = run(["check", "--select", "CS101", "two\nlines.py"], project)
    assert result.stdout.splitlines()[0].startswith("two\\x0alines.py:17:21: CS101")
