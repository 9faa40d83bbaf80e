"""What the fix kinds share: the calls of a file by exact span (`CallIndex`, plain
`ast`), and libcst building blocks: dotted names, argument lists, operator precedence.
Imported only when fixing."""

from __future__ import annotations

import ast
import bisect
import re
from typing import Iterable, Sequence

import libcst as cst

from cslint.diagnostics import Location
from cslint.source import SourceFile

_PYTHON_LINE_END = re.compile(r"\r\n|\r|\n")
# Nodes without calls inside (and without positions): not walked.
_LEAVES = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)


class CallIndex:
    """The calls of one file by their exact spans (lines and character columns, as
    findings give them), built once per file: locating a finding's call is a lookup, and
    a span either is a call's exact span or locates nothing. Only the code on the lines
    where findings start (`lines`) is indexed."""

    def __init__(self, source: SourceFile, tree: ast.Module, lines: Iterable[int]):
        self.source = source
        # The offset in `source.text` of each line's start, lines as Python numbers them.
        self.line_starts = [0, *(m.end() for m in _PYTHON_LINE_END.finditer(source.text))]
        self.calls: dict[Location, ast.Call] = {}
        # A call by the span of one of its keyword arguments' values.
        self.keyword_values: dict[Location, list[tuple[ast.Call, ast.keyword]]] = {}
        # A call by the span of its first positional argument.
        self.by_first_argument: dict[Location, list[ast.Call]] = {}
        wanted = sorted(set(lines))
        nodes: list[ast.AST] = [tree]
        while nodes:
            for node in ast.iter_child_nodes(nodes.pop()):
                if isinstance(node, _LEAVES):
                    continue
                first = getattr(node, "lineno", None)
                if first is not None:
                    # A definition's decorators come before its line.
                    first = min([first, *(d.lineno for d in getattr(node, "decorator_list", ()))])
                    # Only nodes around the lines wanted: the walk skips most of the file.
                    index = bisect.bisect_left(wanted, first)
                    if index == len(wanted) or wanted[index] > node.end_lineno:
                        continue
                if isinstance(node, ast.Call):
                    self.calls[self.location(node)] = node
                    for keyword in node.keywords:
                        self.keyword_values.setdefault(self.location(keyword.value),
                                                       []).append((node, keyword))
                    if node.args:
                        self.by_first_argument.setdefault(self.location(node.args[0]),
                                                          []).append(node)
                nodes.append(node)

    def location(self, node: ast.expr) -> Location:
        column = self.source.character_column
        return Location(node.lineno, column(node.lineno, node.col_offset),
                        node.end_lineno, column(node.end_lineno, node.end_col_offset))

    def offset(self, line: int, column: int) -> int:
        """The offset in the source text of a 1-based line and character column."""
        return self.line_starts[line - 1] + column - 1

    def span(self, node: ast.expr) -> tuple[int, int]:
        """(start, end) offsets of `node`'s code in the source text."""
        where = self.location(node)
        return (self.offset(where.line, where.column),
                self.offset(where.end_line, where.end_column))


def dotted(node: cst.BaseExpression) -> str:
    """`a.b.c` for a dotted name; "" for any other expression."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted(node.value)}.{node.attr.value}"
    return ""


def punctuate(original: Sequence[cst.Arg], entries: list[tuple[cst.Arg, int | None]]
              ) -> list[cst.Arg]:
    """Commas and closing whitespace for a rebuilt argument list, in the call's style.
    `entries`: (argument, its index in `original` or None for a new one)."""
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


_LOWER_THAN_MULTIPLY = (cst.Add, cst.Subtract, cst.LeftShift, cst.RightShift, cst.BitAnd,
                        cst.BitOr, cst.BitXor)
_SAME_AS_MULTIPLY = (cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo,
                     cst.MatrixMultiply)


def _needs_parens(node: cst.BaseExpression, right_operand: bool) -> bool:
    if node.lpar:
        return False
    if isinstance(node, cst.BinaryOperation):
        return isinstance(node.operator, _LOWER_THAN_MULTIPLY) or (
            right_operand and isinstance(node.operator, _SAME_AS_MULTIPLY))
    if isinstance(node, cst.UnaryOperation):
        return isinstance(node.operator, cst.Not)
    return isinstance(node, (cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda,
                             cst.NamedExpr, cst.Yield))


def parenthesized(node: cst.BaseExpression, right_operand: bool) -> cst.BaseExpression:
    """`node` as an operand of `*`, in parentheses where precedence needs them."""
    if _needs_parens(node, right_operand):
        return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return node
