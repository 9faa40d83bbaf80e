"""Baselines through the command line: --write-baseline records the findings, --baseline
(or `baseline` in [tool.cslint]) reports only the new ones, matched without line numbers
and counted, not collapsed; stale entries are counted and dropped; bad files exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_cli import LAZY, run
from test_output_formats import MIXED

BASELINE = "cslint-baseline.json"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'legacy'\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mixed.py").write_text(MIXED)
    (tmp_path / "lazy.py").write_text(LAZY)
    return tmp_path


def write_baseline(project: Path) -> None:
    result = run(["check", "--write-baseline", BASELINE], project)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""


def reported(project: Path, *args: str) -> tuple[list[str], int]:
    """The findings (`path:line: code`) of a run with the baseline, and its exit code."""
    result = run(["check", "--format", "json", "--baseline", BASELINE, *args], project)
    findings = [f"{f['path']}:{f['line']}: {f['code']}"
                for f in json.loads(result.stdout)]
    return findings, result.exit_code


def test_a_project_checked_against_its_own_baseline_is_clean(project):
    assert run(["check"], project).exit_code == 1
    write_baseline(project)
    assert reported(project) == ([], 0)
    result = run(["check", "--baseline", BASELINE], project)
    assert result.stdout.splitlines() == ["Found 0 problems in 2 files (6 baselined)."]


def test_the_file_is_sorted_stable_json_one_entry_a_line(project):
    write_baseline(project)
    text = (project / BASELINE).read_text()
    data = json.loads(text)
    assert data["version"] == 1
    entries = data["entries"]
    assert [(e["path"], e["code"]) for e in entries] == [
        ("lazy.py", "CS101"), ("pkg/mixed.py", "CS102"), ("pkg/mixed.py", "CS104"),
        ("pkg/mixed.py", "CS201"), ("pkg/mixed.py", "CS205")]
    # The two identical CS201s of step() are one entry, counted.
    assert [e["count"] for e in entries] == [1, 1, 1, 2, 1]
    assert sum(line.lstrip().startswith('{"path"') for line in text.splitlines()) == 5
    assert "line" not in text and "row" not in text
    write_baseline(project)
    assert (project / BASELINE).read_text() == text


def test_lines_inserted_above_keep_the_findings_baselined(project):
    write_baseline(project)
    shifted = MIXED.replace("import torch\n", "import torch\nimport math  # new\n\n\n") \
        .replace("    def step(", "    def helper(self):\n        return 1\n\n    def step(")
    (project / "pkg" / "mixed.py").write_text(shifted)
    (project / "lazy.py").write_text("# a comment\n\n" + LAZY)
    assert reported(project) == ([], 0)


def test_only_a_new_violation_is_reported(project):
    write_baseline(project)
    # A third identical if in step() is one more than the entry's count of two.
    (project / "pkg" / "mixed.py").write_text(MIXED.replace(
        '                p.add_(p.grad, alpha=-group["lr"])\n',
        '                if p.grad.sum() > 0:\n'
        '                    p.add_(p.grad)\n'
        '                p.add_(p.grad, alpha=-group["lr"])\n'))
    assert reported(project) == (["pkg/mixed.py:23: CS201"], 1)


def test_a_second_identical_finding_in_one_function_is_reported_when_one_is_baselined(
        project):
    # Record step() with only one of its two identical ifs.
    (project / "pkg" / "mixed.py").write_text(MIXED.replace(
        "                if p.grad.sum() > 0:\n                    p.add_(p.grad)\n", "", 1))
    write_baseline(project)
    (project / "pkg" / "mixed.py").write_text(MIXED)
    assert reported(project) == (["pkg/mixed.py:21: CS201"], 1)


def test_the_same_finding_in_another_function_is_new(project):
    write_baseline(project)
    (project / "lazy.py").write_text(LAZY.replace("def step(", "def step_all("))
    # (Without a step(), CS103 is new too.)
    assert reported(project) == (["lazy.py:5: CS103", "lazy.py:17: CS101"], 1)


def test_stale_entries_are_counted_by_statistics_and_dropped_when_rewritten(project):
    write_baseline(project)
    statistics = run(["check", "--baseline", BASELINE, "--statistics"], project)
    assert "0 stale baseline entries" in statistics.stdout.splitlines()
    # Fix both identical ifs (two stale) and delete lazy.py (one more).
    (project / "pkg" / "mixed.py").write_text(MIXED.replace(
        "                if p.grad.sum() > 0:\n                    p.add_(p.grad)\n", ""))
    (project / "lazy.py").unlink()
    statistics = run(["check", "--baseline", BASELINE, "--statistics"], project)
    assert statistics.exit_code == 0
    assert "3 stale baseline entries" in statistics.stdout.splitlines()
    # A run over another file says nothing of mixed.py's entries.
    (project / "other.py").write_text("x = 1\n")
    statistics = run(["check", "--baseline", BASELINE, "--statistics", "other.py"], project)
    assert "1 stale baseline entry" in statistics.stdout.splitlines()

    write_baseline(project)
    entries = json.loads((project / BASELINE).read_text())["entries"]
    assert [(e["path"], e["code"]) for e in entries] == [
        ("pkg/mixed.py", "CS102"), ("pkg/mixed.py", "CS104"), ("pkg/mixed.py", "CS205")]
    statistics = run(["check", "--baseline", BASELINE, "--statistics"], project)
    assert "0 stale baseline entries" in statistics.stdout.splitlines()


@pytest.mark.parametrize("content, problem", [
    (None, "cannot read baseline: No such file or directory"),
    ("{", "not a cslint baseline: invalid JSON"),
    ("[]", 'not a cslint baseline: expected an object with "version": 1'),
    ('{"version": 1, "entries": [{"path": "lazy.py", "code": "CS101"}]}',
     "not a cslint baseline: entry 1 needs"),
])
def test_a_missing_or_malformed_baseline_is_one_line_and_exit_2(project, content, problem):
    if content is not None:
        (project / BASELINE).write_text(content)
    result = run(["check", "--baseline", BASELINE], project)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(f"cslint: error: {BASELINE}: {problem}")


def test_the_configured_baseline_is_relative_to_the_configuration_file(project):
    (project / "ci").mkdir()
    run(["check", "--write-baseline", "ci/" + BASELINE], project)
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "legacy"\n\n[tool.cslint]\nbaseline = "ci/{BASELINE}"\n')
    # Run from another folder: the path resolves against pyproject.toml's folder.
    result = run(["check", "../pkg"], project / "ci")
    assert result.exit_code == 0, result.output
    assert "(5 baselined)" in result.stdout
    assert run(["check", "--no-config", "../pkg"], project / "ci").exit_code == 1
    # A missing configured baseline is reported as well.
    (project / "ci" / BASELINE).unlink()
    result = run(["check", "../pkg"], project / "ci")
    assert result.exit_code == 2
    assert "ci/cslint-baseline.json: cannot read baseline" in result.stderr


def test_write_baseline_refuses_fix(project):
    result = run(["check", "--fix", "--write-baseline", BASELINE], project)
    assert result.exit_code == 2
    assert not (project / BASELINE).exists()
