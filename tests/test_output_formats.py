"""The CI formats (SARIF, GitHub annotations, GitLab Code Quality), --output-file,
--show-source, the fingerprints they carry, and the README's CI snippets, run."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from cslint import __version__
from cslint.diagnostics import Finding, Location, Report, Severity
from cslint.output import github, text
from cslint.rule_pages import read_page
from cslint.rules import all_rules
from helpers import REPO
from test_cli import LAZY, run

SARIF_SCHEMA = json.loads((Path(__file__).parent / "sarif" / "sarif-2.1.0-rtm.5.json")
                          .read_text(encoding="utf-8"))
SARIF_VALIDATOR = jsonschema.Draft4Validator(
    SARIF_SCHEMA, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)

# One finding of each severity, a safe fix (CS104), an unsafe one (CS205), and two
# identical findings in one function (the CS201s).
MIXED = '''\
import torch
import cerebras.pytorch as cstorch


class Mixed(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["m"] = torch.zeros_like(p)

    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["m"] = state["m"] * 0.9 + p.grad
                if p.grad.sum() > 0:
                    p.add_(p.grad)
                if p.grad.sum() > 0:
                    p.add_(p.grad)
                p.add_(p.grad, alpha=-group["lr"])
'''
MIXED_CODES = ["CS104", "CS102", "CS201", "CS201", "CS205"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mixed.py").write_text(MIXED)
    (tmp_path / "lazy.py").write_text(LAZY)
    return tmp_path


def sarif_of(project: Path, *args: str) -> tuple[dict, int]:
    result = run(["check", "--format", "sarif", *args], project)
    log = json.loads(result.stdout)
    return log, result.exit_code


def assert_valid_sarif(log: dict) -> None:
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in SARIF_VALIDATOR.iter_errors(log)]
    assert errors == []


# ---- SARIF --------------------------------------------------------------------------------

def test_sarif_validates_against_the_official_schema(project):
    log, exit_code = sarif_of(project, ".")
    assert exit_code == 1
    assert_valid_sarif(log)
    assert log["version"] == "2.1.0"
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == ["CS101", *MIXED_CODES]


def test_the_schema_check_rejects_what_sarif_forbids(project):
    """The validation is no formality: the schema catches a wrong level or a missing
    location's line number."""
    log, _ = sarif_of(project, ".")
    result = log["runs"][0]["results"][0]
    result["level"] = "fatal"
    assert not SARIF_VALIDATOR.is_valid(log)
    result["level"] = "error"
    result["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    assert not SARIF_VALIDATOR.is_valid(log)


def test_sarif_driver_describes_every_rule_that_ran(project):
    log, _ = sarif_of(project, "--select", "CS1,CS205", ".")
    driver = log["runs"][0]["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("cslint", __version__)
    assert driver["informationUri"].startswith("https://")
    ran = [rule for rule in all_rules() if rule.code.startswith("CS1") and rule.default_on
           and rule.gate is None] + [r for r in all_rules() if r.code == "CS205"]
    assert [d["id"] for d in driver["rules"]] == [rule.code for rule in ran]
    levels = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
    for described, rule in zip(driver["rules"], ran):
        assert described["name"] == rule.name
        assert described["shortDescription"]["text"]
        assert described["fullDescription"]["text"] in read_page(rule.code)
        assert described["help"] == {"text": read_page(rule.code),
                                     "markdown": read_page(rule.code)}
        assert described["defaultConfiguration"] == {"level": levels[rule.severity]}
        assert described["properties"]["tags"] == [rule.family]


def test_sarif_results_locations_and_levels(project):
    log, _ = sarif_of(project, ".")
    run_ = log["runs"][0]
    rules = run_["tool"]["driver"]["rules"]
    expected = json.loads(run(["check", "--format", "json", "."], project).stdout)
    assert len(run_["results"]) == len(expected)
    assert run_["originalUriBaseIds"]["%SRCROOT%"]["uri"] == project.resolve().as_uri() + "/"
    assert run_["columnKind"] == "unicodeCodePoints"
    for result, finding in zip(run_["results"], expected):
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"] == finding["code"]
        assert result["level"] == {"error": "error", "warning": "warning",
                                   "info": "note"}[finding["severity"]]
        assert result["message"]["text"] == finding["message"]
        location, = result["locations"]
        assert location["physicalLocation"] == {
            "artifactLocation": {"uri": finding["path"].replace(os.sep, "/"),
                                 "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": finding["line"], "startColumn": finding["column"],
                       "endLine": finding["end_line"], "endColumn": finding["end_column"]},
        }
    assert {r["level"] for r in run_["results"]} == {"error", "warning", "note"}


def test_sarif_paths_are_relative_to_the_project_root_wherever_cslint_runs(project):
    log, _ = sarif_of(project / "pkg", "mixed.py")
    location = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "pkg/mixed.py", "uriBaseId": "%SRCROOT%"}


def apply_replacements(source: str, replacements: list[dict]) -> str:
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column - 1

    edits = sorted(((offset(r["deletedRegion"]["startLine"], r["deletedRegion"]["startColumn"]),
                     offset(r["deletedRegion"]["endLine"], r["deletedRegion"]["endColumn"]),
                     r["insertedContent"]["text"]) for r in replacements), reverse=True)
    for start, end, inserted in edits:
        source = source[:start] + inserted + source[end:]
    return source


@pytest.mark.parametrize("code, safe", [("CS104", True), ("CS205", False)])
def test_sarif_fixes_give_what_fix_writes(project, code, safe):
    log, _ = sarif_of(project, "--select", code, "pkg/mixed.py")
    result, = log["runs"][0]["results"]
    fix, = result["fixes"]
    assert ("unsafe" not in fix["description"]["text"]) == safe
    change, = fix["artifactChanges"]
    assert change["artifactLocation"] == {"uri": "pkg/mixed.py", "uriBaseId": "%SRCROOT%"}
    patched = apply_replacements(MIXED, change["replacements"])

    fix_args = ["check", "--select", code, "--fix", "pkg/mixed.py"]
    run(fix_args + ([] if safe else ["--unsafe-fixes"]), project)
    assert patched == (project / "pkg" / "mixed.py").read_text()
    assert patched != MIXED


def test_sarif_fix_replaces_only_the_words_that_change(project):
    log, _ = sarif_of(project, "--select", "CS104", "pkg/mixed.py")
    replacement, = log["runs"][0]["results"][0]["fixes"][0]["artifactChanges"][0][
        "replacements"]
    line = MIXED.splitlines()[11]
    start = line.index("torch.zeros_like") + 1
    assert replacement == {
        "deletedRegion": {"startLine": 12, "startColumn": start, "endLine": 12,
                          "endColumn": start + len("torch")},
        "insertedContent": {"text": "cstorch"}}


def test_sarif_fix_that_adds_an_import_is_two_replacements(tmp_path):
    source = ("import torch\nfrom cerebras.pytorch.optim.lr_scheduler import CosineDecayLR\n"
              "\n\ndef build(model):\n"
              "    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)\n"
              "    return optimizer, CosineDecayLR(optimizer, 1e-3, 0.0, 1000)\n")
    (tmp_path / "train.py").write_text(source)
    log, _ = sarif_of(tmp_path, "--select", "CS401", "train.py")
    replacements = log["runs"][0]["results"][0]["fixes"][0]["artifactChanges"][0][
        "replacements"]
    assert len(replacements) == 2
    run(["check", "--select", "CS401", "--fix", "--unsafe-fixes", "train.py"], tmp_path)
    assert apply_replacements(source, replacements) == (tmp_path / "train.py").read_text()


def test_sarif_without_fixable_findings_has_no_fixes(project):
    log, _ = sarif_of(project, "lazy.py")
    assert all("fixes" not in result for result in log["runs"][0]["results"])
    assert log["runs"][0]["invocations"] == [{"executionSuccessful": True}]


def test_sarif_files_not_checked_are_tool_notifications(project):
    (project / "broken.py").write_text("def f(:\n    pass\n")
    (project / "latin.py").write_bytes(b"name = '\xe9t\xe9'\n")
    result = run(["check", "--format", "sarif", "broken.py", "latin.py", "missing.py",
                  "lazy.py"], project)
    assert result.exit_code == 2
    assert "broken.py:1:7: syntax error" in result.stderr
    log = json.loads(result.stdout)
    assert_valid_sarif(log)
    invocation, = log["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False
    notifications = invocation["toolExecutionNotifications"]
    assert [n["level"] for n in notifications] == ["error"] * 3
    assert [n["message"]["text"].split(":")[0] for n in notifications] == \
        ["missing.py", "broken.py", "latin.py"]
    broken = notifications[1]["locations"][0]["physicalLocation"]
    assert broken == {"artifactLocation": {"uri": "broken.py", "uriBaseId": "%SRCROOT%"},
                      "region": {"startLine": 1, "startColumn": 7}}
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == ["CS101"]


def test_sarif_path_outside_the_project_is_an_absolute_uri(project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "pyproject.toml").write_text("")
    (elsewhere / "a b.py").write_text(LAZY)
    log, _ = sarif_of(project, "lazy.py", str(elsewhere / "a b.py"))
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]
            for r in log["runs"][0]["results"]]
    assert {"uri": "lazy.py", "uriBaseId": "%SRCROOT%"} in uris
    assert {"uri": (elsewhere / "a b.py").resolve().as_uri()} in uris
    assert_valid_sarif(log)


