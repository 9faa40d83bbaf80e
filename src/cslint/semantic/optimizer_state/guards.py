"""Lazy-initialisation guards: which `if` tests mean a state dict or entry is absent."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from cslint.semantic.optimizer_state.values import OPTIMIZER, STATE_MAP, ParamState, Value

if TYPE_CHECKING:
    from cslint.semantic.optimizer_state.walker import StateWalker


def means_absent(walker: StateWalker, test: ast.expr, polarity: bool) -> bool:
    """Whether `test` being `polarity` means a state dict or key is absent."""
    if isinstance(test, ast.BoolOp):
        return any(means_absent(walker, v, polarity) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return means_absent(walker, test.operand, not polarity)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if isinstance(op, (ast.In, ast.NotIn)):
            container = _peek(walker, right)
            if isinstance(container, ParamState) or container is STATE_MAP:
                return polarity == isinstance(op, ast.NotIn)
        if _is_len_of(left) and isinstance(_peek(walker, left.args[0]), ParamState) \
                and isinstance(right, ast.Constant) and isinstance(right.value, int):
            empty = _compare_means_empty(op, right.value)
            if empty is not None:
                return polarity == empty
        if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(right, ast.Constant) \
                and right.value is None and isinstance(left, ast.Call) \
                and isinstance(left.func, ast.Attribute) and left.func.attr == "get" \
                and isinstance(_peek(walker, left.func.value), ParamState):
            return polarity == isinstance(op, ast.Is)
        return False
    if _is_len_of(test) and isinstance(_peek(walker, test.args[0]), ParamState):
        return not polarity
    if isinstance(test, ast.Name) and isinstance(walker.env.get(test.id), ParamState):
        return not polarity
    return False

def _peek(walker: StateWalker, node: ast.expr) -> Value:
    """The value of a guard operand, without recording anything."""
    if isinstance(node, ast.Name):
        return walker.env.get(node.id)
    if isinstance(node, ast.Attribute) and node.attr == "state" and \
            _peek(walker, node.value) is OPTIMIZER:
        return STATE_MAP
    if isinstance(node, ast.Subscript) and _peek(walker, node.value) is STATE_MAP:
        return walker.param_state_for(node.slice)
    return None


def _is_len_of(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "len" and len(node.args) == 1)


def _compare_means_empty(op: ast.cmpop, number: int) -> bool | None:
    """For `len(state) <op> number`: True if it means empty, False if non-empty."""
    if number == 0:
        if isinstance(op, (ast.Eq, ast.LtE)):
            return True
        if isinstance(op, (ast.NotEq, ast.Gt)):
            return False
    if number == 1:
        if isinstance(op, ast.Lt):
            return True
        if isinstance(op, ast.GtE):
            return False
    return None
