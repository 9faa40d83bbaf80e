"""The walk over one traced function: statements in order, each expression to its value."""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import TYPE_CHECKING

from cslint.semantic.module_index import FunctionInfo, decorator_name, dotted_name
from cslint.semantic.project import ClassRef
from cslint.semantic.tensor_values.calls import CallEvaluator
from cslint.semantic.tensor_values.facts import (
    Condition, HostRead, LoopBound, MaskSelection, ScalarArgument, TruthTest,
    ValueDependentShape,
)
from cslint.semantic.tensor_values.values import (
    DEVICE, SELF_KINDS, UNSEEN_MODULE_CLASS, ChainStep, Container, Function, Marker, Sequence,
    Tensor, Value, collection_operation, combine, element_of, entry_of, is_collection,
    is_device, join, merged_into, sliced, source_step, stored_into,
)
from cslint.semantic.torch_api import DEVICE_ATTRIBUTES, DEVICE_TYPES, METADATA_ATTRIBUTES, \
    NOT_TRACING_UNDER_CSTORCH, TENSOR_TYPE_NAMES
from cslint.semantic.walker import StatementWalker, join_envs, unpacked_places

if TYPE_CHECKING:
    from cslint.semantic.tensor_values.analysis import TensorValueAnalysis


# Unary operators of arithmetic (`not` takes a truth value).
_SIGNS = frozenset({ast.USub, ast.UAdd, ast.Invert})
# The source of a param-group tensor the optimizer makes where it is set up.
GROUP_TENSOR = "`{}` is a param-group tensor made where the optimizer is set up"
GLOBAL_STEP = "`{}` is cstorch's global step (enable_global_step=True), a tensor"


