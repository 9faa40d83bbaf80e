"""Autofixes: what a finding's fix is (built by rules, no libcst) and how fixes are applied.

Rules attach a `Fix` built by the small functions at the top of this module; they use
only `ast` and plain data, so a plain `cslint check` never imports libcst. Applying
(`--fix`, `--diff`) imports libcst: the file is parsed once, each finding's position
locates its node in the libcst tree (PositionProvider), all fixes of the file are
applied in one pass, and only the fixed spans change (comments and formatting
elsewhere are kept). The result is re-parsed; a fix that breaks parsing is dropped
and reported. Files are written atomically with their encoding, BOM, line endings
and mode kept.

Fix kinds (the `kind` entry of `Fix.data`):
- `replace-call`: call `<cstorch>.<target>(...)` instead, dropping and renaming
  keywords and appending keywords (CS401, CS104). `<cstorch>` is the module's alias of
  `cerebras.pytorch` / `cslint.cstorch`, or `cstorch` with `import cerebras.pytorch as
  cstorch` added.
- `scale-first-argument`: `p.add_(g, alpha=a)` -> `p.add_(a * g)` (CS205).
"""

from __future__ import annotations

import ast
import codecs
import difflib
import os
import stat
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from cslint.diagnostics import Finding, Fix

if TYPE_CHECKING:
    from cslint.source import SourceFile

CSTORCH_IMPORT = "import cerebras.pytorch as cstorch"


# ---- building fixes (used by rules; no libcst) -----------------------------------------

def replace_call_fix(target: str, *, safe: bool, description: str,
                     drop: Iterable[str] = (), add: Iterable[tuple[str, str]] = (),
                     rename: Iterable[tuple[str, str]] = ()) -> Fix:
    """Call `<cstorch alias>.<target>` instead; drop the keywords in `drop`, rename
    keywords (old, new), append `add` keywords as (name, Python source)."""
    return Fix(safe, description, (
        ("kind", "replace-call"),
        ("target", target),
        ("drop", tuple(drop)),
        ("rename", tuple((old, new) for old, new in rename)),
        ("add", tuple((name, source) for name, source in add)),
    ))


# cstorch creation op -> (positional parameter names after renaming, torch keyword renames)
_CREATION_OPS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "zeros_like": (("other",), {"input": "other"}),
    "ones_like": (("other",), {"input": "other"}),
    "full_like": (("other", "value"), {"input": "other", "fill_value": "value"}),
    "zeros": (("shape",), {"size": "shape"}),
    "ones": (("shape",), {"size": "shape"}),
    "full": (("shape", "value"), {"size": "shape", "fill_value": "value"}),
}


