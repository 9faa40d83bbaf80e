"""What the linter reports: findings and the fixes they may carry."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


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
    """A rewrite applied with libcst (only when fixing). `safe` fixes run under --fix."""

    safe: bool
    description: str
    # Rule-specific data the fixer needs; plain values only so findings stay picklable.
    data: tuple[tuple[str, Any], ...] = ()


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
