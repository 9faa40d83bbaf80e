"""What the traced methods of schedulers reach and do, and whether a cstorch scheduler
class has its closed form.

Cerebras traces the schedule once: the value must be a function of the step
(`self.last_epoch`) and of hyperparameters, computed with torch ops, not a Python
number updated from its previous value. The traced methods of a scheduler are its
closed form (`_get_closed_form`, `_get_closed_form_lr`), `get_lr` and an overridden
`get`, and the methods they call through `self.` (resolved along the class's MRO).
Each function is analysed once per run however many schedulers reach it, so a fact is
found once.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import Collection, Iterable, Iterator, Union

from cslint.config import Version
from cslint.semantic.analysis_error import AnalysisError
from cslint.semantic.module_index import FunctionInfo, ModuleIndex, dotted_name, is_super_call
from cslint.semantic.official import CSTORCH_SCHEDULERS, TORCH_SCHEDULERS
from cslint.semantic.project import ClassRef, ProjectIndex
from cslint.semantic.torch_api import CLOSED_FORMS
from cslint.source import TOO_DEEP, internal_error

# The traced methods the walk starts from, by kind of scheduler.
CSTORCH_ENTRIES = ("_get_closed_form", "_get_closed_form_lr", "get_lr", "get")
TORCH_ENTRIES = ("get_lr", "_get_closed_form_lr")
# Reading these is reading the schedule's own previous value.
PREVIOUS_VALUE_ATTRIBUTES = frozenset({"_last_lr", "_last_value"})
PREVIOUS_VALUE_METHODS = frozenset({"get_last_lr", "get_last_value"})
PREVIOUS_VALUE_READS = PREVIOUS_VALUE_ATTRIBUTES | PREVIOUS_VALUE_METHODS
# Scheduler state that changes with the step (hyperparameters are everything else).
STEP_STATE = frozenset({"last_epoch", "_step_count", "base_lrs"}) | PREVIOUS_VALUE_READS
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


# ---- facts ---------------------------------------------------------------------------------
# `function` is the traced function the fact is in, `node` where it is.

class ReadBackForm(Enum):
    """How a traced function reads the value the schedule last set on the optimizer."""

    GROUP_ITEM = "group item"  # `group["lr"]`, read or updated in place
    GROUP_GET = "group get"  # `group.get("lr")`
    OPTIMIZER_CALL = "optimizer call"  # a call given `self.optimizer...` and "lr"


@dataclass(frozen=True)
class OptimizerValueReadBack:
    """A traced function reads the optimizer's current value of a key the schedule
    drives (`key`), so each value depends on the previous one."""

    function: FunctionInfo
    node: ast.AST
    key: str
    form: ReadBackForm


@dataclass(frozen=True)
class PreviousValueRead:
    """A traced function reads the schedule's previous value: `self.<attribute>`, or a
    call of `self.<attribute>()` when `is_method`."""

    function: FunctionInfo
    node: ast.Attribute
    attribute: str
    is_method: bool


@dataclass(frozen=True)
class BaseRatesChanged:
    """A traced function changes `self.base_lrs`, the initial values every step starts
    from: `node` is the mutating method call when `by_call`, else the assigned target."""

    function: FunctionInfo
    node: ast.AST
    by_call: bool


class StateChange(Enum):
    """How a function cstorch traces changes scheduler state."""

    AUGMENTED = "augmented"  # `self.x += ...`
    WRITTEN_INTO = "written into"  # `self.x[i] = ...`, `self.x.y = ...`
    STORED_FROM_STATE = "stored from state"  # `self.x = <computed from the step or state>`
    MUTATING_CALL = "mutating call"  # `self.x.append(...)`


@dataclass(frozen=True)
class SchedulerStateMutated:
    """A function cstorch traces changes `self.<attribute>` (not `base_lrs`), so its
    value depends on how often it ran: `target` is the augmented target, the element
    written, or the receiver of the mutating `method`."""

    function: FunctionInfo
    node: ast.AST
    change: StateChange
    target: ast.expr
    attribute: str
    method: str | None = None


@dataclass(frozen=True)
class NumberReturningHelper:
    """`self.<name>()`, resolved to `function`, whose return on `line` is a Python
    number."""

    name: str
    function: FunctionInfo
    line: int


@dataclass(frozen=True)
class ClosedFormReturnsNumber:
    """A cstorch scheduler's closed form returns a Python number, not a tensor: `node`
    is the returned expression, a number itself or a call of `helper`."""

    function: FunctionInfo
    node: ast.expr
    helper: NumberReturningHelper | None = None


SchedulerFact = Union[OptimizerValueReadBack, PreviousValueRead, BaseRatesChanged,
                      SchedulerStateMutated, ClosedFormReturnsNumber]


# ---- the traced methods of every scheduler, once per run ---------------------------------

@dataclass
class TracedScheduleFunction:
    """A function reached from the traced methods of some scheduler classes."""

    function: FunctionInfo
    driven_keys: set[str] = field(default_factory=set)  # param-group keys the schedulers set
    traced_by_cstorch: bool = False  # reached from a cstorch scheduler
    closed_form_of: list[ClassRef] = field(default_factory=list)  # cstorch schedulers
    state_attributes: set[str] = field(default_factory=set)  # self attributes that are state


def self_parameter(function: FunctionInfo) -> str | None:
    """The name of a method's `self` parameter."""
    if function.kind not in ("method", "property"):
        return None
    params = function.parameter_names
    return params[0] if params else None