def cstorch_creation_fix(call: ast.Call) -> Fix | None:
    """CS104's fix: `torch.zeros_like(p)` -> `cstorch.zeros_like(p)`, when the arguments
    fit the cstorch signature (`zeros_like(other, dtype=None)`, `full_like(other, value,
    dtype=None)`, `zeros(shape, dtype=None)`, ...): no `device`, `memory_format`,
    `requires_grad` or the like, and no varargs shapes (`torch.zeros(3, 4)`).
    None when they do not fit."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else \
        func.id if isinstance(func, ast.Name) else None
    if name not in _CREATION_OPS:
        return None
    positional, renames = _CREATION_OPS[name]
    if any(isinstance(a, ast.Starred) for a in call.args) or len(call.args) > len(positional):
        return None
    given = list(positional[:len(call.args)])
    rename: list[tuple[str, str]] = []
    for keyword in call.keywords:
        if keyword.arg is None:
            return None
        new = renames.get(keyword.arg, keyword.arg)
        if new not in (*positional, "dtype") or new in given:
            return None
        if new != keyword.arg:
            rename.append((keyword.arg, new))
        given.append(new)
    if any(p not in given for p in positional):
        return None
    if name in ("zeros", "ones", "full"):
        shape = call.args[0] if call.args else next(
            k.value for k in call.keywords if renames.get(k.arg, k.arg) == "shape")
        if isinstance(shape, ast.Constant):
            return None  # torch.zeros(5): an int size, not a shape
    return replace_call_fix(name, safe=True, description=f"use cstorch.{name}",
                            rename=rename)


# Methods whose first argument is scaled by `alpha` / `value` (CS205).
SCALED_METHODS = {"add_": "alpha", "sub_": "alpha", "add": "alpha", "sub": "alpha",
                  "addcdiv_": "value", "addcmul_": "value", "addcdiv": "value",
                  "addcmul": "value"}


def scale_first_argument_fix(method: str, keyword: str) -> Fix:
    """CS205's fix: `p.add_(g, alpha=-lr)` -> `p.add_(-lr * g)`, `p.addcdiv_(a, b,
    value=-lr)` -> `p.addcdiv_(-lr * a, b)`. Unsafe: the floating-point order changes.
    For Tensor methods only: in the functional form `torch.add(p, g, alpha=a)` the scaled
    argument is the second one (the fixer refuses calls on `torch` itself)."""
    return Fix(False, f"fold `{keyword}=` into the first argument of {method}()", (
        ("kind", "scale-first-argument"),
        ("method", method),
        ("keyword", keyword),
    ))


# ---- applying fixes (imports libcst) ----------------------------------------------------

@dataclass
class FileFix:
    """The outcome of fixing one file."""

    source: "SourceFile"
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


def wanted(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (finding.fix.safe or unsafe)


def fix_findings(sources: dict[str, "SourceFile"], findings: Iterable[Finding],
                 unsafe: bool) -> FixReport:
    """Apply the fixes of `findings` (safe ones, and unsafe ones when `unsafe`) to the
    sources, in memory. Write with `write_fixed`."""
    by_path: dict[str, list[Finding]] = {}
    for finding in findings:
        if wanted(finding, unsafe):
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


def _import_libcst():
    """libcst, imported once, without the deprecation warnings of its own imports."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import libcst
        import libcst.metadata  # noqa: F401
    return libcst


def fix_source(source: "SourceFile", findings: list[Finding]) -> FileFix:
    """All fixes of one file in one pass; a fix whose result does not parse is dropped."""
    cst = _import_libcst()

    try:
        module = cst.parse_module(source.text)
    except cst.ParserSyntaxError as error:
        result = FileFix(source, source.raw)
        result.dropped = [(f, f"libcst cannot parse the file: {error.message}")
                          for f in findings]
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


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _encode(text: str, source: "SourceFile") -> bytes:
    raw = text.encode(source.encoding)
    if source.raw.startswith(codecs.BOM_UTF8) and not raw.startswith(codecs.BOM_UTF8):
        raw = codecs.BOM_UTF8 + raw
    return raw


def _data(fix: Fix) -> dict[str, Any]:
    return dict(fix.data)


def _apply(module, findings: list[Finding]) -> tuple[str, list[Finding], list[tuple[Finding, str]]]:
    """(new code, applied findings, dropped (finding, why)) for `findings` on `module`."""
    cst = _import_libcst()
    from libcst.metadata import MetadataWrapper, PositionProvider

    wrapper = MetadataWrapper(module)
    positions = wrapper.resolve(PositionProvider)
    calls = [(node, rng) for node, rng in positions.items() if isinstance(node, cst.Call)]
    targets: dict[int, list[tuple[Finding, dict]]] = {}
    dropped: list[tuple[Finding, str]] = []
    for finding in findings:
        data = _data(finding.fix)
        node = _locate(calls, finding, data)
        if node is None:
            dropped.append((finding, "the code at the finding's position is not what the fix "
                                     "expects"))
            continue
        if targets.get(id(node)) and data.get("kind") == "replace-call" and any(
                d.get("kind") == "replace-call" for _, d in targets[id(node)]):
            dropped.append((finding, "another fix rewrites the same call"))
            continue
        targets.setdefault(id(node), []).append((finding, data))

    prefix, import_problem = _cstorch_prefix(wrapper.module)
    needs_import = prefix is None
    if prefix is None:
        prefix = "cstorch"
    applied: list[Finding] = []

    class Transformer(cst.CSTTransformer):
        def leave_Call(self, original_node, updated_node):
            for finding, data in targets.get(id(original_node), ()):
                if data.get("kind") == "replace-call" and import_problem:
                    dropped.append((finding, import_problem))
                    continue
                try:
                    new = _rewrite(updated_node, data, prefix)
                except _NotApplicable as why:
                    dropped.append((finding, str(why)))
                    continue
                except Exception as error:  # noqa: BLE001 - a bad fix must not stop the rest
                    dropped.append((finding, f"the fix failed ({type(error).__name__}: "
                                             f"{error})"))
                    continue
                updated_node = new
                applied.append(finding)
            return updated_node

    new_module = wrapper.module.visit(Transformer())
    if needs_import and any(_data(f.fix).get("kind") == "replace-call" for f in applied):
        new_module = _add_import(new_module, CSTORCH_IMPORT)
    return new_module.code, applied, dropped


class _NotApplicable(Exception):
    pass


def _contains(rng, finding: Finding) -> bool:
    loc = finding.location
    start = (rng.start.line, rng.start.column + 1)
    end = (rng.end.line, rng.end.column + 1)
    return start <= (loc.line, loc.column) and (loc.end_line, loc.end_column) <= end


def _locate(calls, finding: Finding, data: dict):
    """The smallest call containing the finding's span that the fix applies to."""
    import libcst as cst

    best = None
    best_size = None
    for node, rng in calls:
        if not _contains(rng, finding):
            continue
        if data.get("kind") == "scale-first-argument":
            func = node.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == data.get("method")):
                continue
        elif data.get("kind") == "replace-call":
            loc = finding.location
            # The call itself, not one that merely contains it.
            if (rng.start.line, rng.start.column + 1) != (loc.line, loc.column):
                continue
        else:
            continue
        size = (rng.end.line - rng.start.line, rng.end.column - rng.start.column)
        if best is None or size < best_size:
            best, best_size = node, size
    return best


def _cstorch_prefix(module) -> tuple[str | None, str | None]:
    """(the expression naming cerebras.pytorch in this module or None, a problem that
    prevents adding `import cerebras.pytorch as cstorch`)."""
    import libcst as cst

    found: str | None = None
    for statement in _top_level_statements(module):
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    name = _dotted(alias.name)
                    if name in ("cerebras.pytorch", "cslint.cstorch"):
                        local = alias.asname.name.value if alias.asname else name
                        found = found or local
            elif isinstance(small, cst.ImportFrom) and small.relative == [] \
                    and small.module is not None and not isinstance(small.names, cst.ImportStar):
                source = _dotted(small.module)
                for alias in small.names:
                    full = f"{source}.{_dotted(alias.name)}"
                    if full in ("cerebras.pytorch", "cslint.cstorch"):
                        local = alias.asname.name.value if alias.asname else _dotted(alias.name)
                        found = found or local
    if found is not None:
        return found, None
    if _binds_name(module, "cstorch"):
        return None, "the name `cstorch` is already used in this module"
    return None, None


def _top_level_statements(module):
    import libcst as cst

    for statement in module.body:
        yield statement
        if isinstance(statement, cst.Try):
            yield from statement.body.body


def _dotted(node) -> str:
    import libcst as cst

    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _binds_name(module, name: str) -> bool:
    import libcst as cst

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


def _add_import(module, statement_text: str):
    """Insert an import after the module's leading imports (after the docstring and
    `from __future__` imports when there are none)."""
    import libcst as cst

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


def _is_import(statement) -> bool:
    import libcst as cst

    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body)


def _rewrite(call, data: dict, prefix: str):
    kind = data.get("kind")
    if kind == "replace-call":
        return _replace_call(call, data, prefix)
    if kind == "scale-first-argument":
        return _scale_first_argument(call, data)
    raise _NotApplicable(f"unknown fix kind {kind!r}")


def _replace_call(call, data: dict, prefix: str):
    import libcst as cst

    drop = set(data.get("drop", ()))
    rename = dict(data.get("rename", ()))
    entries = []
    for index, arg in enumerate(call.args):
        name = arg.keyword.value if arg.keyword is not None else None
        if name in drop:
            continue
        if name in rename:
            arg = arg.with_changes(keyword=cst.Name(rename[name]))
        entries.append((arg, index))
    present = {a.keyword.value for a, _ in entries if a.keyword is not None}
    for name, source in data.get("add", ()):
        if name in present:
            continue
        entries.append((cst.Arg(value=cst.parse_expression(source), keyword=cst.Name(name),
                                equal=cst.AssignEqual(
                                    whitespace_before=cst.SimpleWhitespace(""),
                                    whitespace_after=cst.SimpleWhitespace(""))), None))
    func = cst.parse_expression(f"{prefix}.{data['target']}")
    return call.with_changes(func=func, args=_punctuate(call.args, entries))


def _punctuate(original: tuple, entries: list) -> list:
    """Commas and closing whitespace for a rebuilt argument list, in the call's style.
    `entries`: (argument, its index in `original` or None for a new one)."""
    import libcst as cst

    count = len(original)
    separator = None
    for arg in original[:-1]:
        if isinstance(arg.comma, cst.Comma):
            separator = arg.comma
            break
    if separator is None:
        separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    elif isinstance(separator.whitespace_after, cst.ParenthesizedWhitespace):
        # One argument per line: keep the layout, not the comments of that line.
        separator = separator.with_changes(whitespace_after=separator.whitespace_after.with_changes(
            first_line=cst.TrailingWhitespace(), empty_lines=[]))
    if count:
        closing_comma = original[-1].comma
        closing_space = original[-1].whitespace_after_arg
    else:
        closing_comma, closing_space = cst.MaybeSentinel.DEFAULT, cst.SimpleWhitespace("")
    result = []
    for position, (arg, index) in enumerate(entries):
        if position == len(entries) - 1:
            arg = arg.with_changes(comma=closing_comma, whitespace_after_arg=closing_space)
        elif index is not None and index < count - 1 and isinstance(arg.comma, cst.Comma):
            pass  # keeps its own comma and spacing
        else:
            arg = arg.with_changes(comma=separator,
                                   whitespace_after_arg=cst.SimpleWhitespace(""))
        result.append(arg)
    return result


_LOWER_THAN_MULTIPLY = ("Add", "Subtract", "LeftShift", "RightShift", "BitAnd", "BitOr",
                        "BitXor")
_SAME_AS_MULTIPLY = ("Multiply", "Divide", "FloorDivide", "Modulo", "MatrixMultiply")


def _needs_parens(node, right_operand: bool) -> bool:
    import libcst as cst

    if node.lpar:
        return False
    if isinstance(node, cst.BinaryOperation):
        name = type(node.operator).__name__
        return name in _LOWER_THAN_MULTIPLY or (right_operand and name in _SAME_AS_MULTIPLY)
    if isinstance(node, cst.UnaryOperation):
        return isinstance(node.operator, cst.Not)
    return isinstance(node, (cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda,
                             cst.NamedExpr, cst.Yield))


def _parenthesized(node, right_operand: bool):
    import libcst as cst

    if _needs_parens(node, right_operand):
        return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return node


def _scale_first_argument(call, data: dict):
    import libcst as cst

    method, keyword = data.get("method"), data.get("keyword")
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == method):
        raise _NotApplicable(f"not a call of {method}()")
    if _dotted(call.func.value).split(".")[0] == "torch":
        raise _NotApplicable(f"torch.{method}() scales its second argument, not its first")
    if any(a.star for a in call.args):
        raise _NotApplicable("the call passes *args or **kwargs")
    scale = [a for a in call.args if a.keyword is not None and a.keyword.value == keyword]
    positional = [a for a in call.args if a.keyword is None]
    if len(scale) != 1 or not positional:
        raise _NotApplicable(f"no `{keyword}=` keyword with a first argument to fold it into")
    first = positional[0]
    factor = scale[0].value
    product = cst.BinaryOperation(
        left=_parenthesized(factor, right_operand=False),
        operator=cst.Multiply(whitespace_before=cst.SimpleWhitespace(" "),
                              whitespace_after=cst.SimpleWhitespace(" ")),
        right=_parenthesized(first.value, right_operand=True),
    )
    entries = []
    for index, arg in enumerate(call.args):
        if arg is scale[0]:
            continue
        entries.append((arg.with_changes(value=product) if arg is first else arg, index))
    return call.with_changes(args=_punctuate(call.args, entries))


# ---- writing ------------------------------------------------------------------------------

def write_fixed(file: FileFix) -> None:
    """Replace the file atomically (a temporary file in the same folder, then rename),
    keeping its mode."""
    path = Path(file.source.path)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = None
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".cslint-fix",
                                         dir=str(path.parent))
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(file.new_raw)
            stream.flush()
            os.fsync(stream.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


# ---- the command line's --fix / --diff ------------------------------------------------------

@dataclass
class FixOutcome:
    """What `--fix` / `--diff` did: the findings after fixing, and what to print."""

    result: Any  # RunResult: the findings left (re-linted after writing)
    diff: str = ""
    stdout_source: bytes | None = None  # --fix on stdin: the fixed code
    messages: list[str] = field(default_factory=list)  # for stderr
    changed_files: int = 0


def run_fix_mode(result, relint, *, unsafe: bool, diff_only: bool,
                 stdin_name: str | None) -> FixOutcome:
    """Apply the fixes of `result`'s findings. `relint(stdin_bytes)` lints the same paths
    again (with stdin replaced by the fixed code). `--diff` writes nothing."""
    report = fix_findings(result.sources, result.findings, unsafe)
    outcome = FixOutcome(result)
    outcome.messages.extend(f"error: {e}" for e in report.errors)
    for finding, why in report.dropped:
        loc = finding.location
        outcome.messages.append(f"{finding.path}:{loc.line}:{loc.column}: {finding.code} "
                                f"not fixed: {why}")
    changed = [f for f in report.files if f.changed]
    outcome.changed_files = len(changed)
    applied = len(report.applied)
    if diff_only:
        outcome.diff = "".join(f.diff() for f in changed)
        outcome.result.fixed = applied
        return outcome
    stdin_bytes = None
    for file in changed:
        if stdin_name is not None and file.source.display_path == stdin_name:
            stdin_bytes = file.new_raw
        else:
            write_fixed(file)
    if stdin_name is not None:
        source = result.sources.get(stdin_name)
        outcome.stdout_source = stdin_bytes if stdin_bytes is not None else (
            source.raw if source is not None else b"")
    if changed:
        outcome.result = relint(stdin_bytes)
    outcome.result.fixed = applied
    return outcome
