"""The walk over one optimizer function: state reads, writes, updates and calls made."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cslint.semantic.module_index import FunctionInfo, dotted_name, is_super_call, source_snippet
from cslint.semantic.optimizer_state.facts import (
    EagerStateFill, GroupTensorCreated, StateCreated, StateDictRebound, StateFact,
    StateRebound, StateUpdateLost,
)
from cslint.semantic.optimizer_state.guards import means_absent
from cslint.semantic.optimizer_state.values import (
    OPTIMIZER, PARAM_GROUP, PARAM_GROUPS, STATE_MAP, Derived, DictLiteral, EagerConstant,
    IteratedKey, ParamState,
    Role, StateItems, StateTensor, Strings, Value, ValueTuple, derive, join,
)
from cslint.semantic.project import ClassRef
from cslint.semantic.torch_api import EAGER_CREATION_OPS, NEW_TENSOR_METHODS, \
    TENSOR_FACTORIES
from cslint.semantic.walker import StatementWalker, join_envs, unpacked_places

if TYPE_CHECKING:
    from cslint.semantic.optimizer_state.analysis import OptimizerClass, OptimizerStateAnalysis


@dataclass(slots=True)
class FunctionCall:
    """A function to walk: the role it has, its arguments' values, whether a guard
    encloses the call, and how the walk reached it."""

    function: FunctionInfo
    role: Role
    bindings: tuple  # abstract values of the parameters, by position
    guarded: bool
    via: str  # the entry method and helper chain, for messages


class StateWalker(StatementWalker):
    """Walks one function body for one call, statements in order."""

    join_values = staticmethod(join)

    def __init__(self, analysis: OptimizerStateAnalysis, optimizer_class: OptimizerClass,
                 call: FunctionCall, facts: list[StateFact]):
        self.analysis = analysis
        self.project = analysis.project
        self.optimizer_class = optimizer_class
        self.call = call
        self.function = call.function
        self.module = call.function.module
        self.facts = facts
        self.calls: list[FunctionCall] = []
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
        # The param-group keys the `if`s around the statement being walked test absent
        # (`if "k" not in group:`).
        self.absent_group_keys: list[str] = []
        # (state, key) pairs read as `state[key]` in this walk: entries that exist there.
        self.indexed: set[tuple[int, str]] = set()
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
                self.enqueue_method(self.optimizer_class.ref, func.attr, node, args, keywords,
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
        absent_in_body = means_absent(self, node.test, True)
        absent_in_else = means_absent(self, node.test, False)
        group_key = self._group_key_tested_absent(node.test)
        before = dict(self.env)
        if group_key is not None:
            self.absent_group_keys.append(group_key)
        self.guarded_block(node.body, absent_in_body)
        if group_key is not None:
            self.absent_group_keys.pop()
        after_body = self.env
        self.env = before
        self.guarded_block(node.orelse, absent_in_else)
        self.env = join_envs(after_body, self.env, join)

    def _group_key_tested_absent(self, test: ast.expr) -> str | None:
        """"k" of `"k" not in group`, `group` a param group."""
        if isinstance(test, ast.Compare) and len(test.ops) == 1 \
                and isinstance(test.ops[0], ast.NotIn) and isinstance(test.left, ast.Constant) \
                and isinstance(test.left.value, str) \
                and isinstance(test.comparators[0], ast.Name) \
                and self.env.get(test.comparators[0].id) is PARAM_GROUP:
            return test.left.value
        return None

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
            items = value.items if isinstance(value, ValueTuple) else None
            # `grad, lr, b1, b2, state = p.grad, group["lr"], *group["betas"],
            # self.state[p]`: each name the element at its place.
            places = unpacked_places(target, value_node) if items is not None else None
            for i, element in enumerate(target.elts):
                if isinstance(element, ast.Starred):
                    self.assign(element.value, None, value_node, statement)
                    continue
                if places is not None:
                    item = items[places[i]] if places[i] is not None else None
                else:
                    item = items[i] if items is not None and i < len(items) else None
                self.assign(element, item, value_node, statement)
        elif isinstance(target, ast.Subscript):
            container = self.eval(target.value)
            key = self.eval(target.slice)
            if isinstance(container, ParamState):
                self.state_write(container, key, target.slice, value, value_node, target, "assign")
            elif container is PARAM_GROUP:
                if isinstance(target.slice, ast.Constant) \
                        and target.slice.value in self.absent_group_keys \
                        and self.call.role is Role.STEP and isinstance(value_node, ast.Call) \
                        and (self.qualified(value_node.func) in TENSOR_FACTORIES
                             or isinstance(value_node.func, ast.Attribute)
                             and value_node.func.attr in NEW_TENSOR_METHODS):
                    self.facts.append(GroupTensorCreated(self.function, target,
                                                         target.slice.value, self._where()))
            elif container is STATE_MAP:
                if isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str):
                    self.shared_state_write(target, target.slice.value, value_node)
                else:
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
        if isinstance(iterable, StateItems):
            owner, view = iterable.owner, iterable.view
            if owner is STATE_MAP:
                item = {"items": ValueTuple((None, ParamState("item"))),
                        "values": ParamState("item"), "keys": None}[view]
            else:
                key = IteratedKey(owner)
                tensor = StateTensor(owner, None, 0)
                item = {"items": ValueTuple((key, tensor)), "values": tensor, "keys": key}[view]
            self.assign(target, item, target, target)
        elif isinstance(iterable, ParamState):
            self.assign(target, IteratedKey(iterable), target, target)
        elif iterable is PARAM_GROUPS:
            self.assign(target, PARAM_GROUP, target, target)
        elif isinstance(iterable, ValueTuple) and iterable.items and all(
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
                self.optimizer_class.open_keys = True
            else:
                self.optimizer_class.created_keys.update(keys)
            if isinstance(value, EagerConstant):
                self.facts.append(EagerStateFill(
                    self.function, value.call, tuple(keys) if keys is not None else None,
                    value.function))
            return
        guarded = self.guard_depth > 0
        existing = self.optimizer_class.created_keys
        for k in keys or [None]:
            # `state["m"] = beta * state["m"] + g`: the entry is read first, so it exists;
            # the write binds it to a new tensor (a rebinding, however it was created).
            read = value.source if isinstance(value, Derived) else value
            rereads = isinstance(read, StateTensor) and read.owner is owner \
                and read.key == k and (id(owner), k) in self.indexed  # (not `.get(k, x)`)
            if rereads and _casts_itself(value_node):
                # `state["m"] = state["m"].to(grad)`: the same object where the entry
                # already has that dtype and device (as one made like the parameter).
                continue
            if guarded and not iterated and not rereads:
                creation = True
            elif k is None or rereads:
                creation = False
            else:
                creation = k not in existing and not self.optimizer_class.open_keys
            if how == "setdefault" and not creation:
                continue  # setdefault of an existing key changes nothing
            entry = (id(owner), k)
            same_object = (isinstance(value, StateTensor) and value.owner is owner
                           and value.key == k and k is not None
                           and value.version == self.versions.get(entry, 0))
            if creation:
                self.facts.append(StateCreated(self.function, node, k, guarded, self._where()))
            elif role is Role.STEP and (iterated or rereads or (k is not None and k in existing)) \
                    and not same_object:
                self.facts.append(StateRebound(self.function, node, k, key_node, self._where()))
            self.written[entry] = self.statements_seen
            if not same_object:
                self.versions[entry] = self.versions.get(entry, 0) + 1

    def shared_state_write(self, node: ast.AST, key: str, value_node: ast.AST) -> None:
        """`self.state["k"] = ...`: state of the whole optimizer under a key of its own
        (MADGRAD's step count), not a parameter's dict. Outside preinitialize a tensor
        made there is state created late; so is anything bound there while step runs
        (the state is fixed then: strict mode raises CS101), while a Python number kept
        there by another method (`self.state["epochs"] = 0` in `__init__`) is no state
        tensor."""
        self.wrote_state = True
        role = self.call.role
        if role is Role.RESTORE or role is Role.PREINIT \
                or role is Role.OTHER and _python_number(value_node):
            return
        self.facts.append(StateCreated(self.function, node, key, self.guard_depth > 0,
                                       self._where()))

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
                self.optimizer_class.open_keys = True
            return
        self.facts.append(StateDictRebound(self.function, node, self._where()))

    # ---- expressions -----------------------------------------------------------------

    def eval_Name(self, node: ast.Name) -> Value:
        return self.env.get(node.id)

    def eval_Constant(self, node: ast.Constant) -> Value:
        return Strings(frozenset([node.value])) if isinstance(node.value, str) else None

    def eval_Attribute(self, node: ast.Attribute) -> Value:
        base = self.eval(node.value)
        if node.attr in ("state", "param_groups") and (
                base is OPTIMIZER or base is None and isinstance(node.value, ast.Attribute)
                and self.eval(node.value.value) is OPTIMIZER):
            # The optimizer's own, or those of an optimizer it keeps (`self.
            # _base_optimizer.state[p]`: timm's Lookahead keeps its slow weights in the
            # state of the optimizer it wraps, which only preinitialize may extend too).
            return STATE_MAP if node.attr == "state" else PARAM_GROUPS
        if base is OPTIMIZER and node.attr in self.optimizer_class.private_maps:
            return STATE_MAP  # a dict of per-parameter state the class keeps itself
        if isinstance(base, StateTensor) and node.attr == "data":
            return base
        if isinstance(base, (StateTensor, Derived)) and node.attr in ("T", "mT", "real"):
            return derive(base)
        return None

    def eval_Subscript(self, node: ast.Subscript) -> Value:
        return self.subscript(node)

    def eval_Call(self, node: ast.Call) -> Value:
        return self.call_value(node)

    def eval_BinOp(self, node: ast.BinOp) -> Value:
        left, right = self.eval(node.left), self.eval(node.right)
        return derive(left) or derive(right)

    def eval_UnaryOp(self, node: ast.UnaryOp) -> Value:
        return derive(self.eval(node.operand))

    def eval_IfExp(self, node: ast.IfExp) -> Value:
        self.eval(node.test)
        return join(self.eval(node.body), self.eval(node.orelse))

    def eval_Tuple(self, node: ast.Tuple | ast.List) -> Value:
        return ValueTuple(tuple(self.eval(e) for e in node.elts))

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
        if base is PARAM_GROUPS:
            return PARAM_GROUP
        if isinstance(base, ParamState):
            keys = self._keys(index, base)
            key = keys[0] if keys and len(keys) == 1 else None
            if key is not None and isinstance(node.ctx, ast.Load):
                self.indexed.add((id(base), key))  # (read where it exists: `.get` may not)
            return StateTensor(base, key, self.versions.get((id(base), key), 0))
        if isinstance(base, ValueTuple) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, int) and -len(base.items) <= node.slice.value \
                < len(base.items):
            return base.items[node.slice.value]
        if isinstance(base, (StateTensor, Derived)):
            return derive(base)
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
                    return StateItems(STATE_MAP, method)
                if method == "get" and node.args:
                    return self.param_state_for(node.args[0])
                if method == "setdefault" and node.args:
                    # Entries exist for every parameter preinitialize gave state to.
                    self.wrote_state = True
                    if not self.optimizer_class.created_keys \
                            and not self.optimizer_class.open_keys:
                        self.new_state_entry(node, args[1] if len(args) > 1 else None, node)
                    return self.param_state_for(node.args[0])
                return None
            if isinstance(receiver, (StateTensor, Derived)):
                if method.endswith("_") and not method.startswith("_"):
                    if isinstance(receiver, StateTensor):
                        self.updated.add((id(receiver.owner), receiver.key))
                    return receiver  # in-place ops return the same tensor
                return derive(receiver)
            if isinstance(receiver, EagerConstant) and method in ("to", "float", "half"):
                return receiver
            if receiver is OPTIMIZER:
                self.enqueue_method(self.optimizer_class.ref, method, node, args, keywords,
                                    bound=True)
                self.escape(args, keywords)
                return None
            if is_super_call(func.value):
                self.enqueue_super(method, node, args, keywords)
                self.escape(args, keywords)
                return None

        if isinstance(func, ast.Name) and func.id in ("list", "tuple", "sorted") and \
                len(args) == 1 and isinstance(args[0], StateItems):
            return args[0]  # `list(state.items())` iterates the same entries
        qualified = self.qualified(func)
        if qualified is not None and (qualified == "torch" or qualified.startswith("torch.")):
            if qualified in EAGER_CREATION_OPS:
                return EagerConstant(node, qualified)
            if qualified.endswith("_"):
                self.escape(args, keywords)
            sources = [derive(a) for a in args if isinstance(a, (StateTensor, Derived))]
            return None if out is not None else (sources[0] if sources else None)
        self.enqueue_function(func, node, args, keywords)
        self.escape(args, keywords)
        return None

    def param_state_method(self, owner: ParamState, method: str, node: ast.Call,
                           args: list[Value], keywords: dict) -> Value:
        if method in ("items", "values", "keys"):
            return StateItems(owner, method)
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
        elif isinstance(value, ValueTuple):
            for item in value.items:
                self.escape_derived(item)

    def escape(self, args: list[Value], keywords: dict) -> None:
        """A state tensor handed to other code may be updated in place there."""
        for value in (*args, *keywords.values()):
            if isinstance(value, StateTensor):
                self.updated.add((id(value.owner), value.key))
            elif isinstance(value, ValueTuple):
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
        self.calls.append(FunctionCall(function, self.call.role, bindings,
                                       self.guard_depth > 0, via))

    def enqueue_method(self, ref: ClassRef, name: str, node: ast.Call, args, keywords,
                       bound: bool, after: ClassRef | None = None) -> None:
        if name == "preinitialize":
            return  # state made there is preinitialize's, whoever calls it
        found = self.project.find_method(ref, name, self.analysis.version, after=after)
        if ref is self.optimizer_class.ref:
            self.resolutions.append((name, after.name if after else None,
                                     id(found.function if found else None)))
        if found is None or found.function is None or self.project.is_machinery(found.owner):
            return
        self._push(found.function,
                   self._bindings(found.function, OPTIMIZER, args, keywords, bound))

    def enqueue_super(self, name: str, node: ast.Call, args, keywords) -> None:
        if self.function.class_name is None:
            return
        owner = next((entry for entry in self.project.mro(self.optimizer_class.ref)
                      if entry.info is not None
                      and entry.info.qualname == self.function.class_name), None)
        if owner is not None:
            self.enqueue_method(self.optimizer_class.ref, name, node, args, keywords,
                                bound=True, after=owner)

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

    # ---- where a fact was found ----------------------------------------------------

    def _where(self) -> str:
        cls = self.optimizer_class.name
        if self.call.role is Role.STEP:
            return f"{cls}.{self.call.via}" if self.function.name != "step" else f"{cls}.step()"
        return f"{cls}.{self.call.via}"


def _python_number(node: ast.AST) -> bool:
    """A number computed on the host from constants and the object's attributes (`0`,
    `self.warmup_epoch + 1`)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) or node.value is None  # (bool is an int)
    if isinstance(node, ast.UnaryOp):
        return _python_number(node.operand)
    if isinstance(node, ast.BinOp):
        return _python_number(node.left) and _python_number(node.right)
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
        and node.value.id == "self"


# Methods that give a tensor of another dtype or device, or the tensor itself where it
# has those already.
_CASTS = frozenset({"to", "type_as", "type", "float", "half", "bfloat16", "cpu", "cuda"})


def _casts_itself(value_node: ast.AST | None) -> bool:
    """`state["m"].to(grad)`, `state["m"].type_as(p)`: a cast of the entry written."""
    return isinstance(value_node, ast.Call) and isinstance(value_node.func, ast.Attribute) \
        and value_node.func.attr in _CASTS and isinstance(value_node.func.value, ast.Subscript)

