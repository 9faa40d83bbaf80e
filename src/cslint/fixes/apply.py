"""Applying fixes with libcst (imported only by --fix and --diff).

A file is parsed once; each finding's fix locates its call in the libcst tree by
position, all fixes of the file are applied in one pass, and only the fixed spans change
(comments and formatting elsewhere are kept). The result is re-parsed: a fix that breaks
parsing is dropped and reported, the others are kept. Nothing is written here
(`cslint.fixes.write` does that).
"""

from __future__ import annotations

import ast
import codecs
import difflib
import re
import warnings
from dataclasses import dataclass, field
from typing import Iterable

with warnings.catch_warnings():
    # libcst's own imports raise deprecation warnings the user can do nothing about.
    warnings.simplefilter("ignore", DeprecationWarning)
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

from cslint.diagnostics import Finding, Location, Replacement
from cslint.fixes.kinds import CallFix, FixContext, NotApplicable
from cslint.fixes.syntax import dotted
from cslint.source import InputError, SourceFile

CSTORCH_MODULES = ("cerebras.pytorch", "cslint.cstorch")
CSTORCH_IMPORT = "import cerebras.pytorch as cstorch"


@dataclass
class FileFix:
    """The outcome of fixing one file."""

    source: SourceFile
    new_raw: bytes
    applied: list[Finding] = field(default_factory=list)
    dropped: list[tuple[Finding, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.new_raw != self.source.raw

    def diff(self) -> str:
        path = self.source.display_path
        old = _decoded(self.source.raw, self.source.encoding).splitlines(keepends=True)
        new = _decoded(self.new_raw, self.source.encoding).splitlines(keepends=True)
        lines = list(difflib.unified_diff(old, new, f"a/{path}", f"b/{path}"))
        return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end "
                       "of file\n" for line in lines)


@dataclass
class FixReport:
    files: list[FileFix] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def applied(self) -> list[Finding]:
        return [f for file in self.files for f in file.applied]

    @property
    def dropped(self) -> list[tuple[Finding, str]]:
        return [d for file in self.files for d in file.dropped]


def _decoded(raw: bytes, encoding: str) -> str:
    text = raw.decode(encoding, errors="replace")
    return text[1:] if text.startswith("\ufeff") else text


def fix_findings(sources: dict[str, SourceFile], findings: Iterable[Finding],
                 unsafe: bool) -> FixReport:
    """Apply the fixes of `findings` (safe ones, and unsafe ones when `unsafe`) to the
    sources, in memory. Write with `cslint.fixes.write.write_fixed`."""
    by_path: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.fix is not None and (finding.fix.safe or unsafe):
            by_path.setdefault(finding.path, []).append(finding)
    report = FixReport()
    for path, file_findings in by_path.items():
        source = sources.get(path)
        if source is None:
            continue
        try:
            report.files.append(fix_source(source, file_findings))
        except Exception as error:  # noqa: BLE001 - one file's trouble must not stop the rest
            report.errors.append(f"{path}: could not apply fixes ({type(error).__name__}: "
                                 f"{error})")
    return report


def fix_source(source: SourceFile, findings: list[Finding]) -> FileFix:
    """All fixes of one file in one pass; a fix whose result does not parse is dropped."""
    try:
        module = _parse_module(source)
    except _CannotParse as error:
        result = FileFix(source, source.raw)
        result.dropped = [(f, f"libcst cannot parse the file: {error}") for f in findings]
        return result
    text, applied, dropped = _apply(module, findings)
    if applied and not _parses(text):
        # Find the culprits: add the fixes one at a time, keeping those that parse.
        kept: list[Finding] = []
        text = source.text
        dropped = list(dropped)
        for finding in applied:
            attempt, ok, _ = _apply(module, kept + [finding])
            if finding in ok and _parses(attempt):
                kept.append(finding)
                text = attempt
            else:
                dropped.append((finding, "the fixed code would not parse"))
        applied = kept
        if kept:
            text, applied, _ = _apply(module, kept)
    result = FileFix(source, _encode(text, source) if applied else source.raw)
    result.applied = applied
    result.dropped = dropped
    return result


def fix_replacements(sources: dict[str, SourceFile], findings: Iterable[Finding]
                     ) -> dict[Finding, tuple[Replacement, ...]]:
    """Each fix (safe or not) applied on its own, as replacements of spans of its file
    (SARIF's `fixes`); a fix that does not apply, or whose result would not parse, has
    none."""
    by_path: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.fix is not None:
            by_path.setdefault(finding.path, []).append(finding)
    edits: dict[Finding, tuple[Replacement, ...]] = {}
    for path, file_findings in by_path.items():
        source = sources.get(path)
        if source is None:
            continue
        try:
            module = _parse_module(source)
        except _CannotParse:
            continue
        for finding in file_findings:
            try:
                text, applied, _ = _apply(module, [finding])
            except Exception:  # noqa: BLE001 - one fix's trouble must not stop the report
                continue
            if applied and _parses(text):
                edits[finding] = replacements(source.text, text)
    return edits


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_LINE_END = re.compile(r"\r\n|\r|\n")


def replacements(old: str, new: str) -> tuple[Replacement, ...]:
    """The smallest spans of `old` (in lines as Python numbers them and character columns)
    whose replacement gives `new`: one per changed run of lines, trimmed to the
    characters that differ, widened to whole words (`torch` -> `cstorch`, not an
    inserted `cs`)."""
    old_lines, new_lines = _LINE.findall(old), _LINE.findall(new)
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    found = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        removed, inserted = "".join(old_lines[i1:i2]), "".join(new_lines[j1:j2])
        prefix = len(_common_prefix(removed, inserted))
        while _splits_word(removed, prefix) or _splits_word(inserted, prefix):
            prefix -= 1
        suffix = len(_common_prefix(removed[prefix:][::-1], inserted[prefix:][::-1]))
        while _splits_word(removed, len(removed) - suffix) \
                or _splits_word(inserted, len(inserted) - suffix):
            suffix -= 1
        start = _position(i1 + 1, removed[:prefix])
        end = _position(i1 + 1, removed[:len(removed) - suffix])
        found.append(Replacement(Location(*start, *end),
                                 inserted[prefix:len(inserted) - suffix]))
    return tuple(found)


def _splits_word(text: str, at: int) -> bool:
    return 0 < at < len(text) and _is_word(text[at - 1]) and _is_word(text[at])


def _is_word(character: str) -> bool:
    return character.isalnum() or character == "_"


def _common_prefix(a: str, b: str) -> str:
    return a[:next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))]


