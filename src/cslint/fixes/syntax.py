"""libcst building blocks the fix kinds share: finding a call by position, dotted names,
argument lists, operator precedence. Imported only when fixing."""

from __future__ import annotations

from typing import Callable, Sequence

import libcst as cst
from libcst.metadata import CodeRange

from cslint.diagnostics import Location


def _contains(span: CodeRange, location: Location) -> bool:
    start = (span.start.line, span.start.column + 1)
    end = (span.end.line, span.end.column + 1)
    return start <= (location.line, location.column) and \
        (location.end_line, location.end_column) <= end


def smallest_call_around(calls: Sequence[tuple[cst.Call, CodeRange]], location: Location,
                         accept: Callable[[cst.Call, CodeRange], bool]) -> cst.Call | None:
    """The smallest call whose span holds `location` and that `accept` takes (the first
    of equal size)."""
    best = None
    best_size = None
    for call, span in calls:
        if not _contains(span, location) or not accept(call, span):
            continue
        size = (span.end.line - span.start.line, span.end.column - span.start.column)
        if best is None or size < best_size:
            best, best_size = call, size
    return best


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