class FunctionWalker(StatementWalker):
    """One function under one set of argument values."""

    def __init__(self, analysis: TensorValueAnalysis, function: FunctionInfo,
                 ref: ClassRef | None, bindings: tuple, closure: dict | None,
                 literals: tuple = ()):
        self.analysis = analysis
        # Parameters the call gives a literal (`output_type="np"`, or its default), which
        # the function tests and never binds again: tests of them decide their branch.
        self.literals: dict[str, object] = dict(literals)
        # `x = a if flag else b` with `flag` a name: x's value on each side of `flag`, by
        # x (read again under `if flag:`, roi_align's `roi_bin_grid_h`).
        self.conditioned: dict[str, tuple[str, Value, Value]] = {}
        self._last_choice: tuple | None = None  # the last conditional expression's sides
        self.project = analysis.project
        self.function = function
        self.module = function.module
        self.ref = ref
        self.env: dict[str, Value] = dict(closure or {})
        names = function.parameter_names
        # (Parameters declared `int`, `float`, ... were given no tensor by
        # `TensorValueAnalysis.summary`.)
        for name, value in zip(names, bindings):
            self.env[name] = value
        # Keyword-only parameters follow the positional ones in `bindings`.
        kwonly = [a.arg for a in function.node.args.kwonlyargs]
        for name, value in zip(kwonly, (*bindings[len(names):], *([None] * len(kwonly)))):
            self.env[name] = value
        self.condition = Condition.EXPRESSION  # where a truth value taken now is taken
        # The names of param groups the function wrote an entry of (`group_entry`).
        self.written_groups: set[str] = set()
        # What reading each such entry gives where the function did not write it.
        self.entry_defaults: dict[str, Value] = {}
        # The entries (`group_entry`) the `if`s around the statement test are absent.
        self.absent_entries: list[set[str]] = []
        self.returned: Value = None
        # The parameters a list's or dict's method filled (`grads.append(p.grad)`), with
        # every value they held after one: what the caller's container holds after.
        self.filled: dict[str, Value] = {}
        self.in_closed_form = isinstance(bindings[0] if bindings else None, Marker) and \
            bindings[0].kind == "scheduler_self"

    def run(self) -> None:
        self.block(self.function.node.body)

    def note_filled(self, name: str, container: Value) -> None:
        """`name` holds `container` after one of its methods added entries."""
        if name in self.function.parameter_set:
            self.filled[name] = join(self.filled.get(name), container)

    def filled_arguments(self) -> tuple:
        """(position in the bindings, value) of each parameter a container method filled
        and the function never binds again: the caller's list or dict is the one
        filled."""
        if not self.filled:
            return ()
        rebound = self.function.bound_names
        return tuple((index, self.filled[name])
                     for index, name in enumerate(self.function.binding_names)
                     if name in self.filled and name not in rebound)

    # ---- facts ---------------------------------------------------------------------

    def truth_test(self, node: ast.AST, subject: ast.AST, value: Tensor) -> None:
        self.analysis.record(TruthTest(self.function, node, subject, value.why,
                                       self.condition))

    def host_read(self, node: ast.AST, subject: ast.AST, value: Tensor, reader: str,
                  listed_by: str | None = None) -> None:
        self.analysis.record(HostRead(self.function, node, subject, value.why, reader,
                                      listed_by))

    def scalar_argument(self, node: ast.AST, value: Tensor, position: str,
                        method: str | None = None, keyword: str | None = None,
                        foreach: str | None = None, filled: str | None = None,
                        listed: str | None = None, index: int | None = None) -> None:
        self.analysis.record(ScalarArgument(self.function, node, value.why, value.scheduled,
                                            position, method, keyword, foreach, filled,
                                            listed, index))

    def data_dependent_shape(self, node: ast.AST, op: str) -> None:
        self.analysis.record(ValueDependentShape(self.function, node, op))

    # ---- statements ----------------------------------------------------------------

    def statement_Assign(self, node: ast.Assign) -> None:
        if self._unpacked_by_position(node):
            return
        value = self.eval(node.value)
        for target in node.targets:
            self.assign(target, value, node.value)
        choice = self._last_choice
        if choice is not None and choice[0] is node.value and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value.test, ast.Name) \
                and node.value.test.id != node.targets[0].id:
            self.conditioned[node.targets[0].id] = (node.value.test.id, choice[1], choice[2])
        elif self.conditioned and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self._condition_derived(node.targets[0].id, node.value)

    def _unpacked_by_position(self, node: ast.Assign) -> bool:
        """`grad, lr, beta1, beta2, state = p.grad, group["lr"], *group["betas"],
        self.state[p]` (lion-pytorch): each name gets the element at its place
        (`unpacked_places`), those the starred one covers its elements. (A tuple with
        `*xs` is otherwise a list of every element.)"""
        places = unpacked_places(node.targets[0], node.value) if len(node.targets) == 1 \
            else None
        if places is None:
            return False
        elements = node.value.elts
        values = [self.eval(e) for e in elements]
        star = next(i for i, e in enumerate(elements) if isinstance(e, ast.Starred))
        for element, place in zip(node.targets[0].elts, places):
            if place is None:
                self.assign(element, element_of(values[star]), elements[star])
            else:
                self.assign(element, values[place], elements[place])
        return True

    def _condition_derived(self, name: str, expression: ast.expr) -> None:
        """`b = 1 - beta ** step` after `step = step_t if capturable else
        _get_value(step_t)`: `b` holds on each side of `capturable` what `step`'s side
        gives (torch's RAdam tests `rho_t > 5.0` only where `step` is a number). Of
        arithmetic alone, which records nothing, evaluated again with each side."""
        flags = set()
        for part in ast.walk(expression):
            kind = part.__class__
            if kind is ast.Name:
                chosen = self.conditioned.get(part.id)
                if chosen is not None:
                    flags.add(chosen[0])
            elif kind is ast.Constant:
                if not isinstance(part.value, (int, float, complex)):
                    return
            elif kind not in (ast.BinOp, ast.UnaryOp) and not isinstance(
                    part, (ast.operator, ast.expr_context)) and kind not in _SIGNS:
                return
        if len(flags) != 1:
            return
        flag = flags.pop()
        if flag == name:
            return
        before = self.env
        sides = []
        for position in (1, 2):
            self.env = {**before, **{chosen: sides_of[position]
                                     for chosen, sides_of in self.conditioned.items()
                                     if sides_of[0] == flag}}
            self.assign(ast.Name(name, ast.Store()), self.eval(expression), expression)
            sides.append(self.env[name])
        self.env = before
        self.conditioned[name] = (flag, sides[0], sides[1])

    def statement_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.assign(node.target, self.eval(node.value), node.value)

    def statement_AugAssign(self, node: ast.AugAssign) -> None:
        value = self.eval(node.value)
        current = self.eval(node.target)
        if is_collection(current) and value.__class__ is not Tensor:  # `xs += ys`
            if isinstance(node.target, ast.Name):
                self.env[node.target.id] = collection_operation(node.op, current, value)
            return
        combined = combine([current, value], ChainStep("{} " + _op(node.op) + "= {}",
                                                       node.target, node.value))
        if isinstance(node.target, ast.Name):
            self.env[node.target.id] = join(current, combined) if combined else current
            if self.conditioned:
                self._forget_conditions(node.target.id)

    def statement_If(self, node: ast.If) -> None:
        decided = self._decided(node.test)
        if decided is not None:
            # `if output_type == "np":` given "np": only that branch runs, and where it
            # returns, nothing after it in the block does.
            taken = node.body if decided else node.orelse
            self.block(taken)
            self.block_ended = _always_leaves(taken)
            return
        self.test(node.test, Condition.IF)
        not_in_body, not_in_else = _not_tensors(node.test)
        dead = self._dead_branch(not_in_body, not_in_else)
        if dead is not None:
            # `if isinstance(t, torch.Tensor):` of a device tensor: only the branch a
            # tensor takes runs (what the other does to values computed from `t` is of
            # Python numbers), and where it returns, nothing after it in the block does
            # (torchvision's `if isinstance(img, torch.Tensor): return ...` before the PIL
            # code).
            taken = node.orelse if dead == "body" else node.body
            self._narrowed_block(taken, not_in_else if dead == "body" else not_in_body)
            self.block_ended = _always_leaves(taken)
            return
        sides = self._conditioned_sides(node.test)
        before = dict(self.env)
        self.env.update(sides[0])
        absent = _entries_tested_absent(node.test)
        if absent:
            self.absent_entries.append(absent)
        self._narrowed_block(node.body, not_in_body)
        if absent:
            self.absent_entries.pop()
        after_body = self.env
        self.env = before
        self.env.update(sides[1])
        self._narrowed_block(node.orelse, not_in_else)
        self.env = self._joined(after_body, self.env)

    def statement_Try(self, node: ast.Try) -> None:
        """The body (then the `else`), or a handler, which may start anywhere in the body:
        after it, a name holds what either left it (`try: ckp1 = weight / weight_sum` /
        `except ZeroDivisionError: ckp1 = 0`: a tensor, or 0). A handler that always
        raises or returns leaves nothing."""
        before = dict(self.env)
        self.block(node.body)
        self.block(node.orelse)
        after_body = self.env
        reached = None if _always_leaves(node.body) or _always_leaves(node.orelse) \
            else after_body
        for handler in node.handlers:
            self.env = self._joined(before, after_body)
            self.block(handler.body)
            if not _always_leaves(handler.body):
                reached = self.env if reached is None else self._joined(reached, self.env)
        self.env = reached if reached is not None else after_body
        self.block(node.finalbody)

    statement_TryStar = statement_Try

    def _narrowed_block(self, body: list[ast.stmt], not_tensors: set[str]) -> None:
        """The block, where the `if` test says these names hold no tensor
        (`if not isinstance(alpha, torch.Tensor):`); each regains its value after the
        block unless the block binds it."""
        narrowed = {name: self.env[name] for name in not_tensors if name in self.env}
        for name in narrowed:
            self.env[name] = None
        self.block(body)
        if narrowed:
            bound = _bound_names(body)
            for name, value in narrowed.items():
                if name not in bound:
                    self.env[name] = value

    def _forget_in_loop(self, body: list[ast.stmt]) -> None:
        """A loop's body walked once stands for every turn: what it binds again does not
        hold what a flag chose before it."""
        if self.conditioned:
            for name in _bound_names(body):
                self._forget_conditions(name)

    def statement_While(self, node: ast.While) -> None:
        self._forget_in_loop(node.body)
        self.test(node.test, Condition.WHILE)
        before = dict(self.env)
        self.block(node.body)
        self.env = self._joined(before, self.env)
        self.test(node.test, Condition.WHILE)  # again, with what the body bound
        self.block(node.orelse)

    def statement_For(self, node: ast.For | ast.AsyncFor) -> None:
        self._forget_in_loop(node.body)
        iterable = self.loop_iterable(node.iter)
        self.assign(node.target, element_of(iterable), node.iter)
        before = dict(self.env)
        self.block(node.body)
        self.env = self._joined(before, self.env)
        self.block(node.orelse)

    statement_AsyncFor = statement_For

    def statement_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            value = self.eval(item.context_expr)
            if item.optional_vars is not None:
                self.assign(item.optional_vars, value, item.context_expr)
        self.block(node.body)

    statement_AsyncWith = statement_With

    def statement_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            self.returned = join(self.returned, self.eval(node.value))

    def statement_Assert(self, node: ast.Assert) -> None:
        # The message is built only where the assertion fails: the step stops anyway.
        self.test(node.test, Condition.EXPRESSION)

    def statement_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        info = FunctionInfo(node.name, f"{self.function.qualname}.<locals>.{node.name}", node,
                            self.module, None, tuple(decorator_name(d) for d in
                                                     node.decorator_list), False, "function",
                            node.lineno, node.col_offset, node.end_lineno)
        self.env[node.name] = Function(((info, self.ref, dict(self.env), False),))

    statement_AsyncFunctionDef = statement_FunctionDef

    def statement_Raise(self, node: ast.Raise) -> None:
        """The exception is built only on the way out of a step that fails anyway: what
        its message reads (`f"{x} must be ..."`) is not reported."""

    def loop_iterable(self, node: ast.expr) -> Value:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "range":
            for arg in node.args:
                value = self.eval(arg)
                if is_device(value):
                    self.analysis.record(LoopBound(self.function, arg, value.why))
            return None
        return self.eval(node)

    def assign(self, target: ast.expr, value: Value, value_node: ast.expr) -> None:
        if isinstance(target, ast.Name):
            if target.id in self.written_groups:
                self._forget_entries(target.id)
            if isinstance(value, Tensor):
                value = Tensor(value.device, (ChainStep("{} = {}", target.id, value_node),
                                              *value.why)[:4], value.scheduled, value.boolean,
                               value.grouped)
            self.env[target.id] = value
            if self.conditioned:
                self._forget_conditions(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            starred = next((i for i, e in enumerate(target.elts)
                            if isinstance(e, ast.Starred)), None)
            for i, element in enumerate(target.elts):
                if isinstance(element, ast.Starred):
                    item = Container(element_of(value)) if value is not None else None
                    self.assign(element.value, item, value_node)
                    continue
                if isinstance(value, Sequence) and starred is None and i < len(value.items):
                    item = value.items[i]
                elif isinstance(value, Sequence) and starred is not None:
                    index = i if i < starred else i - len(target.elts)
                    item = value.items[index] if -len(value.items) <= index < len(value.items) \
                        else None
                else:
                    item = element_of(value)
                # `a, b = x, y`: the chain names `y`, not the whole tuple.
                element_node = value_node.elts[i] if isinstance(value_node, ast.Tuple) and \
                    starred is None and len(value_node.elts) == len(target.elts) else value_node
                self.assign(element, item, element_node)
        elif isinstance(target, ast.Subscript):
            container = self.eval(target.value)
            key = self.eval(target.slice)
            if container.__class__ is Marker and container.kind == "group" \
                    and isinstance(target.value, ast.Name) \
                    and isinstance(target.slice, ast.Constant) \
                    and isinstance(target.slice.value, str):
                # `group["norm"] = p.norm()` in the step: read back as written, until
                # `group` is bound again (po's ASGD keeps its norms there).
                entry = group_entry(target.value.id, target.slice.value)
                if any(entry in tested for tested in self.absent_entries) and \
                        self.analysis.group_key_made_at_setup(self.ref, target.slice.value,
                                                              self.function):
                    # `if "initial_lr" not in group: group["initial_lr"] = lr` where the
                    # class's setup makes the entry (composer's DecoupledAdamW): the
                    # step never writes it.
                    return
                if entry not in self.env:
                    # What a path that does not write it reads: the class's entry.
                    self.entry_defaults.setdefault(entry, self.eval(target))
                self.written_groups.add(target.value.id)
                self.env[entry] = \
                    value if value.__class__ is not Tensor else Tensor(
                        value.device, (ChainStep("{} = {}", target, value_node),
                                       *value.why)[:4], value.scheduled, value.boolean,
                        value.grouped)
                return
            # `d[k] = v` into a list or dict we know: it holds `v` too. What an unknown
            # value holds stays unknown.
            if isinstance(target.value, ast.Name) and isinstance(container, Container):
                if isinstance(target.slice, ast.Slice):  # `xs[i:j] = ys`: the elements of ys
                    value = element_of(value)
                self.env[target.value.id] = stored_into(container, key, value)
            elif container.__class__ is Tensor and is_device(value):
                # `norms = torch.zeros(n)` then `norms[i] = p.grad.norm()`
                self.host_tensor_takes(target.value, container.changed(device=True, why=(
                    ChainStep("a device value stored into it by `{} = {}`", target,
                              value_node), *value.why)[:4]))
        elif isinstance(target, ast.Attribute):
            self.eval(target.value)
        elif isinstance(target, ast.Starred):
            self.assign(target.value, value, value_node)

    def host_tensor_takes(self, target: ast.expr, device_value: Tensor) -> None:
        """`target`, a name bound to a tensor made on the host, is changed in place with a
        device value (`.add_()`, `out=`, an item stored): it holds `device_value` from
        then on, so a test of it reads the device."""
        if target.__class__ is ast.Name:
            held = self.env.get(target.id)
            if held.__class__ is Tensor and not held.device:
                self.env[target.id] = device_value

    # ---- truth tests -------------------------------------------------------------------

    def test(self, node: ast.expr, condition: Condition) -> None:
        saved = self.condition
        self.condition = condition
        try:
            self.truth(node)
        finally:
            self.condition = saved

    def truth(self, node: ast.expr) -> Value:
        """`node` used as a condition: every operand of and/or/not is tested."""
        if isinstance(node, ast.BoolOp):
            return self._operands(node, lambda operand, last: self.truth(operand))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self.truth(node.operand)
            return None
        value = self.eval(node)
        if is_device(value):
            self.truth_test(node, node, value)
        return value

    # ---- expressions ----------------------------------------------------------------------

    def eval_Name(self, node: ast.Name) -> Value:
        if node.id in self.env:
            return self.env[node.id]
        target = self.project.resolve_in_module(self.module, node.id)
        if isinstance(target, FunctionInfo):
            return Function(((target, None, None, False),))
        return None

    def eval_Constant(self, node: ast.Constant) -> Value:
        value = node.value
        if value.__class__ is str and value.partition(":")[0] in DEVICE_TYPES:
            return DEVICE  # "cuda", "cuda:0", "lazy"
        return None

    def eval_Attribute(self, node: ast.Attribute) -> Value:
        base = self.eval(node.value)
        attr = node.attr
        if attr in DEVICE_ATTRIBUTES:
            # `p.device`, `self.device`, `backend.torch_device`: a device, unless that of
            # a host constant (or of a list, a function, ...).
            return DEVICE if base is None or is_device(base) or (
                isinstance(base, Marker) and base.kind != "device") else None
        if isinstance(base, Tensor):
            # A method read without a call, or a name torch.Tensor lacks (a subclass's
            # `edge_index.num_rows`, an object taken for a tensor): not a tensor we know.
            if attr in METADATA_ATTRIBUTES or attr not in self.analysis.tensor_attributes:
                return None
            return Tensor(base.device, (source_step(node), *base.why)[:4], base.scheduled,
                          base.boolean and attr in ("data", "T", "mT"), base.grouped)
        if isinstance(base, Marker):
            return self.marker_attribute(base, attr, node)
        if isinstance(base, Container) and attr in ("data",):
            return base
        return None

    def marker_attribute(self, base: Marker, attr: str, node: ast.Attribute) -> Value:
        kind = base.kind
        if kind == "optimizer_self":
            if attr == "param_groups":
                return Marker("param_groups")
            if attr == "state":
                return Marker("state_map")
        if kind == "scheduler_self":
            if attr == "last_epoch" and self.in_closed_form:
                return Tensor(True, ("`self.last_epoch` is the step tensor in a closed form",))
            if attr == "optimizer":
                return Marker("optimizer_self")
        if kind in SELF_KINDS and base.ref is not None:
            self.analysis.note_class_use(True)
            value = self.analysis.attributes_of(base.ref).get(attr)
            if value is not None:
                return value
            if kind == "module_self" and attr == "training":
                return None
            # A method read without a call (`for view in [self._channel_view, ...]`,
            # `helper(x, self._norm)`): the bound method, called later. (A property's
            # value is not known.)
            found = self.project.find_method(base.ref, attr)
            if found is not None and found.function is not None and \
                    found.function.kind != "property" and \
                    not self.project.is_machinery(found.owner):
                return Function(((found.function, base.ref, None, True),))
        if kind == "module":
            ref = base.ref
            if ref is None and attr in ("weight", "bias"):
                # A torch.nn layer's parameters (`self.embedding.weight`).
                return Tensor(True, (ChainStep("`{}` is a parameter of a torch.nn layer",
                                               node),))
            if isinstance(ref, ClassRef) and ref is not UNSEEN_MODULE_CLASS:
                # A project submodule's attribute, as its own methods see it.
                value = self.analysis.attributes_of(ref).get(attr)
                if isinstance(value, Tensor):
                    return value
        return None

    def eval_Subscript(self, node: ast.Subscript) -> Value:
        base = self.eval(node.value)
        index_node = node.slice
        if isinstance(index_node, ast.Slice):
            for bound in (index_node.lower, index_node.upper, index_node.step):
                value = self.eval(bound)
                if is_device(value):
                    self.scalar_argument(bound, value, "a slice bound")
            index = None
        else:
            index = self.eval(index_node)
        if isinstance(base, Marker):
            key = index_node.value if isinstance(index_node, ast.Constant) else None
            if base.kind == "group":
                if self.written_groups and isinstance(key, str) \
                        and isinstance(node.value, ast.Name):
                    written = group_entry(node.value.id, key)
                    if written in self.env:
                        return self.env[written]
                if key == "params":
                    return Marker("params")
                if key in self.analysis.tensor_keys:
                    return Tensor(True, (ChainStep("`{}` is a scheduled hyperparameter (a "
                                                   "tensor on the system)", node),),
                                  scheduled=True)
                # Only a key some class makes a tensor under makes the answer depend on
                # the class.
                if key in self.analysis.group_keys_anywhere:
                    self.analysis.note_class_use(True)
                    if key in self.analysis.group_tensor_keys(self.ref):
                        return Tensor(True, (ChainStep(GROUP_TENSOR, node),), grouped=True)
                return None
            if base.kind == "param_groups":
                return Marker("group")
            if base.kind == "params":
                return Tensor(True, ("a parameter",))
            if base.kind == "state_map":
                # Only a key some class makes a shared state tensor under makes the answer
                # depend on the class.
                if key in self.analysis.shared_keys_anywhere:
                    self.analysis.note_class_use(True)
                    if key in self.analysis.shared_state_keys(self.ref):
                        return Tensor(True, (ChainStep("`{}` is optimizer state", node),))
                return Marker("param_state")
            if base.kind == "param_state":
                if key == "step" and self.analysis.global_step_anywhere:
                    # cstorch's global step (enable_global_step=True): an exact source,
                    # whatever a callee's annotation says (`step: int`).
                    self.analysis.note_class_use(True)
                    if self.analysis.has_global_step(self.ref):
                        return Tensor(True, (ChainStep(GLOBAL_STEP, node),), grouped=True)
                if key in self.analysis.object_keys_anywhere:
                    # An object the optimizer keeps per parameter (a projector): its
                    # methods run in the step with what the step gives them.
                    self.analysis.note_class_use(True)
                    kept = self.analysis.object_state_class(self.ref, key)
                    if kept is not None:
                        return Marker("object_self", kept)
                # Only a key some class stores a Python number under makes the answer
                # depend on the class.
                if key in self.analysis.python_keys_anywhere:
                    self.analysis.note_class_use(True)
                    if key in self.analysis.python_state_keys(self.ref):
                        return None
                return Tensor(True, (ChainStep("`{}` is optimizer state", node),))
            if base.kind == "module_list":
                # `self.layers[:n]` is a list of the same modules, `self.layers[i]` one.
                return base if isinstance(index_node, ast.Slice) else \
                    Marker("module", base.ref)
            return None
        if isinstance(base, Tensor):
            if isinstance(index, Tensor) and index.boolean and base.device:
                self.analysis.record(MaskSelection(self.function, node, index_node))
            return Tensor(base.device or is_device(index),
                          (source_step(node), *base.why)[:4], scheduled=base.scheduled,
                          grouped=base.grouped)
        if index_node.__class__ is ast.Slice and isinstance(base, (Container, Sequence)):
            return sliced(base, index_node)
        if isinstance(base, Sequence):
            if isinstance(index_node, ast.Constant) and isinstance(index_node.value, int) \
                    and -len(base.items) <= index_node.value < len(base.items):
                return base.items[index_node.value]
            if is_device(index):
                self.host_read(index_node, node.slice, index, "indexing a Python sequence")
            return element_of(base)
        if isinstance(base, Container):
            if is_device(index) and not base.mapping:
                self.host_read(index_node, node.slice, index, "indexing a Python sequence")
            return entry_of(base, index_node)
        return None

    def eval_Call(self, node: ast.Call) -> Value:
        return CallEvaluator(self, node).evaluate()

    def eval_BinOp(self, node: ast.BinOp) -> Value:
        left, right = self.eval(node.left), self.eval(node.right)
        if isinstance(node.op, ast.Mod) and isinstance(node.left, (ast.Constant, ast.JoinedStr)) \
                and isinstance(getattr(node.left, "value", None), str):
            for value, operand in self._format_operands(node.right, right):
                if is_device(value):
                    self.host_read(operand, operand, value, "formatting")
            return None
        if is_collection(left) or is_collection(right):
            if left.__class__ is not Tensor and right.__class__ is not Tensor:
                return collection_operation(node.op, left, right)  # `xs + ys`, `xs * n`
            if left.__class__ is Sequence or right.__class__ is Sequence:
                return None
        result = combine([left, right], node)
        if result is not None and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
            both_bool = all(isinstance(v, Tensor) and v.boolean for v in (left, right)
                            if isinstance(v, Tensor))
            result = result.changed(boolean=both_bool)
        return result

    def _format_operands(self, node: ast.expr, value: Value):
        if isinstance(node, ast.Tuple):
            return [(self.eval(e), e) for e in node.elts]
        return [(value, node)]

    def eval_UnaryOp(self, node: ast.UnaryOp) -> Value:
        if isinstance(node.op, ast.Not):
            self.truth(node.operand)
            return None
        value = self.eval(node.operand)
        if isinstance(value, Tensor):
            return value.changed(why=(source_step(node), *value.why)[:4],
                           boolean=value.boolean and isinstance(node.op, ast.Invert))
        return None

    def eval_BoolOp(self, node: ast.BoolOp) -> Value:
        return self._operands(node, lambda operand, last:
                              self.eval(operand) if last else self.truth(operand))

    def _operands(self, node: ast.BoolOp, visit) -> Value:
        """The join of `visit(operand, is_last)` over the operands of `and`/`or`, each
        seen where the ones before it let it run: after `isinstance(x, Tensor) or`, `x`
        holds no tensor (the right operand runs only where the left is false)."""
        result = None
        not_tensors: set[str] = set()
        last = len(node.values) - 1
        for index, operand in enumerate(node.values):
            if not_tensors:
                value = self._narrowed(lambda: visit(operand, index == last), not_tensors)
            else:
                value = visit(operand, index == last)
            result = join(result, value)
            when_true, when_false = _not_tensors(operand)
            not_tensors |= when_true if isinstance(node.op, ast.And) else when_false
        return result

    def eval_Compare(self, node: ast.Compare) -> Value:
        values = [self.eval(node.left)] + [self.eval(c) for c in node.comparators]
        operands = [node.left, *node.comparators]
        if all(_compares_python_values(op, left, right)
               for op, left, right in zip(node.ops, operands, operands[1:])):
            return None
        result = combine(values, node)
        return result.changed(boolean=True) if result is not None else None

    def eval_IfExp(self, node: ast.IfExp) -> Value:
        decided = self._decided(node.test)
        if decided is not None:
            return self.eval(node.body if decided else node.orelse)
        self.truth(node.test)
        not_in_body, not_in_else = _not_tensors(node.test)
        dead = self._dead_branch(not_in_body, not_in_else)
        if dead is not None:  # (as in `statement_If`)
            return self._narrowed_eval(node.orelse, not_in_else) if dead == "body" \
                else self._narrowed_eval(node.body, not_in_body)
        taken = self._narrowed_eval(node.body, not_in_body)
        other = self._narrowed_eval(node.orelse, not_in_else)
        self._last_choice = (node, taken, other)
        return join(taken, other)

    def _conditioned_sides(self, test: ast.expr) -> tuple[dict, dict]:
        """For `if flag:` (or `if not flag:`): the values the names chosen by `flag` hold
        in the body and in the `else` (`x = a if flag else b`: a, then b)."""
        if not self.conditioned:
            return {}, {}
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        name = test.operand if negated else test
        if not isinstance(name, ast.Name):
            return {}, {}
        true_side = {x: side for x, (flag, side, _) in self.conditioned.items()
                     if flag == name.id}
        false_side = {x: side for x, (flag, _, side) in self.conditioned.items()
                      if flag == name.id}
        return (false_side, true_side) if negated else (true_side, false_side)

    def _joined(self, a: dict, b: dict) -> dict:
        """The names after two paths; a param-group entry one path wrote holds, on the
        other, what the class's entry reads (`if relative_step: group["lr"] = lr_t`
        leaves timm's Adafactor the scheduled lr on the other path)."""
        result = join_envs(a, b, join)
        for entry, default in self.entry_defaults.items():
            if (entry in a) != (entry in b):
                result[entry] = join(a[entry] if entry in a else b[entry], default)
        return result

    def _forget_entries(self, name: str) -> None:
        """The param group `name` bound again: the entries written into it are its own."""
        prefix = group_entry(name, "")
        for entry in [entry for entry in self.env if entry.startswith(prefix)]:
            del self.env[entry]

    def _forget_conditions(self, name: str) -> None:
        """`name` bound again: what was chosen by it, or as it, holds no more."""
        for chosen, (flag, _, _) in list(self.conditioned.items()):
            if chosen == name or flag == name:
                del self.conditioned[chosen]

    def _decided(self, test: ast.expr) -> bool | None:
        """The outcome of a test known before the step runs: of a literal parameter alone
        (`mode == "np"`, `mode is None`, `flag`), or of a question about the tracing,
        which on the system is no JIT script or trace, no FX trace and no ONNX export
        (`torch.jit.is_tracing()`: False); with `not`, and `and`/`or` whose operands
        are all known up to the one that decides (an earlier operand's truth is read).
        None for any other test."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self._decided(test.operand)
            return None if inner is None else not inner
        if isinstance(test, ast.BoolOp):
            deciding = isinstance(test.op, ast.Or)  # the outcome that ends the chain
            for operand in test.values:
                outcome = self._decided(operand)
                if outcome is None:
                    return None
                if outcome is deciding:
                    return deciding
            return not deciding
        if isinstance(test, ast.Call) and not test.args and not test.keywords:
            dotted = dotted_name(test.func)
            if dotted is not None and self.project.qualified_name(
                    self.module, dotted) in NOT_TRACING_UNDER_CSTORCH:
                return False
        if not self.literals:
            return None
        return literal_outcome(test, self.literals)

    def _dead_branch(self, not_in_body: set[str], not_in_else: set[str]) -> str | None:
        """"body" or "else": the branch of a test that a device tensor in the
        environment cannot take (`isinstance(t, torch.Tensor)` false, `isinstance(t,
        float)` true); None when both may run."""
        if any(is_device(self.env.get(name)) for name in not_in_else):
            return "else"
        if any(is_device(self.env.get(name)) for name in not_in_body):
            return "body"
        return None

    def _narrowed_eval(self, node: ast.expr, not_tensors: set[str]) -> Value:
        """The expression's value where these names hold no tensor (as `_narrowed_block`;
        a name the expression binds with `:=` keeps what it bound)."""
        return self._narrowed(lambda: self.eval(node), not_tensors)

    def _narrowed(self, evaluate, not_tensors: set[str]) -> Value:
        """`evaluate()` where these names hold no tensor (see `_narrowed_eval`)."""
        narrowed = {name: self.env[name] for name in not_tensors if name in self.env}
        for name in narrowed:
            self.env[name] = None
        try:
            return evaluate()
        finally:
            for name, value in narrowed.items():
                if self.env.get(name) is None:
                    self.env[name] = value

    def eval_Tuple(self, node: ast.Tuple) -> Value:
        values = tuple(self.eval(e) for e in node.elts)
        if any(e.__class__ is ast.Starred for e in node.elts):
            return self._unpacked(node.elts, values)  # `(*xs, y)`: positions unknown
        return Sequence(values)

    def eval_List(self, node: ast.List) -> Value:
        return self._unpacked(node.elts, [self.eval(e) for e in node.elts])

    def _unpacked(self, elements: list[ast.expr], values) -> Container:
        """A list of these elements, each `*xs` giving the elements of `xs`."""
        element = None
        for node, value in zip(elements, values):
            element = join(element, element_of(value) if node.__class__ is ast.Starred
                           else value)
        return Container(element)

    def eval_Set(self, node: ast.Set) -> Value:
        for element in node.elts:
            self.eval(element)
        return None

    def eval_Dict(self, node: ast.Dict) -> Value:
        result = Container(None, mapping=True)
        copies_group = False
        written: dict[str, Value] = {}
        for key_node, value_node in zip(node.keys, node.values):
            if key_node is None:  # `{**other}`
                spread = self.eval(value_node)
                copies_group = copies_group or (
                    isinstance(spread, Marker) and spread.kind == "group")
                result = merged_into(result, spread)
            else:
                key = self.eval(key_node)
                value = self.eval(value_node)
                result = stored_into(result, key, value)
                if isinstance(key_node, ast.Constant) and isinstance(key_node.value, str):
                    written[key_node.value] = value
        # `{**group, "params": owned}` is a param group with some entries replaced: its
        # hyperparameters keep their own values, not the join of every entry's.
        if copies_group:
            return Marker("group")
        # An entry written under a string key is what it reads back (a `**spread`'s
        # keys are not known: they are not taken to overwrite one written).
        return replace(result, keyed=tuple(written.items())) if written else result

    def eval_Starred(self, node: ast.Starred) -> Value:
        return self.eval(node.value)

    def eval_NamedExpr(self, node: ast.NamedExpr) -> Value:
        value = self.eval(node.value)
        self.assign(node.target, value, node.value)
        return value

    def eval_Lambda(self, node: ast.Lambda) -> Value:
        return None

    def eval_JoinedStr(self, node: ast.JoinedStr) -> Value:
        for part in node.values:
            if isinstance(part, ast.FormattedValue):
                value = self.eval(part.value)
                if is_device(value):
                    self.host_read(part.value, part.value, value, "formatting")
                if part.format_spec is not None:
                    self.eval(part.format_spec)
        return None

    def _comprehension(self, node, elements: list[ast.expr]) -> Value:
        saved = dict(self.env)
        for generator in node.generators:
            iterable = self.eval(generator.iter)
            self.assign(generator.target, element_of(iterable), generator.iter)
            for condition in generator.ifs:
                self.truth(condition)
        values = [self.eval(e) for e in elements]
        self.env = saved
        if isinstance(node, ast.DictComp):
            return Container(values[1], mapping=True, key=values[0])
        return Container(values[0])

    def eval_ListComp(self, node: ast.ListComp) -> Value:
        return self._comprehension(node, [node.elt])

    eval_SetComp = eval_ListComp
    eval_GeneratorExp = eval_ListComp

    def eval_DictComp(self, node: ast.DictComp) -> Value:
        return self._comprehension(node, [node.key, node.value])


def _compares_python_values(op: ast.cmpop, left: ast.expr, right: ast.expr) -> bool:
    """Identity, membership, or `==`/`!=` against `None`: `Tensor.__eq__(None)` gives
    NotImplemented, so Python compares identity and the result is a Python bool."""
    if op.__class__ in (ast.Is, ast.IsNot, ast.In, ast.NotIn):
        return True
    return op.__class__ in (ast.Eq, ast.NotEq) and any(
        side.__class__ is ast.Constant and side.value is None for side in (left, right))


def _op(op: ast.operator) -> str:
    return {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**",
            ast.FloorDiv: "//", ast.Mod: "%", ast.MatMult: "@"}.get(type(op), "?")


# Types that no tensor is: `isinstance(x, (int, float))` says `x` holds none.
_NUMBER_TYPES = frozenset({"int", "float", "bool", "complex", "numbers.Number", "Number"})


def _not_tensors(test: ast.expr) -> tuple[set[str], set[str]]:
    """The names that hold no tensor where the test is true, and where it is false:
    `isinstance(x, torch.Tensor)` and `torch.is_tensor(x)` (false: `x` is none),
    `not isinstance(x, Tensor)`,
    `isinstance(x, float)`, `all(isinstance(v, float) for v in xs)` (for `xs`), and
    the operands of `and` where the whole is true."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        when_true, when_false = _not_tensors(test.operand)
        return when_false, when_true
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return {n for value in test.values for n in _not_tensors(value)[0]}, set()
    tested = _tensor_type_test(test)
    if tested is not None:
        return set(), {tested}
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) \
            and test.func.id == "all" and len(test.args) == 1 and not test.keywords \
            and isinstance(test.args[0], (ast.GeneratorExp, ast.ListComp)) \
            and len(test.args[0].generators) == 1:
        # `all(isinstance(v, float) for v in xs)`: where true, `xs` holds no tensor.
        (loop,) = test.args[0].generators
        if isinstance(loop.target, ast.Name) and isinstance(loop.iter, ast.Name) \
                and not loop.ifs and not loop.is_async \
                and loop.target.id in _not_tensors(test.args[0].elt)[0]:
            return {loop.iter.id}, set()
        return set(), set()
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
            and test.func.id == "isinstance" and len(test.args) == 2
            and isinstance(test.args[0], ast.Name) and not test.keywords):
        return set(), set()
    kinds = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
    names = [dotted_name(kind) for kind in kinds]
    if any(name is None for name in names):
        return set(), set()
    if all(name in _NUMBER_TYPES for name in names):
        return {test.args[0].id}, set()
    return set(), set()


