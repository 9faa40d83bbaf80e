"""What the linter reports: findings, the fixes they may carry, and a run's report."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping, Sequence


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Location:
    """A span in a file: 1-based lines, 1-based character columns, end exclusive."""

    line: int
    column: int
    end_line: int
    end_column: int


@dataclass(frozen=True)
class Fix:
    """A rewrite applied with libcst (only when fixing). `safe` fixes run under --fix.

    Each kind of fix (`cslint.fixes.kinds`) subclasses this with the plain values it
    needs, so findings stay picklable and building them never imports libcst."""

    safe: bool
    description: str


@dataclass(frozen=True)
class Finding:
    path: str
    location: Location
    code: str
    name: str
    message: str
    severity: Severity
    fix: Fix | None = field(default=None, compare=False)
    # Identifies the finding across edits that shift lines (`cslint.fingerprints`); set
    # by the engine once the file's findings are known.
    fingerprint: str = field(default="", compare=False)

    @property
    def fixable(self) -> bool:
        return self.fix is not None

    def sort_key(self) -> tuple:
        loc = self.location
        return (self.path, loc.line, loc.column, self.code)


@dataclass(frozen=True)
class InputProblem:
    """An input that could not be checked (read, decoded, parsed or analysed)."""

    path: str  # as displayed
    problem: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        """The one line reported: `path[:line[:column]]: problem`."""
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: {self.problem}"


@dataclass(frozen=True)
class Replacement:
    """New text for a span of a file (an insertion where the span is empty)."""

    location: Location
    text: str


@dataclass(frozen=True)
class RuleDescription:
    """A rule that ran, as reports describe it."""

    code: str
    name: str
    family: str
    severity: Severity
    summary: str
    fixable: bool
    # The rule's page (Markdown), when the report asked for it (SARIF's rule help).
    page: str | None = None


@dataclass(frozen=True)
class Report:
    """What the output formats print: one run's findings and how it went."""

    findings: tuple[Finding, ...]
    # Inputs that could not be checked; each prints as one line.
    errors: tuple[InputProblem, ...]
    files_checked: int
    # Findings fixed by --fix: the findings left are re-checked after fixing.
    fixed: int = 0
    # The version of cslint that ran, and the rules it ran.
    linter_version: str = ""
    rules: tuple[RuleDescription, ...] = ()
    # The project's folder (absolute; None when there were no inputs) and each path shown
    # (of the findings and the errors) as a path in it: relative, with `/`, or absolute
    # when the file lies outside it.
    project_root: str | None = None
    project_paths: Mapping[str, str] = field(default_factory=dict)
    # The checked files' lines, by path shown (--show-source prints them).
    source_lines: Mapping[str, Sequence[str]] = field(default_factory=dict)
    # Each fixable finding's fix as text replacements (SARIF's `fixes`); computed only
    # when asked for, since it needs libcst.
    fix_edits: Mapping[Finding, tuple[Replacement, ...]] = field(default_factory=dict)
    # With a baseline (`cslint.baseline`): the findings it absorbed (left out of
    # `findings`) and its entries that no longer match; None without one.
    baselined: int = 0
    stale_baseline_entries: int | None = None

    def counts_by_code(self) -> list[tuple[str, int]]:
        """(code, number of findings), the most frequent first."""
        counts = Counter(f.code for f in self.findings)
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))
