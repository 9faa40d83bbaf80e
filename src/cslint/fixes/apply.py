"""Applying fixes (imported only by --fix, --diff and SARIF's fixes).

Each finding's fix locates its call by exact span in the file's `ast`
(`cslint.fixes.syntax.CallIndex`, built once per file). Only that call's own code is
parsed with libcst, rewritten and put back at its span; every other character stays as
read (comments, formatting, line endings, code libcst would not reproduce), and the
bytes outside the fixed spans are the bytes read (encoding, BOM). The work per file is
linear in its size and its fixes.

A fix that does not fit its code (its call moved, the arguments do not suit it, its
result would not parse) is dropped with the reason; a fix that fails (an exception,
code nested too deep) is an error. Nothing is written here (`cslint.fixes.write`).
"""

from __future__ import annotations

import ast
import bisect
import codecs
import difflib
import gc
import os
import re
import warnings
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterable, Mapping

with warnings.catch_warnings():
    # libcst's own imports raise deprecation warnings the user can do nothing about.
    warnings.simplefilter("ignore", DeprecationWarning)
    import libcst as cst

from cslint.diagnostics import Finding, InputProblem, Location, Replacement
from cslint.fixes.kinds import CallFix, FixContext, NotApplicable
from cslint.fixes.syntax import CallIndex
from cslint.source import SourceFile

CSTORCH_MODULES = ("cerebras.pytorch", "cslint.cstorch")
CSTORCH_IMPORT = "import cerebras.pytorch as cstorch"

# Why a fix is dropped when its finding's span is not the span of a call it fits.
MOVED = "the code at the finding's position is not what the fix expects"
WOULD_NOT_PARSE = "the fixed code would not parse"


@dataclass(frozen=True)
class Edit:
    """Replace `text[start:end]` of a source's text with `new`."""

    start: int
    end: int
    new: str


