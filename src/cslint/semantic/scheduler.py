"""What the traced methods of schedulers reach and do (the facts behind CS302, CS303, CS305).

Cerebras traces the schedule once: the value must be a function of the step
(`self.last_epoch`) and of hyperparameters, computed with torch ops, not a Python
number updated from its previous value. The traced methods of a scheduler are its
closed form (`_get_closed_form`, `_get_closed_form_lr`), `get_lr` and an overridden
`get`, and the methods they call through `self.` (resolved along the class's MRO).
Each function is analysed once per run however many schedulers reach it, so a line is
reported once.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Iterator

from cslint.config import Version
from cslint.semantic.analysis_error import AnalysisError
from cslint.semantic.module_index import (
    FunctionInfo, ModuleIndex, dotted_name, is_super_call, source_snippet,
)
from cslint.semantic.official import CSTORCH_SCHEDULERS, TORCH_SCHEDULERS
from cslint.semantic.project import ClassRef, ProjectIndex
from cslint.semantic.torch_api import CLOSED_FORMS

CSTORCH_ENTRIES = ("_get_closed_form", "_get_closed_form_lr", "get_lr", "get")
TORCH_ENTRIES = ("get_lr", "_get_closed_form_lr")
# Reading these is reading the schedule's own previous value.
LAST_VALUE_READS = {
    "_last_lr": "self._last_lr",
    "_last_value": "self._last_value",
    "get_last_lr": "self.get_last_lr()",
    "get_last_value": "self.get_last_value()",
}
# Scheduler state that changes with the step (hyperparameters are everything else).
STEP_STATE = frozenset({"last_epoch", "_step_count", "_last_lr", "_last_value", "base_lrs",
                        "get_last_lr", "get_last_value"})
# What may hold a tensor: the step and state, and the optimizer's param-group values.
TENSOR_STATE = STEP_STATE | {"optimizer"}
MUTATING_METHODS = frozenset({
    "append", "extend", "insert", "pop", "popitem", "clear", "update", "setdefault", "add",
    "remove", "discard", "appendleft", "extendleft", "popleft", "rotate", "sort", "reverse",
    "__setitem__", "__delitem__",
})
NUMERIC_BUILTINS = frozenset({"float", "int", "round", "abs", "min", "max", "pow", "len", "sum"})
ALWAYS_NUMBER_BUILTINS = frozenset({"float", "int", "len", "round"})
MATH_CONSTANTS = frozenset({"math.pi", "math.e", "math.tau", "math.inf", "math.nan"})


# ---- the traced methods of every scheduler, once per run ---------------------------------

@dataclass
class Reach:
    """A function reached from the traced methods of some scheduler classes."""

    function: FunctionInfo
    contexts: list[ClassRef] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)  # param-group keys the schedulers drive
    cstorch: bool = False  # reached from a cstorch scheduler (CS303, CS305)
    closed_form_of: list[ClassRef] = field(default_factory=list)  # CS305 entries
    state_attrs: set[str] = field(default_factory=set)  # self attributes that are state


def self_name(function: FunctionInfo) -> str | None:
    if function.kind not in ("method", "property"):
        return None
    params = function.parameter_names
    return params[0] if params else None


def _self_rooted(node: ast.AST, self_id: str | None) -> tuple[str, ...] | None:
    """`self.a.b[0].c` -> ("a", "b", "c"); None when not rooted at `self`."""
    attrs: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            attrs.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and attrs == []:
            return None
        else:
            break
    if self_id is not None and isinstance(node, ast.Name) and node.id == self_id:
        return tuple(reversed(attrs))
    return None


def _walk_body(function: ast.AST) -> Iterator[ast.AST]:
    """Every node of a function's body (nested lambdas and functions included)."""
    for statement in getattr(function, "body", ()):
        yield from ast.walk(statement)