# ---- fingerprints -------------------------------------------------------------------------

def fingerprints(project: Path, path: str = "pkg/mixed.py") -> list[tuple[str, str]]:
    log, _ = sarif_of(project, path)
    return [(r["ruleId"], r["partialFingerprints"]["cslintFindingHash/v1"])
            for r in log["runs"][0]["results"]]


def test_fingerprints_survive_line_shifts_and_tell_identical_findings_apart(project):
    before = fingerprints(project)
    assert [code for code, _ in before] == MIXED_CODES
    assert len({fp for _, fp in before}) == len(before)
    first_if, second_if = (fp for code, fp in before if code == "CS201")
    assert first_if.split(":")[0] == second_if.split(":")[0]  # same hash, counted
    assert (first_if.split(":")[1], second_if.split(":")[1]) == ("1", "2")

    shifted = MIXED.replace("import torch\n", "import torch\nimport math  # new\n\n\n") \
        .replace("    def step(", "    def helper(self):\n        return 1\n\n    def step(")
    (project / "pkg" / "mixed.py").write_text(shifted)
    assert fingerprints(project) == before


@pytest.mark.parametrize("edit", [
    pytest.param(lambda s: s.replace('state = self.state[p]', 'st = self.state[p]')
                 .replace('state["m"] = state["m"]', 'st["m"] = st["m"]'), id="flagged text"),
    pytest.param(lambda s: s.replace("def step(", "def step_renamed(").replace(
        "    def preinitialize", "    def step(self, closure=None):\n"
        "        return self.step_renamed()\n\n    def preinitialize"),
        id="enclosing function"),
])
def test_fingerprint_changes_with_the_flagged_text_or_its_function(project, edit):
    before = dict(fingerprints(project))
    (project / "pkg" / "mixed.py").write_text(edit(MIXED))
    after = dict(fingerprints(project))
    assert after["CS102"] != before["CS102"]
    assert after["CS104"] == before["CS104"]


