"""Which expressions of traced code hold device-tensor values, and where traced code
takes a device tensor's truth value, reads it on the host, passes it where a Python
number is needed, or makes a shape depend on it.

Traced code is what runs once to record the graph: optimizer `step`, scheduler closed
forms, `nn.Module.forward`, `@cstorch.trace` functions, and whatever they call. A small
abstract interpretation per function, statements in order, gives each name a value:
a device tensor (with the chain that made it one, for the message), a host constant
tensor, or a structural value (param groups, optimizer state, modules, containers,
functions). Only what is a device tensor by a source we can name is ever flagged.
Calls are followed with the abstract values of their arguments; a helper's return
value is its summary under those arguments.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from typing import Iterable, Union

from cslint.source import internal_error
from cslint.semantic.analyses import AnalysisError
from cslint.semantic.module_index import (
    ClassInfo, FunctionInfo, ModuleIndex, decorator_name, dotted_name,
    is_super_call, source_snippet,
)
from cslint.semantic.project import ClassRef, ProjectIndex
from cslint.semantic.torch_api import (
    BOOLEAN_OPS, COMPILE, CREATION_SIZE_FUNCTIONS, DATA_DEPENDENT_SHAPE, HOST_BUILTINS,
    HOST_DECORATORS, HOST_READ_METHODS, ITERATION_BUILTINS, LOG_METHODS, LOGGER_NAMES,
    METADATA_ATTRIBUTES, METADATA_METHODS, NON_TENSOR_ANNOTATIONS, NON_TENSOR_TORCH,
    SCALAR_ARGUMENTS, SCHEDULER_TRACED_METHODS, SIZE_METHODS, TRACE_DECORATORS,
    TRUTH_METHODS,
)
from cslint.semantic.walker import StatementWalker, join_envs

MAX_CALL_DEPTH = 24


# ---- abstract values ---------------------------------------------------------------
# Immutable by convention: `frozen=True` makes each creation ~4x slower (a setattr call
# per field), and one is created per evaluated node.

@dataclass(slots=True, unsafe_hash=True)
class Tensor:
    """A tensor. `device` False: a host constant built from Python values in traced code.
    `why` is the chain back to the source, newest step first."""

    device: bool
    why: tuple[str, ...]
    scheduled: bool = False  # a scheduled hyperparameter (the lr) or computed from one
    boolean: bool = False  # provably of dtype bool (for CS206)

    def changed(self, *, device: bool | None = None, why: tuple | None = None,
                scheduled: bool | None = None, boolean: bool | None = None) -> "Tensor":
        """A copy with some fields changed (`dataclasses.replace` costs several times more)."""
        return Tensor(self.device if device is None else device,
                      self.why if why is None else why,
                      self.scheduled if scheduled is None else scheduled,
                      self.boolean if boolean is None else boolean)


@dataclass(slots=True, unsafe_hash=True)
class Marker:
    """Structural values of optimizers and modules."""

    kind: str  # param_groups, group, params, state_map, param_state, module, module_list,
    # optimizer_self, scheduler_self, module_self
    ref: ClassRef | None = None


@dataclass(slots=True, unsafe_hash=True)
class Sequence:
    items: tuple


@dataclass(slots=True, unsafe_hash=True)
class Container:
    """A list or dict whose elements are `element` (e.g. a list of tensors)."""

    element: object
    mapping: bool = False  # a dict: looking up a tensor key hashes it, reads no value


@dataclass(slots=True, unsafe_hash=True)
class Function:
    targets: tuple  # (FunctionInfo, class ref or None, closure env or None, bound self)


@dataclass(slots=True, unsafe_hash=True)
class Items:
    owner: object
    view: str


Value = Union[None, Tensor, Marker, Sequence, Container, Function, Items]


def _is_device(value: Value) -> bool:
    return value.__class__ is Tensor and value.device


# What one path knows survives "nothing known" on the other (a helper that returns a
# tuple of state tensors on one path and nothing on another); a tensor on any path stays
# a tensor.
_KEPT_OVER_NOTHING = frozenset({Tensor, Marker, Function, Sequence, Container})


def join(a: Value, b: Value) -> Value:
    # (Class identity tests: joins run at every branch and call, isinstance costs more.)
    if a is b:
        return a
    if a is None:
        return b if b.__class__ in _KEPT_OVER_NOTHING else None
    if b is None:
        return a if a.__class__ in _KEPT_OVER_NOTHING else None
    if a == b:
        return a
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        if a.device != b.device:
            return a if a.device else b
        return a.changed(scheduled=a.scheduled or b.scheduled, boolean=a.boolean and b.boolean)
    if isinstance(a, Tensor):
        return a  # a tensor on any path stays a tensor
    if isinstance(b, Tensor):
        return b
    if isinstance(a, Container) and isinstance(b, Container):
        return Container(join(a.element, b.element), a.mapping and b.mapping)
    if isinstance(a, Function) and isinstance(b, Function):
        targets = list(a.targets)
        known = {(id(t[0]), id(t[2])) for t in targets}
        targets += [t for t in b.targets if (id(t[0]), id(t[2])) not in known]
        return Function(tuple(targets))
    if isinstance(a, Sequence) and isinstance(b, Sequence) and len(a.items) == len(b.items):
        return Sequence(tuple(join(x, y) for x, y in zip(a.items, b.items)))
    return None


def combine(values: Iterable[Value], step) -> Value:
    """A tensor computed from `values` (arithmetic, torch ops): device if any input is."""
    tensors = []
    for value in values:
        if value is None:
            continue
        if value.__class__ is Container or value.__class__ is Sequence:
            value = element_of(value)  # torch.cat([...]), torch.stack(tensors)
        if value.__class__ is Tensor:
            tensors.append(value)
    if not tensors:
        return None
    device = [t for t in tensors if t.device]
    base = device[0] if device else tensors[0]
    step = _src(step) if isinstance(step, ast.AST) else step
    return Tensor(bool(device), (step, *base.why)[:4],
                  scheduled=any(t.scheduled for t in tensors))


def element_of(value: Value) -> Value:
    if isinstance(value, Tensor):
        return value.changed(why=("an element of it", *value.why)[:4], boolean=value.boolean)
    if isinstance(value, Container):
        return value.element
    if isinstance(value, Sequence):
        result = None
        for item in value.items:
            result = join(result, item)
        return result
    if isinstance(value, Marker):
        return {"param_groups": Marker("group"), "params": Tensor(True, ("a parameter",)),
                "module_list": Marker("module")}.get(value.kind)
    return None


class _Text:
    """A step of a value's chain, rendered only when a finding is reported (unparsing
    every expression eagerly would cost more than the analysis)."""

    __slots__ = ("template", "parts")

    def __init__(self, template: str, *parts):
        self.template = template
        self.parts = parts

    def __str__(self) -> str:
        return self.template.format(*(p if isinstance(p, str) else source_snippet(p)
                                      for p in self.parts))


def _src(node: ast.AST) -> _Text:
    return _Text("{}", node)


# ---- facts ------------------------------------------------------------------------------
# `node` is where the fact is; `chain` is how the value became a device tensor, newest
# step first (steps render as text only when a rule reports them).

class Condition(Enum):
    """Where a truth value is taken."""

    IF = "if"
    WHILE = "while"
    EXPRESSION = "expression"  # and/or/not, `x if t else y`, assert, bool(), min/max


@dataclass(frozen=True)
class TruthTest:
    """The truth value of a device tensor (`subject`) decides Python control flow."""

    function: FunctionInfo
    node: ast.AST
    subject: ast.AST
    chain: tuple
    condition: Condition


@dataclass(frozen=True)
class LoopBound:
    """A device tensor bounds a Python loop (`range(n)` with a tensor `n`)."""

    function: FunctionInfo
    node: ast.AST
    chain: tuple


@dataclass(frozen=True)
class HostRead:
    """A device tensor (`subject`) read on the host by `reader` ("`float()`", "logging",
    "formatting", "`.item()`", ...)."""

    function: FunctionInfo
    node: ast.AST
    subject: ast.AST
    chain: tuple
    reader: str


@dataclass(frozen=True)
class ScalarArgument:
    """A device tensor where PyTorch needs a Python number; `position` says which
    ("`alpha=` of `.add_()`", "a slice bound"). `scheduled`: it is (or is computed
    from) a scheduled hyperparameter. `method`/`keyword`: the Tensor method and keyword
    when it is a scaling keyword of a Tensor method (`p.add_(g, alpha=-lr)`)."""

    function: FunctionInfo
    node: ast.AST
    chain: tuple
    scheduled: bool
    position: str
    method: str | None = None
    keyword: str | None = None


@dataclass(frozen=True)
class ValueDependentShape:
    """An op (`op`: "nonzero", "where(condition)") whose output shape depends on the
    values of a device tensor."""

    function: FunctionInfo
    node: ast.AST
    op: str


@dataclass(frozen=True)
class MaskSelection:
    """A device tensor indexed with a boolean tensor `mask` (a value-dependent shape)."""

    function: FunctionInfo
    node: ast.AST
    mask: ast.AST


TracedFact = Union[TruthTest, LoopBound, HostRead, ScalarArgument, ValueDependentShape,
                   MaskSelection]


def _fact_kind(fact: TracedFact) -> object:
    """What makes two facts at one place different findings."""
    if type(fact) is TruthTest:
        return fact.condition
    if type(fact) is ScalarArgument:
        return (ScalarArgument, fact.scheduled)
    return type(fact)


@dataclass(frozen=True)
class Entry:
    """A traced entry point: the function, the class it runs for, the argument values."""

    function: FunctionInfo
    ref: ClassRef | None
    bindings: tuple
    description: str
    closure: dict | None = None


class TensorValueAnalysis:
    """The facts of every traced function of a project."""

    def __init__(self, project: ProjectIndex):
        self.project = project
        config = project.config
        self.tensor_keys = frozenset(config.tensor_hyperparameters)
        self.trace_decorators = TRACE_DECORATORS | set(config.traced_decorators)
        self.traced_functions = set(config.traced_functions)
        self.errors: list[AnalysisError] = []
        self._summaries: dict[tuple, Value] = {}
        self._class_dependent: dict[tuple, bool] = {}
        self._class_free_summaries: dict[tuple, Value] = {}
        self._class_use: list[bool] = []  # per summary being computed: did it use its class?
        self._in_progress: set[tuple] = set()
        self._facts: dict[tuple, TracedFact] = {}  # the first fact of each kind and place
        self._facts_by_module: dict[int, list[TracedFact]] | None = None
        self._depth = 0
        self._non_tensor_parameters: dict[int, frozenset[str]] = {}

    def non_tensor_parameters(self, function: FunctionInfo) -> frozenset[str]:
        """Parameters annotated with a non-tensor type (`num_steps: int = 5`)."""
        found = self._non_tensor_parameters.get(id(function.node))
        if found is None:
            args = function.node.args
            found = self._non_tensor_parameters[id(function.node)] = frozenset(
                arg.arg for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs)
                if arg.annotation is not None and _declares_non_tensor(arg.annotation))
        return found

    def run(self) -> None:
        for entry in self.entries():
            try:
                self.summary(entry.function, entry.ref, entry.bindings, entry.closure)
            except RecursionError:
                self.errors.append(AnalysisError(entry.function.module,
                                                 "too deeply nested to analyse"))
            except Exception as error:  # a bug of ours must not stop the other files
                self.errors.append(AnalysisError(entry.function.module,
                                                 internal_error(error, entry.description)))
        grouped: dict[int, list[TracedFact]] = {}
        for fact in self._facts.values():
            grouped.setdefault(id(fact.function.module), []).append(fact)
        self._facts_by_module = grouped

    def facts_in(self, module: ModuleIndex) -> list[TracedFact]:
        """The module's facts, in the order the analysis found them."""
        if self._facts_by_module is None:
            raise RuntimeError("TensorValueAnalysis.run() has not run")
        return self._facts_by_module.get(id(module), [])

    def record(self, fact: TracedFact) -> None:
        # Summaries under several argument values find the same fact again.
        node = fact.node
        key = (id(fact.function.module), node.lineno, node.col_offset, _fact_kind(fact))
        if key not in self._facts:
            self._facts[key] = fact

    # ---- entry points -------------------------------------------------------------------

    def entries(self) -> list[Entry]:
        project = self.project
        result: list[Entry] = []
        for ref in project.project_classes:
            if project.is_machinery(ref):
                continue
            try:
                kinds = project.kinds(ref)
            except RecursionError:
                self.errors.append(AnalysisError(ref.info.module, "too deeply nested to analyse"))
                continue
            if kinds.optimizer:
                self._method_entry(result, ref, "step", Marker("optimizer_self", ref))
            if kinds.cstorch_scheduler:
                for name in SCHEDULER_TRACED_METHODS:
                    self._method_entry(result, ref, name, Marker("scheduler_self", ref))
            if kinds.nn_module:
                self._method_entry(result, ref, "forward", Marker("module_self", ref),
                                   inputs_are_tensors=True)
        for module in project.primary_modules:
            candidates = [(f, None) for f in module.functions.values()]
            candidates += list(module.nested_functions)
            for info in module.classes.values():
                candidates += [(f, None) for f in info.methods.values()]
            for function, enclosing in candidates:
                if self._is_trace_entry(function):
                    closure = self._enclosing_facts(module, enclosing)
                    bindings = self._input_bindings(function, skip_first=False,
                                                    source="an argument of a traced function")
                    result.append(Entry(function, None, bindings, f"{function.name}()", closure))
        return result

    def _method_entry(self, result: list[Entry], ref: ClassRef, name: str, self_value: Marker,
                      inputs_are_tensors: bool = False) -> None:
        found = self.project.find_method(ref, name)
        if found is None or found.function is None or found.abstract:
            return
        if self.project.is_machinery(found.owner) or self._is_host_function(found.function):
            return
        function = found.function
        if inputs_are_tensors:
            bindings = self._input_bindings(function, skip_first=True, source="a forward input")
            bindings = (self_value, *bindings[1:])
        else:
            bindings = (self_value,)
        result.append(Entry(function, ref, bindings, f"{ref.short_name}.{name}()"))

    def _decorators(self, function: FunctionInfo) -> set[str]:
        names = set()
        for written in function.decorators:
            names.add(written)
            qualified = self.project.qualified_name(function.module, written) if written else None
            if qualified:
                names.add(qualified)
        return names

    def _is_trace_entry(self, function: FunctionInfo) -> bool:
        if function.qualname in self.traced_functions:
            return True
        return bool(self._decorators(function) & self.trace_decorators)

    def _is_host_function(self, function: FunctionInfo) -> bool:
        return bool(self._decorators(function) & HOST_DECORATORS)

    def _input_bindings(self, function: FunctionInfo, skip_first: bool, source: str) -> tuple:
        """Arguments are tensors unless annotated as non-tensor types or given a
        non-tensor default (`output_attentions=False`, `dim=-1`); `mask=None` may be one."""
        args = function.node.args
        positional = [*args.posonlyargs, *args.args]
        defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        values = []
        for i, (arg, default) in enumerate(zip(positional, defaults)):
            if skip_first and i == 0:
                values.append(None)
                continue
            values.append(self._input_value(arg, default, source))
        return tuple(values)

    def _input_value(self, arg: ast.arg, default: ast.expr | None, source: str) -> Value:
        if arg.annotation is not None and (
                _declares_non_tensor(arg.annotation) or _annotation_text(arg.annotation)
                .startswith(("Optional[int", "Literal"))):
            return None
        if default is not None and not (isinstance(default, ast.Constant)
                                        and default.value is None):
            return None
        return Tensor(True, (f"`{arg.arg}` is {source}",))

    def _enclosing_facts(self, module: ModuleIndex, enclosing: ast.AST | None) -> dict:
        """Names of the enclosing scopes that hold modules (`model = cstorch.compile(...)`,
        `loss_fn = nn.CrossEntropyLoss()`), for traced functions nested in them."""
        facts: dict[str, Value] = {}
        scopes = [module.tree] + ([enclosing] if enclosing is not None else [])
        for scope in scopes:
            for statement in _flat_statements(getattr(scope, "body", [])):
                if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Call):
                    value = self._constructed(module, statement.value)
                    for target in statement.targets:
                        if isinstance(target, ast.Name) and value is not None:
                            facts[target.id] = value
        return facts

    def _constructed(self, module: ModuleIndex, call: ast.Call) -> Value:
        """What calling a class or factory gives, when it is a module."""
        dotted = dotted_name(call.func)
        if dotted is None:
            return None
        qualified = self.project.qualified_name(module, dotted)
        if qualified in COMPILE:
            return Marker("module")
        if qualified and qualified.startswith("torch.nn.") and \
                qualified.rsplit(".", 1)[-1][:1].isupper():
            name = qualified.rsplit(".", 1)[-1]
            if name in ("Parameter", "Buffer"):
                return Tensor(True, (f"`{source_snippet(call)}` is a module parameter",))
            if name in ("ModuleList", "Sequential", "ModuleDict"):
                return Marker("module_list") if name != "Sequential" else Marker("module")
            return Marker("module")
        found = self.project.resolve_in_module(module, dotted)
        if isinstance(found, ClassInfo):
            ref = self.project.ref_for_info(found)
            if self.project.kinds(ref).nn_module:
                return Marker("module", ref)
        return None

    # ---- summaries ----------------------------------------------------------------------

    def summary(self, function: FunctionInfo, ref: ClassRef | None, bindings: tuple,
                closure: dict | None = None) -> Value:
        """Analyse `function` under these argument values; its return value."""
        if self._is_host_function(function):
            return None  # step closures run on the host with real values
        signature = tuple(_signature(b) for b in bindings)
        closure_id = id(closure) if closure else None
        key = (id(function), id(ref), signature, closure_id)
        # A summary that never looked at the class (no `self.x`, no MRO lookup) holds for
        # every class that inherits the function.
        class_free_key = (id(function), tuple(_without_class(s) for s in signature), closure_id)
        if key in self._summaries:
            self._note_class_use(self._class_dependent[key])
            return self._summaries[key]
        if class_free_key in self._class_free_summaries:
            return self._class_free_summaries[class_free_key]
        if key in self._in_progress or self._depth >= MAX_CALL_DEPTH:
            return None  # recursion: assume nothing
        self._in_progress.add(key)
        self._depth += 1
        self._class_use.append(False)
        try:
            walker = _Walker(self, function, ref, bindings, closure)
            walker.run()
            result = walker.returned
        finally:
            self._depth -= 1
            self._in_progress.discard(key)
            used_class = self._class_use.pop()
        self._summaries[key] = result
        self._class_dependent[key] = used_class
        if used_class:
            self._note_class_use(True)
        else:
            self._class_free_summaries[class_free_key] = result
        return result

    def _note_class_use(self, used: bool) -> None:
        """The function being analysed depends on its class (directly or via a callee)."""
        if used and self._class_use:
            self._class_use[-1] = True

    @cached_property
    def _class_facts(self) -> dict[int, tuple[dict[str, Value], frozenset[str]]]:
        return {}

    def _facts_of_class(self, info: ClassInfo, owner: ClassRef
                        ) -> tuple[dict[str, Value], frozenset[str]]:
        """One walk over a class's own methods: the `self.X` it sets up (parameters,
        buffers, submodules, stored functions) and the state keys it stores Python
        numbers under (torch's LBFGS keeps `state["n_iter"] = 0`)."""
        cached = self._class_facts.get(id(info))
        if cached is not None:
            return cached
        values: dict[str, Value] = {}
        module = info.module
        python_keys = set(self._python_keys_of_class(info))
        for method in info.methods.values():
            if not _may_set_up_attributes(method):
                continue  # sets up no `self.X`
            # Statements, and the calls they make directly, hold every fact we want here:
            # far fewer nodes than a walk over every expression.
            for node in method.statements:
                kind = node.__class__
                if kind is ast.Assign and len(node.targets) == 1:
                    target = node.targets[0]
                    if target.__class__ is ast.Attribute and \
                            target.value.__class__ is ast.Name and target.value.id == "self":
                        value = self._attribute_value(module, owner, node.value)
                        if value is not None:
                            values[target.attr] = value
                elif kind is ast.Call and node.func.__class__ is ast.Attribute \
                        and node.func.attr in ("register_buffer", "register_parameter") \
                        and node.args and isinstance(node.args[0], ast.Constant) \
                        and isinstance(node.args[0].value, str):
                    kind = "buffer" if node.func.attr == "register_buffer" else "parameter"
                    values[node.args[0].value] = Tensor(
                        True, (f"`self.{node.args[0].value}` is a module {kind}",))
        facts = (values, frozenset(python_keys))
        self._class_facts[id(info)] = facts
        return facts

    @cached_property
    def _merged_facts(self) -> dict[int, tuple[dict[str, Value], frozenset[str]]]:
        return {}

    def _merged(self, ref: ClassRef):
        cached = self._merged_facts.get(id(ref))
        if cached is None:
            values: dict[str, Value] = {}
            keys: set[str] = set()
            for entry in reversed(self.project.mro(ref)):
                if entry.info is not None:
                    own_values, own_keys = self._facts_of_class(entry.info, ref)
                    values.update(own_values)
                    keys |= own_keys
            cached = (values, frozenset(keys))
            self._merged_facts[id(ref)] = cached
        return cached

    @cached_property
    def python_keys_anywhere(self) -> frozenset[str]:
        """State keys any optimizer class of the project stores Python numbers under."""
        keys: set[str] = set()
        for ref in self.project.project_classes:
            if ref.info is not None and self.project.kinds(ref).optimizer:
                keys |= self._python_keys_of_class(ref.info)
        return frozenset(keys)

    def _python_keys_of_class(self, info: ClassInfo) -> frozenset[str]:
        cached = self._python_keys_cache.get(id(info))
        if cached is None:
            keys: set[str] = set()
            for method in info.methods.values():
                if method.mentions("state") and _may_store_under_a_key(method):
                    keys |= _python_valued_keys(method.statements,
                                                _number_parameters(method.node))
            cached = self._python_keys_cache[id(info)] = frozenset(keys)
        return cached

    @cached_property
    def _python_keys_cache(self) -> dict[int, frozenset[str]]:
        return {}

    def attributes_of(self, ref: ClassRef) -> dict[str, Value]:
        return self._merged(ref)[0]

    def python_state_keys(self, ref: ClassRef | None) -> frozenset[str]:
        return self._merged(ref)[1] if ref is not None else frozenset()

    def _attribute_value(self, module: ModuleIndex, owner: ClassRef, node: ast.expr) -> Value:
        if isinstance(node, ast.IfExp):  # `self.update_fn = a if flag else b`
            return join(self._attribute_value(module, owner, node.body),
                        self._attribute_value(module, owner, node.orelse))
        structural = _self_structure(node)
        if structural is not None:
            return structural
        if isinstance(node, ast.Call):
            value = self._constructed(module, node)
            if isinstance(value, Tensor):
                return value
            return value
        dotted = dotted_name(node)
        if dotted is None:
            return None
        if dotted.startswith("self."):
            found = self.project.find_method(owner, dotted[5:])
            if found is not None and found.function is not None:
                return Function(((found.function, None, None, True),))
            return None
        target = self.project.resolve_in_module(module, dotted)
        if isinstance(target, FunctionInfo):
            return Function(((target, None, None, False),))
        return None