def _self_rooted(node: ast.AST, self_name: str | None) -> tuple[str, ...] | None:
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
    if self_name is not None and isinstance(node, ast.Name) and node.id == self_name:
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
    """Which functions the traced methods of the project's schedulers reach, and the
    facts of each."""

    def __init__(self, project: ProjectIndex):
        self.project = project
        self.version: Version | None = project.config.cstorch_version
        self.errors: list[AnalysisError] = []
        self.reached: dict[int, TracedScheduleFunction] = {}  # by id of the function node
        self._facts_by_module: dict[int, list[SchedulerFact]] | None = None
        # Per function node, computed once however many schedulers reach the function.
        self._local_bindings: dict[int, LocalBindings] = {}
        self._state_write_nodes: dict[int, tuple[str | None, list[ast.AST]]] = {}

    @cached_property
    def schedulers(self) -> list[tuple[ClassRef, bool]]:
        """(scheduler class, whether it is a cstorch scheduler)."""
        project = self.project
        return [(ref, kinds.cstorch_scheduler) for ref, kinds in project.classified_classes
                if (kinds.cstorch_scheduler or kinds.torch_scheduler)
                and not project.is_machinery(ref)]

    def run(self) -> None:
        for ref, cstorch in self.schedulers:
            try:
                self._reach_from(ref, cstorch)
            except RecursionError:
                self.errors.append(AnalysisError(ref.info.module, TOO_DEEP))
            except Exception as error:  # a bug of ours must not stop the other files
                self.errors.append(AnalysisError(ref.info.module,
                                                 internal_error(error, ref.short_name)))
        by_module: dict[int, list[TracedScheduleFunction]] = {}
        for traced in self.reached.values():
            by_module.setdefault(id(traced.function.module), []).append(traced)
        # A module's facts in the order of its functions, each function's in walk order.
        self._facts_by_module = {}
        for module_id, functions in by_module.items():
            facts = self._facts_by_module[module_id] = []
            for traced in sorted(functions, key=lambda t: t.function.node.lineno):
                try:
                    facts.extend(self._facts_of(traced))
                except RecursionError:
                    self.errors.append(AnalysisError(traced.function.module,
                                                     TOO_DEEP))
                except Exception as error:  # a bug of ours must not stop the other files
                    self.errors.append(AnalysisError(traced.function.module, internal_error(
                        error, f"{traced.function.qualname}()")))

    def facts_in(self, module: ModuleIndex) -> list[SchedulerFact]:
        """The module's facts: by function in line order, each function's in walk order."""
        if self._facts_by_module is None:
            raise RuntimeError("SchedulerAnalysis.run() has not run")
        return self._facts_by_module.get(id(module), [])

    def driven_keys(self, ref: ClassRef, cstorch: bool) -> set[str]:
        if not cstorch:
            return {"lr"}
        names = self.project.known_ancestors(ref)
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

    def local_bindings(self, function: FunctionInfo) -> LocalBindings:
        found = self._local_bindings.get(function.key)
        if found is None:
            found = self._local_bindings[function.key] = LocalBindings(function.node)
        return found

    # ---- what one scheduler reaches ------------------------------------------------------

    def _reach_from(self, ref: ClassRef, cstorch: bool) -> None:
        keys = self.driven_keys(ref, cstorch)
        queue: list[tuple[FunctionInfo, ClassRef, bool]] = []
        for name in (CSTORCH_ENTRIES if cstorch else TORCH_ENTRIES):
            found = self.resolve_self_method(ref, name)
            if found is not None:
                queue.append((found[0], found[1], name in CLOSED_FORMS))
        seen: set[int] = set()
        functions: list[TracedScheduleFunction] = []
        while queue:
            function, owner, closed_form = queue.pop()
            traced = self.reached.get(function.key)
            if traced is None:
                traced = self.reached[function.key] = TracedScheduleFunction(function)
            if closed_form and cstorch and not any(c is ref for c in traced.closed_form_of):
                traced.closed_form_of.append(ref)
            if function.key in seen:
                continue
            seen.add(function.key)
            traced.driven_keys |= keys
            traced.traced_by_cstorch = traced.traced_by_cstorch or cstorch
            functions.append(traced)
            queue.extend((f, o, False) for f, o in self._callees(ref, function, owner))
        if cstorch:
            state = self._state_attributes([t.function for t in functions])
            for traced in functions:
                traced.state_attributes |= state

    def _callees(self, ref: ClassRef, function: FunctionInfo,
                 owner: ClassRef) -> Iterator[tuple[FunctionInfo, ClassRef]]:
        """Methods called (or taken as bound methods, `f = self._helper`) through `self.`
        or `super().`."""
        self_name = self_parameter(function)
        names: set[tuple[str, bool]] = set()
        for node in _walk_body(function.node):
            if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
                continue
            target = node.value
            if self_name is not None and isinstance(target, ast.Name) and target.id == self_name:
                names.add((node.attr, False))
            elif is_super_call(target):
                names.add((node.attr, True))
        for name, through_super in sorted(names):
            found = self.resolve_self_method(ref, name, after=owner if through_super else None)
            if found is not None:
                yield found

    def _state_writes(self, function: FunctionInfo) -> tuple[str | None, list[ast.AST]]:
        """A method's self name and the nodes that may write scheduler state (none
        without a self parameter)."""
        key = function.key
        if key not in self._state_write_nodes:
            self_name = self_parameter(function)
            nodes = [] if self_name is None else [
                n for n in _walk_body(function.node)
                if isinstance(n, (ast.AugAssign, ast.Assign, ast.AnnAssign))
                or (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute))]
            self._state_write_nodes[key] = (self_name, nodes)
        return self._state_write_nodes[key]

    def _state_attributes(self, functions: list[FunctionInfo]) -> set[str]:
        """Self attributes that hold state: the step and previous values, and what the
        traced methods change from call to call (augmented assignments, mutated
        containers, assignments from state or from the attribute itself)."""
        state = set(STEP_STATE)
        writers = []
        for function in functions:
            self_name, nodes = self._state_writes(function)
            if nodes:
                writers.append((self_name, nodes, self.local_bindings(function)))
        changed = True
        while changed:
            changed = False
            for self_name, nodes, local in writers:
                for node in nodes:
                    for attr in _stateful_writes(node, self_name, state, local):
                        if attr not in state:
                            state.add(attr)
                            changed = True
        return state

    # ---- the facts of one function -------------------------------------------------------

    def _facts_of(self, traced: TracedScheduleFunction) -> list[SchedulerFact]:
        facts: list[SchedulerFact] = list(self._recursive_reads(traced))
        if traced.traced_by_cstorch:
            facts.extend(self._state_mutations(traced))
            facts.extend(self._number_returns(traced))
        return facts

    def _recursive_reads(self, traced: TracedScheduleFunction) -> Iterator[SchedulerFact]:
        """Reads of the values the schedule set before, and changes of the initial ones."""
        function = traced.function
        body = function.node
        self_name = self_parameter(function)
        optimizers = _optimizer_names(body, self_name)
        groups = _group_names(body, self.local_bindings(function).params, optimizers)
        aug_targets = {id(n.target) for n in _walk_body(body) if isinstance(n, ast.AugAssign)}
        keys = traced.driven_keys

        def is_group(expr: ast.expr) -> bool:
            if isinstance(expr, ast.Name):
                return expr.id in groups
            return _mentions_param_groups(expr, optimizers)

        for node in _walk_body(body):
            if isinstance(node, ast.Subscript):
                key = _constant_key(node.slice)
                if key in keys and is_group(node.value) and (
                        isinstance(node.ctx, ast.Load) or id(node) in aug_targets):
                    yield OptimizerValueReadBack(function, node, key, ReadBackForm.GROUP_ITEM)
            elif isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr == "get" and node.args \
                        and (key := _constant_key(node.args[0])) in keys and is_group(func.value):
                    yield OptimizerValueReadBack(function, node, key, ReadBackForm.GROUP_GET)
                    continue
                arguments = [*node.args, *(k.value for k in node.keywords)]
                given = [k for a in arguments if (k := _constant_key(a)) in keys]
                if given and self_name is not None and any(
                        (_self_rooted(a, self_name) or ())[:1] == ("optimizer",)
                        for a in arguments):
                    yield OptimizerValueReadBack(function, node, given[0],
                                                 ReadBackForm.OPTIMIZER_CALL)
                elif self_name is not None and isinstance(func, ast.Attribute) \
                        and _is_mutating_method(func.attr) \
                        and (_self_rooted(func.value, self_name) or ())[:1] == ("base_lrs",):
                    yield BaseRatesChanged(function, node, by_call=True)
            elif isinstance(node, ast.Attribute) and self_name is not None \
                    and isinstance(node.value, ast.Name) and node.value.id == self_name \
                    and node.attr in PREVIOUS_VALUE_READS and isinstance(node.ctx, ast.Load):
                yield PreviousValueRead(function, node, node.attr,
                                        is_method=node.attr in PREVIOUS_VALUE_METHODS)
            elif isinstance(node, (ast.Assign, ast.AugAssign)) and self_name is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for element in _target_elements(target):
                        if (_self_rooted(element, self_name) or ())[:1] == ("base_lrs",):
                            yield BaseRatesChanged(function, element, by_call=False)

    def _state_mutations(self, traced: TracedScheduleFunction) -> Iterator[SchedulerFact]:
        """Changes of scheduler state other than `base_lrs` (which the reads report)."""
        function = traced.function
        self_name = self_parameter(function)
        if self_name is None:
            return
        local = self.local_bindings(function)
        state = traced.state_attributes or set(STEP_STATE)
        for node in _walk_body(function.node):
            if isinstance(node, ast.AugAssign):
                path = _self_rooted(node.target, self_name)
                if path and path[0] != "base_lrs":
                    yield SchedulerStateMutated(function, node, StateChange.AUGMENTED,
                                                node.target, path[0])
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for element in _target_elements(target):
                        path = _self_rooted(element, self_name)
                        if not path or path[0] == "base_lrs":
                            continue
                        if isinstance(element, ast.Subscript) or len(path) > 1:
                            yield SchedulerStateMutated(function, element,
                                                        StateChange.WRITTEN_INTO, element, path[0])
                        elif node.value is not None and (
                                _reads_state(node.value, self_name, state, local)
                                or _reads_state(node.value, self_name, {path[0]}, None)):
                            yield SchedulerStateMutated(function, element,
                                                        StateChange.STORED_FROM_STATE, element,
                                                        path[0])
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                path = _self_rooted(node.func.value, self_name)
                if path and path[0] != "base_lrs" and _is_mutating_method(node.func.attr):
                    yield SchedulerStateMutated(function, node, StateChange.MUTATING_CALL,
                                                node.func.value, path[0], node.func.attr)

    def _number_returns(self, traced: TracedScheduleFunction) -> Iterator[SchedulerFact]:
        """Returns of a closed form that are Python numbers, directly or through a
        `self.` helper (resolved for each scheduler the closed form is of)."""
        function = traced.function
        if function.name not in CLOSED_FORMS or not traced.closed_form_of:
            return
        numbers = _PythonNumbers(function, self.local_bindings(function))
        for node in _own_returns(function.node):
            if node.value is None:
                continue
            if numbers.number(node.value):
                yield ClosedFormReturnsNumber(function, node.value)
                continue
            helper = _returned_self_call(node.value, numbers.self_name)
            if helper is None:
                continue
            for ref in traced.closed_form_of:
                found = self.resolve_self_method(ref, helper)
                if found is None:
                    continue
                line = self._number_return_line(found[0])
                if line is not None:
                    yield ClosedFormReturnsNumber(function, node.value,
                                                  NumberReturningHelper(helper, found[0], line))
                    break

    def _number_return_line(self, function: FunctionInfo) -> int | None:
        """The line of a return of `function` that is provably a Python number."""
        numbers = _PythonNumbers(function, self.local_bindings(function))
        for node in _own_returns(function.node):
            if node.value is not None and numbers.number(node.value):
                return node.lineno
        return None