def test_fingerprint_depends_on_the_path_in_the_project_not_on_the_folder_cslint_runs_in(project):
    from_root = fingerprints(project)
    log, _ = sarif_of(project / "pkg", "mixed.py")
    from_inside = [(r["ruleId"], r["partialFingerprints"]["cslintFindingHash/v1"])
                   for r in log["runs"][0]["results"]]
    assert from_inside == from_root
    (project / "pkg" / "copy.py").write_text(MIXED)
    copied = fingerprints(project, "pkg/copy.py")
    assert not {fp for _, fp in copied} & {fp for _, fp in from_root}


# ---- GitHub -------------------------------------------------------------------------------

def unescape_data(value: str) -> str:  # as the Actions runner does
    return value.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def unescape_property(value: str) -> str:
    return value.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":") \
        .replace("%2C", ",").replace("%25", "%")


WORKFLOW_COMMAND = re.compile(r"^::(?P<name>[a-z]+) (?P<properties>[^:]*)::(?P<message>.*)$")


def parse_workflow_command(line: str) -> tuple[str, dict[str, str], str]:
    """`::name key=value,...::message`, split and unescaped as GitHub's runner does."""
    match = WORKFLOW_COMMAND.match(line)
    assert match, line
    properties = {}
    for pair in match.group("properties").split(","):
        key, value = pair.split("=", 1)
        properties[key] = unescape_property(value)
    return match.group("name"), properties, unescape_data(match.group("message"))


