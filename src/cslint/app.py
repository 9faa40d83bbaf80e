"""One run of cslint as a front end asks for it (the command line; any other caller the
same way): lint, then, when asked, fix or diff and lint what is left.

It parses no options and prints nothing: the caller passes a `Config` and the code read
from stdin, and prints the `RunResult` (its `report` through `cslint.output`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Sequence

from cslint import __version__
from cslint.baseline import Baseline, match_baseline
from cslint.codes import CODES
from cslint.config import Config
from cslint.deep_stack import with_deep_stack
from cslint.diagnostics import Report, RuleDescription
from cslint.discovery import printable, project_path
from cslint.engine import STDIN, LintResult, lint
from cslint.rule_pages import read_page

__all__ = ["STDIN", "FixDiff", "FixMode", "ReportDetail", "RunResult", "run"]


class FixMode(Enum):
    CHECK = "check"  # report the findings
    FIX = "fix"  # write the fixes (stdin: return the fixed code), report the findings left
    DIFF = "diff"  # return the fixes as a unified diff, write nothing


@dataclass(frozen=True)
class FixDiff:
    """What --diff shows: the fixes as a unified diff."""

    text: str
    fixes: int  # findings the diff fixes
    files: int  # files it changes


@dataclass(frozen=True)
class RunResult:
    # The findings (after fixing: those left, re-linted), the inputs that could not be
    # checked, and how many findings were fixed.
    report: Report
    # For stderr: remarks on the inputs (a folder without Python files).
    notices: tuple[str, ...] = ()
    # For stderr: fixes that failed or were not applied, and why.
    fix_messages: tuple[str, ...] = ()
    # FixMode.DIFF only.
    diff: FixDiff | None = None
    # FixMode.FIX with code read from stdin: the code to print in place of the report
    # (the fixed code; as read when nothing changed; empty when it could not be read).
    stdin_output: bytes | None = None


@dataclass(frozen=True)
class ReportDetail:
    """What the report carries beyond the findings, for the formats that use it."""

    rule_pages: bool = False  # each rule's page (SARIF's rule help)
    fix_edits: bool = False  # each fix as text replacements (SARIF's fixes; loads libcst)
    fingerprints: bool = False  # each finding's fingerprint (SARIF, GitLab)


@with_deep_stack  # the fixes too: libcst walks its trees recursively
def run(paths: Sequence[str], config: Config, *, stdin: tuple[str, bytes] | None = None,
        fix_mode: FixMode = FixMode.CHECK, unsafe_fixes: bool = False,
        detail: ReportDetail = ReportDetail(), baseline: Baseline | None = None) -> RunResult:
    """Lint `paths` (`-` stands for `stdin`: its display name and its bytes) under
    `config`, then fix as `fix_mode` asks: the safe fixes, the unsafe ones too when
    `unsafe_fixes`. The report carries what `detail` asks for, and leaves out the
    findings `baseline` records (`cslint.baseline.load_baseline`)."""
    # Fingerprints cost a walk of each file with findings: only for those who read them.
    fingerprints = detail.fingerprints or baseline is not None
    linted = lint(list(paths), config, stdin, fingerprints=fingerprints)
    if fix_mode is FixMode.CHECK:
        return RunResult(_report(linted, detail, baseline=baseline), tuple(linted.notices))

    from cslint.fixes.apply import fix_findings  # libcst: loaded only when fixing

    fixes = fix_findings(linted.sources, linted.findings, unsafe_fixes)
    messages = [f"error: {error}" for error in fixes.errors]
    for finding, why in fixes.dropped:
        loc = finding.location
        messages.append(f"{finding.path}:{loc.line}:{loc.column}: {finding.code} "
                        f"not fixed: {why}")
    changed = [file for file in fixes.files if file.changed]
    fixed = len(fixes.applied)
    if fix_mode is FixMode.DIFF:
        diff = FixDiff("".join(file.diff() for file in changed), fixed, len(changed))
        return RunResult(_report(linted, detail, baseline=baseline), tuple(linted.notices),
                         tuple(messages), diff=diff)

    from cslint.fixes.write import write_fixed

    stdin_name = stdin[0] if stdin is not None else None
    stdin_shown = printable(stdin_name) if stdin_name is not None else None  # as linted
    fixed_stdin = None
    for file in changed:
        if file.source.display_path == stdin_shown:
            fixed_stdin = file.new_raw
        else:
            write_fixed(file)
    stdin_output = None
    if stdin_shown is not None:
        source = linted.sources.get(stdin_shown)
        stdin_output = fixed_stdin if fixed_stdin is not None else (
            source.raw if source is not None else b"")
    if changed:
        # The findings left, at their places in the fixed code.
        linted = lint(list(paths), config, (stdin_name, fixed_stdin)
                      if stdin_name is not None and fixed_stdin is not None else stdin,
                      fingerprints=fingerprints)
    return RunResult(_report(linted, detail, fixed, baseline), tuple(linted.notices),
                     tuple(messages), stdin_output=stdin_output)


def _report(linted: LintResult, detail: ReportDetail, fixed: int = 0,
            baseline: Baseline | None = None) -> Report:
    rules = tuple(
        RuleDescription(rule.code, rule.name, rule.family, rule.severity,
                        CODES[rule.code].summary, rule.fixable,
                        read_page(rule.code) if detail.rule_pages else None)
        for rule in linted.rules)
    errors = tuple(error.as_problem() for error in linted.errors)
    root = linted.project_root
    paths = {}
    for finding in linted.findings:
        if finding.path not in paths:
            paths[finding.path] = project_path(linted.sources[finding.path].path, root)
    for error in errors:
        paths.setdefault(error.path, project_path(
            linted.input_paths.get(error.path, Path(error.path)), root))
    findings = tuple(linted.findings)
    baselined, stale = 0, None
    if baseline is not None:
        checked = {project_path(source.path, root) for source in linted.sources.values()}
        match = match_baseline(baseline, findings, paths, checked, root)
        findings, baselined, stale = match.new, match.baselined, match.stale
    fix_edits = {}
    if detail.fix_edits and any(finding.fixable for finding in findings):
        from cslint.fixes.apply import fix_replacements  # libcst: loaded only when asked

        fix_edits = fix_replacements(linted.sources, list(findings))
    return Report(findings, errors, linted.files_checked, fixed,
                  linter_version=__version__, rules=rules,
                  project_root=str(root) if root is not None else None, project_paths=paths,
                  source_lines={shown: source.lines for shown, source in linted.sources.items()},
                  fix_edits=fix_edits, baselined=baselined, stale_baseline_entries=stale)
