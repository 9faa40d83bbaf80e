"""The rule registry: one small class per rule, registered by a decorator.

`all_rules` imports the rule modules of this package, one per family; a code of
`cslint.codes` that no rule registers fails tests/test_rule_pages.py.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import TYPE_CHECKING, ClassVar, Iterable, TypeVar

from cslint.codes import CODES, selector_specificity
from cslint.config import Version, format_version, parse_version
from cslint.diagnostics import Finding, Fix, Location, Severity

if TYPE_CHECKING:
    from cslint.config import Config
    from cslint.semantic.analyses import Analyses
    from cslint.semantic.module_index import ModuleIndex
    from cslint.semantic.project import ProjectIndex
    from cslint.source import SourceFile


@dataclass(frozen=True)
class VersionGate:
    """A release-specific rule: on when `cstorch-version` is below `below`."""

    below: Version

    def admits(self, version: Version | None) -> bool:
        return version is not None and version < self.below

    def describe(self) -> str:
        return f"on for cstorch-version < {format_version(self.below)}"


# Before 2.5 a scheduler's closed form is `_get_closed_form_lr()` (the release-specific
# rules themselves say their release in `cslint.codes`).
RELEASES_BEFORE_2_5 = VersionGate(parse_version("2.5"))


def release_gate(code: str) -> VersionGate | None:
    """The releases the rule of `code` is on for by default; None: every release."""
    before = CODES[code].before_release
    return VersionGate(parse_version(before)) if before else None


class FixSafety(Enum):
    SAFE = "safe"  # applied by --fix
    UNSAFE = "unsafe"  # changes behaviour in corner cases: --fix --unsafe-fixes


class Rule:
    """One rule: its class attributes say what it is (the rule page's header, `cslint
    rules` and the README table are generated from them); `check` reports findings."""

    code: ClassVar[str]
    family: ClassVar[str]
    severity: ClassVar[Severity]
    fix_safety: ClassVar[FixSafety | None] = None  # None: not fixable
    fix_example: ClassVar[str] = ""  # what the fix does, for the page header
    release_note: ClassVar[str] = ""  # how the rule follows `cstorch-version`, if it does
    # The project-wide analyses whose facts the rule reads (the engine runs those).
    uses: ClassVar[tuple[type, ...]] = ()

    @property
    def name(self) -> str:
        return CODES[self.code].name

    @property
    def default_on(self) -> bool:
        return CODES[self.code].default_on

    @property
    def gate(self) -> VersionGate | None:
        return release_gate(self.code)

    @property
    def fixable(self) -> bool:
        return self.fix_safety is not None

    def check(self, context: "ModuleContext") -> Iterable[Finding]:
        raise NotImplementedError

    def place(self, finding: Finding) -> tuple | None:
        """Where the rule keeps at most one finding, the first it reports there (None:
        every finding is kept). Rules reporting facts that several paths reach say one
        per position."""
        return None


class FactRule(Rule):
    """A rule reporting the facts of the analysis it `uses`: `findings` maps each fact
    the analysis found in the module, in the order found, to its findings."""

    def check(self, context: "ModuleContext") -> Iterable[Finding]:
        for fact in context.analyses.of(self.uses[0]).facts_in(context.module):
            yield from self.findings(context, fact)

    def findings(self, context: "ModuleContext", fact: object) -> Iterable[Finding]:
        raise NotImplementedError


def one_per_position(finding: Finding) -> tuple:
    return (finding.location.line, finding.location.column)


def one_per_line(finding: Finding) -> tuple:
    return (finding.location.line,)


_REGISTRY: dict[str, type[Rule]] = {}
R = TypeVar("R", bound=type[Rule])


def register(cls: R) -> R:
    if cls.code not in CODES:
        raise ValueError(f"{cls.__name__}: {cls.code} is not in cslint.codes")
    if cls.code in _REGISTRY:
        raise ValueError(f"{cls.code} registered twice")
    _REGISTRY[cls.code] = cls
    return cls


@lru_cache(maxsize=1)
def all_rules() -> tuple[Rule, ...]:
    # Importing a family's module registers its rules (it imports this module: not at
    # the top). Named, not imported by a name computed from a scan of the folder: the
    # linter imports nothing by name (tests/test_never_executes.py).
    from cslint.rules import optimizer_state, program, scheduler, traced  # noqa: F401
    return tuple(_REGISTRY[code]() for code in sorted(_REGISTRY))


def select_codes(config: "Config") -> list[str]:
    """The codes a run checks, in code order; ruff's model: (select or the defaults) +
    extend-select - ignore, the most specific selector winning; release-gated rules need
    their release or their full code. Reads `cslint.codes` alone: no rule is imported."""
    chosen = []
    selectors = list(config.select) if config.select is not None else []
    selectors += config.extend_select
    for code, entry in sorted(CODES.items()):
        if entry.runtime_only:
            continue
        selected = max((selector_specificity(s, code) for s in selectors), default=0)
        if config.select is None and entry.default_on:
            selected = max(selected, 1)
        ignored = max((selector_specificity(s, code) for s in config.ignore), default=0)
        if not selected or ignored >= selected:
            continue
        gate = release_gate(code)
        if gate is not None and not gate.admits(config.cstorch_version) \
                and code not in selectors:
            continue
        chosen.append(code)
    return chosen


def rules_for(codes: Iterable[str]) -> list[Rule]:
    """The rules of `codes` (importing every rule module), in code order."""
    wanted = set(codes)
    return [rule for rule in all_rules() if rule.code in wanted]


class ModuleContext:
    """What a rule sees of one checked file: its tree, index, the project, the analyses."""

    def __init__(self, source: "SourceFile", module: "ModuleIndex", project: "ProjectIndex",
                 config: "Config", analyses: "Analyses"):
        self.source = source
        self.module = module
        self.project = project
        self.config = config
        self.analyses = analyses

    @property
    def tree(self) -> ast.Module:
        """The file's syntax tree (parsed again if it was let go: rules whose facts or
        text show nothing to find do not ask)."""
        return self.module.tree

    def location(self, node: ast.AST) -> Location:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            return self._name_location(node)
        line = node.lineno
        end_line = getattr(node, "end_lineno", None) or line
        column = self.source.character_column(line, node.col_offset)
        end_offset = getattr(node, "end_col_offset", None)
        end_column = (self.source.character_column(end_line, end_offset)
                      if end_offset is not None else column)
        return Location(line, column, end_line, end_column)

    def _name_location(self, node) -> Location:
        """A definition is reported at its name, not across its whole body."""
        text = self.source.line_text(node.lineno)
        match = re.compile(rf"\b(class|def)\s+({re.escape(node.name)})\b").search(text)
        if match is None:
            column = self.source.character_column(node.lineno, node.col_offset)
            return Location(node.lineno, column, node.lineno, column)
        return Location(node.lineno, match.start(2) + 1, node.lineno, match.end(2) + 1)

    def finding(self, rule: Rule, node: ast.AST, message: str, fix: Fix | None = None) -> Finding:
        return Finding(self.source.display_path, self.location(node), rule.code, rule.name,
                       message, rule.severity, fix)