@dataclass
class FileFix:
    """The outcome of fixing one file."""

    source: SourceFile
    new_raw: bytes
    applied: list[Finding] = field(default_factory=list)
    dropped: list[tuple[Finding, str]] = field(default_factory=list)
    # Fixes that failed (an error, not a misfit): (finding, why).
    failed: list[tuple[Finding, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.new_raw != self.source.raw


@dataclass
class FixReport:
    files: list[FileFix] = field(default_factory=list)
    # Files whose fixes could not be applied, and fixes that failed.
    errors: list[InputProblem] = field(default_factory=list)

    @property
    def applied(self) -> list[Finding]:
        return [f for file in self.files for f in file.applied]

    @property
    def dropped(self) -> list[tuple[Finding, str]]:
        return [d for file in self.files for d in file.dropped]


def fix_findings(sources: dict[str, SourceFile], findings: Iterable[Finding],
                 unsafe: bool, trees: Mapping[str, ast.Module] | None = None) -> FixReport:
    """Apply the fixes of `findings` (safe ones, and unsafe ones when `unsafe`) to the
    sources, in memory (`trees`: their syntax trees, by path, where already parsed).
    Write with `cslint.fixes.write.write_fixed`."""
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
            with _collector_paused():
                file = fix_source(source, file_findings, (trees or {}).get(path))
        except Exception as error:  # noqa: BLE001 - one file's trouble must not stop the rest
            report.errors.append(InputProblem(path, f"could not apply fixes ({_why(error)})"))
            continue
        report.files.append(file)
        for finding, why in file.failed:
            location = finding.location
            report.errors.append(InputProblem(path, f"{finding.code} could not be fixed "
                                                    f"({why})", location.line, location.column))
    return report


def fix_source(source: SourceFile, findings: list[Finding], tree: ast.Module | None = None
               ) -> FileFix:
    """All fixes of one file (`tree`: its syntax tree, where already parsed); a fix whose
    result does not parse is dropped."""
    outcome = _FileFixer(source, findings, tree).fix_all(findings)
    result = FileFix(source, _encoded(source, outcome.edits) if outcome.edits else source.raw)
    result.applied = outcome.applied
    result.dropped = outcome.dropped
    result.failed = outcome.failed
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
            fixer = _FileFixer(source, file_findings)
            # Together first: the file is parsed once, not once per fix.
            together = fixer.fix_all(file_findings)
        except Exception:  # noqa: BLE001 - one file's trouble must not stop the report
            continue
        breaking = {id(finding) for finding, why in together.dropped if why == WOULD_NOT_PARSE}
        for finding in file_findings:
            if id(finding) in breaking:
                continue
            try:
                alone = fixer.apply([finding])
            except Exception:  # noqa: BLE001 - one fix's trouble must not stop the report
                continue
            if alone.applied:
                edits[finding] = tuple(replacement for edit in alone.edits
                                       for replacement in _edit_replacements(fixer, edit))
    return edits


def cstorch_import_edit(source: SourceFile, tree: ast.Module, statement: str = CSTORCH_IMPORT
                        ) -> Edit | None:
    """The edit that adds `statement` (an import of cerebras.pytorch, or of its runtime
    reference) where the fixes add theirs; None when the module imports it already."""
    fixer = _FileFixer(source, [], tree)
    return None if fixer.cstorch_alias is not None else fixer._import_edit(statement)


def spliced(text: str, edits: list[Edit]) -> str:
    """`text` with `edits` (in order, apart) made."""
    return _spliced(text, 0, len(text), edits)


def encoded(source: SourceFile, edits: list[Edit]) -> bytes:
    """The file's bytes with `edits` (in order, apart) made, its encoding, BOM and the
    bytes outside the edits kept (ValueError when they cannot be)."""
    try:
        return _encoded(source, edits)
    except _UnfaithfulEncoding as error:
        raise ValueError(str(error)) from None


# ---- one file -----------------------------------------------------------------------------

@dataclass
class _Outcome:
    text: str
    edits: list[Edit]
    applied: list[Finding]
    dropped: list[tuple[Finding, str]]
    failed: list[tuple[Finding, str]]


class _FileFixer:
    """What fixing one file needs, computed once: its tree, its calls by span, its name
    for cerebras.pytorch and where that import would go."""

    def __init__(self, source: SourceFile, findings: list[Finding],
                 tree: ast.Module | None = None):
        self.source = source
        self.text = source.text
        if tree is None:
            with _collector_paused():
                tree = source.parse()
        self.tree = tree
        self.calls = CallIndex(source, self.tree, (f.location.line for f in findings))
        match = re.search(r"\r\n?|\n", self.text)
        self.newline = match.group() if match else "\n"  # as libcst's default_newline
        self._parser_config = cst.PartialParserConfig(default_newline=self.newline)
        self._module = cst.Module(body=[], default_newline=self.newline)  # writes code
        alias, problem = _cstorch_alias(self.tree)
        self.cstorch_alias = alias
        self.context = FixContext(alias or "cstorch", problem)
        # Rewrites by (call's code, fix, check): a file often repeats a call.
        self._rewritten: dict[tuple[str, CallFix, bool], str | NotApplicable] = {}

    def fix_all(self, findings: list[Finding]) -> _Outcome:
        """`findings`' fixes applied together, less those whose result does not parse."""
        outcome = self.apply(findings)
        if not outcome.applied or _parses(outcome.text):
            return outcome
        # Find the culprits: first each fixed call's code on its own, then, should the
        # file still not parse (a call that parses alone but not in its place: in an
        # f-string, say), the fixes one at a time, keeping those whose result parses.
        outcome = self.apply(findings, check_each_call=True)
        if not outcome.applied or _parses(outcome.text):
            return outcome
        kept: list[Finding] = []
        for finding in outcome.applied:
            attempt = self.apply(kept + [finding])
            if finding in attempt.applied and _parses(attempt.text):
                kept.append(finding)
            else:
                outcome.dropped.append((finding, WOULD_NOT_PARSE))
        final = self.apply(kept)
        outcome.text, outcome.edits, outcome.applied = final.text, final.edits, final.applied
        return outcome

    def apply(self, findings: list[Finding], check_each_call: bool = False) -> _Outcome:
        """`findings`' fixes applied together: nested calls from the inside out, each
        call's code rewritten once per fix of it. `check_each_call`: drop a fix whose
        call's new code does not parse on its own (the caller checks the whole file)."""
        order = {id(finding): number for number, finding in enumerate(findings)}
        targets: dict[tuple[int, int], list[tuple[Finding, CallFix]]] = {}
        dropped: list[tuple[Finding, str]] = []
        failed: list[tuple[Finding, str]] = []
        for finding in findings:
            fix = finding.fix
            node = fix.locate(self.calls, finding.location) if isinstance(fix, CallFix) \
                else None
            if node is None:
                dropped.append((finding, MOVED))
                continue
            same_call = targets.setdefault(self.calls.span(node), [])
            if fix.calls_cstorch and any(other.calls_cstorch for _, other in same_call):
                dropped.append((finding, "another fix rewrites the same call"))
                continue
            same_call.append((finding, fix))

        # Calls either nest or are apart: a call's inner targets are its children.
        children: dict[tuple[int, int], list[tuple[int, int]]] = {span: [] for span in targets}
        outermost: list[tuple[int, int]] = []
        enclosing: list[tuple[int, int]] = []
        for span in sorted(targets, key=lambda s: (s[0], -s[1])):
            while enclosing and enclosing[-1][1] <= span[0]:
                enclosing.pop()
            (children[enclosing[-1]] if enclosing else outermost).append(span)
            enclosing.append(span)

        applied: list[Finding] = []
        calls_cstorch = False
        new_code: dict[tuple[int, int], str] = {}
        for span in sorted(targets, key=lambda s: s[1]):  # inner calls end first
            code = _spliced(self.text, span[0], span[1],
                            [Edit(*child, new_code[child]) for child in children[span]])
            for finding, fix in targets[span]:
                try:
                    code = self._rewrite(code, fix, check_each_call)
                except NotApplicable as why:
                    dropped.append((finding, str(why)))
                    continue
                except Exception as error:  # noqa: BLE001 - a bad fix must not stop the rest
                    failed.append((finding, _why(error)))
                    continue
                applied.append(finding)
                calls_cstorch = calls_cstorch or fix.calls_cstorch
            new_code[span] = code
        edits = [Edit(*span, new_code[span]) for span in outermost
                 if new_code[span] != self.text[span[0]:span[1]]]
        if calls_cstorch and self.cstorch_alias is None:
            edits.append(self._import_edit())
            # (An insertion before a call that starts where it goes comes first.)
            edits.sort(key=lambda edit: (edit.start, edit.end))
        applied.sort(key=lambda finding: order[id(finding)])
        return _Outcome(_spliced(self.text, 0, len(self.text), edits), edits, applied,
                        dropped, failed)

    def _rewrite(self, code: str, fix: CallFix, check: bool) -> str:
        """The call `code` rewritten by `fix` (NotApplicable when it does not fit)."""
        key = (code, fix, check)
        if key not in self._rewritten:
            try:
                self._rewritten[key] = self._rewrite_call(code, fix, check)
            except NotApplicable as why:
                self._rewritten[key] = why
        result = self._rewritten[key]
        if isinstance(result, NotApplicable):
            raise NotApplicable(str(result))
        return result

    def _rewrite_call(self, code: str, fix: CallFix, check: bool) -> str:
        # In parentheses: a call spread over lines may be valid only inside the brackets
        # around it. The parentheses are the call's own to libcst and are taken off again.
        wrapped = f"({code})"
        call = cst.parse_expression(wrapped, config=self._parser_config)
        if not isinstance(call, cst.Call) or self._module.code_for_node(call) != wrapped:
            raise NotApplicable("libcst does not reproduce the call's code exactly")
        rewritten = fix.rewrite(call, self.context)
        new = self._module.code_for_node(rewritten.with_changes(lpar=call.lpar, rpar=call.rpar))
        if check and not _parses(new, "eval"):
            raise NotApplicable(WOULD_NOT_PARSE)
        return new[1:-1]

    def _import_edit(self, statement: str = CSTORCH_IMPORT) -> Edit:
        """`statement` (`import cerebras.pytorch as cstorch`) after the module's leading
        imports (after the docstring, or first, when there are none), as a line of its
        own."""
        lines = _statement_lines(self.tree.body)
        insert_at = 0  # the number of statement lines the import follows
        for number, line in enumerate(lines):
            first = line[0]
            if isinstance(first, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                break
            if all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in line):
                insert_at = number + 1
            elif number == 0 and _is_docstring(line):
                insert_at = max(insert_at, 1)
        newline = self.newline
        if insert_at == 0:
            # Before the first statement (after the comments heading the file), and a
            # blank line after it.
            at = self.calls.offset(_first_line(lines[0][0]), 1)
            return Edit(at, at, statement + newline + newline)
        previous = lines[insert_at - 1]
        end_line = previous[-1].end_lineno
        starts = self.calls.line_starts
        if end_line < len(starts):
            at, new = starts[end_line], statement + newline
        else:  # after the last line, which has no line end
            at, new = len(self.text), newline + statement
        if _is_docstring(previous):
            # A blank line after the docstring, and one before what follows unless it
            # has one.
            new = newline + new
            if insert_at < len(lines) and _first_line(lines[insert_at][0]) == end_line + 1:
                new += newline
        return Edit(at, at, new)


def _first_line(statement: ast.stmt) -> int:
    decorators = getattr(statement, "decorator_list", ())
    return min([statement.lineno, *(d.lineno for d in decorators)])


_COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For,
             ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match,
             *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))