def test_github_annotations(project):
    result = run(["check", "--format", "github", "lazy.py", "pkg/mixed.py"], project)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "::error file=lazy.py,line=17,col=21,endLine=17,endColumn=31,"
        "title=CS101 state-outside-preinitialize::state \"m\" is created under a "
        "lazy-initialisation check in Lazy.step(); create it in preinitialize() and only "
        "update it in place in step()")
    parsed = [parse_workflow_command(line) for line in lines]
    assert [p[0] for p in parsed] == ["error", "notice", "warning", "error", "error", "error"]
    expected = json.loads(run(["check", "--format", "json", "lazy.py", "pkg/mixed.py"],
                              project).stdout)
    for (_, properties, message), finding in zip(parsed, expected):
        assert properties == {
            "file": finding["path"].replace(os.sep, "/"), "line": str(finding["line"]),
            "col": str(finding["column"]), "endLine": str(finding["end_line"]),
            "endColumn": str(finding["end_column"]),
            "title": f"{finding['code']} {finding['name']}"}
        assert message == finding["message"]


@pytest.mark.parametrize("raw", ["plain", "100% sure", "a\r\nb\nc", "x: 1, y: 2", "%0A%25",
                                 "::error file=x::y"])
def test_github_escaping_round_trips(raw):
    line = github.command("warning", {"file": raw, "title": raw}, raw)
    assert "\n" not in line and "\r" not in line
    assert parse_workflow_command(line) == ("warning", {"file": raw, "title": raw}, raw)


def test_github_escaping_is_githubs():
    assert github.escape_data("50%\r\nok: a,b") == "50%25%0D%0Aok: a,b"
    assert github.escape_property("50%\r\nok: a,b") == "50%25%0D%0Aok%3A a%2Cb"


def test_github_odd_file_name_and_files_not_checked(project):
    (project / "odd, name: 100%.py").write_text(LAZY)
    (project / "broken.py").write_text("def f(:\n")
    result = run(["check", "--format", "github", "odd, name: 100%.py", "broken.py"], project)
    assert result.exit_code == 2
    finding, error = (parse_workflow_command(line) for line in result.stdout.splitlines())
    assert finding[1]["file"] == "odd, name: 100%.py"
    assert error[0] == "error"
    assert error[1] == {"file": "broken.py", "line": "1", "col": "7",
                        "title": "cslint: file not checked"}
    assert error[2].startswith("syntax error")


# ---- GitLab -------------------------------------------------------------------------------

def test_gitlab_code_quality_report(project):
    result = run(["check", "--format", "gitlab", "."], project)
    assert result.exit_code == 1
    issues = json.loads(result.stdout)
    log, _ = sarif_of(project, ".")
    sarif_fingerprints = [r["partialFingerprints"]["cslintFindingHash/v1"]
                          for r in log["runs"][0]["results"]]
    expected = json.loads(run(["check", "--format", "json", "."], project).stdout)
    severities = {"error": "critical", "warning": "major", "info": "info"}
    for issue, finding, fingerprint in zip(issues, expected, sarif_fingerprints, strict=True):
        assert issue == {
            "description": f"{finding['code']} {finding['message']}",
            "check_name": f"{finding['code']} {finding['name']}",
            "fingerprint": fingerprint,
            "severity": severities[finding["severity"]],
            "location": {"path": finding["path"].replace(os.sep, "/"),
                         "lines": {"begin": finding["line"]}},
        }
    assert len({issue["fingerprint"] for issue in issues}) == len(issues)
    assert {issue["severity"] for issue in issues} == {"critical", "major", "info"}


