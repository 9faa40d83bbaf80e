"""What the linter reports: findings, the fixes they may carry, and a run's report."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum


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

    @property
    def fixable(self) -> bool:
        return self.fix is not None

    def sort_key(self) -> tuple:
        loc = self.location
        return (self.path, loc.line, loc.column, self.code)


@dataclass(frozen=True)
class Report:
    """What the output formats print: one run's findings and how it went."""

    findings: tuple[Finding, ...]
    # Inputs that could not be checked, one line each (`path[:line[:column]]: problem`).
    errors: tuple[str, ...]
    files_checked: int
    # Findings fixed by --fix: the findings left are re-checked after fixing.
    fixed: int = 0

    def counts_by_code(self) -> list[tuple[str, int]]:
        """(code, number of findings), the most frequent first."""
        counts = Counter(f.code for f in self.findings)
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))
