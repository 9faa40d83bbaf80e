"""How optimizers create and update their state: facts about state created outside
`preinitialize`, rebound in `step`, filled eagerly, or updated and then lost.

For each concrete optimizer class of the project (a *context*), the methods are
walked from their entry points along the class's MRO: `preinitialize` (state may be
created there), `step` (state may only be updated in place) and every other method
(state may not be created). Restoration (`load_state_dict`, `__setstate__`) is
neither. A small abstract interpretation per function follows the optimizer's
`self.state`, its per-parameter dicts and the tensors read from them through
aliases, calls (with the abstract values of the arguments) and guards such as
`if len(state) == 0:`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from enum import Enum
from typing import Union

from cslint.semantic.analyses import AnalysisError
from cslint.semantic.module_index import (
    FunctionInfo, ModuleIndex, dotted_name, is_super_call,
    source_snippet,
)
from cslint.semantic.project import ClassRef, ProjectIndex
from cslint.semantic.torch_api import EAGER_CREATION_OPS
from cslint.semantic.walker import StatementWalker, join_envs

RESTORATION_METHODS = frozenset({"load_state_dict", "__setstate__", "_load_from_state_dict"})


class Role(Enum):
    PREINIT = "preinitialize"
    STEP = "step"
    OTHER = "other"
    RESTORE = "restore"

    # Members are singletons: hash by identity in C, not Enum's Python-level name hash
    # (roles key every walk of the analysis).
    __hash__ = object.__hash__


# ---- abstract values ---------------------------------------------------------

class _Optimizer:
    def __repr__(self) -> str:
        return "OPTIMIZER"


class _StateMap:
    def __repr__(self) -> str:
        return "STATE_MAP"


OPTIMIZER = _Optimizer()  # the optimizer (`self` in its methods)
STATE_MAP = _StateMap()  # `self.state`


class ParamState:
    """One parameter's state dict (`self.state[p]`); identity matters."""

    def __init__(self, label: str):
        self.label = label

    def __repr__(self) -> str:
        return f"ParamState({self.label})"


# Immutable by convention: `frozen=True` makes each creation ~4x slower.
@dataclass(slots=True, unsafe_hash=True)
class StateTensor:
    """A value read from a parameter's state; `version` tells whether it is still the
    object stored under `key` (a rebinding write bumps the entry's version)."""

    owner: ParamState
    key: str | None
    version: int


@dataclass(slots=True, unsafe_hash=True)
class Derived:
    """A new tensor computed from a state tensor (not the stored object)."""

    source: StateTensor


@dataclass(slots=True, unsafe_hash=True)
class Strings:
    values: frozenset[str]


@dataclass(slots=True, unsafe_hash=True)
class IteratedKey:
    owner: ParamState


@dataclass(slots=True, unsafe_hash=True)
class EagerConstant:
    call: ast.Call
    function: str


@dataclass(slots=True, unsafe_hash=True)
class Items:
    """`x.items()` / `.values()` / `.keys()` of a state container."""

    owner: object
    view: str


@dataclass(slots=True, unsafe_hash=True)
class Sequence_:
    items: tuple


@dataclass(slots=True, unsafe_hash=True)
class DictLiteral:
    entries: tuple  # ((key value, value value, value node), ...)


Value = Union[None, _Optimizer, _StateMap, ParamState, StateTensor, Derived, Strings,
              IteratedKey, EagerConstant, Items, Sequence_, DictLiteral]


def _join(a: Value, b: Value) -> Value:
    if a == b or a is b:
        return a
    if isinstance(a, Strings) and isinstance(b, Strings):
        return Strings(a.values | b.values)
    if isinstance(a, ParamState) and isinstance(b, ParamState):
        return a
    return None


# ---- facts -------------------------------------------------------------------
# `where` names the class and the entry method (and helper) the walk came from:
# "MyAdam.step()", "MyAdam.reset() -> _init_buffers()".

@dataclass(frozen=True)
class StateCreated:
    """A state entry written outside `preinitialize` that it did not create (`guarded`:
    under a lazy-initialisation check such as `if len(state) == 0`)."""

    function: FunctionInfo
    node: ast.AST
    key: str | None
    guarded: bool
    where: str


@dataclass(frozen=True)
class StateDictRebound:
    """A parameter's whole state bound to a new dict outside `preinitialize`."""

    function: FunctionInfo
    node: ast.AST
    where: str


@dataclass(frozen=True)
class StateRebound:
    """A state entry `preinitialize` created, bound to another object in `step`."""

    function: FunctionInfo
    node: ast.AST
    key: str | None
    key_node: ast.AST
    where: str


