"""Where a program's float64 goes: each float64 dtype name and `.double()` call of a torch
program, with the place its value reaches.

float64 matters where it reaches the device: in traced code (the functions the tensor-value
analysis walks from optimizer `step`, scheduler closed forms, `nn.Module.forward` and
`@cstorch.trace` functions), stored as the state of an object traced code reads (a module's
parameters, buffers and attributes, an optimizer's state and param groups, a cstorch
scheduler's attributes), as the global default dtype, or converting a module. float64 on
the host (a script, a checkpoint tool, an `__init__` temporary cast back to float32 before
it is stored) reaches none of them.

Outside traced code a small flow per scope (a function, a class body, the module's own
statements) follows float64 from its uses through names, containers, arithmetic, tensor
methods and torch functions, until a cast to another dtype ends it, into those places. A
function of the same module that returns float64 hands it on to its callers there; a name
holding float64 hands it on to the functions inside its scope that read it (a module
constant to a `forward`, a name of `main()` to the `@cstorch.trace` step defined in it).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from enum import Enum
from typing import Iterator, Union

from cslint.semantic.module_index import (
    ClassInfo, FunctionInfo, ModuleIndex, calls_under, dotted_name, is_super_call,
)
from cslint.semantic.program import candidate_lines, walk_lines
from cslint.semantic.project import ClassRef, ProjectIndex
from cslint.semantic.tensor_values import TensorValueAnalysis
from cslint.semantic.tensor_values.class_attributes import constructed_value
from cslint.semantic.tensor_values.values import Marker
from cslint.semantic.torch_api import (
    AUTOGRAD_FUNCTIONS, DTYPE_CAST_METHODS, FLOAT64_NAMES, FLOAT64_WORDS, HOST_READ_METHODS,
    METADATA_ATTRIBUTES, METADATA_METHODS, TORCH_DTYPES,
)
from cslint.semantic.walker import StatementWalker, join_envs


class Reach(Enum):
    """Where a float64 use's value goes."""

    TRACED_CODE = "traced code"
    OBJECT_STATE = "the state of a module, optimizer or scheduler"
    DEFAULT_DTYPE = "the default dtype"
    MODULE_CONVERSION = "a module's dtype"
    HOST = "host code only"


@dataclass(frozen=True)
class Float64Name:
    """A use of a float64 dtype or tensor type (`name`, qualified: "torch.float64")."""

    node: ast.expr
    name: str
    reach: Reach


@dataclass(frozen=True)
class DoubleConversion:
    """A `.double()` call, a conversion to float64."""

    node: ast.Call
    reach: Reach


Float64Use = Union[Float64Name, DoubleConversion]

Scope = Union[FunctionInfo, ClassInfo, ModuleIndex]


def float64_uses(module: ModuleIndex, text: str, tensor_values: TensorValueAnalysis
                 ) -> Iterator[Float64Use]:
    """float64 names and `.double()` calls of a torch program, in walk order, each with
    where it reaches; dtype names compared (`x.dtype == torch.float64`) or tabulated (three
    dtypes or more in one literal) are checks, not uses."""
    if "float64" not in text and "ouble" not in text:
        return
    if not module.imports_from(("torch",)) and not module.imports_cstorch:
        return
    uses = list(_uses(module, text))
    if not uses:
        return
    reaches = _Reaches(module, tensor_values, uses).find()
    for use, name in uses:
        reach = reaches.get(id(use), Reach.HOST)
        yield Float64Name(use, name, reach) if name else DoubleConversion(use, reach)