def _statement_lines(body: list[ast.stmt]) -> list[list[ast.stmt]]:
    """The module's statements as lines: simple statements that share a line
    (`import a; import b`) are one line; a compound statement is one of its own."""
    lines: list[list[ast.stmt]] = []
    for statement in body:
        if lines and not isinstance(statement, _COMPOUND) \
                and not isinstance(lines[-1][-1], _COMPOUND) \
                and statement.lineno == lines[-1][-1].end_lineno:
            lines[-1].append(statement)
        else:
            lines.append([statement])
    return lines


def _is_docstring(line: list[ast.stmt]) -> bool:
    return len(line) == 1 and isinstance(line[0], ast.Expr) \
        and isinstance(line[0].value, ast.Constant) \
        and isinstance(line[0].value.value, (str, bytes))


def _spliced(text: str, start: int, end: int, edits: list[Edit]) -> str:
    """`text[start:end]` with `edits` (in order, apart, inside it) made."""
    pieces = []
    at = start
    for edit in edits:
        pieces.append(text[at:edit.start])
        pieces.append(edit.new)
        at = edit.end
    pieces.append(text[at:end])
    return "".join(pieces)


class _UnfaithfulEncoding(Exception):
    """The file's bytes cannot be kept as read outside the fixed spans."""


def _encoded(source: SourceFile, edits: list[Edit]) -> bytes:
    """The file's bytes with `edits` made: the bytes between the edits are the bytes read
    (checked, not re-encoded), the new code is in the file's encoding."""
    raw, text, encoding = source.raw, source.text, source.encoding
    at = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
    pieces = [raw[:at]]
    position = 0

    def keep(upto: int) -> bytes:
        nonlocal at, position
        old = text[position:upto].encode(encoding)
        if raw[at:at + len(old)] != old:
            raise _UnfaithfulEncoding(f"its {encoding} bytes would not be kept as they are")
        at += len(old)
        position = upto
        return old

    for edit in edits:
        pieces.append(keep(edit.start))
        keep(edit.end)  # the replaced code: skipped, but its bytes must match too
        try:
            pieces.append(edit.new.encode(encoding))
        except UnicodeEncodeError:
            raise _UnfaithfulEncoding(f"the fixed code cannot be written in {encoding}") \
                from None
    pieces.append(keep(len(text)))
    if at != len(raw):
        raise _UnfaithfulEncoding(f"its {encoding} bytes would not be kept as they are")
    return b"".join(pieces)