def _own_returns(function: ast.AST) -> Iterator[ast.Return]:
    """Return statements of the function itself, not of nested functions."""
    stack = list(getattr(function, "body", ()))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _constant_string_return(function: FunctionInfo) -> str | None:
    for node in _own_returns(function.node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return node.value.value
    return None


class SchedulerAnalysis:
    """Which functions the traced methods of the project's schedulers reach."""

    def __init__(self, project: ProjectIndex):
        self.project = project
        self.version: Version | None = project.config.cstorch_version
        self.errors: list[AnalysisError] = []

    @cached_property
    def contexts(self) -> list[tuple[ClassRef, bool]]:
        """(scheduler class, whether it is a cstorch scheduler)."""
        project = self.project
        result = []
        for ref in project.project_classes:
            if not ref.info.base_names:
                continue
            try:
                kinds = project.kinds(ref)
            except RecursionError:
                self.errors.append(AnalysisError(ref.info.module, "too deeply nested to analyse"))
                continue
            if (kinds.cstorch_scheduler or kinds.torch_scheduler) \
                    and not project.is_machinery(ref):
                result.append((ref, kinds.cstorch_scheduler))
        return result

    def run(self) -> None:
        reached: dict[int, Reach] = {}
        for ref, cstorch in self.contexts:
            try:
                self._analyse_context(ref, cstorch, reached)
            except RecursionError:
                self.errors.append(AnalysisError(ref.info.module, "too deeply nested to analyse"))
        self.reached = reached

    def in_module(self, module: ModuleIndex) -> list[Reach]:
        return self._reached_by_module.get(id(module), [])

    @cached_property
    def _reached_by_module(self) -> dict[int, list[Reach]]:
        grouped: dict[int, list[Reach]] = {}
        for reach in self.reached.values():
            grouped.setdefault(id(reach.function.module), []).append(reach)
        return grouped

    def driven_keys(self, ref: ClassRef, cstorch: bool) -> set[str]:
        if not cstorch:
            return {"lr"}
        names = self.project.ancestor_names(ref)
        if CSTORCH_SCHEDULERS[1] in names:
            return {"lr"}
        if CSTORCH_SCHEDULERS[2] in names:
            return {"weight_decay"}
        found = self.project.find_method(ref, "param_group_key", self.version)
        if found is not None and found.function is not None:
            key = _constant_string_return(found.function)
            if key:
                return {key}
        return set()

    def resolve_self_method(self, ref: ClassRef, name: str,
                            after: ClassRef | None = None) -> tuple[FunctionInfo, ClassRef] | None:
        found = self.project.find_method(ref, name, self.version, after=after)
        if found is None or found.function is None or found.abstract:
            return None
        if self.project.is_machinery(found.owner):
            return None
        return found.function, found.owner

    def _analyse_context(self, ref: ClassRef, cstorch: bool, reached: dict[int, Reach]) -> None:
        keys = self.driven_keys(ref, cstorch)
        queue: list[tuple[FunctionInfo, ClassRef, bool]] = []
        for name in (CSTORCH_ENTRIES if cstorch else TORCH_ENTRIES):
            found = self.resolve_self_method(ref, name)
            if found is not None:
                queue.append((found[0], found[1], name in CLOSED_FORMS))
        seen: set[int] = set()
        functions: list[Reach] = []
        while queue:
            function, owner, closed_form = queue.pop()
            reach = reached.get(id(function.node))
            if reach is None:
                reach = reached[id(function.node)] = Reach(function)
            if closed_form and cstorch and not any(c is ref for c in reach.closed_form_of):
                reach.closed_form_of.append(ref)
            if id(function.node) in seen:
                continue
            seen.add(id(function.node))
            reach.contexts.append(ref)
            reach.keys |= keys
            reach.cstorch = reach.cstorch or cstorch
            functions.append(reach)
            queue.extend((f, o, False) for f, o in self._callees(ref, function, owner))
        if cstorch:
            state = _state_attributes([self._writes(r.function) for r in functions])
            for reach in functions:
                reach.state_attrs |= state

    def _writes(self, function: FunctionInfo) -> tuple[str | None, "_Locals | None", list]:
        """A function's self name, locals and the nodes that may write scheduler state
        (computed once per function, however many schedulers reach it)."""
        cache = self.__dict__.setdefault("_write_cache", {})
        key = id(function.node)
        if key not in cache:
            me = self_name(function)
            if me is None:
                cache[key] = (None, None, [])
            else:
                nodes = [n for n in _walk_body(function.node)
                         if isinstance(n, (ast.AugAssign, ast.Assign, ast.AnnAssign))
                         or (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute))]
                cache[key] = (me, _Locals(function.node) if nodes else None, nodes)
        return cache[key]

    def _callees(self, ref: ClassRef, function: FunctionInfo,
                 owner: ClassRef) -> Iterator[tuple[FunctionInfo, ClassRef]]:
        """Methods called (or taken as bound methods, `f = self._helper`) through `self.`
        or `super().`."""
        me = self_name(function)
        names: set[tuple[str, bool]] = set()
        for node in _walk_body(function.node):
            if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
                continue
            target = node.value
            if me is not None and isinstance(target, ast.Name) and target.id == me:
                names.add((node.attr, False))
            elif is_super_call(target):
                names.add((node.attr, True))
        for name, through_super in sorted(names):
            found = self.resolve_self_method(ref, name, after=owner if through_super else None)
            if found is not None:
                yield found