def _uses(module: ModuleIndex, text: str) -> Iterator[tuple[ast.expr, str | None]]:
    """(node, qualified float64 name) of each use; a `.double()` call has no name."""
    lines = candidate_lines(text, [*FLOAT64_WORDS, *(
        local for local, target in module.imports.items() if target in FLOAT64_NAMES)])
    checked: set[int] = set()  # dtype names compared or tabulated, not used
    for node, parent in walk_lines(module.tree, lines):
        if isinstance(node, ast.Call):
            # Two dtypes or more handed to a call together are the dtypes it accepts
            # (`can_use_foreach(group, dtypes=(torch.float32, torch.float64))`): no tensor
            # takes a collection of dtypes, where a pair unpacked into names may be two
            # dtypes used (`compute, store = torch.float64, torch.float32`).
            for argument in (*node.args, *(keyword.value for keyword in node.keywords)):
                if isinstance(argument, (ast.List, ast.Tuple, ast.Set)):
                    dtypes = [e for e in argument.elts if _is_dtype(module, e)]
                    if len(dtypes) >= 2:
                        checked.update(id(e) for e in dtypes)
        if isinstance(node, (ast.Dict, ast.List, ast.Tuple, ast.Set)):
            elements = [*node.keys, *node.values] if isinstance(node, ast.Dict) \
                else node.elts
            dtypes = [e for e in elements if e is not None and _is_dtype(module, e)]
            if len(dtypes) >= 3:  # a table of dtypes (a mapping, a list to test)
                checked.update(id(e) for e in dtypes)
        if isinstance(node, ast.IfExp):
            mirrored = _mirrored(module, node)
            if mirrored is not None:
                checked.add(id(mirrored))
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                elements = operand.elts if isinstance(
                    operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
                checked.update(id(e) for e in elements)
        elif isinstance(node, (ast.Attribute, ast.Name)) and isinstance(node.ctx, ast.Load):
            if isinstance(parent, ast.Attribute) or id(node) in checked:
                continue  # only whole dotted names; checks are fine
            qualified = _qualified(module, node)
            if qualified in FLOAT64_NAMES:
                yield node, qualified
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "double" and not node.args and not node.keywords:
            receiver = dotted_name(node.func.value)
            if receiver is not None and "." not in receiver and receiver in module.imports:
                continue  # a module's `double()` function, not Tensor.double()
            yield node, None


def _mirrored(module: ModuleIndex, node: ast.IfExp) -> ast.expr | None:
    """The float64 name a conditional gives only where another dtype is float64 already
    (`torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32`):
    it follows that dtype, it does not choose float64."""
    test = node.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    operands = (test.left, test.comparators[0])
    if not any(_qualified(module, side) in FLOAT64_NAMES for side in operands):
        return None
    if isinstance(test.ops[0], (ast.Eq, ast.Is)):
        branch = node.body
    elif isinstance(test.ops[0], (ast.NotEq, ast.IsNot)):
        branch = node.orelse
    else:
        return None
    return branch if _qualified(module, branch) in FLOAT64_NAMES else None


def _qualified(module: ModuleIndex, node: ast.expr) -> str | None:
    dotted = dotted_name(node)
    return module.qualify(dotted) if dotted else None


def _is_dtype(module: ModuleIndex, node: ast.expr) -> bool:
    qualified = _qualified(module, node)
    return bool(qualified) and qualified.startswith("torch.") \
        and qualified[len("torch."):] in TORCH_DTYPES


# ---- where each use reaches -------------------------------------------------------------

class _Reaches:
    """The reach of a module's float64 uses: traced code by the tensor-value analysis,
    the rest by the flow of each scope that holds one (and the callers of the functions
    that return one)."""

    def __init__(self, module: ModuleIndex, tensor_values: TensorValueAnalysis,
                 uses: list[tuple[ast.expr, str | None]]):
        self.module = module
        self.project: ProjectIndex = tensor_values.project
        self.tensor_values = tensor_values
        self.uses = uses
        self.use_ids = {id(use) for use, _ in uses}
        self.reach: dict[int, Reach] = {}
        # What the module's functions return of float64, by function node.
        self.returned: dict[int, frozenset[ast.expr]] = {}
        self._definitions = _definitions(module)
        self._callers: dict[int, list[Scope]] = {}  # by id of the function's node
        self._scope_calls: dict[int, list[ast.Call]] = {}  # by id of the scope
        # The float64 values functions read from the scopes around them, by function node.
        self.outer_values: dict[int, dict[str, _Value]] = {}

    def find(self) -> dict[int, Reach]:
        pending: list[Scope] = []
        for use, _ in self.uses:
            enclosing = self._enclosing(use)
            if self._runs_traced(enclosing):
                self.reach[id(use)] = Reach.TRACED_CODE
            else:
                _add_once(pending, enclosing[-1] if enclosing else self.module)
        # A walk only adds to what functions return, so this ends; the budget is a guard.
        budget = 4 * (len(self._definitions) + 1)
        while pending and budget:
            budget -= 1
            scope = pending.pop(0)
            flow = _ScopeFlow(self, scope)
            try:
                flow.run()
            except RecursionError:
                # Too deep to follow (a sum of hundreds of terms): what it recorded stands,
                # the rest of its float64 is not shown to reach the device.
                continue
            outer = {name: value for name, value in flow.env.items() if _float64(value)}
            if outer and not isinstance(scope, ClassInfo):  # a class body's names: not seen
                for inner in self._reading_functions(scope, outer):
                    _add_once(pending, inner)
            if isinstance(scope, FunctionInfo) and flow.returned:
                before = self.returned.get(scope.key, frozenset())
                if not flow.returned <= before:
                    self.returned[scope.key] = before | flow.returned
                    for caller in self._callers_of(scope):
                        _add_once(pending, caller)
        return self.reach

    def _reading_functions(self, scope: Scope, outer: dict[str, _Value]
                           ) -> Iterator[FunctionInfo]:
        """The functions inside `scope` that read its float64 names: those traced code runs
        take the float64 there; the others are given the values, and are yielded while
        what they are given grows."""
        for inner in self._definitions:
            if not isinstance(inner, FunctionInfo) or inner is scope or (
                    not isinstance(scope, ModuleIndex) and not _inside(inner.node, scope.node)):
                continue
            # (Its text naming none of them is cheaper to see than its free names.)
            if not any(inner.mentions(name) for name in outer):
                continue
            read = _free_names(inner.node) & outer.keys()
            if not read:
                continue
            if self._runs_traced(self._enclosing(inner.node)):
                for name in read:
                    self.record(outer[name].float64, Reach.TRACED_CODE)
                continue
            given = self.outer_values.setdefault(inner.key, {})
            grown = False
            for name in read:
                joined = _join(given.get(name), outer[name])
                if joined != given.get(name):
                    given[name], grown = joined, True
            if grown:
                yield inner

    def record(self, origins: frozenset[ast.expr], reach: Reach) -> None:
        for use in origins:
            self.reach.setdefault(id(use), reach)

    def _enclosing(self, node: ast.AST) -> list[Scope]:
        """The definitions around `node`, outermost first (a default value belongs to
        its function; a decorator to the scope around it)."""
        position = (node.lineno, node.col_offset)
        around = [info for info in self._definitions
                  if (info.node.lineno, info.node.col_offset) <= position
                  <= (info.node.end_lineno, info.node.end_col_offset)]
        return sorted(around, key=lambda info: (info.node.lineno, info.node.col_offset))

    def _runs_traced(self, enclosing: list[Scope]) -> bool:
        """Code in the innermost function the tensor-value analysis walked, with no host
        function (a step closure) or class between, runs in traced code; so does an
        autograd op's `forward` and `backward` (the analysis does not follow `Op.apply`)."""
        for info in reversed(enclosing):
            if not isinstance(info, FunctionInfo):
                return False
            if self.tensor_values.walked(info) or self._is_autograd_op_method(info):
                return True
            if self.tensor_values.is_host_function(info):
                return False
        return False

    def _is_autograd_op_method(self, function: FunctionInfo) -> bool:
        owner = self.class_of(function)
        return owner is not None and function.name in ("forward", "backward") and bool(
            self.project.known_ancestors(self.project.ref_for_info(owner)) & AUTOGRAD_FUNCTIONS)

    def class_of(self, function: FunctionInfo) -> ClassInfo | None:
        return self.module.classes.get(function.class_name) if function.class_name else None

    def callee(self, scope: Scope, call: ast.Call) -> FunctionInfo | None:
        """The function of this module a call runs: `name(...)`, or `self.name(...)` /
        `cls.name(...)` in a method of its class."""
        func = call.func
        if isinstance(func, ast.Name):
            return self.module.functions.get(func.id)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and isinstance(scope, FunctionInfo) and scope.parameter_names \
                and func.value.id == scope.parameter_names[0]:
            owner = self.class_of(scope)
            if owner is not None:
                return owner.methods.get(func.attr)
        return None

    def _callers_of(self, function: FunctionInfo) -> list[Scope]:
        """The scopes of this module that call `function`. A function whose text does
        not name it is not walked; each scope's calls are listed once."""
        found = self._callers.get(function.key)
        if found is None:
            found = self._callers[function.key] = []
            for scope in (*self._definitions, self.module):
                if isinstance(scope, FunctionInfo) and not scope.mentions(function.name):
                    continue
                calls = self._scope_calls.get(id(scope))
                if calls is None:
                    calls = self._scope_calls[id(scope)] = list(_calls_of_scope(scope))
                if any(callee is not None and callee.node is function.node
                       for callee in (self.callee(scope, call) for call in calls)):
                    found.append(scope)
        return found


def _inside(node: ast.AST, around: ast.AST) -> bool:
    return (around.lineno, around.col_offset) < (node.lineno, node.col_offset) \
        and (node.end_lineno, node.end_col_offset) <= (around.end_lineno, around.end_col_offset)


def _free_names(function: ast.AST) -> frozenset[str]:
    """Names a function reads without binding them itself (parameters and assignments
    bind; a simplification of Python's scoping that favours the outer value)."""
    loaded: set[str] = set()
    bound: set[str] = {arg.arg for arg in ast.walk(function.args) if isinstance(arg, ast.arg)}
    for node in ast.walk(function):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
    return frozenset(loaded - bound)


def _add_once(scopes: list[Scope], scope: Scope) -> None:
    if not any(scope is s for s in scopes):
        scopes.append(scope)


def _definitions(module: ModuleIndex) -> list[Scope]:
    """The module's functions and classes, at any depth."""
    found: list[Scope] = [*module.functions.values(), *module.classes.values()]
    found += [function for function, _ in module.nested_functions]
    for info in module.classes.values():
        found += info.methods.values()
    return found


def _body(scope: Scope) -> list[ast.stmt]:
    return scope.tree.body if isinstance(scope, ModuleIndex) else scope.node.body


_DEFINITION_NODES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})