@contextmanager
def _collector_paused():
    """The cyclic garbage collector paused: parsing a large file makes a heap of nodes
    the collector would scan again and again (three times the parse's time)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _parses(text: str, mode: str = "exec") -> bool:
    try:
        with warnings.catch_warnings(), _collector_paused():
            warnings.simplefilter("ignore")
            ast.parse(text, mode=mode)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _why(error: BaseException) -> str:
    """An exception as one line."""
    if isinstance(error, RecursionError):
        return "nested too deeply"
    if isinstance(error, _UnfaithfulEncoding):
        return str(error)
    message = error.message if isinstance(error, cst.ParserSyntaxError) else str(error)
    return " ".join(f"{type(error).__name__}: {message}".split())


# ---- the module's import of cerebras.pytorch -------------------------------------------

def _cstorch_alias(tree: ast.Module) -> tuple[str | None, str | None]:
    """(the expression naming cerebras.pytorch in this module or None, a problem that
    prevents adding `import cerebras.pytorch as cstorch`)."""
    found: str | None = None
    for statement in _top_level_statements(tree):
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.name in CSTORCH_MODULES:
                    found = found or alias.asname or alias.name
        elif isinstance(statement, ast.ImportFrom) and statement.level == 0 \
                and statement.module is not None:
            for alias in statement.names:
                if f"{statement.module}.{alias.name}" in CSTORCH_MODULES:
                    found = found or alias.asname or alias.name
    if found is not None:
        return found, None
    if "cstorch" in _names_used(tree):
        return None, "the name `cstorch` is already used in this module"
    return None, None


def _top_level_statements(tree: ast.Module):
    for statement in tree.body:
        yield statement
        if isinstance(statement, ast.Try):
            yield from statement.body


def _names_used(tree: ast.Module) -> set[str]:
    """Every name the module's code spells, except attribute names (`x.cstorch` uses no
    name `cstorch`) and the later parts of dotted module names."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add(node.name.split(".")[0])
            if node.asname:
                names.add(node.asname)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.keyword) and node.arg:
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
        elif isinstance(node, ast.MatchClass):
            names.update(node.kwd_attrs)
    return names