def _annotation_text(annotation: ast.expr) -> str:
    """`Optional[int]` for `typing.Optional[int]`; the common shapes are spelled here,
    the rest by `ast.unparse` (many times slower)."""
    if isinstance(annotation, (ast.Name, ast.Attribute)):
        text = dotted_name(annotation)
        if text is not None:
            return text.replace("typing.", "")
    elif isinstance(annotation, ast.Subscript) and \
            isinstance(annotation.value, (ast.Name, ast.Attribute)):
        inner = annotation.slice
        parts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        if all(isinstance(p, (ast.Name, ast.Attribute)) or
               (isinstance(p, ast.Constant) and p.value is Ellipsis) for p in parts):
            return f"{_annotation_text(annotation.value)}[" + ", ".join(
                "..." if isinstance(p, ast.Constant) else _annotation_text(p)
                for p in parts) + "]"
    return source_snippet(annotation, 80).replace("typing.", "")


def _declares_non_tensor(annotation: ast.expr) -> bool:
    return _annotation_text(annotation) in NON_TENSOR_ANNOTATIONS


def _number_parameters(function: ast.AST) -> set[str]:
    """Parameters annotated `int`/`float` or given a number as default."""
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults):]],
                        args.defaults))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d})
    numbers = set()
    for arg in (*positional, *args.kwonlyargs):
        default = defaults.get(arg.arg)
        if isinstance(arg.annotation, ast.Name) and arg.annotation.id in ("int", "float") or (
                isinstance(default, ast.Constant) and isinstance(default.value, (int, float))
                and not isinstance(default.value, bool)):
            numbers.add(arg.arg)
    return numbers