def _calls_of_scope(scope: Scope) -> Iterator[ast.Call]:
    """The calls a scope's own statements make (not those of the definitions in it)."""
    for statement in _body(scope):
        if statement.__class__ not in _DEFINITION_NODES:
            yield from calls_under(statement, _DEFINITION_NODES)


# ---- the flow of one scope --------------------------------------------------------------

@dataclass(frozen=True)
class _Value:
    """What the flow knows of a value: the float64 uses it derives from, whether it is a
    module object, whether it is part of the state of an object traced code reads (`self`
    of such a class, `self.state[p]`, `self.layers`, `model.linear.weight`)."""

    float64: frozenset[ast.expr] = frozenset()
    module: bool = False
    stateful: bool = False


def _float64(value: _Value | None) -> frozenset[ast.expr]:
    return value.float64 if value is not None else frozenset()


def _join(a: _Value | None, b: _Value | None) -> _Value | None:
    if a is None or b is None:
        return a if b is None else b
    return _Value(a.float64 | b.float64, a.module or b.module, a.stateful or b.stateful)


def _derived(values) -> _Value | None:
    """A tensor or container computed from these values: float64 if any of them is (type
    promotion)."""
    origins = frozenset().union(*(_float64(v) for v in values))
    return _Value(origins) if origins else None