def test_gitlab_clean_run_is_an_empty_array(project):
    (project / "lazy.py").unlink()
    (project / "pkg" / "mixed.py").unlink()
    result = run(["check", "--format", "gitlab", "."], project)
    assert (result.exit_code, json.loads(result.stdout)) == (0, [])


# ---- --output-file, --statistics ----------------------------------------------------------

@pytest.mark.parametrize("output_format", ["text", "json", "sarif", "github", "gitlab"])
def test_output_file_takes_stdouts_place(project, output_format):
    (project / "broken.py").write_text("def f(:\n")
    args = ["check", "--format", output_format, "lazy.py", "broken.py"]
    printed = run(args, project)
    written = run(args + ["--output-file", "reports/out.txt"], project)
    assert written.exit_code == printed.exit_code == 2
    assert written.stdout == ""
    assert written.stderr == printed.stderr != ""
    assert (project / "reports" / "out.txt").read_text(encoding="utf-8") == printed.stdout
    assert run(["check", "--format", output_format, "-o", "clean.out", "pkg/mixed.py",
                "--select", "CS3"], project).exit_code == 0
    assert (project / "clean.out").exists()


def test_output_file_that_cannot_be_written(project):
    (project / "taken").mkdir()
    result = run(["check", "lazy.py", "--output-file", "taken"], project)
    assert result.exit_code == 2
    assert result.stderr.startswith("cslint: error: taken: cannot write")
    assert result.stdout == ""


def test_output_file_with_diff_and_with_fixed_stdin(project):
    result = run(["check", "--select", "CS104", "--diff", "-o", "fix.diff", "pkg/mixed.py"],
                 project)
    assert result.exit_code == 1 and result.stdout == ""
    assert (project / "fix.diff").read_text().startswith("--- pkg/mixed.py\n+++ pkg/mixed.py\n")
    result = run(["check", "--select", "CS104", "--fix", "--format", "json", "-o", "left.json",
                  "-", "--stdin-filename", "pkg/piped.py"], project, input=MIXED.encode())
    assert "cstorch.zeros_like(p)" in result.stdout  # the fixed code still goes to stdout
    assert json.loads((project / "left.json").read_text()) == []


@pytest.mark.parametrize("output_format", ["sarif", "github", "gitlab"])
def test_statistics_needs_a_format_that_can_count(project, output_format):
    result = run(["check", "--statistics", "--format", output_format, "."], project)
    assert result.exit_code == 2
    assert "--statistics" in result.stderr and result.stdout == ""


# ---- --show-source ------------------------------------------------------------------------

SHOWN_LAZY = '''\
lazy.py:17:21: CS101 state "m" is created under a lazy-initialisation check in Lazy.step(); \
create it in preinitialize() and only update it in place in step()
   |
17 |                     state["m"] = torch.zeros_like(p)
   |                     ^^^^^^^^^^ CS101
   |

Found 1 problem in 1 file.
'''


def test_show_source(project):
    assert run(["check", "--show-source", "lazy.py"], project).stdout == SHOWN_LAZY
    fixable = run(["check", "--show-source", "--select", "CS104", "pkg/mixed.py"],
                  project).stdout
    assert "   = help: use cstorch.zeros_like\n" in fixable


def test_show_source_is_off_in_pipes_and_for_other_formats(project):
    plain = run(["check", "lazy.py"], project).stdout
    assert "|" not in plain
    assert run(["check", "--no-show-source", "lazy.py"], project).stdout == plain
    assert run(["check", "--show-source", "--format", "json", "lazy.py"], project).stdout == \
        run(["check", "--format", "json", "lazy.py"], project).stdout