@dataclass(frozen=True)
class EagerStateFill:
    """A state entry filled with a constant by an eager torch op in `preinitialize`
    (`node` is that call, `torch_function` its qualified name)."""

    function: FunctionInfo
    node: ast.Call
    keys: tuple[str, ...] | None
    torch_function: str


@dataclass(frozen=True)
class StateUpdateLost:
    """A name holding a state tensor rebound in `step` to a new value that is never
    stored back."""

    function: FunctionInfo
    node: ast.AST
    name: str
    key: str | None


StateFact = Union[StateCreated, StateDictRebound, StateRebound, EagerStateFill,
                  StateUpdateLost]


@dataclass
class _Context:
    """One concrete optimizer class and what its preinitialize creates."""

    ref: ClassRef
    created_keys: set[str] = field(default_factory=set)
    # Keys we cannot enumerate (dynamic keys, or an unseen base's preinitialize).
    open_keys: bool = False

    @property
    def name(self) -> str:
        return self.ref.short_name


@dataclass(slots=True)
class _Call:
    function: FunctionInfo
    role: Role
    bindings: tuple  # abstract values of the parameters, by position
    guarded: bool
    via: str  # the entry method and helper chain, for messages


def _signature(value: Value) -> object:
    if isinstance(value, (StateTensor, Derived, ParamState)):
        return type(value).__name__ + (f":{value.key}" if isinstance(value, StateTensor) else "")
    if value is OPTIMIZER or value is STATE_MAP:
        return repr(value)
    return None