def _bound_names(body: list[ast.stmt]) -> set[str]:
    return {node.id for statement in body for node in ast.walk(statement)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}


def literal_outcome(test: ast.expr, literals: dict[str, object]) -> bool | None:
    """What `test` gives when the names in `literals` hold those values: a comparison of
    one of them with a constant (`==`, `!=`, `is`, `is not`, `in`/`not in` a tuple of
    constants), the name itself or `not` it; None for any other test."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = literal_outcome(test.operand, literals)
        return None if inner is None else not inner
    if isinstance(test, ast.Name):
        return bool(literals[test.id]) if test.id in literals else None
    tested = _tensor_type_test(test)
    if tested is not None:
        # A Python constant is no tensor (timm's `_init_scalar(value=0.0)` tests
        # `isinstance(value, Tensor)`).
        return False if tested in literals else None
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(right, ast.Name) and right.id in literals and \
            isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
        left, right = right, left
    if not (isinstance(left, ast.Name) and left.id in literals):
        return None
    value = literals[left.id]
    if isinstance(right, (ast.Tuple, ast.List, ast.Set)) and isinstance(op, (ast.In, ast.NotIn)):
        if not all(isinstance(e, ast.Constant) for e in right.elts):
            return None
        found = any(type(value) is type(e.value) and value == e.value for e in right.elts)
        return found if isinstance(op, ast.In) else not found
    if not isinstance(right, ast.Constant):
        return None
    constant = right.value
    if isinstance(op, ast.Is):
        return value is constant if constant is None or isinstance(constant, bool) else None
    if isinstance(op, ast.IsNot):
        return value is not constant if constant is None or isinstance(constant, bool) \
            else None
    if isinstance(op, (ast.Eq, ast.NotEq)):
        equal = value == constant
        return equal if isinstance(op, ast.Eq) else not equal
    return None


def _tensor_type_test(test: ast.expr) -> str | None:
    """The name that `isinstance(name, Tensor)` (`torch.Tensor`, `torch.FloatTensor`, a
    tuple of tensor types) or `torch.is_tensor(name)` asks about; None for any other
    test."""
    if not (isinstance(test, ast.Call) and test.args and isinstance(test.args[0], ast.Name)
            and not test.keywords):
        return None
    function = dotted_name(test.func)
    if function in ("torch.is_tensor", "is_tensor") and len(test.args) == 1:
        return test.args[0].id
    if function != "isinstance" or len(test.args) != 2:
        return None
    kinds = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
    if all((dotted_name(kind) or "").rsplit(".", 1)[-1] in TENSOR_TYPE_NAMES
           for kind in kinds):
        return test.args[0].id
    return None


def literal_parameters_of(node: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """Parameters of `node` that an `if` or conditional expression of its own tests alone
    (as `literal_outcome` reads the test) and that nothing in it binds again."""
    arguments = node.args
    names = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    stored, tested = set(), set()
    for child in ast.walk(node):
        kind = child.__class__
        if kind is ast.Name:
            if child.ctx.__class__ is not ast.Load:
                stored.add(child.id)
        elif kind is ast.If or kind is ast.IfExp:
            test = child.test
            while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test = test.operand
            operands = [test] if isinstance(test, ast.Name) else \
                [test.left, *test.comparators] if isinstance(test, ast.Compare) \
                and len(test.ops) == 1 else []
            tested.update(o.id for o in operands if isinstance(o, ast.Name))
            if (name := _tensor_type_test(test)) is not None:
                tested.add(name)
    return frozenset(tested & names - stored)


def _always_leaves(statements: list[ast.stmt]) -> bool:
    """Whether running `statements` always ends in a `return` or `raise` of theirs."""
    if not statements:
        return False
    last = statements[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    return isinstance(last, ast.If) and _always_leaves(last.body) and _always_leaves(last.orelse)


def _entries_tested_absent(test: ast.expr) -> set[str]:
    """The entries (`group_entry`) that `"k" not in group` says are absent, alone or
    among the operands of `and`."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) \
        else [test]
    return {group_entry(part.comparators[0].id, part.left.value) for part in parts
            if isinstance(part, ast.Compare) and len(part.ops) == 1
            and isinstance(part.ops[0], ast.NotIn) and isinstance(part.left, ast.Constant)
            and isinstance(part.left.value, str) and isinstance(part.comparators[0], ast.Name)}


def group_entry(group: str, key: str) -> str:
    """The walker's name for the entry `key` that a function wrote into the param group
    bound to `group` (no identifier holds the separator)."""
    return f"{group}\x00{key}"
