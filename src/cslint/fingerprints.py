"""Fingerprints: what identifies a finding across edits that shift lines.

A fingerprint hashes the file's path in the project, the rule code, the flagged source
text (runs of whitespace collapsed) and the qualified name of the class or function around
it, never a line number, so unrelated edits above a finding keep its fingerprint. Identical
findings in one scope are told apart by their order: `<hash>:<n>`, n counting from 1 (the
form of GitHub's own `primaryLocationLineHash`). SARIF's `partialFingerprints`, GitLab's
`fingerprint` and the baseline all use it.
"""

from __future__ import annotations

import ast
import bisect
import hashlib
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from cslint.diagnostics import Finding, Location

# Hex digits of the SHA-256 kept: 64 bits, plenty for the findings of one project.
HASH_LENGTH = 16


# The fields of a node that hold statements (or handlers and match cases, which do).
_STATEMENT_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")
_FIELDS_BY_TYPE: dict[type, tuple[str, ...]] = {}


def _statement_fields(kind: type) -> tuple[str, ...]:
    fields = _FIELDS_BY_TYPE.get(kind)
    if fields is None:
        fields = _FIELDS_BY_TYPE[kind] = tuple(f for f in _STATEMENT_FIELDS if f in kind._fields)
    return fields


@dataclass(frozen=True)
class _Scope:
    start: int
    end: int
    depth: int
    name: str


class Scopes:
    """The classes and functions of a module, to name the one around a line."""

    def __init__(self, tree: ast.Module):
        found: list[_Scope] = []
        # Definitions are statements, and only the statement fields of a node hold
        # statements: expressions, however deeply nested, are never entered (and a stack,
        # not recursion, walks).
        stack: list[tuple[ast.AST, str, int]] = [(tree, "", 0)]
        while stack:
            node, prefix, depth = stack.pop()
            for field in _statement_fields(node.__class__):
                for child in getattr(node, field):
                    if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                        name = f"{prefix}{child.name}"
                        found.append(_Scope(child.lineno, child.end_lineno or child.lineno,
                                            depth, name))
                        stack.append((child, name + ".", depth + 1))
                    else:
                        stack.append((child, prefix, depth))
        found.sort(key=lambda scope: scope.start)
        self._scopes = found
        self._starts = [scope.start for scope in found]

    def around(self, line: int) -> str:
        """The dotted name (`Adam.step`, `Adam.step.helper`) of the innermost class or
        function whose lines hold `line`; "" at module level."""
        best: _Scope | None = None
        for scope in self._scopes[:bisect.bisect_right(self._starts, line)]:
            if scope.end >= line and (best is None or scope.depth > best.depth):
                best = scope
        return best.name if best is not None else ""


def flagged_text(lines: Sequence[str], location: Location) -> str:
    """The source text of the span, whitespace runs collapsed to one space; for an empty
    span, its whole line."""
    def line(number: int) -> str:
        return lines[number - 1] if 0 < number <= len(lines) else ""

    if location.line == location.end_line:
        text = line(location.line)[location.column - 1:location.end_column - 1]
    else:
        parts = [line(location.line)[location.column - 1:]]
        parts += [line(n) for n in range(location.line + 1, location.end_line)]
        parts.append(line(location.end_line)[:location.end_column - 1])
        text = "\n".join(parts)
    if not text.strip():
        text = line(location.line)
    return " ".join(text.split())


def finding_key(path: str, code: str, scope: str, text: str) -> str:
    """The hash shared by identical findings in one scope (the fingerprint without its
    occurrence number)."""
    data = "\0".join((path, code, scope, text)).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:HASH_LENGTH]


def with_fingerprints(findings: Iterable[Finding], path: str, lines: Sequence[str],
                      tree: ast.Module) -> list[Finding]:
    """The findings of one file with their fingerprints, in position order (which numbers
    identical ones); `path` is the file's path in the project
    (`cslint.discovery.project_path`)."""
    findings = sorted(findings, key=Finding.sort_key)
    if not findings:
        return findings
    scopes = Scopes(tree)
    seen: dict[str, int] = {}
    result = []
    for finding in findings:
        key = finding_key(path, finding.code, scopes.around(finding.location.line),
                          flagged_text(lines, finding.location))
        seen[key] = seen.get(key, 0) + 1
        result.append(replace(finding, fingerprint=f"{key}:{seen[key]}"))
    return result