class OptimizerStateAnalysis:
    """The state facts of every optimizer class of a project."""

    def __init__(self, project: ProjectIndex):
        self.project = project
        self.version = project.config.cstorch_version
        self.errors: list[AnalysisError] = []
        self._facts_by_module: dict[int, list[StateFact]] | None = None
        # Per context class (by id of its ref): the state keys its preinitialize creates.
        self.created_keys: dict[int, tuple[frozenset[str], bool]] = {}
        # Walks that did not depend on their class: (calls made, how `self.x` resolved).
        self._context_free_calls: dict[tuple, tuple[list[_Call], list[tuple]]] = {}
        self._global_step: dict[int, bool] = {}

    def run(self) -> None:
        # Classes sharing a method find the same facts in it: keep the first of each.
        seen: set[tuple] = set()
        grouped: dict[int, list[StateFact]] = {}
        for ref in self.contexts():
            try:
                facts = self._analyse_context(ref)
            except RecursionError:
                self.errors.append(AnalysisError(ref.info.module, "too deeply nested to analyse"))
                continue
            for fact in facts:
                key = (id(fact.function.module), type(fact), fact.node.lineno,
                       fact.node.col_offset)
                if key not in seen:
                    seen.add(key)
                    grouped.setdefault(id(fact.function.module), []).append(fact)
        self._facts_by_module = grouped

    def facts_in(self, module: ModuleIndex) -> list[StateFact]:
        """The module's facts, in the order the analysis found them."""
        if self._facts_by_module is None:
            raise RuntimeError("OptimizerStateAnalysis.run() has not run")
        return self._facts_by_module.get(id(module), [])

    def contexts(self) -> list[ClassRef]:
        """Optimizer classes that can be instantiated, or that nothing derives from."""
        project = self.project
        result = []
        for ref in project.project_classes:
            try:
                kinds = project.kinds(ref)
            except RecursionError:
                self.errors.append(AnalysisError(ref.info.module, "too deeply nested to analyse"))
                continue
            if not kinds.optimizer or project.is_machinery(ref):
                continue
            leaf = not project.subclasses.get(id(ref))
            if leaf or self._instantiable(ref, kinds.cstorch_optimizer):
                result.append(ref)
        return result

    def _instantiable(self, ref: ClassRef, cstorch: bool) -> bool:
        if ref.info is not None and ref.info.declares_abstract:
            return False
        if not cstorch:
            return True
        for name in ("preinitialize", "step"):
            found = self.project.find_method(ref, name, self.version)
            if found is None or found.abstract:
                return False
        return True

    # ---- one context -----------------------------------------------------------

    def _analyse_context(self, ref: ClassRef) -> list[StateFact]:
        context = _Context(ref)
        facts: list[StateFact] = []
        visited: set[tuple] = set()
        reached: set[int] = set()

        def run(entries: list[_Call]) -> None:
            queue = list(entries)
            while queue:
                call = queue.pop()
                key = (id(call.function), call.role, tuple(_signature(b) for b in call.bindings),
                       call.guarded)
                if key in visited:
                    continue
                visited.add(key)
                reached.add(id(call.function))
                if not self._may_touch_state(call):
                    continue
                shared_key = (*key, call.via)
                cached = self._context_free_calls.get(shared_key)
                if cached is not None and self._same_resolutions(ref, cached[1]):
                    queue.extend(cached[0])
                    continue
                walker = _FunctionWalker(self, context, call, facts)
                reported = len(facts)
                try:
                    # Restoration writes no findings, and a function that cannot see
                    # state matters only through what it calls; for other methods not
                    # even that: each method of the class is an entry of its own.
                    if call.role is not Role.RESTORE and self._holds_state(call):
                        walker.walk()
                    elif call.role is not Role.OTHER:
                        walker.scan_calls()
                except RecursionError:
                    self.errors.append(AnalysisError(call.function.module,
                                                     "too deeply nested to analyse"))
                    continue
                queue.extend(walker.calls)
                # A walk that wrote no state and found nothing did not depend on this
                # class: other classes inheriting the same method reuse what it calls.
                if call.role is not Role.PREINIT and not walker.wrote_state \
                        and len(facts) == reported:
                    self._context_free_calls[shared_key] = (walker.calls, walker.resolutions)

        self._seed_created_keys(context)
        preinit = self._entry(ref, "preinitialize", Role.PREINIT)
        run([preinit] if preinit else [])
        restore = [c for n in RESTORATION_METHODS if (c := self._entry(ref, n, Role.RESTORE))]
        run(restore)
        step = self._entry(ref, "step", Role.STEP)
        run([step] if step else [])
        # Every other method is an entry of its own unless one already reached it; one
        # that never names `state` can only matter through what it calls.
        for name in self._method_names(ref):
            function = self._entry_function(ref, name)
            if function is not None and id(function) not in reached \
                    and self._mentions_state(function):
                run([self._call(function, Role.OTHER, name)])
        self.created_keys[id(ref)] = (frozenset(context.created_keys), context.open_keys)
        return facts

    @staticmethod
    def _mentions_state(function: FunctionInfo) -> bool:
        """Whether a function may reach optimizer state: its text names `.state`, or it
        calls through `self` or `super()` (a textual, conservative prefilter)."""
        return function.mentions(".state") or function.mentions("self") or \
            function.mentions("super(")

    def _may_touch_state(self, call: _Call) -> bool:
        """A function given no optimizer or state value that never names `.state` nor
        calls through self cannot create or update optimizer state: skip its walk."""
        if any(_signature(b) is not None for b in call.bindings):
            return True
        return self._mentions_state(call.function)

    def _holds_state(self, call: _Call) -> bool:
        """Whether a function can see optimizer state: it names `.state`, or an argument
        is state (the optimizer itself only counts through `.state`)."""
        if any(_signature(b) is not None and b is not OPTIMIZER for b in call.bindings):
            return True
        return call.function.mentions(".state")

    def _same_resolutions(self, ref: ClassRef, resolutions: list[tuple]) -> bool:
        for name, after_name, function_id in resolutions:
            after = next((e for e in self.project.mro(ref) if e.name == after_name), None) \
                if after_name else None
            found = self.project.find_method(ref, name, self.version, after=after)
            if id(found.function if found else None) != function_id:
                return False
        return True

    def _method_names(self, ref: ClassRef) -> list[str]:
        names: dict[str, None] = {}  # ordered, without repeats
        for entry in self.project.mro(ref):
            if entry.info is None or self.project.is_machinery(entry):
                continue
            for name in entry.info.methods:
                if name not in ("preinitialize", "step"):
                    names[name] = None
        return list(names)

    def _entry(self, ref: ClassRef, name: str, role: Role) -> _Call | None:
        function = self._entry_function(ref, name)
        return self._call(function, role, name) if function is not None else None

    def _entry_function(self, ref: ClassRef, name: str) -> FunctionInfo | None:
        """The project function a class runs for method `name` (not machinery's, not
        an abstract one)."""
        found = self.project.find_method(ref, name, self.version)
        if found is None or found.function is None or found.function.is_abstract \
                or self.project.is_machinery(found.owner):
            return None
        return found.function

    @staticmethod
    def _call(function: FunctionInfo, role: Role, name: str) -> _Call:
        bindings = (OPTIMIZER,) if function.kind in ("method", "property") else ()
        return _Call(function, role, bindings, False, f"{name}()")

    def _seed_created_keys(self, context: _Context) -> None:
        """Keys created by bases we only know from the official table, and the global step."""
        project = self.project
        preinit = project.find_method(context.ref, "preinitialize", self.version)
        for entry in project.mro(context.ref):
            if entry.official is not None:
                context.created_keys |= entry.official.state_keys
                if entry.official.global_step:
                    context.created_keys.add("step")
            elif entry.unknown:
                context.open_keys = True
        if preinit is not None and preinit.function is None and preinit.owner.unknown:
            context.open_keys = True
        if self._enables_global_step(context.ref):
            context.created_keys.add("step")

    def _enables_global_step(self, ref: ClassRef) -> bool:
        """`super().__init__(params, defaults, enable_global_step=...)` anywhere up the MRO."""
        for entry in self.project.mro(ref):
            init = entry.info.methods.get("__init__") if entry.info else None
            if init is None or self.project.is_machinery(entry):
                continue
            if id(init) not in self._global_step:
                self._global_step[id(init)] = init.mentions("__init__(") and \
                    _init_enables_global_step(init)
            if self._global_step[id(init)]:
                return True
        return False