def _position(first_line: int, before: str) -> tuple[int, int]:
    """(line, 1-based column) just after `before`, a text starting at `first_line`."""
    ends = list(_LINE_END.finditer(before))
    if not ends:
        return first_line, len(before) + 1
    return first_line + len(ends), len(before) - ends[-1].end() + 1


# libcst's parser slows down with nesting faster than linearly (a sum of 20,000 terms takes
# minutes), and CPython compiles nothing nested deeper than about 3,000 levels.
LIBCST_DEPTH_LIMIT = 3_000


class _CannotParse(Exception):
    """Why libcst does not parse a file."""


def _parse_module(source: SourceFile) -> cst.Module:
    """The libcst tree of `source` (a file nested deeper than LIBCST_DEPTH_LIMIT is
    checked, parsed by `ast`, but not fixed)."""
    try:
        tree = source.parse()
    except InputError as error:
        raise _CannotParse(error.problem) from None
    if _deeper_than(tree, LIBCST_DEPTH_LIMIT):
        raise _CannotParse(f"nested more than {LIBCST_DEPTH_LIMIT:,} levels deep")
    try:
        return cst.parse_module(source.text)
    except cst.ParserSyntaxError as error:
        raise _CannotParse(error.message) from None


def _deeper_than(tree: ast.AST, limit: int) -> bool:
    pending = [(tree, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return False


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _encode(text: str, source: SourceFile) -> bytes:
    raw = text.encode(source.encoding)
    if source.raw.startswith(codecs.BOM_UTF8) and not raw.startswith(codecs.BOM_UTF8):
        raw = codecs.BOM_UTF8 + raw
    return raw


def _apply(module: cst.Module, findings: list[Finding]
           ) -> tuple[str, list[Finding], list[tuple[Finding, str]]]:
    """(new code, applied findings, dropped (finding, why)) for `findings` on `module`."""
    wrapper = MetadataWrapper(module)
    positions = wrapper.resolve(PositionProvider)
    calls = [(node, span) for node, span in positions.items() if isinstance(node, cst.Call)]
    targets: dict[int, list[tuple[Finding, CallFix]]] = {}
    dropped: list[tuple[Finding, str]] = []
    for finding in findings:
        fix = finding.fix
        if not isinstance(fix, CallFix) or (node := fix.locate(calls, finding.location)) is None:
            dropped.append((finding, "the code at the finding's position is not what the fix "
                                     "expects"))
            continue
        same_call = targets.setdefault(id(node), [])
        if fix.calls_cstorch and any(other.calls_cstorch for _, other in same_call):
            dropped.append((finding, "another fix rewrites the same call"))
            continue
        same_call.append((finding, fix))

    alias, import_problem = _cstorch_alias(wrapper.module)
    context = FixContext(alias or "cstorch", import_problem)
    applied: list[Finding] = []

    class Transformer(cst.CSTTransformer):
        calls_cstorch = False  # an applied fix names cerebras.pytorch

        def leave_Call(self, original_node, updated_node):
            for finding, fix in targets.get(id(original_node), ()):
                try:
                    new = fix.rewrite(updated_node, context)
                except NotApplicable as why:
                    dropped.append((finding, str(why)))
                    continue
                except Exception as error:  # noqa: BLE001 - a bad fix must not stop the rest
                    dropped.append((finding, f"the fix failed ({type(error).__name__}: "
                                             f"{error})"))
                    continue
                updated_node = new
                applied.append(finding)
                self.calls_cstorch = self.calls_cstorch or fix.calls_cstorch
            return updated_node

    transformer = Transformer()
    new_module = wrapper.module.visit(transformer)
    if alias is None and transformer.calls_cstorch:
        new_module = _add_import(new_module, CSTORCH_IMPORT)
    return new_module.code, applied, dropped


# ---- the module's import of cerebras.pytorch -------------------------------------------

def _cstorch_alias(module: cst.Module) -> tuple[str | None, str | None]:
    """(the expression naming cerebras.pytorch in this module or None, a problem that
    prevents adding `import cerebras.pytorch as cstorch`)."""
    found: str | None = None
    for statement in _top_level_statements(module):
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    name = dotted(alias.name)
                    if name in CSTORCH_MODULES:
                        local = alias.asname.name.value if alias.asname else name
                        found = found or local
            elif isinstance(small, cst.ImportFrom) and small.relative == [] \
                    and small.module is not None and not isinstance(small.names, cst.ImportStar):
                source = dotted(small.module)
                for alias in small.names:
                    full = f"{source}.{dotted(alias.name)}"
                    if full in CSTORCH_MODULES:
                        local = alias.asname.name.value if alias.asname else dotted(alias.name)
                        found = found or local
    if found is not None:
        return found, None
    if _binds_name(module, "cstorch"):
        return None, "the name `cstorch` is already used in this module"
    return None, None


def _top_level_statements(module: cst.Module):
    for statement in module.body:
        yield statement
        if isinstance(statement, cst.Try):
            yield from statement.body.body


def _binds_name(module: cst.Module, name: str) -> bool:
    class Finder(cst.CSTVisitor):
        def __init__(self):
            super().__init__()
            self.found = False

        def visit_Attribute(self, node):
            node.value.visit(self)
            return False  # `x.cstorch` does not bind the name

        def visit_Name(self, node):
            if node.value == name:
                self.found = True

    finder = Finder()
    module.visit(finder)
    return finder.found


def _add_import(module: cst.Module, statement_text: str) -> cst.Module:
    """Insert an import after the module's leading imports (after the docstring and
    `from __future__` imports when there are none)."""
    body = list(module.body)
    insert_at = 0
    for index, statement in enumerate(body):
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            break
        if isinstance(statement, cst.SimpleStatementLine):
            kinds = statement.body
            if all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in kinds):
                insert_at = index + 1
            elif index == 0 and len(kinds) == 1 and isinstance(kinds[0], cst.Expr) \
                    and isinstance(kinds[0].value, (cst.SimpleString, cst.ConcatenatedString)):
                insert_at = max(insert_at, 1)
    new = cst.parse_statement(statement_text + module.default_newline,
                              config=module.config_for_parsing)
    if insert_at == 0 or not _is_import(body[insert_at - 1]):
        # After a docstring (or at the top): a blank line before what follows.
        if insert_at < len(body):
            following = body[insert_at]
            if not following.leading_lines:
                body[insert_at] = following.with_changes(
                    leading_lines=[cst.EmptyLine(), *following.leading_lines])
        if insert_at > 0:
            new = new.with_changes(leading_lines=[cst.EmptyLine()])
    body.insert(insert_at, new)
    return module.with_changes(body=body)


def _is_import(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body)