def run_in_terminal(args: list[str], cwd: Path) -> str:
    """cslint with its stdout on a pseudo-terminal (as in an interactive shell)."""
    pty = pytest.importorskip("pty")
    leader, follower = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    try:
        process = subprocess.run([sys.executable, "-m", "cslint", *args], cwd=cwd, env=env,
                                 stdout=follower, stderr=subprocess.PIPE, timeout=60)
        os.close(follower)
        follower = None
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: everything was read
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        if follower is not None:
            os.close(follower)
        os.close(leader)
    assert process.returncode == 1, process.stderr
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_show_source_is_the_default_on_a_terminal_but_not_with_quiet(project):
    assert run_in_terminal(["check", "lazy.py"], project) == SHOWN_LAZY
    quiet = run_in_terminal(["check", "--quiet", "lazy.py"], project)
    assert quiet == SHOWN_LAZY.splitlines(keepends=True)[0]
    assert run_in_terminal(["check", "--no-show-source", "lazy.py"], project) == \
        "".join(SHOWN_LAZY.splitlines(keepends=True)[i] for i in (0, 6))


def test_show_source_underlines_by_terminal_columns():
    lines = ["x\t= f(\u5b57\u5b57, y)", "if (a and", "        b):"]

    def finding(location: Location) -> Finding:
        return Finding("f.py", location, "CS201", "tensor-dependent-if", "m", Severity.ERROR)

    # A tab shows as four spaces, a wide character takes two columns.
    assert text.source_snippet(finding(Location(1, 11, 1, 12)), lines) == [
        "  |", "1 | x    = f(字字, y)", f"  | {' ' * 15}^ CS201", "  |", ""]
    # A span over several lines underlines each from its first non-blank character.
    assert text.source_snippet(finding(Location(2, 5, 3, 10)), lines)[1:5] == [
        "2 | if (a and", "  |     ^^^^^", "3 |         b):", "  |         ^ CS201"]
    # An empty span still gets one caret.
    assert text.source_snippet(finding(Location(2, 1, 2, 1)), lines)[2] == "  | ^ CS201"
    report = Report((finding(Location(2, 1, 2, 3)),), (), 1, source_lines={"f.py": lines})
    assert "  | ^^ CS201" in text.render(report, statistics=False, quiet=True, show_source=True)


# ---- what each format loads ---------------------------------------------------------------

@pytest.mark.parametrize("output_format, loads_libcst", [
    ("text", False), ("json", False), ("github", False), ("gitlab", False), ("sarif", True)])
def test_only_sarif_loads_libcst(project, output_format, loads_libcst):
    probe = (
        "import sys\n"
        "from cslint.cli import main\n"  # (`python -m cslint` ends with os._exit)
        f"sys.argv = ['cslint', 'check', '--format', {output_format!r}, '-o', 'out', "
        "'pkg/mixed.py']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exit:\n"
        "    code = exit.code\n"
        "print('EXIT', code, 'LIBCST', 'libcst' in sys.modules, 'TORCH', 'torch' in sys.modules)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    result = subprocess.run([sys.executable, "-c", probe], cwd=project, capture_output=True,
                            text=True, env=env, check=True)
    assert f"EXIT 1 LIBCST {loads_libcst} TORCH False" in result.stdout, result.stderr


# ---- the README's CI snippets, run --------------------------------------------------------

def readme_yaml_blocks() -> list[dict]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", readme, re.S)]


def github_workflow() -> dict:
    found = [block for block in readme_yaml_blocks()
             if isinstance(block, dict) and "jobs" in block]
    assert len(found) == 1, "the README has one GitHub Actions workflow"
    return found[0]


def gitlab_job() -> dict:
    found = [job for block in readme_yaml_blocks() if isinstance(block, dict)
             for job in block.values() if isinstance(job, dict)
             and "codequality" in job.get("artifacts", {}).get("reports", {})]
    assert len(found) == 1, "the README has one GitLab job with a Code Quality report"
    return found[0]