# ---- state and values inside one function ------------------------------------------------

class LocalBindings:
    """Flow-insensitive facts about a function's local names: its parameters, the values
    bound to each name, and the names bound other than by `name = value`."""

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
        self.opaque: set[str] = set()
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


def _reads_state(node: ast.expr, self_name: str | None, state: Collection[str],
                 local: LocalBindings | None, seen: set[str] | None = None) -> bool:
    """Whether an expression reads the step or scheduler state (directly or through
    local names assigned from it)."""
    seen = seen if seen is not None else set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) \
                and sub.value.id == self_name and sub.attr in state:
            return True
        if local is not None and isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) \
                and sub.id in local.values and sub.id not in seen:
            seen.add(sub.id)
            if any(_reads_state(v, self_name, state, local, seen) for v in local.values[sub.id]):
                return True
    return False


def _stateful_writes(node: ast.AST, self_name: str, state: set[str],
                     local: LocalBindings) -> Iterator[str]:
    if isinstance(node, ast.AugAssign):
        path = _self_rooted(node.target, self_name)
        if path:
            yield path[0]
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for element in _target_elements(target):
                path = _self_rooted(element, self_name)
                if not path:
                    continue
                if isinstance(element, ast.Subscript) or len(path) > 1:
                    yield path[0]
                elif node.value is not None and (
                        _reads_state(node.value, self_name, state, local)
                        or _reads_state(node.value, self_name, {path[0]}, None)):
                    yield path[0]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        path = _self_rooted(node.func.value, self_name)
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