# Keywords of `Tensor.to` that choose neither a dtype nor a device.
_TO_OPTIONS = frozenset({"non_blocking", "copy", "memory_format"})
# Methods that add to a container in place.
_ADDING_METHODS = frozenset({"append", "extend", "insert", "update", "setdefault"})
# Methods of a module that give the module back (`Model().to(device).double()`).
_MODULE_METHODS = frozenset({"to", "cuda", "cpu", "train", "eval", "requires_grad_", "type",
                             "float", "half", "bfloat16", "double"})
# Builtins that give the elements they are given, rearranged.
_REARRANGING_BUILTINS = frozenset({"list", "tuple", "dict", "set", "sorted", "reversed", "zip",
                                   "iter", "next"})
_DEFAULT_DTYPE_SETTERS = frozenset({"torch.set_default_dtype", "torch.set_default_tensor_type"})
_PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter",
                                "torch.nn.Buffer", "torch.nn.parameter.Buffer"})


class _ScopeFlow(StatementWalker):
    """The float64 values of one scope (a function, a class body, the module's own
    statements), statements in order; records the uses that reach a place that matters."""

    join_values = staticmethod(_join)

    def __init__(self, reaches: _Reaches, scope: Scope):
        self.reaches = reaches
        self.module = reaches.module
        self.project = reaches.project
        self.scope = scope
        self.env: dict[str, _Value | None] = {}
        if isinstance(scope, FunctionInfo):  # what it reads of the scopes around it
            self.env.update(reaches.outer_values.get(scope.key, {}))
        self.returned: frozenset[ast.expr] = frozenset()
        # A method's `self`: its name and class, and whether traced code reads its state.
        self.self_name: str | None = None
        self.self_ref: ClassRef | None = None
        self.self_stateful = False
        # Class attributes of a class whose objects traced code reads are its state.
        self.names_are_state = isinstance(scope, ClassInfo) and self._kinds(scope)[1]
        if isinstance(scope, FunctionInfo):
            self._bind_parameters(scope)

    def _kinds(self, info: ClassInfo) -> tuple[bool, bool]:
        """(a module, an object traced code reads: a module, optimizer or cstorch scheduler)."""
        kinds = self.project.kinds(self.project.ref_for_info(info))
        return kinds.nn_module, kinds.nn_module or kinds.optimizer or kinds.cstorch_scheduler

    def _bind_parameters(self, function: FunctionInfo) -> None:
        args = function.node.args
        positional = [*args.posonlyargs, *args.args]
        defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        for arg, default in (*zip(positional, defaults),
                             *zip(args.kwonlyargs, args.kw_defaults)):
            # `compute_dtype=torch.float64`: the default is what the function gets.
            self.env[arg.arg] = self.eval(default)
        owner = self.reaches.class_of(function)
        if owner is not None and positional and function.kind in ("method", "property"):
            module, stateful = self._kinds(owner)
            self.self_name = positional[0].arg
            self.self_ref = self.project.ref_for_info(owner)
            self.self_stateful = stateful
            self.env[self.self_name] = _Value(module=module, stateful=stateful)

    def run(self) -> None:
        self.block(_body(self.scope))

    # ---- statements -------------------------------------------------------------------

    def statement_Assign(self, node: ast.Assign) -> None:
        source = node.value
        if isinstance(source, (ast.Tuple, ast.List)):  # `a, b = x.double(), y`
            parts = [self.eval(e) for e in source.elts]
            value = _derived(parts)
        else:
            parts, value = None, self.eval(source)
        for target in node.targets:
            if parts is not None and isinstance(target, (ast.Tuple, ast.List)) \
                    and len(target.elts) == len(parts):
                for element, part in zip(target.elts, parts):
                    self.store(element, part)
            else:
                self.store(target, value)

    def statement_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.store(node.target, self.eval(node.value))

    def statement_AugAssign(self, node: ast.AugAssign) -> None:
        self.store(node.target, _derived([self.eval(node.target), self.eval(node.value)]))

    def statement_If(self, node: ast.If) -> None:
        self.eval(node.test)
        before = dict(self.env)
        self.block(node.body)
        after_body, self.env = self.env, before
        self.block(node.orelse)
        self.env = join_envs(after_body, self.env, _join)

    def statement_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            value = self.eval(item.context_expr)
            if item.optional_vars is not None:
                self.bind(item.optional_vars, value)
        self.block(node.body)

    statement_AsyncWith = statement_With

    def statement_Return(self, node: ast.Return) -> None:
        self.returned |= _float64(self.eval(node.value))

    def statement_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """A nested function is a scope of its own."""

    statement_AsyncFunctionDef = statement_FunctionDef

    def store(self, target: ast.expr, value: _Value | None) -> None:
        """An assignment: into the state of an object traced code reads, or a name."""
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            holder = self.eval(target.value)
            if isinstance(target, ast.Subscript):
                self.eval(target.slice)
            if holder is not None and holder.stateful:
                self.reaches.record(_float64(value), Reach.OBJECT_STATE)
            elif isinstance(target.value, ast.Name) and _float64(value):
                # A local container that now holds float64 (`tables[k] = t.double()`).
                self.env[target.value.id] = _join(holder, _derived([value]))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.store(element, value)
        elif isinstance(target, ast.Starred):
            self.store(target.value, value)
        elif isinstance(target, ast.Name):
            if self.names_are_state:
                self.reaches.record(_float64(value), Reach.OBJECT_STATE)
            self.env[target.id] = value

    def bind_loop_target(self, target: ast.expr, iterable: _Value | None) -> None:
        self.bind(target, iterable)

    def bind(self, target: ast.expr, value: _Value | None) -> None:
        """A loop's or comprehension's names (each the whole value: its elements)."""
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.env[node.id] = value

    # ---- expressions ------------------------------------------------------------------

    def _use(self, node: ast.expr) -> _Value | None:
        return _Value(frozenset((node,))) if id(node) in self.reaches.use_ids else None

    def eval_Name(self, node: ast.Name) -> _Value | None:
        return self._use(node) or self.env.get(node.id)

    def eval_Attribute(self, node: ast.Attribute) -> _Value | None:
        used = self._use(node)
        if used is not None:
            return used
        holder = self.eval(node.value)
        if holder is None or node.attr in METADATA_ATTRIBUTES:
            return None
        return _Value(holder.float64, self._is_submodule(node), holder.stateful)

    def _is_submodule(self, node: ast.Attribute) -> bool:
        """`self.encoder`, a module its class set up."""
        if self.self_ref is None or not isinstance(node.value, ast.Name) \
                or node.value.id != self.self_name:
            return False
        stored = self.reaches.tensor_values.attributes_of(self.self_ref).get(node.attr)
        return isinstance(stored, Marker) and stored.kind in ("module", "module_list")

    def eval_Subscript(self, node: ast.Subscript) -> _Value | None:
        holder = self.eval(node.value)
        self.eval(node.slice)
        return holder  # an element of a tensor, of a container, of a module list

    def eval_BinOp(self, node: ast.BinOp) -> _Value | None:
        return _derived([self.eval(node.left), self.eval(node.right)])

    def eval_UnaryOp(self, node: ast.UnaryOp) -> _Value | None:
        return _derived([self.eval(node.operand)])

    def eval_BoolOp(self, node: ast.BoolOp) -> _Value | None:
        result = None
        for value in node.values:
            result = _join(result, self.eval(value))
        return result

    def eval_IfExp(self, node: ast.IfExp) -> _Value | None:
        self.eval(node.test)
        return _join(self.eval(node.body), self.eval(node.orelse))

    def eval_Tuple(self, node: ast.Tuple | ast.List | ast.Set) -> _Value | None:
        return _derived([self.eval(e) for e in node.elts])

    eval_List = eval_Set = eval_Tuple

    def eval_Dict(self, node: ast.Dict) -> _Value | None:
        for key in node.keys:
            self.eval(key)
        return _derived([self.eval(v) for v in node.values])

    def eval_Starred(self, node: ast.Starred) -> _Value | None:
        return self.eval(node.value)

    def eval_Await(self, node: ast.Await) -> _Value | None:
        return self.eval(node.value)

    def eval_NamedExpr(self, node: ast.NamedExpr) -> _Value | None:
        value = self.eval(node.value)
        self.bind(node.target, value)
        return value

    def eval_Lambda(self, node: ast.Lambda) -> _Value | None:
        """A function that computes in float64 (`lambda x: x.double()`) carries it."""
        saved = self.env
        self.env = dict(saved)
        for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
            self.env[arg.arg] = None
        result = _derived([self.eval(node.body)])
        self.env = saved
        return result

    def eval_ListComp(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp
                      ) -> _Value | None:
        saved = self.env
        self.env = dict(saved)
        for generator in node.generators:
            self.bind(generator.target, self.eval(generator.iter))
            for condition in generator.ifs:
                self.eval(condition)
        if isinstance(node, ast.DictComp):
            self.eval(node.key)
            result = _derived([self.eval(node.value)])
        else:
            result = _derived([self.eval(node.elt)])
        self.env = saved
        return result

    eval_SetComp = eval_GeneratorExp = eval_DictComp = eval_ListComp

    # ---- calls ------------------------------------------------------------------------

    def eval_Call(self, node: ast.Call) -> _Value | None:
        func = node.func
        if isinstance(func, ast.Attribute) and is_super_call(func.value):
            return self._super_call(node)
        used = self._use(func)  # `torch.DoubleTensor(...)`: a float64 tensor
        dotted = dotted_name(func)
        qualified = self.project.qualified_name(self.module, dotted) if dotted else None
        callee = self.reaches.callee(self.scope, node)
        if isinstance(func, ast.Attribute) and used is None and qualified is None \
                and callee is None:
            return self._method(node, func.attr, self.eval(func.value))
        if not isinstance(func, (ast.Name, ast.Attribute)):
            self.eval(func)  # `make()(x)`, `fns[i](x)`
        args = [self.eval(a) for a in node.args]
        keywords = {k.arg: self.eval(k.value) for k in node.keywords}
        if used is not None:
            return used
        if callee is not None:
            returned = self.reaches.returned.get(callee.key)
            return _Value(returned) if returned else None
        if qualified in _DEFAULT_DTYPE_SETTERS:
            self._record_all(args, keywords, Reach.DEFAULT_DTYPE)
            return None
        if qualified in _PARAMETER_CLASSES:
            data = args[0] if args else keywords.get("data")
            self.reaches.record(_float64(data), Reach.OBJECT_STATE)
            return data
        if isinstance(func, ast.Name):
            if func.id in self.env:  # a local function: a float64 lambda gives float64
                return _derived([self.env[func.id]])
            if func.id == "setattr" and len(args) == 3 and args[0] is not None \
                    and args[0].stateful:
                self.reaches.record(_float64(args[2]), Reach.OBJECT_STATE)
                return None
            if func.id in _REARRANGING_BUILTINS:
                return _derived([*args, *keywords.values()])
        constructed = constructed_value(self.project, self.module, node)
        if isinstance(constructed, Marker) and constructed.kind in ("module", "module_list"):
            # A module built in float64 (`nn.Linear(4, 4, dtype=torch.float64)`).
            self._record_all(args, keywords, Reach.MODULE_CONVERSION)
            return _Value(module=True, stateful=True)
        if qualified is not None and qualified.startswith("torch."):
            return self._torch_function(qualified, args, keywords)
        return None

    def _record_all(self, args: list, keywords: dict, reach: Reach) -> None:
        for value in (*args, *keywords.values()):
            self.reaches.record(_float64(value), reach)

    def _super_call(self, node: ast.Call) -> None:
        """`super().__init__(params, defaults)`: what a class whose objects traced code
        reads hands its base class's constructor becomes their state."""
        args = [self.eval(a) for a in node.args]
        keywords = {k.arg: self.eval(k.value) for k in node.keywords}
        if node.func.attr == "__init__" and self.self_stateful:
            self._record_all(args, keywords, Reach.OBJECT_STATE)

    def _torch_function(self, qualified: str, args: list, keywords: dict) -> _Value | None:
        if "dtype" in keywords:  # the result has the dtype asked for
            return _derived([keywords["dtype"]])
        if qualified in ("torch.finfo", "torch.iinfo"):
            return None  # Python numbers about a dtype
        return _derived([*args, *keywords.values()])

    def _method(self, node: ast.Call, name: str, receiver: _Value | None) -> _Value | None:
        args = [self.eval(a) for a in node.args]
        keywords = {k.arg: self.eval(k.value) for k in node.keywords}
        if name in ("register_buffer", "register_parameter"):
            stored = args[1] if len(args) > 1 else keywords.get("tensor", keywords.get("param"))
            self.reaches.record(_float64(stored), Reach.OBJECT_STATE)
            return None
        if receiver is not None and receiver.module and name in _MODULE_METHODS:
            self.reaches.record(_float64(self._use(node)), Reach.MODULE_CONVERSION)
            self._record_all(args, keywords, Reach.MODULE_CONVERSION)
            return receiver
        if name in _ADDING_METHODS:
            if receiver is not None and receiver.stateful:
                self._record_all(args, keywords, Reach.OBJECT_STATE)
            elif isinstance(node.func.value, ast.Name):  # a local container now holds them
                added = _derived([*args, *keywords.values()])
                if added is not None:
                    self.env[node.func.value.id] = _join(receiver, added)
            return receiver if name == "setdefault" else None
        if name == "double":
            return self._use(node)
        if name == "to":
            return self._moved_or_cast(node, receiver, args, keywords)
        if name == "type":  # `t.type(torch.DoubleTensor)`; a type string is not followed
            return _derived([*args, *keywords.values()])
        if name in DTYPE_CAST_METHODS or name in HOST_READ_METHODS or name in METADATA_METHODS:
            return None
        if "dtype" in keywords:  # `x.new_zeros(n, dtype=...)`, `x.sum(dtype=...)`
            return _derived([keywords["dtype"]])
        if name in ("get", "pop") and receiver is not None:
            return receiver  # an entry of a container
        if receiver is not None and receiver.float64:
            # A method of a float64 tensor: float64 in, float64 out (type promotion).
            return _derived([receiver, *args, *keywords.values()])
        return None

    def _moved_or_cast(self, node: ast.Call, receiver: _Value | None, args: list, keywords: dict
                   ) -> _Value | None:
        """`t.to(...)`: float64 when asked for, the tensor's own dtype when
        only moved to a device, unknown when cast to a dtype we cannot name."""
        asked = _derived([*args, *(v for k, v in keywords.items() if k not in _TO_OPTIONS)])
        if asked is not None:
            return asked
        choices = [*node.args, *(k.value for k in node.keywords
                                 if k.arg not in _TO_OPTIONS and k.arg != "device")]
        if receiver is not None and receiver.float64 and \
                all(self._names_device(choice) for choice in choices):
            return _Value(receiver.float64)
        return None

    def _names_device(self, node: ast.expr) -> bool:
        """A device: a string or an index ("cpu", 0), `torch.device(...)`, or a name or
        attribute called so (`device`, `x.device`, `self.target_device`)."""
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (str, int)) and not isinstance(node.value, bool)
        if isinstance(node, ast.Call):
            dotted = dotted_name(node.func)
            return dotted is not None and \
                self.project.qualified_name(self.module, dotted) == "torch.device"
        dotted = dotted_name(node)
        return dotted is not None and dotted.rsplit(".", 1)[-1].lower().endswith("device")