# ---- edits as replacements (SARIF) ----------------------------------------------------------

def _edit_replacements(fixer: _FileFixer, edit: Edit) -> tuple[Replacement, ...]:
    """An edit as the smallest replacements of the whole lines it touches."""
    starts = fixer.calls.line_starts
    text = fixer.text
    first = _line_of(starts, edit.start)
    last = _line_of(starts, edit.end)
    begin = starts[first - 1]
    end = starts[last] if last < len(starts) else len(text)
    old = text[begin:end]
    new = text[begin:edit.start] + edit.new + text[edit.end:end]
    return tuple(Replacement(Location(r.location.line + first - 1, r.location.column,
                                      r.location.end_line + first - 1, r.location.end_column),
                             r.text)
                 for r in replacements(old, new))


def _line_of(starts: list[int], offset: int) -> int:
    """The 1-based line holding `offset`."""
    return bisect.bisect_right(starts, offset)


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


# ---- the unified diff -------------------------------------------------------------------------

_PATCH_LINE = re.compile(rb"[^\n]*\n|[^\n]+\Z")
_NO_NEWLINE = b"\n\\ No newline at end of file\n"


def unified_diff(display_path: str, old: bytes, new: bytes, context: int = 3) -> bytes:
    """A unified diff of a file's bytes that `patch -p0` (and `git apply -p0`) applies to
    give `new` exactly: in the file's own bytes (encoding, BOM, line endings), its lines
    cut after each \\n as patch cuts them (a \\r alone is part of a line, so a file with
    \\r line endings is one line), "\\ No newline at end of file" only at the end."""
    a, b = _PATCH_LINE.findall(old), _PATCH_LINE.findall(new)
    changes = []  # (a_start, a_end, b_start, b_end) of each run of lines that differ
    a_at = b_at = 0
    for i, j, size in [*_matching_blocks(a, b), (len(a), len(b), 0)]:
        if i > a_at or j > b_at:
            changes.append((a_at, i, b_at, j))
        a_at, b_at = i + size, j + size
    if not changes:
        return b""
    hunks: list[list[tuple[int, int, int, int]]] = []
    for change in changes:
        if hunks and change[0] - hunks[-1][-1][1] <= 2 * context:
            hunks[-1].append(change)
        else:
            hunks.append([change])
    name = _patch_file_name(display_path)
    out = [b"--- " + name + b"\n", b"+++ " + name + b"\n"]
    for hunk in hunks:
        a_start = max(0, hunk[0][0] - context)
        b_start = hunk[0][2] - (hunk[0][0] - a_start)
        a_end = min(len(a), hunk[-1][1] + context)
        b_end = hunk[-1][3] + (a_end - hunk[-1][1])
        out.append(b"@@ -%s +%s @@\n" % (_hunk_range(a_start, a_end),
                                         _hunk_range(b_start, b_end)))
        at = a_start
        for a_from, a_to, b_from, b_to in hunk:
            out += [b" " + line for line in a[at:a_from]]
            out += [b"-" + line for line in a[a_from:a_to]]
            out += [b"+" + line for line in b[b_from:b_to]]
            at = a_to
        out += [b" " + line for line in a[at:a_end]]
    return b"".join(line if line.endswith(b"\n") else line + _NO_NEWLINE for line in out)