def _is_python_number(node: ast.expr, numbers: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in ("float", "int", "len", "round")
    if isinstance(node, ast.Name):
        return node.id in numbers
    if isinstance(node, ast.UnaryOp):
        return _is_python_number(node.operand, numbers)
    return False


# Text pre-filters: each regex starts with a literal, which `re` finds fast (alternations
# and character classes first are several times slower), and the rest are substring tests.

# `self.x = ...` or `register_buffer(`: what `_facts_of_class` looks for.
_SELF_ATTRIBUTE_STORE = re.compile(r"self\.\w+\s*(?:\\\s*)?=(?!=)")


def _may_set_up_attributes(function: FunctionInfo) -> bool:
    """A text pre-filter for `_facts_of_class` (True when the text is unknown)."""
    text = function.source_text
    return text is None or "register_buffer(" in text or "register_parameter(" in text \
        or _SELF_ATTRIBUTE_STORE.search(text) is not None


# `x["key"] = ...` or `.setdefault(`: what `_python_valued_keys` looks for; a store under
# a literal key contains `] =`, the cheap test that comes first.
_CLOSING_STORE = re.compile(r"\]\s*=(?!=)")
_KEYED_STORE = re.compile(r"""\[\s*(?:'[^'\n]*'|"[^"\n]*")\s*\]\s*=(?!=)""")


def _may_store_under_a_key(function: FunctionInfo) -> bool:
    """A text pre-filter for `_python_valued_keys` (True when the text is unknown)."""
    text = function.source_text
    return text is None or ".setdefault(" in text or (
        _CLOSING_STORE.search(text) is not None and _KEYED_STORE.search(text) is not None)


def _python_valued_keys(nodes: list[ast.AST], parameters: set[str] = frozenset()) -> set[str]:
    """Literal state keys written with Python numbers in one function, given its nodes
    (a syntactic scan: constants, float()/int() results, names bound only to such values,
    and parameters that are numbers)."""
    numbers: set[str] = set(parameters)
    not_numbers: set[str] = set()
    assignments = [n for n in nodes if n.__class__ is ast.Assign]
    for node in assignments:
        for target in node.targets:
            if target.__class__ is ast.Name:
                (numbers if _is_python_number(node.value, frozenset())
                 else not_numbers).add(target.id)
    numbers -= not_numbers
    keys: set[str] = set()
    for node in nodes:
        if node.__class__ is ast.Assign:
            for target in node.targets:
                if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant) \
                        and isinstance(target.slice.value, str) \
                        and _is_python_number(node.value, numbers):
                    keys.add(target.slice.value)
        elif node.__class__ is ast.Call and node.func.__class__ is ast.Attribute \
                and node.func.attr == "setdefault" and len(node.args) == 2 \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) \
                and _is_python_number(node.args[1], numbers):
            keys.add(node.args[0].value)
    return keys


