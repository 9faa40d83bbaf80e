"""The control flow shared by the two abstract interpreters: the optimizer-state analysis
and the tensor-value inference each walk a function's statements in order and evaluate
its expressions to abstract values of their own.

A subclass gives its values through `eval_<NodeType>` methods and its statements through
`statement_<NodeType>` methods; the walker finds each by the node's type with one dict
lookup (a chain of isinstance tests per node cost more than the analyses' own work). Node
types without a method of their own have their sub-expressions evaluated, values dropped.
"""

from __future__ import annotations

import ast
from typing import Callable


def unpacked_places(target: ast.expr, value: ast.expr) -> list[int | None] | None:
    """For `a, b, c, d = x, *ys, z` (one starred element in a tuple or list display, none
    in the names): the place in the display each name takes its value from, counted
    from the start before the star and from the end after it; None for a name the
    starred element's items cover. None where the statement is not of that form."""
    if not isinstance(target, (ast.Tuple, ast.List)) or \
            not isinstance(value, (ast.Tuple, ast.List)) or \
            any(isinstance(e, ast.Starred) for e in target.elts):
        return None
    stars = [i for i, e in enumerate(value.elts) if isinstance(e, ast.Starred)]
    if len(stars) != 1:
        return None
    star, count = stars[0], len(target.elts)
    after = len(value.elts) - 1 - star
    if count < star + after:
        return None
    return [index if index < star else
            len(value.elts) - (count - index) if index >= count - after else None
            for index in range(count)]


def _dispatch_table(cls: type, prefix: str) -> dict[type, object]:
    """Node type -> the method of `cls` (inherited ones too) named prefix + the type's
    name. Types this Python lacks (`TryStar` before 3.11) are left out."""
    return {getattr(ast, name[len(prefix):]): getattr(cls, name)
            for name in dir(cls)
            if name.startswith(prefix) and hasattr(ast, name[len(prefix):])}


def join_envs(a: dict, b: dict, join: Callable) -> dict:
    """Names after two branches, each value joined with the analysis's own `join`:
    most keep the same value, so join only what differs."""
    result = dict(a)
    for name, value in b.items():
        if result.get(name) is not value:
            result[name] = join(result.get(name), value)
    for name in a.keys() - b.keys():
        result[name] = join(a[name], None)
    return result


class StatementWalker:
    """Walks one function: `block` runs statements, `eval` gives an expression's value."""

    _statement_methods: dict[type, object] = {}
    _eval_methods: dict[type, object] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._statement_methods = _dispatch_table(cls, "statement_")
        cls._eval_methods = _dispatch_table(cls, "eval_")

    # Statements walked so far: the order of writes and reads within a walk.
    statements_seen = 0
    # Set by a statement after which the rest of its block cannot run (an `if` the
    # walker decides whose taken branch returns): `block` stops there.
    block_ended = False

    def block(self, statements: list[ast.stmt]) -> None:
        methods = self._statement_methods
        for statement in statements:
            self.statements_seen += 1
            method = methods.get(statement.__class__)
            if method is not None:
                method(self, statement)
            else:
                self.eval_parts(statement)
            if self.block_ended:
                self.block_ended = False
                return

    def eval(self, node: ast.expr | None):
        if node is None:
            return None
        method = self._eval_methods.get(node.__class__)
        if method is not None:
            return method(self, node)
        self.eval_parts(node)
        return None

    def eval_parts(self, node: ast.AST) -> None:
        """Evaluate what a node without a method of its own holds, for its findings."""
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.eval(child)
            elif isinstance(child, ast.comprehension):
                self.eval(child.iter)
                for condition in child.ifs:
                    self.eval(condition)

    # ---- statements the analyses walk alike --------------------------------------------

    # The analysis's join of two values where control flow merges.
    join_values: Callable[[object, object], object]

    def bind_loop_target(self, target: ast.expr, iterable: object) -> None:
        """Bind a `for` loop's target to the elements of `iterable`'s value."""
        raise NotImplementedError

    def statement_For(self, node: ast.For | ast.AsyncFor) -> None:
        """The body once, joined with not entering it."""
        self.bind_loop_target(node.target, self.eval(node.iter))
        before = dict(self.env)
        self.block(node.body)
        self.env = join_envs(before, self.env, self.join_values)
        self.block(node.orelse)

    statement_AsyncFor = statement_For

    def statement_While(self, node: ast.While) -> None:
        """The test, then the body once, joined with not entering it."""
        self.eval(node.test)
        before = dict(self.env)
        self.block(node.body)
        self.env = join_envs(before, self.env, self.join_values)
        self.block(node.orelse)

    def statement_Expr(self, node: ast.Expr) -> None:
        self.eval(node.value)

    def statement_Try(self, node: ast.Try) -> None:
        self.block(node.body)
        for handler in node.handlers:
            self.block(handler.body)
        self.block(node.orelse)
        self.block(node.finalbody)

    statement_TryStar = statement_Try

    def statement_ClassDef(self, node: ast.ClassDef) -> None:
        """A class defined inside a function is not walked: its methods are its own."""

    def statement_Match(self, node) -> None:
        self.eval(node.subject)
        for case in node.cases:
            self.block(case.body)