def _group_names(function: ast.AST, params: Iterable[str], optimizers: set[str]) -> set[str]:
    """Names that hold a param group of the scheduler's optimizer (named by `optimizers`:
    `_optimizer_names`) in this function."""
    names = {p for p in params if "group" in p.lower()}
    for node in _walk_body(function):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) \
                and _mentions_param_groups(node.iter, optimizers):
            names.update(_names(node.target))
        elif isinstance(node, ast.Assign) and _mentions_param_groups(node.value, optimizers) \
                and isinstance(node.value, (ast.Subscript, ast.Attribute)):
            for target in node.targets:
                names.update(_names(target))
    return names


def _optimizer_names(function: ast.AST, self_name: str | None) -> set[str]:
    """Local names bound to the scheduler's optimizer (`opt = self.optimizer`), and the
    parameters named `optimizer`."""
    names = {"optimizer"}
    for node in _walk_body(function):
        if not isinstance(node, ast.Assign):
            continue
        value = node.value
        if isinstance(value, ast.Name) or isinstance(value, ast.Attribute) \
                and isinstance(value.value, ast.Name) and value.value.id == self_name:
            if _is_own_optimizer(value, names):
                for target in node.targets:
                    names.update(_names(target))
    return names


def _is_own_optimizer(node: ast.AST, names: set[str]) -> bool:
    """A name in `names`, or an `optimizer` / `_optimizer` attribute (`self.optimizer`)."""
    if isinstance(node, ast.Name):
        return node.id in names
    return isinstance(node, ast.Attribute) and node.attr in ("optimizer", "_optimizer")