def is_torch_library(qualified: str | None) -> bool:
    """torch's ops and utilities, as opposed to Python code of torch.optim that a
    project (torch's own source included) may define and we analyse."""
    return qualified is not None and (qualified == "torch" or (
        qualified.startswith("torch.") and not qualified.startswith("torch.optim.")))


def _self_structure(node: ast.expr) -> Value:
    """`self.param_groups[0]["params"]` and the like, stored in `__init__`."""
    steps: list[ast.expr] = []
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        steps.append(node)
        node = node.value
    if not (isinstance(node, ast.Name) and node.id == "self") or not steps:
        return None
    steps.reverse()
    if not (isinstance(steps[0], ast.Attribute) and steps[0].attr == "param_groups"):
        return None
    value: Value = Marker("param_groups")
    for step in steps[1:]:
        if isinstance(step, ast.Subscript) and isinstance(value, Marker):
            key = step.slice.value if isinstance(step.slice, ast.Constant) else None
            if value.kind == "param_groups":
                value = Marker("group")
            elif value.kind == "group" and key == "params":
                value = Marker("params")
            else:
                return None
        else:
            return None
    return value


def _flat_statements(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    for statement in body:
        yield statement
        if isinstance(statement, (ast.If, ast.With, ast.Try, ast.For, ast.While)):
            for name in ("body", "orelse", "finalbody"):
                yield from _flat_statements(getattr(statement, name, []) or [])


def _without_class(signature: object) -> object:
    if isinstance(signature, tuple) and signature[:1] == ("M",):
        return signature[:2]
    return signature


def _signature(value: Value) -> object:
    kind = value.__class__
    if value is None:
        return None
    if kind is Tensor:
        return ("T", value.device, value.scheduled, value.boolean)
    if kind is Marker:
        return ("M", value.kind, id(value.ref))
    if kind is Sequence:
        return ("S", tuple(_signature(v) for v in value.items))
    if kind is Container:
        return ("C", _signature(value.element))
    if kind is Function:
        return ("F", tuple(id(t[0]) for t in value.targets))
    return None


class _Walker(StatementWalker):
    """One function under one set of argument values."""

    def __init__(self, analysis: TensorValueAnalysis, function: FunctionInfo,
                 ref: ClassRef | None, bindings: tuple, closure: dict | None):
        self.analysis = analysis
        self.project = analysis.project
        self.function = function
        self.module = function.module
        self.ref = ref
        self.env: dict[str, Value] = dict(closure or {})
        names = function.parameter_names
        annotated = None  # read only when a value is passed
        for name, value in zip(names, bindings):
            # A parameter declared `int`, `float`, ... holds no tensor, whatever a call
            # site seems to pass (a joined function value, a misread starred call), except
            # a scheduled hyperparameter: `lr: float` is exactly the mistake CS205 is for.
            if value is not None and not (isinstance(value, Tensor) and value.scheduled):
                if annotated is None:
                    annotated = analysis.non_tensor_parameters(function)
                if name in annotated:
                    value = None
            self.env[name] = value
        # Keyword-only parameters follow the positional ones in `bindings`.
        kwonly = [a.arg for a in function.node.args.kwonlyargs]
        for name, value in zip(kwonly, (*bindings[len(names):], *([None] * len(kwonly)))):
            self.env[name] = value
        self.condition = Condition.EXPRESSION  # where a truth value taken now is taken
        self.returned: Value = None
        self.in_closed_form = isinstance(bindings[0] if bindings else None, Marker) and \
            bindings[0].kind == "scheduler_self"

    def run(self) -> None:
        self.block(self.function.node.body)

    # ---- facts ---------------------------------------------------------------------

    def truth_test(self, node: ast.AST, subject: ast.AST, value: Tensor) -> None:
        self.analysis.record(TruthTest(self.function, node, subject, value.why,
                                       self.condition))

    def host_read(self, node: ast.AST, subject: ast.AST, value: Tensor, reader: str) -> None:
        self.analysis.record(HostRead(self.function, node, subject, value.why, reader))

    def scalar_argument(self, node: ast.AST, value: Tensor, position: str,
                        method: str | None = None, keyword: str | None = None) -> None:
        self.analysis.record(ScalarArgument(self.function, node, value.why, value.scheduled,
                                            position, method, keyword))

    def data_dependent_shape(self, node: ast.AST, op: str) -> None:
        self.analysis.record(ValueDependentShape(self.function, node, op))

    # ---- statements ----------------------------------------------------------------

    def statement_Assign(self, node: ast.Assign) -> None:
        value = self.eval(node.value)
        for target in node.targets:
            self.assign(target, value, node.value)

    def statement_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.assign(node.target, self.eval(node.value), node.value)

    def statement_AugAssign(self, node: ast.AugAssign) -> None:
        value = self.eval(node.value)
        current = self.eval(node.target)
        combined = combine([current, value], _Text("{} " + _op(node.op) + "= {}",
                                                   node.target, node.value))
        if isinstance(node.target, ast.Name):
            self.env[node.target.id] = join(current, combined) if combined else current

    def statement_If(self, node: ast.If) -> None:
        self.test(node.test, Condition.IF)
        before = dict(self.env)
        self.block(node.body)
        after_body = self.env
        self.env = before
        self.block(node.orelse)
        self.env = join_envs(after_body, self.env, join)

    def statement_While(self, node: ast.While) -> None:
        self.test(node.test, Condition.WHILE)
        before = dict(self.env)
        self.block(node.body)
        self.env = join_envs(before, self.env, join)
        self.test(node.test, Condition.WHILE)  # again, with what the body bound
        self.block(node.orelse)

    def statement_For(self, node: ast.For | ast.AsyncFor) -> None:
        iterable = self.loop_iterable(node.iter)
        self.assign(node.target, element_of(iterable) if not isinstance(iterable, Items)
                    else self.items_element(iterable), node.iter)
        before = dict(self.env)
        self.block(node.body)
        self.env = join_envs(before, self.env, join)
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
        self.test(node.test, Condition.EXPRESSION)
        if node.msg is not None:
            self.eval(node.msg)

    def statement_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        info = FunctionInfo(node.name, f"{self.function.qualname}.<locals>.{node.name}", node,
                            self.module, None, tuple(decorator_name(d) for d in
                                                     node.decorator_list), False, "function")
        self.env[node.name] = Function(((info, self.ref, dict(self.env), False),))

    statement_AsyncFunctionDef = statement_FunctionDef

    def statement_Raise(self, node: ast.Raise) -> None:
        if node.exc is not None:
            self.eval(node.exc)

    def loop_iterable(self, node: ast.expr) -> Value:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "range":
            for arg in node.args:
                value = self.eval(arg)
                if _is_device(value):
                    self.analysis.record(LoopBound(self.function, arg, value.why))
            return None
        return self.eval(node)

    def items_element(self, items: Items) -> Value:
        owner = items.owner
        if isinstance(owner, Marker) and owner.kind == "state_map":
            element = Marker("param_state")
            return {"items": Sequence((Tensor(True, ("a parameter",)), element)),
                    "values": element, "keys": Tensor(True, ("a parameter",))}[items.view]
        if isinstance(owner, Marker) and owner.kind == "param_state":
            tensor = Tensor(True, ("optimizer state",))
            return {"items": Sequence((None, tensor)), "values": tensor, "keys": None}[items.view]
        element = owner.element if isinstance(owner, Container) else None
        return {"items": Sequence((None, element)), "values": element,
                "keys": None}[items.view]

    def assign(self, target: ast.expr, value: Value, value_node: ast.expr) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, Tensor):
                value = Tensor(value.device, (_Text("{} = {}", target.id, value_node),
                                              *value.why)[:4], value.scheduled, value.boolean)
            self.env[target.id] = value
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
            self.eval(target.slice)
            if isinstance(target.value, ast.Name) and isinstance(container, (Container,
                                                                             type(None))):
                if isinstance(value, Tensor) and isinstance(container, Container):
                    self.env[target.value.id] = Container(join(container.element, value))
        elif isinstance(target, ast.Attribute):
            self.eval(target.value)
        elif isinstance(target, ast.Starred):
            self.assign(target.value, value, value_node)

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
            result = None
            for operand in node.values:
                result = join(result, self.truth(operand))
            return result
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self.truth(node.operand)
            return None
        value = self.eval(node)
        if _is_device(value):
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
        return None

    def eval_Attribute(self, node: ast.Attribute) -> Value:
        base = self.eval(node.value)
        attr = node.attr
        if isinstance(base, Tensor):
            if attr in METADATA_ATTRIBUTES:
                return None
            return Tensor(base.device, (_src(node), *base.why)[:4], base.scheduled,
                          base.boolean and attr in ("data", "T", "mT"))
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
        if kind in ("optimizer_self", "scheduler_self", "module_self") and base.ref is not None:
            self.analysis._note_class_use(True)
            value = self.analysis.attributes_of(base.ref).get(attr)
            if value is not None:
                return value
            if kind == "module_self" and attr == "training":
                return None
        return None

    def eval_Subscript(self, node: ast.Subscript) -> Value:
        base = self.eval(node.value)
        index_node = node.slice
        if isinstance(index_node, ast.Slice):
            for bound in (index_node.lower, index_node.upper, index_node.step):
                value = self.eval(bound)
                if _is_device(value):
                    self.scalar_argument(bound, value, "a slice bound")
            index = None
        else:
            index = self.eval(index_node)
        if isinstance(base, Marker):
            key = index_node.value if isinstance(index_node, ast.Constant) else None
            if base.kind == "group":
                if key == "params":
                    return Marker("params")
                if key in self.analysis.tensor_keys:
                    return Tensor(True, (_Text("`{}` is a scheduled hyperparameter (a tensor "
                                               "on the system)", node),), scheduled=True)
                return None
            if base.kind == "param_groups":
                return Marker("group")
            if base.kind == "params":
                return Tensor(True, ("a parameter",))
            if base.kind == "state_map":
                return Marker("param_state")
            if base.kind == "param_state":
                # Only a key some class stores a Python number under makes the answer
                # depend on the class.
                if key in self.analysis.python_keys_anywhere:
                    self.analysis._note_class_use(True)
                    if key in self.analysis.python_state_keys(self.ref):
                        return None
                return Tensor(True, (_Text("`{}` is optimizer state", node),))
            if base.kind == "module_list":
                return Marker("module")
            return None
        if isinstance(base, Tensor):
            if isinstance(index, Tensor) and index.boolean and base.device:
                self.analysis.record(MaskSelection(self.function, node, index_node))
            return Tensor(base.device or _is_device(index),
                          (_src(node), *base.why)[:4], scheduled=base.scheduled)
        if isinstance(base, Sequence):
            if isinstance(index_node, ast.Constant) and isinstance(index_node.value, int) \
                    and -len(base.items) <= index_node.value < len(base.items):
                return base.items[index_node.value]
            if _is_device(index):
                self.host_read(index_node, node.slice, index, "indexing a Python sequence")
            return element_of(base)
        if isinstance(base, Container):
            if _is_device(index) and not base.mapping:
                self.host_read(index_node, node.slice, index, "indexing a Python sequence")
            return base.element
        return None

    def eval_Call(self, node: ast.Call) -> Value:
        return _CallEvaluator(self, node).evaluate()

    def eval_BinOp(self, node: ast.BinOp) -> Value:
        left, right = self.eval(node.left), self.eval(node.right)
        if isinstance(node.op, ast.Mod) and isinstance(node.left, (ast.Constant, ast.JoinedStr)) \
                and isinstance(getattr(node.left, "value", None), str):
            for value, operand in self._format_operands(node.right, right):
                if _is_device(value):
                    self.host_read(operand, operand, value, "formatting")
            return None
        if isinstance(left, Sequence) or isinstance(right, Sequence):
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
            return value.changed(why=(_src(node), *value.why)[:4],
                           boolean=value.boolean and isinstance(node.op, ast.Invert))
        return None

    def eval_BoolOp(self, node: ast.BoolOp) -> Value:
        result = None
        for operand in node.values[:-1]:
            result = join(result, self.truth(operand))
        return join(result, self.eval(node.values[-1]))

    def eval_Compare(self, node: ast.Compare) -> Value:
        values = [self.eval(node.left)] + [self.eval(c) for c in node.comparators]
        if all(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
            return None
        result = combine(values, node)
        return result.changed(boolean=True) if result is not None else None

    def eval_IfExp(self, node: ast.IfExp) -> Value:
        self.truth(node.test)
        return join(self.eval(node.body), self.eval(node.orelse))

    def eval_Tuple(self, node: ast.Tuple) -> Value:
        return Sequence(tuple(self.eval(e) for e in node.elts))

    def eval_List(self, node: ast.List) -> Value:
        values = [self.eval(e) for e in node.elts]
        element = None
        for value in values:
            element = join(element, value)
        return Container(element)

    def eval_Set(self, node: ast.Set) -> Value:
        for element in node.elts:
            self.eval(element)
        return None

    def eval_Dict(self, node: ast.Dict) -> Value:
        element = None
        for key, value in zip(node.keys, node.values):
            self.eval(key)
            element = join(element, self.eval(value))
        return Container(element, mapping=True)

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
                if _is_device(value):
                    self.host_read(part.value, part.value, value, "formatting")
                if part.format_spec is not None:
                    self.eval(part.format_spec)
        return None

    def _comprehension(self, node, elements: list[ast.expr]) -> Value:
        saved = dict(self.env)
        for generator in node.generators:
            iterable = self.eval(generator.iter)
            item = self.items_element(iterable) if isinstance(iterable, Items) \
                else element_of(iterable)
            self.assign(generator.target, item, generator.iter)
            for condition in generator.ifs:
                self.truth(condition)
        values = [self.eval(e) for e in elements]
        self.env = saved
        return Container(values[-1], mapping=isinstance(node, ast.DictComp)) if values else None

    def eval_ListComp(self, node: ast.ListComp) -> Value:
        return self._comprehension(node, [node.elt])

    eval_SetComp = eval_ListComp
    eval_GeneratorExp = eval_ListComp

    def eval_DictComp(self, node: ast.DictComp) -> Value:
        return self._comprehension(node, [node.key, node.value])


def _names_bool_dtype(call: ast.Call) -> bool:
    """`dtype=torch.bool` or `.to(torch.bool)`."""
    return any(dotted_name(v) == "torch.bool"
               for v in (*call.args, *(k.value for k in call.keywords)))


def _op(op: ast.operator) -> str:
    return {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**",
            ast.FloorDiv: "//", ast.Mod: "%", ast.MatMult: "@"}.get(type(op), "?")


class _CallEvaluator:
    """One call in traced code: host reads, scalar arguments, data-dependent shapes,
    then the value it gives (following project functions with their arguments)."""

    __slots__ = ("walker", "node", "func", "args", "keywords", "receiver")

    def __init__(self, walker: _Walker, node: ast.Call):
        self.walker = walker
        self.node = node
        self.func = node.func

    def evaluate(self) -> Value:
        walker, node, func = self.walker, self.node, self.func
        func_class = func.__class__
        receiver = computed_callee = None
        if func_class is ast.Attribute:
            receiver = walker.eval(func.value)
        elif func_class is not ast.Name:
            computed_callee = walker.eval(func)  # `make()(x)`, `fns[i](x)`
        self.args = list(map(walker.eval, node.args)) if node.args else []
        self.keywords = {k.arg: walker.eval(k.value) for k in node.keywords} \
            if node.keywords else {}
        self.receiver = receiver
        if func_class is ast.Attribute:
            result = self.method_call(receiver, func.attr)
            if result is not _UNHANDLED:
                return result
        dotted = dotted_name(func)
        qualified, function, _ = walker.project.callee(walker.module, dotted) \
            if dotted else (None, None, None)
        project_function = function is not None and not is_torch_library(qualified)
        if func_class is ast.Name:
            if func.id in HOST_BUILTINS and func.id not in walker.env and qualified is None:
                return self.builtin(func.id)
            if func.id in ITERATION_BUILTINS:
                return self.builtin(func.id)
        if qualified is not None and not project_function:
            if qualified == "torch" or qualified.startswith("torch."):
                return self.torch_function(qualified)
            if qualified.startswith(("math.", "numpy.", "np.")):
                return self.host_library(qualified)
            if qualified.startswith("logging.") and qualified.rsplit(".", 1)[-1] in LOG_METHODS:
                return self.logged()
            if qualified in COMPILE:
                return Marker("module")
            if qualified.startswith("cerebras.pytorch.") and qualified.rsplit(".", 1)[-1] in (
                    "zeros_like", "ones_like", "full_like", "zeros", "ones", "full"):
                return combine(self.args, node) or Tensor(
                    False, (_Text("`{}` is built from Python values", node),))
        if func_class is ast.Name:
            callee = walker.eval(func)
        elif func_class is ast.Attribute:
            callee = self.attribute_callee()
        else:
            callee = computed_callee
        return self.call_value(callee)

    # -- methods ---------------------------------------------------------------------------

    def method_call(self, receiver: Value, name: str):
        walker, node = self.walker, self.node
        if isinstance(receiver, Tensor):
            if receiver.device and name in TRUTH_METHODS:
                walker.truth_test(node, node, receiver)
                return None
            if receiver.device and name in HOST_READ_METHODS:
                walker.host_read(node, self.func.value, receiver, f"`.{name}()`")
                return None
            if name in METADATA_METHODS or name in HOST_READ_METHODS or name in TRUTH_METHODS:
                return None
            if name in ("equal", "allclose") and (receiver.device or any(
                    _is_device(a) for a in self.args)):
                walker.host_read(node, node, receiver, f"`.{name}()`")
                return None
            self.check_scalar_arguments(name, method=True)
            if name in DATA_DEPENDENT_SHAPE and receiver.device:
                walker.data_dependent_shape(node, name)
            if name in SIZE_METHODS:
                self.check_sizes(self.args, f"the size of `.{name}()`")
            result = combine([receiver, *self.args, *self.keywords.values()], node)
            if result is not None and name in ("to", "cuda") and not result.device and (
                    self.args or "device" in self.keywords):
                result = result.changed(device=True,
                                 why=(_Text("moved to a device by `{}`", node), *result.why)[:4])
            if result is not None:
                result = result.changed(boolean=(name in BOOLEAN_OPS or (
                    name == "to" and _names_bool_dtype(node))) or (
                    receiver.boolean and name in ("clone", "detach", "to", "contiguous")))
            return result
        if receiver is None and name in SCALAR_ARGUMENTS:
            # `x.add_(g, alpha=lr)` needs a number whatever `x` turns out to be.
            self.check_scalar_arguments(name, method=True, keywords_only=True)
        if isinstance(receiver, Marker):
            return self.marker_method(receiver, name)
        if isinstance(receiver, (Container, Sequence)) and name in ("items", "values", "keys"):
            return Items(receiver if isinstance(receiver, Container) else
                         Container(element_of(receiver)), name)
        if isinstance(receiver, Container) and name in ("append", "extend", "insert"):
            if isinstance(self.func.value, ast.Name):
                added = self.args[-1] if self.args else None
                if name == "extend":
                    added = element_of(added)
                walker.env[self.func.value.id] = Container(join(receiver.element, added))
            return None
        if isinstance(receiver, Container) and name in ("get", "pop"):
            return receiver.element
        if name in LOG_METHODS and self.is_logger(self.func.value):
            return self.logged()
        if name == "format" and isinstance(self.func.value, ast.Constant):
            return self.logged()
        return _UNHANDLED

    def marker_method(self, receiver: Marker, name: str) -> Value:
        walker = self.walker
        kind = receiver.kind
        if kind in ("state_map", "param_state") and name in ("items", "values", "keys"):
            return Items(receiver, name)
        if kind == "param_state" and name in ("get", "setdefault"):
            return Tensor(True, (_Text("`{}` is optimizer state", self.node),))
        if kind == "state_map" and name == "get":
            return Marker("param_state")
        if kind == "group" and name == "get" and self.node.args:
            key = self.node.args[0]
            if isinstance(key, ast.Constant) and key.value in walker.analysis.tensor_keys:
                return Tensor(True, (_Text("`{}` is a scheduled hyperparameter", self.node),),
                              scheduled=True)
            if isinstance(key, ast.Constant) and key.value == "params":
                return Marker("params")
            return None
        if kind == "module" or kind == "module_self" and name == "__call__":
            return self.module_call()
        if kind in ("optimizer_self", "scheduler_self", "module_self"):
            if name == "increment_global_step" or self.returns_tensor(receiver, name):
                return Tensor(True, (_Text("`{}` returns the global step tensor", self.node),))
            return _UNHANDLED
        return None

    def returns_tensor(self, receiver: Marker, name: str) -> bool:
        if receiver.ref is None:
            return False
        self.walker.analysis._note_class_use(True)
        found = self.walker.project.find_method(receiver.ref, name)
        return bool(found and found.owner.official and name in found.owner.official.returns_tensor)

    def attribute_callee(self) -> Value:
        """The function `obj.name(...)` calls: a method along the MRO, a stored function,
        or a function of an imported module."""
        walker = self.walker
        receiver = self.receiver
        name = self.func.attr
        if isinstance(receiver, Marker) and receiver.ref is not None and receiver.kind in (
                "optimizer_self", "scheduler_self", "module_self"):
            walker.analysis._note_class_use(True)
            found = walker.project.find_method(receiver.ref, name)
            if found is not None and found.function is not None and \
                    not walker.project.is_machinery(found.owner):
                return Function(((found.function, receiver.ref, None, True),))
            stored = walker.analysis.attributes_of(receiver.ref).get(name)
            if isinstance(stored, (Function, Marker)):
                return stored
            return None
        if is_super_call(self.func.value) and walker.ref is not None \
                and walker.function.class_name is not None:
            walker.analysis._note_class_use(True)
            owner = next((e for e in walker.project.mro(walker.ref) if e.info is not None
                          and e.info.qualname == walker.function.class_name), None)
            found = walker.project.find_method(walker.ref, name, after=owner) if owner else None
            if found is not None and found.function is not None and \
                    not walker.project.is_machinery(found.owner):
                return Function(((found.function, walker.ref, None, True),))
            return None
        if isinstance(receiver, (Function, Marker)):
            return None
        dotted = dotted_name(self.func)
        if dotted:
            _, target, owner = walker.project.callee(walker.module, dotted)
            if target is not None:
                return Function(((target, None, None, False),))
            if owner is not None:  # `ClassName.method(...)` on a project class
                info, method = owner
                found = walker.project.find_method(walker.project.ref_for_info(info), method)
                if found is not None and found.function is not None:
                    return Function(((found.function, None, None, False),))
        return None

    def call_value(self, callee: Value) -> Value:
        walker = self.walker
        if isinstance(callee, Marker) and callee.kind in ("module", "module_self"):
            return self.module_call()
        if not isinstance(callee, Function):
            return None
        result = None
        for function, ref, closure, bound in callee.targets:
            bindings = self.bindings(function, bound, ref)
            result = join(result, walker.analysis.summary(function, ref or walker.ref, bindings,
                                                           closure))
        return result

    def bindings(self, function: FunctionInfo, bound: bool, ref: ClassRef | None) -> tuple:
        """Argument values by parameter: positional ones, then keyword-only ones."""
        names = function.parameter_names
        values: list[Value] = [None] * len(names)
        offset = 0
        if function.kind == "staticmethod":
            bound = False
        if bound or function.kind == "classmethod":
            if names:
                values[0] = self.self_value(ref)
            offset = 1
        for i, value in enumerate(self.args):
            if isinstance(self.node.args[i], ast.Starred):
                break
            if offset + i < len(values):
                values[offset + i] = value
        for name, value in self.keywords.items():
            if name in names:
                values[names.index(name)] = value
        kwonly = [a.arg for a in function.node.args.kwonlyargs]
        return (*values, *(self.keywords.get(name) for name in kwonly))

    def self_value(self, ref: ClassRef | None) -> Value:
        walker = self.walker
        receiver = self.receiver
        if isinstance(receiver, Marker) and receiver.kind.endswith("_self"):
            return receiver
        current = walker.env.get(walker.function.parameter_names[0]) \
            if walker.function.parameter_names else None
        return current if isinstance(current, Marker) else None

    def module_call(self) -> Value:
        return Tensor(True, (_Text("`{}` is a module's output", self.node),))

    # -- builtins and libraries ----------------------------------------------------------------

    def builtin(self, name: str) -> Value:
        walker, node = self.walker, self.node
        if name in ("len", "isinstance"):
            return None
        if name == "bool":
            for arg, value in zip(node.args, self.args):
                if _is_device(value):
                    walker.truth_test(node, arg, value)
            return None
        if name in ("min", "max"):
            tensors = [v for v in self.args if isinstance(v, Tensor)]
            if len(self.args) == 1:
                tensors = [element_of(self.args[0])] if isinstance(
                    element_of(self.args[0]), Tensor) else tensors
            device = [t for t in tensors if t.device]
            if device:
                walker.truth_test(node, node, device[0])
            return combine(tensors, node)
        if name in ("sum", "abs"):
            values = self.args if name == "abs" else [element_of(a) for a in self.args[:1]]
            return combine(values, node)
        if name == "range":
            for arg, value in zip(node.args, self.args):
                if _is_device(value):
                    walker.host_read(arg, arg, value, "`range()`")
            return None
        if name in ("zip",):
            return Container(Sequence(tuple(element_of(a) for a in self.args)))
        if name == "enumerate":
            return Container(Sequence((None, element_of(self.args[0]) if self.args else None)))
        if name in ("list", "tuple", "reversed", "sorted", "iter"):
            if self.args and isinstance(self.args[0], Marker):
                return self.args[0]
            return Container(element_of(self.args[0])) if self.args else Container(None)
        if name == "next":
            return element_of(self.args[0]) if self.args else None
        if name == "dict":
            return Container(None, mapping=True)
        if name in HOST_BUILTINS:
            for arg, value in zip(node.args, self.args):
                if _is_device(value):
                    walker.host_read(arg, arg, value, f"`{name}()`")
            for keyword in node.keywords:
                value = self.keywords.get(keyword.arg)
                if _is_device(value):
                    walker.host_read(keyword.value, keyword.value, value, f"`{name}()`")
        return None

    def host_library(self, qualified: str) -> Value:
        walker = self.walker
        for arg, value in zip(self.node.args, self.args):
            if _is_device(value):
                walker.host_read(arg, arg, value, f"`{qualified}()`")
        return None

    def is_logger(self, node: ast.expr) -> bool:
        dotted = dotted_name(node)
        if dotted is None:
            return isinstance(node, ast.Call) and (dotted_name(node.func) or "").endswith(
                "getLogger")
        return dotted.rsplit(".", 1)[-1] in LOGGER_NAMES

    def logged(self) -> Value:
        walker = self.walker
        for arg, value in [*zip(self.node.args, self.args),
                           *((k.value, self.keywords.get(k.arg)) for k in self.node.keywords)]:
            if _is_device(value):
                walker.host_read(arg, arg, value, "logging")
        return None

    def torch_function(self, qualified: str) -> Value:
        walker, node = self.walker, self.node
        name = qualified.rsplit(".", 1)[-1]
        if qualified in NON_TENSOR_TORCH:
            if qualified == "torch.is_nonzero":
                for arg, value in zip(node.args, self.args):
                    if _is_device(value):
                        walker.truth_test(node, arg, value)
            return None
        if qualified in ("torch.equal", "torch.allclose"):
            device = [v for v in self.args if _is_device(v)]
            if device:
                walker.host_read(node, node, device[0], f"`{qualified}()`")
            return None
        self.check_scalar_arguments(name, method=False)
        if name in ("full", "full_like"):
            fill = self.keywords.get("fill_value", self.args[1] if len(self.args) > 1 else None)
            fill_node = next((k.value for k in node.keywords if k.arg == "fill_value"),
                             node.args[1] if len(node.args) > 1 else None)
            if _is_device(fill):
                walker.scalar_argument(fill_node, fill, f"the fill value of `{qualified}()`")
        if name == "tensor" and self.args and isinstance(self.args[0], Tensor) \
                and self.args[0].device:
            walker.scalar_argument(node.args[0], self.args[0], "`torch.tensor()`")
        if name in CREATION_SIZE_FUNCTIONS:
            self.check_sizes(self.args, f"the size of `{qualified}()`")
        if name in DATA_DEPENDENT_SHAPE and any(_is_device(a) for a in self.args[:1]):
            walker.data_dependent_shape(node, name)
        if name == "where" and len(node.args) == 1 and not node.keywords and \
                _is_device(self.args[0]):
            walker.data_dependent_shape(node, "where(condition)")
        device_given = "device" in self.keywords and node.keywords and not (
            isinstance(next(k.value for k in node.keywords if k.arg == "device"), ast.Constant))
        inputs = [*self.args, *self.keywords.values()]
        if isinstance(self.receiver, Tensor):
            inputs.append(self.receiver)
        result = combine(inputs, node)
        if result is None:
            if name.startswith("_foreach") or name in ("no_grad", "enable_grad"):
                return None
            result = Tensor(False, (_Text("`{}` is built from Python values", node),))
        if device_given and not result.device:
            result = result.changed(device=True,
                             why=(_Text("`{}` is created on a device", node),))
        boolean = name in BOOLEAN_OPS or _names_bool_dtype(node)
        return result.changed(boolean=boolean)

    def check_scalar_arguments(self, name: str, method: bool, keywords_only: bool = False
                               ) -> None:
        walker, node = self.walker, self.node
        if name not in SCALAR_ARGUMENTS:
            return
        keyword, scalar_first_arity = SCALAR_ARGUMENTS[name]
        for k in node.keywords:
            if k.arg == keyword:
                value = self.keywords.get(keyword)
                if _is_device(value):
                    # A Tensor method's keyword scales its first argument: `p.add_(g,
                    # alpha=-lr)` is `p.add_(-lr * g)`; in `torch.add(p, g, alpha=a)` it
                    # scales the second.
                    if method:
                        walker.scalar_argument(k.value, value, f"`{keyword}=` of `.{name}()`",
                                               name, keyword)
                    else:
                        walker.scalar_argument(k.value, value,
                                               f"`{keyword}=` of `torch.{name}()`")
        if method and not keywords_only and len(node.args) == scalar_first_arity \
                and not node.keywords:
            value = self.args[0]
            if _is_device(value):
                walker.scalar_argument(node.args[0], value,
                                     f"the scalar first argument of `.{name}()` (deprecated form)")

    def check_sizes(self, values: list[Value], position: str) -> None:
        for arg, value in zip(self.node.args, values):
            if _is_device(value):
                self.walker.scalar_argument(arg, value, position)
            elif isinstance(value, Sequence):
                for item_node, item in zip(getattr(arg, "elts", []), value.items):
                    if _is_device(item):
                        self.walker.scalar_argument(item_node, item, position)


_UNHANDLED = object()