def _hunk_range(start: int, end: int) -> bytes:
    """A hunk header's range of 0-based lines [start, end), as diff writes it."""
    if end - start == 1:
        return b"%d" % (start + 1)
    return b"%d,%d" % (start + 1 if end > start else start, end - start)


def _matching_blocks(a: list[bytes], b: list[bytes]) -> list[tuple[int, int, int]]:
    """(i, j, size): runs of equal lines `a[i:i+size] == b[j:j+size]`, in order. Lines
    that occur once in each anchor the match (patience diff); difflib matches the few
    lines between anchors, so the time grows with the file, not with the file times its
    changes."""
    count_a, count_b = Counter(a), Counter(b)
    in_b = {line: j for j, line in enumerate(b) if count_b[line] == 1}
    pairs = [(i, in_b[line]) for i, line in enumerate(a)
             if count_a[line] == 1 and line in in_b]
    blocks: list[tuple[int, int, int]] = []
    a_at = b_at = 0
    for i, j in [*_increasing(pairs), (len(a), len(b))]:
        if i > a_at and j > b_at:
            matcher = difflib.SequenceMatcher(None, a[a_at:i], b[b_at:j], autojunk=False)
            blocks += [(a_at + x, b_at + y, size)
                       for x, y, size in matcher.get_matching_blocks() if size]
        if i < len(a):
            blocks.append((i, j, 1))
        a_at, b_at = i + 1, j + 1
    merged: list[tuple[int, int, int]] = []
    for i, j, size in blocks:
        if merged and merged[-1][0] + merged[-1][2] == i and merged[-1][1] + merged[-1][2] == j:
            merged[-1] = (merged[-1][0], merged[-1][1], merged[-1][2] + size)
        else:
            merged.append((i, j, size))
    return merged


def _increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest run of `pairs` (sorted by their first items) whose second items
    increase too (patience sorting)."""
    tails: list[int] = []  # tails[k]: the index in `pairs` that ends the best run of k + 1
    tail_values: list[int] = []  # the second item of each of those
    previous = [-1] * len(pairs)
    for index, (_, j) in enumerate(pairs):
        k = bisect.bisect_left(tail_values, j)
        if k:
            previous[index] = tails[k - 1]
        if k == len(tails):
            tails.append(index)
            tail_values.append(j)
        else:
            tails[k] = index
            tail_values[k] = j
    run = []
    index = tails[-1] if tails else -1
    while index >= 0:
        run.append(pairs[index])
        index = previous[index]
    return run[::-1]


def _patch_file_name(display_path: str) -> bytes:
    """The path as a diff header names it: quoted as C strings (as git quotes them) when
    it holds characters that would end or change the name."""
    name = os.fsencode(display_path)
    if re.fullmatch(rb"[\x21-\x7e]+", name) and b'"' not in name and b"\\" not in name:
        return name
    escapes = {b'"'[0]: b'\\"', b"\\"[0]: b"\\\\", b"\t"[0]: b"\\t", b"\n"[0]: b"\\n"}
    return b'"' + b"".join(escapes.get(byte, bytes([byte]) if 0x20 <= byte < 0x7f
                                       else b"\\%03o" % byte) for byte in name) + b'"'