def _mentions_param_groups(node: ast.AST, optimizers: set[str]) -> bool:
    """Whether `node` reads the `param_groups` of the scheduler's own optimizer
    (`self.optimizer.param_groups`, or through a name in `optimizers`), not those of
    other optimizers it holds (`for opt in self.optimizer.optimizers: opt.param_groups`)."""
    return any(isinstance(n, ast.Attribute) and n.attr == "param_groups"
               and _is_own_optimizer(n.value, optimizers) for n in ast.walk(node))


def _constant_key(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class _PythonNumbers:
    """Whether an expression of a function is provably a Python number."""

    def __init__(self, function: FunctionInfo, local: LocalBindings):
        self.module = function.module
        self.self_name = self_parameter(function)
        self.local = local

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
                if sub.id in self.local.params and sub.id != self.self_name:
                    return True
                if sub.id in self.local.values and sub.id not in seen:
                    seen.add(sub.id)
                    if sub.id in self.local.opaque or any(
                            self.tensor_like(v, seen) for v in self.local.values[sub.id]):
                        return True
            elif isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) \
                    and sub.value.id == self.self_name and sub.attr in TENSOR_STATE:
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


def _returned_self_call(node: ast.expr, self_name: str | None) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and isinstance(node.func.value, ast.Name) and node.func.value.id == self_name:
        return node.func.attr
    return None