# ---- state and values inside one function ------------------------------------------------

class _Locals:
    """Flow-insensitive facts about a function's local names."""

    def __init__(self, function: ast.AST):
        self.params: set[str] = set()
        args = getattr(function, "args", None)
        if args is not None:
            for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
                self.params.add(arg.arg)
            for arg in (args.vararg, args.kwarg):
                if arg is not None:
                    self.params.add(arg.arg)
        self.values: dict[str, list[ast.expr]] = {}
        self.opaque: set[str] = set()  # bound other than by `name = value`
        for node in _walk_body(function):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    self._bind(target, node.value)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                self._bind(node.target, node.value)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                self.values.setdefault(node.target.id, []).append(
                    ast.BinOp(left=node.target, op=node.op, right=node.value))
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                for name in _names(node.target):
                    self.opaque.add(name)
                    self.values.setdefault(name, []).append(node.iter)
            elif isinstance(node, ast.NamedExpr):
                self._bind(node.target, node.value)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        for name in _names(item.optional_vars):
                            self.opaque.add(name)
                            self.values.setdefault(name, []).append(item.context_expr)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                inner = node.args
                for arg in (*inner.posonlyargs, *inner.args, *inner.kwonlyargs):
                    self.opaque.add(arg.arg)

    def _bind(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.values.setdefault(target.id, []).append(value)
        else:
            for name in _names(target):
                self.opaque.add(name)
                self.values.setdefault(name, []).append(value)

    def is_local(self, name: str) -> bool:
        return name in self.values or name in self.params


def _names(target: ast.expr) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _reads_state(node: ast.expr, me: str | None, state: set[str], local: _Locals | None,
                 seen: set[str] | None = None) -> bool:
    """Whether an expression reads the step or scheduler state (directly or through
    local names assigned from it)."""
    seen = seen if seen is not None else set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) \
                and sub.value.id == me and sub.attr in state:
            return True
        if local is not None and isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) \
                and sub.id in local.values and sub.id not in seen:
            seen.add(sub.id)
            if any(_reads_state(v, me, state, local, seen) for v in local.values[sub.id]):
                return True
    return False


def _state_attributes(functions: list[tuple[str | None, "_Locals | None", list]]) -> set[str]:
    """Self attributes that hold state: the step and previous values, and what the
    traced methods change from call to call (augmented assignments, mutated
    containers, assignments from state or from the attribute itself)."""
    state = set(STEP_STATE)
    infos = [(me, local, nodes) for me, local, nodes in functions if me is not None and nodes]
    changed = True
    while changed:
        changed = False
        for me, local, nodes in infos:
            for node in nodes:
                for attr in _stateful_writes(node, me, state, local):
                    if attr not in state:
                        state.add(attr)
                        changed = True
    return state


def _stateful_writes(node: ast.AST, me: str, state: set[str], local: _Locals) -> Iterator[str]:
    if isinstance(node, ast.AugAssign):
        path = _self_rooted(node.target, me)
        if path:
            yield path[0]
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for element in _target_elements(target):
                path = _self_rooted(element, me)
                if not path:
                    continue
                if isinstance(element, ast.Subscript) or len(path) > 1:
                    yield path[0]
                elif node.value is not None and (
                        _reads_state(node.value, me, state, local)
                        or _reads_state(node.value, me, {path[0]}, None)):
                    yield path[0]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        path = _self_rooted(node.func.value, me)
        if path and _is_mutating_method(node.func.attr):
            yield path[0]


def _target_elements(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [e for t in target.elts for e in _target_elements(t)]
    if isinstance(target, ast.Starred):
        return _target_elements(target.value)
    return [target]


def _is_mutating_method(name: str) -> bool:
    return name in MUTATING_METHODS or (name.endswith("_") and not name.startswith("_"))


def _method_label(function: FunctionInfo) -> str:
    if function.class_name:
        return f"{function.class_name.rsplit('.', 1)[-1]}.{function.name}()"
    return f"{function.name}()"


# ---- CS302 ---------------------------------------------------------------------------------

def _group_names(function: ast.AST, params: Iterable[str]) -> set[str]:
    """Names that hold an optimizer param group in this function."""
    names = {p for p in params if "group" in p.lower()}
    for node in _walk_body(function):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) \
                and _mentions_param_groups(node.iter):
            names.update(_names(node.target))
        elif isinstance(node, ast.Assign) and _mentions_param_groups(node.value) \
                and isinstance(node.value, (ast.Subscript, ast.Attribute)):
            for target in node.targets:
                names.update(_names(target))
    return names


