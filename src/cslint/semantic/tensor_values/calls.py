"""One call in traced code: what it reads on the host or needs as a number, and its value."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from cslint.semantic.module_index import FunctionInfo, dotted_name, is_super_call
from cslint.semantic.project import ClassRef
from cslint.semantic.tensor_values.values import (
    DEVICE, MODULE_KINDS, SELF_KINDS, UNSEEN_MODULE_CLASS, ChainStep, Container, Function,
    Items, Marker, Sequence, Tensor, Value, combine, element_of, entry_of, is_device, join,
    merged_into, module_classes, stored_into,
)
from cslint.semantic.torch_api import (
    BOOLEAN_OPS, COMPILE, CREATION_SIZE_FUNCTIONS, DATA_DEPENDENT_SHAPE, DEVICE_FUNCTIONS,
    FOREACH_NUMBER_ARGUMENTS, FOREACH_SCALAR_ARGUMENTS, is_tensor_op,
    HOST_BUILTINS, HOST_READ_METHODS, ITERATION_BUILTINS, LOG_METHODS, LOGGER_NAMES,
    METADATA_METHODS, NON_TENSOR_TORCH, OPTIM_HELPERS_COMPUTING, OPTIM_HELPERS_GIVING_ARGUMENT,
    OPTIM_HELPERS_READING_VALUE, SCALAR_ARGUMENTS, SIZE_METHODS, TENSORS_FROM_DATA,
    TRUTH_METHODS,
)

if TYPE_CHECKING:
    from cslint.semantic.tensor_values.walker import FunctionWalker


def _first_argument(function: FunctionInfo, bound: bool) -> int:
    """The position of the parameter a call's first argument goes to: 1 past the `self`
    of a method called bound (or the `cls` of a classmethod), else 0."""
    return 1 if (bound and function.kind != "staticmethod") or \
        function.kind == "classmethod" else 0


def is_torch_library(qualified: str | None) -> bool:
    """torch's ops and utilities, as opposed to Python code of torch.optim that a
    project (torch's own source included) may define and we analyse."""
    return qualified is not None and (qualified == "torch" or (
        qualified.startswith("torch.") and not qualified.startswith("torch.optim.")))


# Calls that give a list (or tuple) of tensors.
_LIST_MAKERS = frozenset({"unbind", "split", "chunk", "tensor_split", "list", "tuple"})


def _gives_a_list(node: ast.expr, function: ast.AST, seen: int = 0) -> bool:
    """Whether `node` is a list of tensors by its form: a display, a comprehension,
    `t.unbind()`, a foreach op's result (`torch._foreach_abs(xs)`), or a name the
    function binds only to those. (The analysis keeps a list of tensors as the tensors
    it holds; the list overload of `torch._foreach_lerp_`'s weight takes one.)"""
    if isinstance(node, (ast.List, ast.ListComp, ast.Tuple, ast.GeneratorExp)):
        return True
    if isinstance(node, ast.Call):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else \
            node.func.id if isinstance(node.func, ast.Name) else ""
        return name in _LIST_MAKERS or (name.startswith("_foreach_")
                                        and not name.endswith("_"))
    if isinstance(node, ast.Name) and seen < 4:
        values = [statement.value for statement in ast.walk(function)
                  if isinstance(statement, ast.Assign) and any(
                      isinstance(t, ast.Name) and t.id == node.id for t in statement.targets)]
        return bool(values) and all(_gives_a_list(v, function, seen + 1) for v in values)
    return False


def _names_bool_dtype(call: ast.Call) -> bool:
    """`dtype=torch.bool` or `.to(torch.bool)`."""
    return any(dotted_name(v) == "torch.bool"
               for v in (*call.args, *(k.value for k in call.keywords)))


# Literals a call can give a parameter and a test can compare, by Python's own rules.
LITERAL_TYPES = (str, bytes, int, float, bool, type(None))

# torch.nn.Module's methods that give the module itself back.
MODULE_RETURNS_ITSELF = frozenset({
    "to", "cuda", "cpu", "xpu", "float", "half", "double", "bfloat16", "type", "train",
    "eval", "requires_grad_", "apply", "to_empty", "share_memory"})


class CallEvaluator:
    """One call in traced code: host reads, scalar arguments, data-dependent shapes,
    then the value it gives (following project functions with their arguments)."""

    __slots__ = ("walker", "node", "func", "args", "keywords", "receiver")

    def __init__(self, walker: FunctionWalker, node: ast.Call):
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
            if qualified == "typing.cast":  # the value itself (`cast(float, -lr * m)`)
                return self.args[1] if len(self.args) == 2 and not node.keywords else None
            if qualified in COMPILE:
                return Marker("module")
            if qualified in DEVICE_FUNCTIONS:
                return DEVICE
            if qualified in ("collections.OrderedDict", "collections.defaultdict"):
                # A defaultdict's first argument is its factory, not entries.
                sources = self.args[:1] if qualified.endswith("OrderedDict") else self.args[1:2]
                return self.with_entries(Container(None, mapping=True), sources)
            if qualified.startswith("cerebras.pytorch.") and qualified.rsplit(".", 1)[-1] in (
                    "zeros_like", "ones_like", "full_like", "zeros", "ones", "full"):
                return combine(self.args, node) or Tensor(
                    False, (ChainStep("`{}` is built from Python values", node),))
        if dotted and function is None and walker.ref is not None:
            made = self.object_made()
            if made is not None:
                return made
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
            if name not in walker.analysis.tensor_methods:
                return None  # a subclass's method (`adj_t.has_value()`): its result unknown
            if name in ("equal", "allclose") and (receiver.device or any(
                    is_device(a) for a in self.args)):
                walker.host_read(node, node, receiver, f"`.{name}()`")
                return None
            self.check_scalar_arguments(name, method=True)
            if name in DATA_DEPENDENT_SHAPE and receiver.device:
                walker.data_dependent_shape(node, name)
            if name in SIZE_METHODS:
                self.check_sizes(self.args, f"the size of `.{name}()`")
            result = combine([receiver, *self.args, *self.keywords.values()], node)
            # `.to(dtype)` or `.to(a device we cannot name)` leaves a host constant there.
            if result is not None and not result.device and (name == "cuda" or (
                    name == "to" and DEVICE in (*self.args, self.keywords.get("device")))):
                result = result.changed(device=True, why=(
                    ChainStep("moved to a device by `{}`", node), *result.why)[:4])
            if result is not None:
                result = result.changed(boolean=(name in BOOLEAN_OPS or (
                    name == "to" and _names_bool_dtype(node))) or (
                    receiver.boolean and name in ("clone", "detach", "to", "contiguous")))
            if result is not None and result.device and name.endswith("_") \
                    and not name.startswith("_"):
                # `total = torch.zeros(())` then `total.add_(p.grad.norm())`
                walker.host_tensor_takes(self.func.value, result.changed(why=(
                    ChainStep("a device value taken in place by `{}`", node),
                    *result.why[1:])[:4]))
            return result
        if receiver is None and name in SCALAR_ARGUMENTS:
            # `x.add_(g, alpha=lr)` needs a number whatever `x` turns out to be.
            self.check_scalar_arguments(name, method=True, keywords_only=True)
        if isinstance(receiver, Marker):
            return self.marker_method(receiver, name)
        if isinstance(receiver, (Container, Sequence)) and name in ("items", "values", "keys"):
            return Items(receiver if isinstance(receiver, Container) else
                         Container(element_of(receiver)), name)
        if isinstance(receiver, Container):
            return self.container_method(receiver, name)
        if name in LOG_METHODS and self.is_logger(self.func.value):
            return self.logged()
        if name == "format" and isinstance(self.func.value, ast.Constant):
            return self.logged()
        return _UNHANDLED

    def container_method(self, receiver: Container, name: str):
        """A list's or dict's method; one that adds entries rebinds the name to the
        container holding them too."""
        args = self.args
        if name in ("get", "pop"):
            written = entry_of(receiver, self.node.args[0] if self.node.args else None)
            return written if written is receiver.element or len(args) < 2 \
                else join(written, args[1])
        if name == "popitem":
            return Sequence((receiver.key, receiver.element))
        if name == "copy":
            return receiver
        if name == "setdefault" and args:
            value = args[1] if len(args) > 1 else None
            self.rebind(stored_into(receiver, args[0], value))
            return join(receiver.element, value)
        if name in ("append", "insert") and args:
            self.rebind(stored_into(receiver, None, args[-1]))
            return None
        if name == "extend" and args:
            self.rebind(stored_into(receiver, None, element_of(args[0])))
            return None
        if name == "update" and receiver.mapping:
            self.rebind(self.with_entries(receiver, args))
            return None
        return _UNHANDLED

    def rebind(self, container: Container) -> None:
        """`xs.append(x)` and the like: `xs` (a local name) holds `container` from now on."""
        if isinstance(self.func.value, ast.Name):
            self.walker.env[self.func.value.id] = container
            self.walker.note_filled(self.func.value.id, container)

    def with_entries(self, mapping: Container, sources: list[Value]) -> Container:
        """`mapping` with the entries of `sources` (dicts or key-value pairs) and of the
        call's keywords (`dict(a, b=t)`, `d.update(other, b=t)`)."""
        for value in sources:
            mapping = merged_into(mapping, value)
        for name, value in self.keywords.items():
            mapping = merged_into(mapping, value) if name is None \
                else stored_into(mapping, None, value)
        return mapping

    def marker_method(self, receiver: Marker, name: str) -> Value:
        walker = self.walker
        kind = receiver.kind
        if kind in ("state_map", "param_state") and name in ("items", "values", "keys"):
            return Items(receiver, name)
        if kind == "param_state" and name in ("get", "setdefault"):
            return Tensor(True, (ChainStep("`{}` is optimizer state", self.node),))
        if kind == "state_map" and name == "get":
            return Marker("param_state")
        if kind == "group" and name == "get" and self.node.args:
            key = self.node.args[0]
            if isinstance(key, ast.Constant) and key.value in walker.analysis.tensor_keys:
                return Tensor(True, (ChainStep("`{}` is a scheduled hyperparameter",
                                               self.node),), scheduled=True)
            if isinstance(key, ast.Constant) and key.value == "params":
                return Marker("params")
            return None
        if kind in MODULE_KINDS and name in ("__call__", "forward") or \
                kind == "module_self" and name == "__call__":
            return self.module_call(receiver)
        if kind == "module":
            return self.submodule_method(receiver, name)
        if kind in SELF_KINDS:
            if name == "increment_global_step" or self.returns_tensor(receiver, name):
                return Tensor(True, (ChainStep("`{}` returns the global step tensor", self.node),))
            return _UNHANDLED
        return None

    def returns_tensor(self, receiver: Marker, name: str) -> bool:
        if receiver.ref is None:
            return False
        self.walker.analysis.note_class_use(True)
        found = self.walker.project.find_method(receiver.ref, name)
        return bool(found and found.owner.official and name in found.owner.official.returns_tensor)

    def attribute_callee(self) -> Value:
        """The function `obj.name(...)` calls: a method along the MRO, a stored function,
        or a function of an imported module."""
        walker = self.walker
        receiver = self.receiver
        name = self.func.attr
        if isinstance(receiver, Marker) and receiver.ref is not None and \
                receiver.kind in SELF_KINDS:
            walker.analysis.note_class_use(True)
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
            walker.analysis.note_class_use(True)
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

    def object_made(self) -> Value:
        """An object of a plain project class made in an optimizer's traced code
        (`projector = Projector(rank)` in its step): its `__init__` runs with the call's
        arguments, and its methods run where it is used."""
        walker = self.walker
        analysis = walker.analysis
        made = analysis.class_attributes.plain_class_made(walker.module, self.node)
        if made is None:
            return None
        analysis.note_class_use(True)  # (only where the call makes such an object)
        if not walker.project.kinds(walker.ref).optimizer:
            return None
        instance = Marker("object_self", made)
        found = walker.project.find_method(made, "__init__")
        if found is not None and found.function is not None and \
                not walker.project.is_machinery(found.owner):
            values = list(self.bindings(found.function, True, made))
            if values:
                values[0] = instance
            analysis.summary(found.function, made, tuple(values))
        return instance

    def call_value(self, callee: Value) -> Value:
        walker = self.walker
        if isinstance(callee, Marker) and callee.kind in ("module", "module_list",
                                                          "module_self"):
            return self.module_call(callee)
        if not isinstance(callee, Function):
            return None
        result = None
        for function, ref, closure, bound in callee.targets:
            bindings = self.bindings(function, bound, ref)
            literals = self.literals(function, bound)
            filled_out: list = []
            result = join(result, walker.analysis.summary(function, ref or walker.ref, bindings,
                                                           closure, literals, filled_out))
            for index, value in filled_out:
                self.fill_argument(function, bound, index, value)
        return result

    def fill_argument(self, function: FunctionInfo, bound: bool, index: int,
                      value: Value) -> None:
        """The caller's name given as the parameter at `index` (of the bindings) holds
        what the callee filled it with, too."""
        name = function.binding_names[index]
        given = next((k.value for k in self.node.keywords if k.arg == name), None)
        position = index - _first_argument(function, bound)
        if given is None and index < len(function.parameter_names) and \
                0 <= position < len(self.node.args) and not any(
                    isinstance(a, ast.Starred) for a in self.node.args[:position + 1]):
            given = self.node.args[position]
        if isinstance(given, ast.Name):
            env = self.walker.env
            env[given.id] = join(env.get(given.id), value)

    def literals(self, function: FunctionInfo, bound: bool) -> tuple:
        """The literals this call gives the parameters `function` tests alone
        (`TensorValueAnalysis.literal_parameters`): a constant argument, or the
        parameter's constant default where the call passes none; sorted by name."""
        node, arguments = self.node, function.node.args
        # (Most calls give no literal: then the function's tests are not read.)
        if not any(isinstance(e, ast.Constant) for e in (
                *node.args, *(k.value for k in node.keywords), *arguments.defaults,
                *arguments.kw_defaults)):
            return ()
        tested = self.walker.analysis.literal_parameters(function)
        if not tested:
            return ()
        if any(isinstance(a, ast.Starred) for a in node.args) or \
                any(k.arg is None for k in node.keywords):
            return ()  # (`*args`, `**kwargs`: which parameter gets what is not known)
        positional = [*arguments.posonlyargs, *arguments.args]
        given: dict[str, ast.expr] = {}
        for parameter, argument in zip(positional[_first_argument(function, bound):],
                                       node.args):
            given[parameter.arg] = argument
        given.update((k.arg, k.value) for k in node.keywords)
        defaults = dict(zip([a.arg for a in positional[len(positional)
                                                       - len(arguments.defaults):]],
                            arguments.defaults))
        defaults.update((a.arg, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults)
                        if d is not None)
        found = []
        for name in sorted(tested):
            expression = given.get(name, defaults.get(name))
            if isinstance(expression, ast.Constant) and \
                    isinstance(expression.value, LITERAL_TYPES):
                found.append((name, expression.value))
        return tuple(found)

    def bindings(self, function: FunctionInfo, bound: bool, ref: ClassRef | None) -> tuple:
        """Argument values by parameter: positional ones, then keyword-only ones."""
        names = function.parameter_names
        values: list[Value] = [None] * len(names)
        offset = _first_argument(function, bound)
        if offset and names:
            values[0] = self.self_value(ref)
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

    def module_call(self, module: Marker) -> Value:
        """A module called (a Sequential: its elements): a project class's `forward`
        under the call's arguments gives its value (a tuple stays a tuple); a torch.nn
        layer's output is a tensor; a class we cannot see gives nothing known."""
        classes = module_classes(module.ref)
        result = None
        for ref in classes:
            forward = self.walker.analysis.forward_of(ref)
            if forward.__class__ is FunctionInfo:
                # Of several classes the call reaches one, we cannot tell which: each
                # runs as where no caller is visible (the arguments may fit only one).
                output = self.run_method(forward, ref, with_arguments=len(classes) == 1)
            elif forward:
                output = Tensor(True, (ChainStep("`{}` is a module's output", self.node),))
            else:
                output = None
            result = join(result, output)
        return result

    def submodule_method(self, module: Marker, name: str) -> Value:
        """`self.block.method(...)`: the project method under the call's arguments; a
        method of torch.nn.Module's gives what it gives (`parameters()` tensors,
        `modules()` modules of classes we cannot see, `to()` the module itself), any
        other nothing known; so does one of a class we cannot see."""
        ref = module.ref
        if ref is UNSEEN_MODULE_CLASS:
            return None
        found = self.walker.project.find_method(ref, name) \
            if isinstance(ref, ClassRef) else None
        if found is None or found.function is None or \
                self.walker.project.is_machinery(found.owner):
            return self.module_library_method(module, name)
        return self.run_method(found.function, ref)

    def module_library_method(self, module: Marker, name: str) -> Value:
        """What a method torch.nn.Module defines gives (None: nothing known)."""
        if name in MODULE_RETURNS_ITSELF:
            return module
        if name in ("parameters", "buffers", "get_parameter", "get_buffer"):
            return Tensor(True, (ChainStep("`{}` gives a module's parameters", self.node),))
        if name in ("named_parameters", "named_buffers"):
            return Container(Sequence((None, Tensor(True, (ChainStep(
                "`{}` gives a module's parameters", self.node),)))))
        if name == "state_dict":
            return Container(Tensor(True, (ChainStep("`{}` holds a module's parameters",
                                                     self.node),)), mapping=True)
        unseen = Marker("module", UNSEEN_MODULE_CLASS)
        if name in ("modules", "children"):
            return Container(unseen)
        if name in ("named_modules", "named_children"):
            return Container(Sequence((None, unseen)))
        if name == "get_submodule":
            return unseen
        return None

    def run_method(self, function: FunctionInfo, ref: ClassRef, with_arguments: bool = True
                   ) -> Value:
        """A method of a submodule of class `ref` called with this call's arguments; an
        argument we know nothing of is what the method itself shows (its evidence)."""
        analysis = self.walker.analysis
        evidence = analysis.entry_points.input_bindings(function, ref)
        values = list(self.bindings(function, True, ref)) if with_arguments else \
            list(evidence)
        if values:
            values[0] = Marker("module_self", ref)
        values = [value if value is not None else known
                  for value, known in zip(values, evidence)]
        return analysis.summary(function, ref, tuple(values))

    # -- builtins and libraries ----------------------------------------------------------------

    def builtin(self, name: str) -> Value:
        walker, node = self.walker, self.node
        if name in ("len", "isinstance"):
            return None
        if name == "bool":
            for arg, value in zip(node.args, self.args):
                if is_device(value):
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
                if is_device(value):
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
            return self.with_entries(Container(None, mapping=True), self.args[:1])
        if name in HOST_BUILTINS:
            for arg, value in zip(node.args, self.args):
                if is_device(value):
                    walker.host_read(arg, arg, value, f"`{name}()`")
            for keyword in node.keywords:
                value = self.keywords.get(keyword.arg)
                if is_device(value):
                    walker.host_read(keyword.value, keyword.value, value, f"`{name}()`")
        return None

    def host_library(self, qualified: str) -> Value:
        walker = self.walker
        for arg, value in zip(self.node.args, self.args):
            if is_device(value):
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
            if is_device(value):
                walker.host_read(arg, arg, value, "logging")
        return None

    def torch_function(self, qualified: str) -> Value:
        walker, node = self.walker, self.node
        name = qualified.rsplit(".", 1)[-1]
        if qualified == "torch.device":  # `torch.device("cuda")`, `torch.device(p.device)`
            kind = self.args[0] if self.args else self.keywords.get("type")
            return DEVICE if kind is DEVICE else None
        if qualified in NON_TENSOR_TORCH:
            if qualified == "torch.is_nonzero":
                for arg, value in zip(node.args, self.args):
                    if is_device(value):
                        walker.truth_test(node, arg, value)
            return None
        if qualified in OPTIM_HELPERS_READING_VALUE:
            for arg, value in zip(node.args[:1], self.args):
                if is_device(value):
                    walker.host_read(arg, arg, value, f"`{qualified}()` (`.item()`)")
            return None
        if qualified in OPTIM_HELPERS_GIVING_ARGUMENT:
            return self.args[0] if len(self.args) == 1 and not node.keywords else None
        if qualified in OPTIM_HELPERS_COMPUTING:
            return combine(self.args[:1], node) if len(self.args) == 1 else None
        if qualified in ("torch.equal", "torch.allclose"):
            device = [v for v in self.args if is_device(v)]
            if device:
                walker.host_read(node, node, device[0], f"`{qualified}()`")
            return None
        self.check_scalar_arguments(name, method=False)
        if qualified in TENSORS_FROM_DATA:
            given = node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg == "data"), None)
            listed = _device_element(self.args[0] if self.args else self.keywords.get("data"))
            if given is not None and listed is not None:
                walker.host_read(given, given, listed, f"`{qualified}()`", listed_by=name)
        if name in ("full", "full_like"):
            fill = self.keywords.get("fill_value", self.args[1] if len(self.args) > 1 else None)
            fill_node = next((k.value for k in node.keywords if k.arg == "fill_value"),
                             node.args[1] if len(node.args) > 1 else None)
            if is_device(fill):
                walker.scalar_argument(fill_node, fill, f"the fill value of `{qualified}()`",
                                       filled=name if qualified == f"torch.{name}" else None)
        if name in ("linspace", "logspace"):
            # (start, end, steps): the bounds are read as numbers, the steps are the size
            for index, (arg, value) in enumerate(zip(node.args, self.args)):
                if is_device(value):
                    walker.scalar_argument(arg, value, (
                        "the start of", "the end of", "the number of steps of",
                        "the base of")[min(index, 3)] + f" `{qualified}()`")
        elif name in CREATION_SIZE_FUNCTIONS:
            self.check_sizes(self.args, f"the size of `{qualified}()`")
        if name in DATA_DEPENDENT_SHAPE and any(is_device(a) for a in self.args[:1]):
            walker.data_dependent_shape(node, name)
        if name == "where" and len(node.args) == 1 and not node.keywords and \
                is_device(self.args[0]):
            walker.data_dependent_shape(node, "where(condition)")
        if not is_tensor_op(qualified):
            return None  # a utility of torch's (flags, modules, handles): not known
        # The result is a tensor like its inputs; `torch.tensor(t)` and `torch.as_tensor(t)`
        # of a tensor copy it, reading no value.
        inputs = [*self.args, *self.keywords.values()]
        if isinstance(self.receiver, Tensor):
            inputs.append(self.receiver)
        result = combine(inputs, node)
        if result is None:
            if name.startswith("_foreach") or name in ("no_grad", "enable_grad"):
                return None
            result = Tensor(False, (ChainStep("`{}` is built from Python values", node),))
        # Built from Python values, it stays on the host unless `device=` names a device
        # (`device=None`, `"cpu"`, or a value we cannot name leave a host constant).
        if self.keywords.get("device") is DEVICE and not result.device:
            result = result.changed(device=True,
                             why=(ChainStep("`{}` is created on a device", node),))
        boolean = name in BOOLEAN_OPS or _names_bool_dtype(node)
        written = next((k.value for k in node.keywords if k.arg == "out"), None)
        if written is not None and result.device:
            # `torch.add(total, g.sum(), out=total)`
            walker.host_tensor_takes(written, result.changed(boolean=boolean, why=(
                ChainStep("a device value written into it by `{}`", node),
                *result.why[1:])[:4]))
        return result.changed(boolean=boolean)

    def check_scalar_arguments(self, name: str, method: bool, keywords_only: bool = False
                               ) -> None:
        walker, node = self.walker, self.node
        if not method and name in FOREACH_SCALAR_ARGUMENTS:
            keyword = FOREACH_SCALAR_ARGUMENTS[name]
            for k in node.keywords:
                value = self.keywords.get(keyword) if k.arg == keyword else None
                if is_device(value):
                    walker.scalar_argument(k.value, value, f"`{keyword}=` of `torch.{name}()`",
                                           keyword=keyword, foreach=name)
            return
        if not method and name in FOREACH_NUMBER_ARGUMENTS:
            keyword, position = FOREACH_NUMBER_ARGUMENTS[name]
            value = self.keywords.get(keyword, self.args[position]
                                      if len(self.args) > position else None)
            given = next((k.value for k in node.keywords if k.arg == keyword),
                         node.args[position] if len(node.args) > position else None)
            if is_device(value) and given is not None and \
                    not _gives_a_list(given, walker.function.node):
                walker.scalar_argument(given, value, f"`{keyword}` of `torch.{name}()`",
                                       keyword=keyword, listed=name, index=position)
            return
        if name not in SCALAR_ARGUMENTS:
            return
        keyword, scalar_first_arity = SCALAR_ARGUMENTS[name]
        for k in node.keywords:
            if k.arg == keyword:
                value = self.keywords.get(keyword)
                if is_device(value):
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
            if is_device(value):
                walker.scalar_argument(node.args[0], value,
                                       f"the scalar first argument of `.{name}()` (deprecated form)",
                                       name)

    def check_sizes(self, values: list[Value], position: str) -> None:
        for arg, value in zip(self.node.args, values):
            if is_device(value):
                self.walker.scalar_argument(arg, value, position)
            elif isinstance(value, Sequence):
                for item_node, item in zip(getattr(arg, "elts", []), value.items):
                    if is_device(item):
                        self.walker.scalar_argument(item_node, item, position)


def _device_element(value: Value, depth: int = 0) -> Tensor | None:
    """A device tensor among the elements of a list or tuple (nested ones included)."""
    if isinstance(value, Sequence):
        items = value.items
    elif isinstance(value, Container) and not value.mapping:
        items = (value.element,)
    else:
        return None
    for item in items:
        if is_device(item):
            return item
        found = _device_element(item, depth + 1) if depth < 3 else None
        if found is not None:
            return found
    return None


_UNHANDLED = object()