# ---- whether a scheduler class has its closed form -----------------------------------------

class ClosedForm(Enum):
    """Whether a scheduler class has a closed form of one name along its MRO."""

    DEFINED = "defined"
    ABSTRACT = "abstract"
    MISSING = "missing"
    UNKNOWN = "unknown"  # a base we cannot see comes first and may define it


def closed_form_status(project: ProjectIndex, ref: ClassRef, name: str,
                       version: Version | None) -> ClosedForm:
    """Whether `name` is defined along the MRO by a cstorch (or project) class; torch
    schedulers' own `_get_closed_form_lr` (Python numbers) does not count."""
    for entry in project.mro(ref):
        if entry.info is not None:
            function = entry.info.methods.get(name)
            if function is not None:
                if function.is_abstract:
                    return ClosedForm.ABSTRACT
                if _torch_only(project, entry):
                    continue
                return ClosedForm.DEFINED
            if name in entry.info.class_attributes:
                return ClosedForm.DEFINED
        elif entry.official is not None:
            methods, abstract = entry.official.methods_for(version)
            if name in abstract:
                return ClosedForm.ABSTRACT
            if name in methods:
                if entry.official.qualname.startswith("torch."):
                    continue
                return ClosedForm.DEFINED
        else:
            return ClosedForm.UNKNOWN
    return ClosedForm.MISSING


def _torch_only(project: ProjectIndex, ref: ClassRef) -> bool:
    kinds = project.kinds(ref)
    return kinds.torch_scheduler and not kinds.cstorch_scheduler


def declared_abstract(ref: ClassRef) -> bool:
    """Whether a class says it is abstract (an ABC, or declared so), defined or not."""
    info = ref.info
    if info.declares_abstract:
        return True
    if any(b in ("ABC", "abc.ABC") for b in info.base_names if b):
        return True
    return any(k.arg == "metaclass" and (dotted_name(k.value) or "").endswith("ABCMeta")
               for k in info.node.keywords)


def is_torch_scheduler_class(project: ProjectIndex, ref: ClassRef) -> bool:
    """Whether a scheduler class is torch's own (not a project class deriving from it)."""
    if ref.official is not None:
        return ref.official.qualname.startswith("torch.")
    root = project.machinery_root(ref)
    if root in TORCH_SCHEDULERS:
        return True
    return ref.info is not None and ref.info.module.path_ends_with("torch/optim/lr_scheduler.py")