def _mentions_param_groups(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "param_groups" for n in ast.walk(node))


def _constant_key(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def recursive_reads(reach: Reach) -> Iterator[tuple[ast.AST, str]]:
    function = reach.function
    node_fn = function.node
    me = self_name(function)
    label = _method_label(function)
    local = _Locals(node_fn)
    groups = _group_names(node_fn, local.params)
    aug_targets = {id(n.target) for n in _walk_body(node_fn) if isinstance(n, ast.AugAssign)}

    def is_group(expr: ast.expr) -> bool:
        if isinstance(expr, ast.Name):
            return expr.id in groups
        return _mentions_param_groups(expr)

    advice = ("compute the value in closed form from the step (self.last_epoch) and the "
              "initial values instead")
    for node in _walk_body(node_fn):
        if isinstance(node, ast.Subscript):
            key = _constant_key(node.slice)
            if key in reach.keys and is_group(node.value) and (
                    isinstance(node.ctx, ast.Load) or id(node) in aug_targets):
                yield node, (f"{label} reads back the current `{key}` of the optimizer's param "
                             f"group (`{source_snippet(node)}`), so each value depends on the "
                             f"previous one (a recursive schedule); {advice}")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "get" and node.args \
                    and _constant_key(node.args[0]) in reach.keys and is_group(func.value):
                yield node, (f"{label} reads back the current `{_constant_key(node.args[0])}` "
                             f"of the optimizer's param group (`{source_snippet(node)}`), a "
                             f"recursive schedule; {advice}")
                continue
            arguments = [*node.args, *(k.value for k in node.keywords)]
            keys = [k for a in arguments if (k := _constant_key(a)) in reach.keys]
            if keys and me is not None and any(
                    (_self_rooted(a, me) or ())[:1] == ("optimizer",) for a in arguments):
                yield node, (f"{label} reads back the optimizer's current `{keys[0]}` "
                             f"(`{source_snippet(node)}`), a recursive schedule; {advice}")
            elif me is not None and isinstance(func, ast.Attribute) \
                    and _is_mutating_method(func.attr) \
                    and (_self_rooted(func.value, me) or ())[:1] == ("base_lrs",):
                yield node, (f"{label} changes self.base_lrs (`{source_snippet(node)}`), so later "
                             "values are computed from earlier ones; keep the initial learning "
                             "rates fixed")
        elif isinstance(node, ast.Attribute) and me is not None \
                and isinstance(node.value, ast.Name) and node.value.id == me \
                and node.attr in LAST_VALUE_READS and isinstance(node.ctx, ast.Load):
            yield node, (f"{label} reads the schedule's previous value "
                         f"({LAST_VALUE_READS[node.attr]}), a recursive schedule; {advice}")
        elif isinstance(node, (ast.Assign, ast.AugAssign)) and me is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for element in _target_elements(target):
                    if (_self_rooted(element, me) or ())[:1] == ("base_lrs",):
                        yield element, (f"{label} changes self.base_lrs per step, so later "
                                        "values are computed from earlier ones (a recursive "
                                        "schedule); keep the initial learning rates fixed")


# ---- CS303 ---------------------------------------------------------------------------------

def state_mutations(reach: Reach) -> Iterator[tuple[ast.AST, str]]:
    function = reach.function
    me = self_name(function)
    if me is None:
        return
    label = _method_label(function)
    local = _Locals(function.node)
    state = reach.state_attrs or set(STEP_STATE)
    why = ("so the value depends on how often it was computed; the closed form must be a "
           "pure function of the step (self.last_epoch) and the hyperparameters")
    for node in _walk_body(function.node):
        if isinstance(node, ast.AugAssign):
            path = _self_rooted(node.target, me)
            if path and path[0] != "base_lrs":
                yield node, f"{label} updates `{source_snippet(node.target)}` in place, {why}"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for element in _target_elements(target):
                    path = _self_rooted(element, me)
                    if not path or path[0] == "base_lrs":
                        continue
                    if isinstance(element, ast.Subscript) or len(path) > 1:
                        yield element, (f"{label} writes into `{source_snippet(element)}`, changing "
                                        f"scheduler state, {why}")
                    elif node.value is not None and (
                            _reads_state(node.value, me, state, local)
                            or _reads_state(node.value, me, {path[0]}, None)):
                        yield element, (f"{label} stores a value computed from the step or "
                                        f"scheduler state in `self.{path[0]}`, {why}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            path = _self_rooted(node.func.value, me)
            if path and path[0] != "base_lrs" and _is_mutating_method(node.func.attr):
                yield node, (f"{label} mutates `{source_snippet(node.func.value)}` "
                             f"(`.{node.func.attr}(...)`), {why}")


# ---- CS305 ---------------------------------------------------------------------------------

class _Numbers:
    """Whether an expression of a function is provably a Python number."""

    def __init__(self, function: FunctionInfo):
        self.function = function
        self.module = function.module
        self.me = self_name(function)
        self.local = _Locals(function.node)

    def qualified(self, node: ast.expr) -> str | None:
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head = dotted.split(".")[0]
        if self.local.is_local(head):
            return None
        return self.module.qualify(dotted)

    def tensor_like(self, node: ast.expr, seen: set[str]) -> bool:
        """May hold a tensor (reads the step, state, a parameter or a torch result)."""
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                if sub.id in self.local.params and sub.id != self.me:
                    return True
                if sub.id in self.local.values and sub.id not in seen:
                    seen.add(sub.id)
                    if sub.id in self.local.opaque or any(
                            self.tensor_like(v, seen) for v in self.local.values[sub.id]):
                        return True
            elif isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) \
                    and sub.value.id == self.me and sub.attr in TENSOR_STATE:
                return True
            elif isinstance(sub, ast.Call):
                qualified = self.qualified(sub.func)
                if qualified is None or qualified.split(".")[0] in ("torch", "cerebras",
                                                                    "cslint"):
                    if qualified is not None or not self._builtin(sub.func):
                        return True
        return False

    def _builtin(self, func: ast.expr) -> str | None:
        if isinstance(func, ast.Name) and func.id in NUMERIC_BUILTINS \
                and not self.local.is_local(func.id) and self.module.qualify(func.id) is None:
            return func.id
        return None

    def number(self, node: ast.expr | None, seen: set[str] | None = None) -> bool:
        seen = set() if seen is None else seen
        if node is None:
            return False
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float, complex)) and not isinstance(
                node.value, bool)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return self.number(node.operand, seen)
        if isinstance(node, ast.BinOp):
            return self.number(node.left, seen) and self.number(node.right, seen)
        if isinstance(node, ast.IfExp):
            return self.number(node.body, seen) or self.number(node.orelse, seen)
        if isinstance(node, (ast.Attribute, ast.Name)) and self.qualified(node) in MATH_CONSTANTS:
            return True
        if isinstance(node, ast.Name):
            if node.id in seen or node.id in self.local.opaque or node.id in self.local.params:
                return False
            values = self.local.values.get(node.id)
            if not values:
                return False
            seen.add(node.id)
            return all(self.number(v, seen) for v in values)
        if isinstance(node, ast.Call):
            arguments = [*node.args, *(k.value for k in node.keywords)]
            qualified = self.qualified(node.func)
            if qualified is not None and qualified.startswith("math."):
                return not any(self.tensor_like(a, set()) for a in arguments)
            builtin = self._builtin(node.func)
            if builtin in ALWAYS_NUMBER_BUILTINS:
                return not any(self.tensor_like(a, set()) for a in arguments)
            if builtin is not None:
                return bool(arguments) and all(self.number(a, seen) for a in arguments)
        return False