@pytest.fixture
def sample(tmp_path: Path) -> tuple[Path, dict]:
    """A repository with findings, and an environment whose `cslint` is this checkout."""
    repository = tmp_path / "repository"
    repository.mkdir()
    (repository / "pyproject.toml").write_text("[project]\nname = 'sample'\n")
    (repository / "train").mkdir()
    (repository / "train" / "mixed.py").write_text(MIXED)
    shutil.copy(REPO / "examples" / "simple_adam.py", repository / "simple_adam.py")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "cslint"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m cslint "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=str(REPO / "src"))
    return repository, env


def run_snippet_command(command: str, sample: tuple[Path, dict]) -> subprocess.CompletedProcess:
    repository, env = sample
    return subprocess.run(["bash", "-c", command], cwd=repository, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(shutil.which("bash") is None, reason="the snippets are shell commands")
def test_readme_github_actions_workflow_runs(sample):
    workflow = github_workflow()
    job, = workflow["jobs"].values()
    steps = job["steps"]
    uses = [step.get("uses", "").split("@")[0] for step in steps]
    assert uses[:2] == ["actions/checkout", "actions/setup-python"]
    assert {"run": "pip install cslint"} in steps
    upload = next(step for step in steps
                  if step.get("uses", "").startswith("github/codeql-action/upload-sarif@"))
    assert job["permissions"]["security-events"] == "write"

    commands = [step["run"] for step in steps if "cslint check" in step.get("run", "")]
    assert any("--format github" in command for command in commands)
    assert any("--format sarif" in command for command in commands)
    repository, _ = sample
    for command in commands:
        result = run_snippet_command(command, sample)
        assert result.returncode == 1, result.stderr  # findings fail the step
        if "--format github" in command:
            annotations = [parse_workflow_command(line) for line in result.stdout.splitlines()]
            assert {props["file"] for _, props, _ in annotations} == {
                "simple_adam.py", "train/mixed.py"}
            assert {name for name, _, _ in annotations} == {"error", "warning", "notice"}
    sarif_file = repository / upload["with"]["sarif_file"]
    log = json.loads(sarif_file.read_text(encoding="utf-8"))
    assert_valid_sarif(log)
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in log["runs"][0]["results"]} == {"simple_adam.py", "train/mixed.py"}
    # The upload runs even though the step before it failed on the findings.
    assert "!cancelled()" in upload["if"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="the snippets are shell commands")
def test_readme_gitlab_job_runs(sample):
    job = gitlab_job()
    assert "pip install cslint" in job["script"]
    assert job["artifacts"]["when"] == "always"
    commands = [line for line in job["script"] if "cslint check" in line]
    assert commands and all("--format gitlab" in command for command in commands)
    for command in commands:
        result = run_snippet_command(command, sample)
        assert result.returncode == 1, result.stderr
        assert result.stdout == ""
    repository, _ = sample
    report = json.loads((repository / job["artifacts"]["reports"]["codequality"])
                        .read_text(encoding="utf-8"))
    assert len(report) == 8
    for issue in report:
        assert set(issue) == {"description", "check_name", "fingerprint", "severity",
                              "location"}
        assert issue["severity"] in ("info", "minor", "major", "critical", "blocker")
        assert isinstance(issue["location"]["lines"]["begin"], int)
        assert (repository / issue["location"]["path"]).is_file()


def test_a_run_imports_only_the_format_it_prints(project):
    """A warm run is mostly imports: the other formats are not loaded."""
    probe = (
        "import sys\n"
        "from cslint.cli import main\n"
        "sys.argv = ['cslint', 'check', '--no-cache', '--format', 'json', '.']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('LOADED', sorted(m for m in sys.modules if m.startswith('cslint.output.')),\n"
        "      file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=project, capture_output=True,
                          text=True)
    assert json.loads(done.stdout)  # the report was printed
    assert "LOADED ['cslint.output.json']" in done.stderr, done.stderr
