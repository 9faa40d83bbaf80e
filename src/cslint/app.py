"""One run of cslint as a front end asks for it (the command line; any other caller the
same way): lint, then, when asked, fix or diff and lint what is left.

It parses no options and prints nothing: the caller passes a `Config` and the code read
from stdin, and prints the `RunResult` (its `report` through `cslint.output`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from cslint import __version__
from cslint.codes import CODES
from cslint.config import Config
from cslint.diagnostics import InputProblem, Report, RuleDescription
from cslint.deep_stack import with_deep_stack
from cslint.discovery import printable, project_path
from cslint.engine import STDIN, CacheOptions, LintResult, lint
from cslint.rule_pages import read_page
from cslint.rules import rules_for

if TYPE_CHECKING:
    from cslint.baseline import Baseline

__all__ = ["STDIN", "FixDiff", "FixMode", "ReportDetail", "RunResult", "run"]


class FixMode(Enum):
    CHECK = "check"  # report the findings
    FIX = "fix"  # write the fixes (stdin: return the fixed code), report the findings left
    DIFF = "diff"  # return the fixes as a unified diff, write nothing


# Fixing may make more fixes apply (the import a fix adds makes the file a cstorch
# program, which CS401 checks): lint and fix again until nothing changes, this many
# times at most.
MAX_FIX_ROUNDS = 10


@dataclass(frozen=True)
class FixDiff:
    """What --diff shows: the fixes as a unified diff."""

    patch: bytes  # in each file's own bytes (`cslint.fixes.apply.unified_diff`)
    fixes: int  # findings the diff fixes
    files: int  # files it changes


@dataclass(frozen=True)
class RunResult:
    # The findings (after fixing: those left, re-linted), the inputs that could not be
    # checked (and, when fixing, the fixes that failed and the files not written), and
    # how many findings were fixed.
    report: Report
    # For stderr: remarks on the inputs (a folder without Python files).
    notices: tuple[str, ...] = ()
    # For stderr: fixes that were not applied, and why.
    fix_messages: tuple[str, ...] = ()
    # FixMode.DIFF only.
    diff: FixDiff | None = None
    # FixMode.FIX with code read from stdin: the code to print in place of the report
    # (the fixed code; as read when nothing changed; empty when it could not be read).
    stdin_output: bytes | None = None
    # What the check built (its files, indexes and syntax trees), kept with the result:
    # freeing it object by object took 43 ms of a 0.65 s run over pytorch-optimizer,
    # and the command exits without freeing anything (`cslint.cli.entry`).
    linted: LintResult | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class ReportDetail:
    """What the report carries beyond the findings, for the formats that use it."""

    # Each rule that ran, described with its page (SARIF's rules and their help; imports
    # every rule).
    rules: bool = False
    fix_edits: bool = False  # each fix as text replacements (SARIF's fixes; loads libcst)
    fingerprints: bool = False  # each finding's fingerprint (SARIF, GitLab)


@with_deep_stack  # the fixes too: libcst walks its trees recursively
def run(paths: Sequence[str], config: Config, *, stdin: tuple[str, bytes] | None = None,
        fix_mode: FixMode = FixMode.CHECK, unsafe_fixes: bool = False,
        detail: ReportDetail = ReportDetail(), baseline: Baseline | None = None,
        cache: CacheOptions | None = None,
        progress: Callable[[str, int, int], None] | None = None, jobs: int | None = 1
        ) -> RunResult:
    """Lint `paths` (`-` stands for `stdin`: its display name and its bytes) under
    `config`, then fix as `fix_mode` asks: the safe fixes, the unsafe ones too when
    `unsafe_fixes`. The report carries what `detail` asks for, and leaves out the
    findings `baseline` records (`cslint.baseline.load_baseline`). A check (not a fix)
    reuses the findings `cache` holds for files unchanged since an earlier run; `progress`
    is told how the first pass goes; `jobs` processes share its per-file checks."""
    # Fingerprints cost a walk of each file with findings: only for those who read them.
    fingerprints = detail.fingerprints or baseline is not None
    linted = lint(list(paths), config, stdin, fingerprints=fingerprints,
                  cache=cache if fix_mode is FixMode.CHECK else None, progress=progress,
                  jobs=jobs)
    if fix_mode is FixMode.CHECK:
        return RunResult(_report(linted, detail, baseline=baseline), tuple(linted.notices),
                         linted=linted)

    fixed = _fix_until_settled(paths, config, stdin, linted, unsafe_fixes, fingerprints)
    if fix_mode is FixMode.DIFF:
        from cslint.fixes.apply import unified_diff

        patch = b"".join(unified_diff(shown, linted.sources[shown].raw, new)
                         for shown, new in fixed.code.items())
        diff = FixDiff(patch, sum(fixed.counts.values()), len(fixed.code))
        # The checks of the fixed code may find trouble the code as read did not have.
        seen = {str(error.as_problem()) for error in linted.errors}
        problems = fixed.problems + [error.as_problem() for error in fixed.linted.errors
                                     if str(error.as_problem()) not in seen]
        return RunResult(_report(linted, detail, baseline=baseline, problems=problems),
                         tuple(linted.notices), fixed.messages, diff=diff)

    from cslint.fixes.write import WriteError, remove_stale_temporaries, write_fixed

    stdin_name = printable(stdin[0]) if stdin is not None else None  # as linted
    remove_stale_temporaries([source.path for shown, source in linted.sources.items()
                              if shown != stdin_name])
    problems = list(fixed.problems)
    for shown, new in fixed.code.items():
        if shown == stdin_name:
            continue
        try:
            write_fixed(linted.sources[shown], new)
        except WriteError as error:
            problems.append(InputProblem(shown, str(error)))
            del fixed.counts[shown]
    final = fixed.linted
    if len(problems) > len(fixed.problems):
        # Not all was written: the findings in what the files hold.
        final = lint(list(paths), config, _with_stdin(stdin, fixed.code),
                     fingerprints=fingerprints)
    stdin_output = None
    if stdin_name is not None:
        source = linted.sources.get(stdin_name)
        stdin_output = fixed.code.get(stdin_name, source.raw if source is not None else b"")
    return RunResult(_report(final, detail, sum(fixed.counts.values()), baseline, problems),
                     tuple(final.notices), fixed.messages, stdin_output=stdin_output)


@dataclass
class _Fixed:
    """The fixes of a run, applied in memory until no more apply."""

    linted: LintResult  # the last lint: of the fixed code
    code: dict[str, bytes]  # the fixed code, by display path (of the files changed)
    counts: dict[str, int]  # the findings fixed, by display path
    problems: list[InputProblem]  # fixes that failed, fixes that did not settle
    messages: tuple[str, ...]  # fixes not applied, and why


def _fix_until_settled(paths: Sequence[str], config: Config,
                       stdin: tuple[str, bytes] | None, linted: LintResult, unsafe: bool,
                       fingerprints: bool) -> _Fixed:
    """Fix, lint the fixed code, and again, until no fix changes anything (at most
    MAX_FIX_ROUNDS rounds): a second run has nothing left to fix."""
    from cslint.fixes.apply import fix_findings  # libcst: loaded only when fixing

    code: dict[str, bytes] = {}
    counts: dict[str, int] = {}
    problems: list[InputProblem] = []
    for _ in range(MAX_FIX_ROUNDS):
        fixes = fix_findings(linted.sources, linted.findings, unsafe)
        changed = [file for file in fixes.files if file.changed]
        if not changed:
            break
        for file in changed:
            shown = file.source.display_path
            code[shown] = file.new_raw
            counts[shown] = counts.get(shown, 0) + len(file.applied)
        linted = lint(list(paths), config, _with_stdin(stdin, code), fingerprints=fingerprints,
                      replaced=code)
    else:
        problems += [InputProblem(file.source.display_path, "the fixes did not settle after "
                                  f"{MAX_FIX_ROUNDS} rounds (please report this); the last "
                                  "round's result is kept") for file in changed]
    # What could not be fixed, as the last round found it (in the fixed code).
    messages = tuple(f"{finding.path}:{finding.location.line}:{finding.location.column}: "
                     f"{finding.code} not fixed: {why}" for finding, why in fixes.dropped)
    return _Fixed(linted, code, counts, fixes.errors + problems, messages)


def _with_stdin(stdin: tuple[str, bytes] | None, fixed_raw: dict[str, bytes]
                ) -> tuple[str, bytes] | None:
    """The stdin input with its fixed code."""
    if stdin is None:
        return None
    return stdin[0], fixed_raw.get(printable(stdin[0]), stdin[1])


def _report(linted: LintResult, detail: ReportDetail, fixed: int = 0,
            baseline: Baseline | None = None, problems: Sequence[InputProblem] = ()
            ) -> Report:
    rules = tuple(
        RuleDescription(rule.code, rule.name, rule.family, rule.severity,
                        CODES[rule.code].summary, rule.fixable, read_page(rule.code))
        for rule in (rules_for(linted.codes) if detail.rules else ()))
    errors = tuple(error.as_problem() for error in linted.errors) + tuple(problems)
    root = linted.project_root
    paths = {}
    for finding in linted.findings:
        if finding.path not in paths:
            # (A cached finding's file may not have been read: the inputs name it.)
            source = linted.sources.get(finding.path)
            paths[finding.path] = project_path(
                source.path if source is not None else linted.input_paths[finding.path], root)
    for error in errors:
        paths.setdefault(error.path, project_path(
            linted.input_paths.get(error.path, Path(error.path)), root))
    findings = tuple(linted.findings)
    baselined, stale = 0, None
    if baseline is not None:
        from cslint.baseline import match_baseline

        checked = {project_path(path, root) for path in linted.checked_paths}
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