def _init_enables_global_step(init: FunctionInfo) -> bool:
    """Whether an `__init__` passes a true `enable_global_step` to a base `__init__`
    (a statement-level call, `super().__init__(params, defaults, enable_global_step=True)`)."""
    for node in init.statements:
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute) \
                or node.func.attr != "__init__":
            continue
        for keyword in node.keywords:
            if keyword.arg == "enable_global_step":
                value = keyword.value
                if not (isinstance(value, ast.Constant) and not value.value):
                    return True
        positional = node.args[2:] if is_super_call(node.func.value) else node.args[3:]
        if positional and not (isinstance(positional[0], ast.Constant)
                               and not positional[0].value):
            return True
    return False


class _FunctionWalker(StatementWalker):
    """Walks one function body for one call context, statements in order."""

    def __init__(self, analysis: OptimizerStateAnalysis, context: _Context, call: _Call,
                 facts: list[StateFact]):
        self.analysis = analysis
        self.project = analysis.project
        self.context = context
        self.call = call
        self.function = call.function
        self.module = call.function.module
        self.facts = facts
        self.calls: list[_Call] = []
        self.env: dict[str, Value] = {}
        self.guard_depth = 1 if call.guarded else 0
        self.param_states: dict[str, ParamState] = {}
        self.versions: dict[tuple[int, str], int] = {}
        # State entries updated in place (or possibly, by code they escape to), anywhere.
        self.updated: set[tuple[int, str | None]] = set()
        # Entries written by assignment, with the statement counter at the write.
        self.written: dict[tuple[int, str | None], int] = {}
        self.lost_candidates: list[tuple[ast.AST, str, StateTensor, int]] = []
        self.wrote_state = False  # whether a decision here depended on the class's keys
        self.handed_in: dict[str, StateTensor] = {}
        self.resolutions: list[tuple] = []  # (method, after class, function id) looked up

    # ---- driver ----------------------------------------------------------------

    def walk(self) -> None:
        node = self.function.node
        names = self.function.parameter_names
        for name, value in zip(names, self.call.bindings):
            self.env[name] = value
        # State tensors handed in by the caller: rebinding such a parameter computes a new
        # value from it (an orthogonalisation, a bias correction); it loses no update.
        self.handed_in = {name: value for name, value in zip(names, self.call.bindings)
                          if isinstance(value, StateTensor)}
        self.block(node.body)
        if self.call.role is Role.STEP:
            for node, name, tensor, when in self.lost_candidates:
                entry = (id(tensor.owner), tensor.key)
                if entry not in self.updated and self.written.get(entry, -1) < when:
                    self.facts.append(StateUpdateLost(self.function, node, name, tensor.key))

    def scan_calls(self) -> None:
        """Only the calls, for a function that cannot see state itself: which methods and
        functions it reaches, with the optimizer where it passes `self` on."""
        optimizer_names = {name for name, value in zip(self.function.parameter_names,
                                                        self.call.bindings)
                           if value is OPTIMIZER}

        def value_of(node: ast.expr) -> Value:
            return OPTIMIZER if isinstance(node, ast.Name) and node.id in optimizer_names \
                else None

        for node in self.function.calls:
            args = [value_of(a) for a in node.args]
            keywords = {k.arg: value_of(k.value) for k in node.keywords}
            func = node.func
            if isinstance(func, ast.Attribute) and value_of(func.value) is OPTIMIZER:
                self.enqueue_method(self.context.ref, func.attr, node, args, keywords,
                                    bound=True)
            elif isinstance(func, ast.Attribute) and is_super_call(func.value):
                self.enqueue_super(func.attr, node, args, keywords)
            elif isinstance(func, (ast.Name, ast.Attribute)):
                self.enqueue_function(func, node, args, keywords)

    # ---- statements ---------------------------------------------------------------

    def statement_Assign(self, node: ast.Assign) -> None:
        value = self.eval(node.value)
        for target in node.targets:
            self.assign(target, value, node.value, node)

    def statement_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.assign(node.target, self.eval(node.value), node.value, node)

    def statement_AugAssign(self, node: ast.AugAssign) -> None:
        self.aug_assign(node)

    def statement_If(self, node: ast.If) -> None:
        self.eval(node.test)
        absent_in_body = self.absence(node.test, True)
        absent_in_else = self.absence(node.test, False)
        before = dict(self.env)
        self.guarded_block(node.body, absent_in_body)
        after_body = self.env
        self.env = before
        self.guarded_block(node.orelse, absent_in_else)
        self.env = join_envs(after_body, self.env, _join)

    def statement_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.bind_loop_target(node.target, self.eval(node.iter))
        before = dict(self.env)
        self.block(node.body)
        self.env = join_envs(before, self.env, _join)
        self.block(node.orelse)

    statement_AsyncFor = statement_For

    def statement_While(self, node: ast.While) -> None:
        self.eval(node.test)
        before = dict(self.env)
        self.block(node.body)
        self.env = join_envs(before, self.env, _join)
        self.block(node.orelse)

    def statement_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            value = self.eval(item.context_expr)
            if item.optional_vars is not None:
                self.assign(item.optional_vars, value, item.context_expr, node)
        self.block(node.body)

    statement_AsyncWith = statement_With

    def statement_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        # A nested function sees this scope (closures); walk it where it is defined.
        saved = dict(self.env)
        for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
            self.env.pop(arg.arg, None)
        self.block(node.body)
        self.env = saved

    statement_AsyncFunctionDef = statement_FunctionDef

    def statement_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            self.escape_derived(self.eval(node.value))

    def guarded_block(self, body: list[ast.stmt], guarded: bool) -> None:
        self.guard_depth += guarded
        self.block(body)
        self.guard_depth -= guarded

    def assign(self, target: ast.expr, value: Value, value_node: ast.expr, statement) -> None:
        if isinstance(target, ast.Name):
            previous = self.env.get(target.id)
            if (isinstance(previous, StateTensor) and isinstance(value, Derived)
                    and value.source == previous
                    and self.handed_in.get(target.id) is not previous):
                self.lost_candidates.append((statement, target.id, previous,
                                             self.statements_seen))
            self.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = value.items if isinstance(value, Sequence_) else None
            for i, element in enumerate(target.elts):
                if isinstance(element, ast.Starred):
                    self.assign(element.value, None, value_node, statement)
                    continue
                item = items[i] if items is not None and i < len(items) else None
                self.assign(element, item, value_node, statement)
        elif isinstance(target, ast.Subscript):
            container = self.eval(target.value)
            key = self.eval(target.slice)
            if isinstance(container, ParamState):
                self.state_write(container, key, target.slice, value, value_node, target, "assign")
            elif container is STATE_MAP:
                self.new_state_entry(target, value, value_node)
        else:
            self.eval(target)

    def aug_assign(self, node: ast.AugAssign) -> None:
        target = node.target
        if not (isinstance(target, ast.Name) and isinstance(node.op, ast.BitOr)):
            self.eval(node.value)
        if isinstance(target, ast.Subscript):
            container = self.eval(target.value)
            key = self.eval(target.slice)
            if isinstance(container, ParamState):
                for k in self._keys(key, container) or [None]:
                    self.updated.add((id(container), k))
        elif isinstance(target, ast.Name):
            current = self.env.get(target.id)
            if isinstance(current, StateTensor):  # tensor `+=` is in place
                self.updated.add((id(current.owner), current.key))
            elif isinstance(current, ParamState) and isinstance(node.op, ast.BitOr):
                self.update_with(current, node, [self.eval(node.value)], {})

    def bind_loop_target(self, target: ast.expr, iterable: Value) -> None:
        if isinstance(iterable, Items):
            owner, view = iterable.owner, iterable.view
            if owner is STATE_MAP:
                item = {"items": Sequence_((None, ParamState("item"))),
                        "values": ParamState("item"), "keys": None}[view]
            else:
                key = IteratedKey(owner)
                tensor = StateTensor(owner, None, 0)
                item = {"items": Sequence_((key, tensor)), "values": tensor, "keys": key}[view]
            self.assign(target, item, target, target)
        elif isinstance(iterable, ParamState):
            self.assign(target, IteratedKey(iterable), target, target)
        elif isinstance(iterable, Sequence_) and iterable.items and all(
                isinstance(i, Strings) for i in iterable.items):
            values = frozenset().union(*(i.values for i in iterable.items))
            self.assign(target, Strings(values), target, target)
        else:
            self.assign(target, None, target, target)

    # ---- state writes ------------------------------------------------------------------

    def _keys(self, key: Value, owner: ParamState) -> list[str] | None:
        if isinstance(key, Strings):
            return sorted(key.values)
        return None

    def state_write(self, owner: ParamState, key: Value, key_node: ast.AST, value: Value,
                    value_node: ast.AST | None, node: ast.AST, how: str) -> None:
        self.wrote_state = True
        role = self.call.role
        keys = self._keys(key, owner)
        iterated = isinstance(key, IteratedKey) and key.owner is owner
        if role is Role.RESTORE:
            return
        if role is Role.PREINIT:
            if keys is None:
                self.context.open_keys = True
            else:
                self.context.created_keys.update(keys)
            if isinstance(value, EagerConstant):
                self.facts.append(EagerStateFill(
                    self.function, value.call, tuple(keys) if keys is not None else None,
                    value.function))
            return
        guarded = self.guard_depth > 0
        existing = self.context.created_keys
        for k in keys or [None]:
            if guarded and not iterated:
                creation = True
            elif k is None:
                creation = False
            else:
                creation = k not in existing and not self.context.open_keys
            if how == "setdefault" and not creation:
                continue  # setdefault of an existing key changes nothing
            entry = (id(owner), k)
            same_object = (isinstance(value, StateTensor) and value.owner is owner
                           and value.key == k and k is not None
                           and value.version == self.versions.get(entry, 0))
            if creation:
                self.facts.append(StateCreated(self.function, node, k, guarded, self._where()))
            elif role is Role.STEP and (iterated or (k is not None and k in existing)) \
                    and not same_object:
                self.facts.append(StateRebound(self.function, node, k, key_node, self._where()))
            self.written[entry] = self.statements_seen
            if not same_object:
                self.versions[entry] = self.versions.get(entry, 0) + 1

    def new_state_entry(self, node: ast.AST, value: Value, value_node: ast.AST) -> None:
        self.wrote_state = True
        role = self.call.role
        if role is Role.RESTORE:
            return
        if role is Role.PREINIT:
            if isinstance(value, DictLiteral):
                owner = ParamState("literal")
                for key, item, item_node in value.entries:
                    self.state_write(owner, key, item_node, item, item_node, node, "assign")
            else:
                self.context.open_keys = True
            return
        self.facts.append(StateDictRebound(self.function, node, self._where()))

    # ---- expressions -----------------------------------------------------------------

    def eval_Name(self, node: ast.Name) -> Value:
        return self.env.get(node.id)

    def eval_Constant(self, node: ast.Constant) -> Value:
        return Strings(frozenset([node.value])) if isinstance(node.value, str) else None

    def eval_Attribute(self, node: ast.Attribute) -> Value:
        base = self.eval(node.value)
        if base is OPTIMIZER and node.attr == "state":
            return STATE_MAP
        if isinstance(base, StateTensor) and node.attr == "data":
            return base
        if isinstance(base, (StateTensor, Derived)) and node.attr in ("T", "mT", "real"):
            return _derive(base)
        return None

    def eval_Subscript(self, node: ast.Subscript) -> Value:
        return self.subscript(node)

    def eval_Call(self, node: ast.Call) -> Value:
        return self.call_value(node)

    def eval_BinOp(self, node: ast.BinOp) -> Value:
        left, right = self.eval(node.left), self.eval(node.right)
        return _derive(left) or _derive(right)

    def eval_UnaryOp(self, node: ast.UnaryOp) -> Value:
        return _derive(self.eval(node.operand))

    def eval_IfExp(self, node: ast.IfExp) -> Value:
        self.eval(node.test)
        return _join(self.eval(node.body), self.eval(node.orelse))

    def eval_Tuple(self, node: ast.Tuple | ast.List) -> Value:
        return Sequence_(tuple(self.eval(e) for e in node.elts))

    eval_List = eval_Tuple

    def eval_Dict(self, node: ast.Dict) -> Value:
        entries = []
        for key_node, value_node in zip(node.keys, node.values):
            key = self.eval(key_node) if key_node is not None else None
            entries.append((key, self.eval(value_node), value_node))
        return DictLiteral(tuple(entries))

    def eval_NamedExpr(self, node: ast.NamedExpr) -> Value:
        value = self.eval(node.value)
        self.env[node.target.id] = value
        return value

    def eval_Starred(self, node: ast.Starred) -> Value:
        return self.eval(node.value)

    def eval_Lambda(self, node: ast.Lambda) -> Value:
        return None

    def subscript(self, node: ast.Subscript) -> Value:
        base = self.eval(node.value)
        index = self.eval(node.slice)
        if base is STATE_MAP:
            return self.param_state_for(node.slice)
        if isinstance(base, ParamState):
            keys = self._keys(index, base)
            key = keys[0] if keys and len(keys) == 1 else None
            return StateTensor(base, key, self.versions.get((id(base), key), 0))
        if isinstance(base, Sequence_) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, int) and -len(base.items) <= node.slice.value \
                < len(base.items):
            return base.items[node.slice.value]
        if isinstance(base, (StateTensor, Derived)):
            return _derive(base)
        return None

    def param_state_for(self, index: ast.expr) -> ParamState:
        label = source_snippet(index)
        if label not in self.param_states:
            self.param_states[label] = ParamState(label)
        return self.param_states[label]

    def call_value(self, node: ast.Call) -> Value:
        func = node.func
        args = [self.eval(a) for a in node.args]
        keywords = {k.arg: self.eval(k.value) for k in node.keywords}
        out = keywords.get("out")
        if isinstance(out, StateTensor):
            self.updated.add((id(out.owner), out.key))

        if isinstance(func, ast.Attribute):
            receiver = self.eval(func.value)
            method = func.attr
            if isinstance(receiver, ParamState):
                return self.param_state_method(receiver, method, node, args, keywords)
            if receiver is STATE_MAP:
                if method in ("items", "values", "keys"):
                    return Items(STATE_MAP, method)
                if method == "get" and node.args:
                    return self.param_state_for(node.args[0])
                if method == "setdefault" and node.args:
                    # Entries exist for every parameter preinitialize gave state to.
                    self.wrote_state = True
                    if not self.context.created_keys and not self.context.open_keys:
                        self.new_state_entry(node, args[1] if len(args) > 1 else None, node)
                    return self.param_state_for(node.args[0])
                return None
            if isinstance(receiver, (StateTensor, Derived)):
                if method.endswith("_") and not method.startswith("_"):
                    if isinstance(receiver, StateTensor):
                        self.updated.add((id(receiver.owner), receiver.key))
                    return receiver  # in-place ops return the same tensor
                return _derive(receiver)
            if isinstance(receiver, EagerConstant) and method in ("to", "float", "half"):
                return receiver
            if receiver is OPTIMIZER:
                self.enqueue_method(self.context.ref, method, node, args, keywords, bound=True)
                self.escape(args, keywords)
                return None
            if is_super_call(func.value):
                self.enqueue_super(method, node, args, keywords)
                self.escape(args, keywords)
                return None

        if isinstance(func, ast.Name) and func.id in ("list", "tuple", "sorted") and \
                len(args) == 1 and isinstance(args[0], Items):
            return args[0]  # `list(state.items())` iterates the same entries
        qualified = self.qualified(func)
        if qualified is not None and (qualified == "torch" or qualified.startswith("torch.")):
            if qualified in EAGER_CREATION_OPS:
                return EagerConstant(node, qualified)
            if qualified.endswith("_"):
                self.escape(args, keywords)
            sources = [_derive(a) for a in args if isinstance(a, (StateTensor, Derived))]
            return None if out is not None else (sources[0] if sources else None)
        self.enqueue_function(func, node, args, keywords)
        self.escape(args, keywords)
        return None

    def param_state_method(self, owner: ParamState, method: str, node: ast.Call,
                           args: list[Value], keywords: dict) -> Value:
        if method in ("items", "values", "keys"):
            return Items(owner, method)
        if method == "get" and args:
            keys = self._keys(args[0], owner)
            key = keys[0] if keys and len(keys) == 1 else None
            return StateTensor(owner, key, self.versions.get((id(owner), key), 0))
        if method == "setdefault" and node.args:
            value = args[1] if len(args) > 1 else None
            self.state_write(owner, args[0], node.args[0], value, None, node, "setdefault")
            keys = self._keys(args[0], owner)
            return StateTensor(owner, keys[0] if keys and len(keys) == 1 else None, 0)
        if method == "update":
            self.update_with(owner, node, args, keywords)
        return None

    def update_with(self, owner: ParamState, node: ast.AST, args: list[Value],
                    keywords: dict) -> None:
        entries = []
        for arg in args:
            if isinstance(arg, DictLiteral):
                entries.extend(arg.entries)
            else:
                entries.append((None, None, node))
        for name, value in keywords.items():
            entries.append((Strings(frozenset([name])) if name else None, value, node))
        for key, value, _ in entries:
            self.state_write(owner, key, node, value, None, node, "update")

    def escape_derived(self, value: Value) -> None:
        """A new value returned to the caller may be stored there: not lost here."""
        if isinstance(value, Derived):
            self.updated.add((id(value.source.owner), value.source.key))
        elif isinstance(value, Sequence_):
            for item in value.items:
                self.escape_derived(item)

    def escape(self, args: list[Value], keywords: dict) -> None:
        """A state tensor handed to other code may be updated in place there."""
        for value in (*args, *keywords.values()):
            if isinstance(value, StateTensor):
                self.updated.add((id(value.owner), value.key))
            elif isinstance(value, Sequence_):
                self.escape(list(value.items), {})

    # ---- calls -------------------------------------------------------------------------

    def qualified(self, func: ast.expr) -> str | None:
        dotted = dotted_name(func)
        return self.project.callee(self.module, dotted)[0] if dotted else None

    def _bindings(self, function: FunctionInfo, first: Value | None, args: list[Value],
                  keywords: dict, bound: bool) -> tuple:
        names = function.parameter_names
        values: list[Value] = [None] * len(names)
        offset = 0
        if bound and function.kind in ("method", "property"):
            if names:
                values[0] = first
            offset = 1
        elif function.kind == "classmethod":
            offset = 1
        for i, value in enumerate(args):
            if offset + i < len(values):
                values[offset + i] = value
        for name, value in keywords.items():
            if name in names:
                values[names.index(name)] = value
        return tuple(values)

    def _push(self, function: FunctionInfo, bindings: tuple) -> None:
        via = self.call.via if function.name in self.call.via else \
            f"{self.call.via.split(' ')[0]} through {function.name}()"
        self.calls.append(_Call(function, self.call.role, bindings, self.guard_depth > 0, via))

    def enqueue_method(self, ref: ClassRef, name: str, node: ast.Call, args, keywords,
                       bound: bool, after: ClassRef | None = None) -> None:
        if name == "preinitialize":
            return  # state made there is preinitialize's, whoever calls it
        found = self.project.find_method(ref, name, self.analysis.version, after=after)
        if ref is self.context.ref:
            self.resolutions.append((name, after.name if after else None,
                                     id(found.function if found else None)))
        if found is None or found.function is None or self.project.is_machinery(found.owner):
            return
        self._push(found.function,
                   self._bindings(found.function, OPTIMIZER, args, keywords, bound))

    def enqueue_super(self, name: str, node: ast.Call, args, keywords) -> None:
        if self.function.class_name is None:
            return
        owner = next((entry for entry in self.project.mro(self.context.ref)
                      if entry.info is not None
                      and entry.info.qualname == self.function.class_name), None)
        if owner is not None:
            self.enqueue_method(self.context.ref, name, node, args, keywords, bound=True,
                                after=owner)

    def enqueue_function(self, func: ast.expr, node: ast.Call, args, keywords) -> None:
        dotted = dotted_name(func)
        if dotted is None:
            return
        _, target, owner = self.project.callee(self.module, dotted)
        if target is not None:
            self._push(target, self._bindings(target, None, args, keywords, bound=False))
        elif owner is not None:  # `ClassName.method(self, ...)` on a project class
            info, method = owner
            self.enqueue_method(self.project.ref_for_info(info), method, node, args,
                                keywords, bound=False)

    # ---- guards ------------------------------------------------------------------------

    def absence(self, test: ast.expr, polarity: bool) -> bool:
        """Whether `test` being `polarity` means a state dict or key is absent."""
        if isinstance(test, ast.BoolOp):
            return any(self.absence(v, polarity) for v in test.values)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.absence(test.operand, not polarity)
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left, op, right = test.left, test.ops[0], test.comparators[0]
            if isinstance(op, (ast.In, ast.NotIn)):
                container = self.peek(right)
                if isinstance(container, ParamState) or container is STATE_MAP:
                    return polarity == isinstance(op, ast.NotIn)
            if _is_len_of(left) and isinstance(self.peek(left.args[0]), ParamState) \
                    and isinstance(right, ast.Constant) and isinstance(right.value, int):
                empty = _compare_means_empty(op, right.value)
                if empty is not None:
                    return polarity == empty
            if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(right, ast.Constant) \
                    and right.value is None and isinstance(left, ast.Call) \
                    and isinstance(left.func, ast.Attribute) and left.func.attr == "get" \
                    and isinstance(self.peek(left.func.value), ParamState):
                return polarity == isinstance(op, ast.Is)
            return False
        if _is_len_of(test) and isinstance(self.peek(test.args[0]), ParamState):
            return not polarity
        if isinstance(test, ast.Name) and isinstance(self.env.get(test.id), ParamState):
            return not polarity
        return False

    def peek(self, node: ast.expr) -> Value:
        """The value of a guard operand, without recording anything."""
        if isinstance(node, ast.Name):
            return self.env.get(node.id)
        if isinstance(node, ast.Attribute) and node.attr == "state" and \
                self.peek(node.value) is OPTIMIZER:
            return STATE_MAP
        if isinstance(node, ast.Subscript) and self.peek(node.value) is STATE_MAP:
            return self.param_state_for(node.slice)
        return None

    # ---- where a fact was found ----------------------------------------------------

    def _where(self) -> str:
        cls = self.context.name
        if self.call.role is Role.STEP:
            return f"{cls}.{self.call.via}" if self.function.name != "step" else f"{cls}.step()"
        return f"{cls}.{self.call.via}"


def _derive(value: Value) -> Value:
    if isinstance(value, StateTensor):
        return Derived(value)
    if isinstance(value, Derived):
        return value
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
