"""Compliance errors raised by strict mode.

Every message starts with the linter's rule code (from `cslint.codes`), then
names the class and method that broke the rule, the user's source line, what
happened and how to fix it. One subclass per rule family lets tests and
callers catch a family without parsing messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cslint.codes import CODES

if TYPE_CHECKING:
    from cslint.cstorch.source_position import SourceSite

__all__ = [
    "ComplianceError",
    "StateError",
    "TracedValueError",
    "SchedulerError",
    "GraphChangedError",
    "compliance_error",
]


class ComplianceError(RuntimeError):
    """Code that would fail (or silently misbehave) on a Cerebras system.

    Attributes: `code` (e.g. "CS204"), `owner` (e.g. "MyAdam.step"),
    `filename` and `lineno` of the user's source line (None when unknown).
    """

    def __init__(
        self,
        code: str,
        problem: str,
        fix: str,
        owner: str | None = None,
        site: SourceSite | None = None,
    ) -> None:
        if code not in CODES:
            raise ValueError(f"unknown rule code {code!r}")
        self.code = code
        self.problem = problem
        self.fix = fix
        self.owner = owner
        self.site = site
        self.filename = site.filename if site is not None else None
        self.lineno = site.lineno if site is not None else None
        super().__init__(self._format())

    def _format(self) -> str:
        head = f"{self.code} {CODES[self.code].name}"
        if self.owner:
            head += f" in {self.owner}"
        if self.site is not None:
            head += f" at {self.site.filename}:{self.site.lineno}"
        lines = [f"{head}: {self.problem}"]
        if self.site is not None and self.site.code_line:
            lines.append(f"    {self.site.code_line}")
        lines.append(f"  fix: {self.fix}")
        return "\n".join(lines)

    def __reduce__(self):
        # Keyword-style constructor: the default exception pickling would call
        # cls(message) and fail; errors must cross process boundaries (xdist).
        return (type(self), (self.code, self.problem, self.fix, self.owner, self.site))


class StateError(ComplianceError):
    """CS101/CS102: optimizer state created or rebound after preinitialize."""


class TracedValueError(ComplianceError):
    """CS201-CS206: a device value forced to the host, or a data-dependent shape."""


class SchedulerError(ComplianceError):
    """CS305: a scheduler's closed form that is not a tensor."""


class GraphChangedError(ComplianceError):
    """CS501: successive steps traced different graphs."""


_FAMILY_BY_CODE_PREFIX = {
    "CS1": StateError,
    "CS2": TracedValueError,
    "CS3": SchedulerError,
    "CS5": GraphChangedError,
}


def compliance_error(
    code: str,
    problem: str,
    fix: str,
    owner: str | None = None,
    site: SourceSite | None = None,
) -> ComplianceError:
    """Build the family's error for `code` (not raised here, so tracebacks end at the caller)."""
    family = _FAMILY_BY_CODE_PREFIX.get(code[:3], ComplianceError)
    return family(code, problem, fix, owner=owner, site=site)