def python_number_returns(reach: Reach, analysis: SchedulerAnalysis
                          ) -> Iterator[tuple[ast.AST, str]]:
    function = reach.function
    if function.name not in CLOSED_FORMS or not reach.closed_form_of:
        return
    numbers = _Numbers(function)
    label = _method_label(function)
    fix = ("return a tensor (e.g. torch.tensor(value)), computed from the step with torch ops "
           "where it varies")
    for node in _own_returns(function.node):
        if node.value is None:
            continue
        if numbers.number(node.value):
            yield node.value, (f"{label} returns a Python number (`{source_snippet(node.value)}`) "
                               f"instead of a tensor; {fix}")
            continue
        helper = _returned_self_call(node.value, numbers.me)
        if helper is None:
            continue
        for ref in reach.closed_form_of:
            found = analysis.resolve_self_method(ref, helper)
            if found is None:
                continue
            line = _number_return_of(found[0])
            if line is not None:
                yield node.value, (f"{label} returns self.{helper}(), which returns a Python "
                                   f"number (line {line} of {found[0].path}) instead of a "
                                   f"tensor; {fix}")
                break


def _returned_self_call(node: ast.expr, me: str | None) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and isinstance(node.func.value, ast.Name) and node.func.value.id == me:
        return node.func.attr
    return None


def _number_return_of(function: FunctionInfo) -> int | None:
    """The line of a return of `function` that is provably a Python number."""
    numbers = _Numbers(function)
    for node in _own_returns(function.node):
        if node.value is not None and numbers.number(node.value):
            return node.lineno
    return None
