"""What each class sets up on `self` and the state keys it stores Python numbers under."""

from __future__ import annotations

import ast
import re
from functools import cached_property

from cslint.semantic.module_index import (
    ClassInfo, FunctionInfo, ModuleIndex, dotted_name, source_snippet,
)
from cslint.semantic.project import ClassRef, ProjectIndex
from cslint.semantic.tensor_values.values import (
    MODULE_KINDS, UNSEEN_MODULE_CLASS, Function, Marker, Tensor, Value, join, union_classes,
)
from cslint.semantic.torch_api import COMPILE, DEVICE_ATTRIBUTES, METADATA_ATTRIBUTES, \
    METADATA_METHODS, NEW_TENSOR_METHODS, TENSOR_FACTORIES


# Stores under one state key that make objects of more than one class (or other values).
_NOT_ONE_CLASS = object()


class ClassAttributes:
    """The `self.X` of each class (parameters, buffers, submodules, stored functions)
    and its Python-valued state keys, found once per class and merged along each MRO."""

    def __init__(self, project: ProjectIndex):
        self.project = project
        self._own: dict[int, tuple[dict[str, Value], frozenset[str]]] = {}
        self._along_mro: dict[int, tuple[dict[str, Value], frozenset[str]]] = {}
        self._python_keys_cache: dict[int, frozenset[str]] = {}
        # (param-group keys, shared state keys) made tensors where optimizers are set up.
        self._setup_keys_cache: dict[int, tuple[frozenset[str], frozenset[str]]] = {}
        self._setup_keys_along_mro: dict[int, tuple[frozenset[str], frozenset[str]]] = {}
        self._forwards: dict[int, FunctionInfo | bool] = {}
        self._objects_cache: dict[int, dict[str, object]] = {}
        self._object_classes: dict[tuple[int, str], ClassRef | None] = {}

    def _of_class(self, info: ClassInfo, owner: ClassRef
                  ) -> tuple[dict[str, Value], frozenset[str]]:
        """One walk over a class's own methods: the `self.X` it sets up (parameters,
        buffers, submodules, stored functions) and the state keys it stores Python
        numbers under (torch's LBFGS keeps `state["n_iter"] = 0`)."""
        cached = self._own.get(id(info))
        if cached is not None:
            return cached
        values: dict[str, Value] = {}
        appended: dict[str, Value] = {}  # `self.layers.append(Block(...))`: the elements
        module = info.module
        python_keys = set(self._python_keys_of_class(info))
        # An optimizer's helper objects (`self.helper = LoRARiteHelper()`): their methods
        # run in its step.
        keeps_objects = self.project.kinds(self.project.ref_for_info(info)).optimizer
        for method in info.methods.values():
            if not _may_set_up_attributes(method):
                continue  # sets up no `self.X`
            lists = _local_lists(method)
            # Statements, and the calls they make directly, hold every fact we want here:
            # far fewer nodes than a walk over every expression.
            for node in method.statements:
                kind = node.__class__
                if kind is ast.Assign and len(node.targets) == 1:
                    target = node.targets[0]
                    if target.__class__ is ast.Attribute and \
                            target.value.__class__ is ast.Name and target.value.id == "self":
                        value = self._attribute_value(module, owner, node.value, lists)
                        if value is None and keeps_objects:
                            kept = self.plain_class_made(module, node.value)
                            value = Marker("object_self", kept) if kept is not None else None
                        if value is not None:
                            values[target.attr] = _reassigned(values.get(target.attr), value)
                elif kind is ast.Call and node.func.__class__ is ast.Attribute \
                        and node.func.attr in ("register_buffer", "register_parameter") \
                        and node.args and isinstance(node.args[0], ast.Constant) \
                        and isinstance(node.args[0].value, str):
                    kind = "buffer" if node.func.attr == "register_buffer" else "parameter"
                    values[node.args[0].value] = Tensor(
                        True, (f"`self.{node.args[0].value}` is a module {kind}",))
                elif kind is ast.Call and node.func.__class__ is ast.Attribute \
                        and node.func.attr in ("append", "extend") and node.args:
                    container = node.func.value
                    if container.__class__ is ast.Attribute and \
                            container.value.__class__ is ast.Name and \
                            container.value.id == "self":
                        added = [node.args[0]] if node.func.attr == "append" else \
                            _elements(node.args[0])
                        for element in added or [None]:
                            appended[container.attr] = join(
                                appended.get(container.attr),
                                _element_marker(self.project, module, element))
        for name, element in appended.items():
            value = values.get(name)
            if value.__class__ is Marker and value.kind == "module_list":
                classes = element.ref if value.ref == () else \
                    union_classes(value.ref, element.ref)
                values[name] = Marker("module_list", classes)
        for name, value in values.items():
            if value.__class__ is Marker and value.kind == "module_list" and value.ref == ():
                values[name] = Marker("module_list", UNSEEN_MODULE_CLASS)  # never filled
        found = (values, frozenset(python_keys))
        self._own[id(info)] = found
        return found

    def _merged(self, ref: ClassRef) -> tuple[dict[str, Value], frozenset[str]]:
        """What the classes of `ref`'s MRO set up, the nearest one winning."""
        cached = self._along_mro.get(id(ref))
        if cached is None:
            values: dict[str, Value] = {}
            keys: set[str] = set()
            for entry in reversed(self.project.mro(ref)):
                if entry.info is not None:
                    own_values, own_keys = self._of_class(entry.info, ref)
                    values.update(own_values)
                    keys |= own_keys
            cached = (values, frozenset(keys))
            self._along_mro[id(ref)] = cached
        return cached

    @cached_property
    def python_keys_anywhere(self) -> frozenset[str]:
        """State keys any optimizer class of the project stores Python numbers under."""
        return self._in_any_optimizer(self._python_keys_of_class)

    def _in_any_optimizer(self, keys_of_class) -> frozenset[str]:
        """The union of `keys_of_class` over the project's optimizer classes."""
        keys: set[str] = set()
        for ref in self.project.project_classes:
            if ref.info is not None and self.project.kinds(ref).optimizer:
                keys |= keys_of_class(ref.info)
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
    def object_keys_anywhere(self) -> frozenset[str]:
        """State keys any optimizer class of the project stores an object of one of the
        project's plain classes under (`state["projector"] = GaLoreProjector(...)`)."""
        return self._in_any_optimizer(lambda info: frozenset(self._objects_of_class(info)))

    def object_state_class(self, ref: ClassRef | None, key: str) -> ClassRef | None:
        """The plain project class (no module, optimizer or scheduler) whose objects `ref`
        (or a class of its MRO) keeps under the state key `key`, where every store under
        that key makes one of that class; None otherwise."""
        if ref is None:
            return None
        cache_key = (id(ref), key)
        if cache_key in self._object_classes:
            return self._object_classes[cache_key]
        found = None
        for entry in self.project.mro(ref):
            if entry.info is None:
                continue
            stored = self._objects_of_class(entry.info).get(key)
            if stored is None:
                continue
            if stored is _NOT_ONE_CLASS or (found is not None and stored is not found):
                found = None
                break
            found = stored
        self._object_classes[cache_key] = found
        return found

    def _objects_of_class(self, info: ClassInfo) -> dict[str, object]:
        """The literal keys a class's own methods store under (`x[key] = value`) whose
        every store makes an object of one plain project class: key -> that class's ref
        (`_NOT_ONE_CLASS` where the stores under a key that makes one make anything else)."""
        cached = self._objects_cache.get(id(info))
        if cached is not None:
            return cached
        stores: dict[str, list[tuple[ModuleIndex, ast.expr]]] = {}
        for method in info.methods.values():
            if not method.mentions("] = "):
                continue
            for node in method.statements:
                if node.__class__ is ast.Assign:
                    for target in node.targets:
                        if target.__class__ is ast.Subscript \
                                and target.slice.__class__ is ast.Constant \
                                and isinstance(target.slice.value, str):
                            stores.setdefault(target.slice.value, []).append(
                                (method.module, node.value))
        found: dict[str, object] = {}
        for key, values in stores.items():
            classes = {id(c): c for c in (self.plain_class_made(module, value)
                                          for module, value in values)}
            if not any(c is not None for c in classes.values()):
                continue
            found[key] = next(iter(classes.values())) if len(classes) == 1 else _NOT_ONE_CLASS
        self._objects_cache[id(info)] = found
        return found

    def plain_class_made(self, module: ModuleIndex, value: ast.expr) -> ClassRef | None:
        """The ref of the plain project class (no module, optimizer or scheduler, none
        of unseen bases) `value` calls (`GaLoreProjector(rank)`)."""
        if value.__class__ is not ast.Call:
            return None
        dotted = dotted_name(value.func)
        if dotted is None:
            return None
        target = self.project.resolve_in_module(module, dotted)
        if not isinstance(target, ClassInfo):
            return None
        ref = self.project.ref_for_info(target)
        return ref if self.project.is_plain_class(ref) else None

    def group_tensor_keys(self, ref: ClassRef | None) -> frozenset[str]:
        """Param-group keys `ref` (or a class of its MRO) makes tensors under where the
        optimizer is set up (`group["step"] = cstorch.zeros(())` in `preinitialize`)."""
        return self._setup_keys(ref)[0]

    def group_key_made_elsewhere(self, ref: ClassRef | None, key: str,
                                 function: FunctionInfo) -> bool:
        """Whether a method of `ref` (or of a class of its MRO) other than `function`
        writes the entry `key` (`group["initial_lr"] = group["lr"]` in `__init__`) or
        names it in a dict it builds (the defaults): then `if key not in group:` in
        `function` may never be taken. True where the class is unknown."""
        if ref is None or ref.info is None:
            return True
        for entry in self.project.mro(ref):
            if entry.info is None:
                continue
            for method in entry.info.methods.values():
                if method is not function and method.mentions(key) \
                        and key in method.named_keys:
                    return True
        return False

    def shared_state_keys(self, ref: ClassRef | None) -> frozenset[str]:
        """Keys of its own `ref` (or a class of its MRO) makes a state tensor under where
        the optimizer is set up (`self.state["k"] = cstorch.zeros(1)` in `preinitialize`:
        state of the whole optimizer, not of a parameter)."""
        return self._setup_keys(ref)[1]

    @cached_property
    def global_step_anywhere(self) -> bool:
        """Whether any optimizer class of the project has cstorch's global step."""
        return any(ref.info is not None and self.project.kinds(ref).optimizer
                   and self.project.has_global_step(ref) for ref in self.project.project_classes)

    def _setup_keys(self, ref: ClassRef | None) -> tuple[frozenset[str], frozenset[str]]:
        if ref is None:
            return frozenset(), frozenset()
        cached = self._setup_keys_along_mro.get(id(ref))
        if cached is None:
            group: set[str] = set()
            shared: set[str] = set()
            for entry in self.project.mro(ref):
                if entry.info is not None:
                    own = self._setup_keys_of_class(entry.info)
                    group |= own[0]
                    shared |= own[1]
            cached = self._setup_keys_along_mro[id(ref)] = (frozenset(group), frozenset(shared))
        return cached

    @cached_property
    def group_keys_anywhere(self) -> frozenset[str]:
        """Param-group keys any optimizer class of the project makes tensors under."""
        return self._in_any_optimizer(lambda info: self._setup_keys_of_class(info)[0])

    @cached_property
    def shared_keys_anywhere(self) -> frozenset[str]:
        """Keys any optimizer class of the project makes a shared state tensor under."""
        return self._in_any_optimizer(lambda info: self._setup_keys_of_class(info)[1])

    def _setup_keys_of_class(self, info: ClassInfo) -> tuple[frozenset[str], frozenset[str]]:
        cached = self._setup_keys_cache.get(id(info))
        if cached is None:
            group: set[str] = set()
            shared: set[str] = set()
            for name in _SETUP_METHODS:
                method = info.methods.get(name)
                if method is not None and (method.mentions("param_groups")
                                           or method.mentions("state")):
                    own_group, own_shared = _setup_tensor_keys(self.project, info.module,
                                                               method)
                    group |= own_group
                    shared |= own_shared
            cached = self._setup_keys_cache[id(info)] = (frozenset(group), frozenset(shared))
        return cached

    def forward_of(self, ref: ClassRef | None) -> FunctionInfo | bool:
        """What calling a module of class `ref` (an element of a module marker's classes)
        runs: the project `forward`; True for a torch.nn layer (None, or a project class
        whose `forward` comes from one), whose inputs and output are tensors; False for
        a class we cannot see."""
        if ref is None:
            return True
        if ref is UNSEEN_MODULE_CLASS:
            return False
        found = self._forwards.get(id(ref))
        if found is None:
            lookup = self.project.find_method(ref, "forward")
            if lookup is not None and lookup.function is not None and not lookup.abstract \
                    and not self.project.is_machinery(lookup.owner):
                found = lookup.function
            else:
                unseen = next((e for e in self.project.mro(ref) if e.unknown), None)
                found = unseen is not None and unseen.name.startswith("torch.nn.")
            self._forwards[id(ref)] = found
        return found

    def attributes_of(self, ref: ClassRef) -> dict[str, Value]:
        """What `self.X` holds in the methods of `ref`, by attribute name."""
        return self._merged(ref)[0]

    def python_state_keys(self, ref: ClassRef | None) -> frozenset[str]:
        """State keys `ref` (or a class of its MRO) stores Python numbers under."""
        return self._merged(ref)[1] if ref is not None else frozenset()

    def _attribute_value(self, module: ModuleIndex, owner: ClassRef, node: ast.expr,
                         lists: dict[str, list] | None = None) -> Value:
        if isinstance(node, ast.IfExp):  # `self.update_fn = a if flag else b`
            return join(self._attribute_value(module, owner, node.body, lists),
                        self._attribute_value(module, owner, node.orelse, lists))
        structural = _self_structure(node)
        if structural is not None:
            return structural
        if isinstance(node, ast.Call):
            return constructed_value(self.project, module, node, lists)
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


def constructed_value(project: ProjectIndex, module: ModuleIndex, call: ast.Call,
                      lists: dict[str, list] | None = None) -> Value:
    """What calling a class or factory gives, when it is a module. `lists`: the elements
    of the local lists a module container may be built from (`nn.ModuleList(blocks)`)."""
    dotted = dotted_name(call.func)
    if dotted is None:
        return None
    qualified = project.qualified_name(module, dotted)
    if qualified in COMPILE:
        return Marker("module")
    if qualified and qualified.startswith("torch.nn.") and \
            qualified.rsplit(".", 1)[-1][:1].isupper():
        name = qualified.rsplit(".", 1)[-1]
        if name in ("Parameter", "Buffer"):
            return Tensor(True, (f"`{source_snippet(call)}` is a module parameter",))
        if name in ("ModuleList", "Sequential", "ModuleDict"):
            # Calling one (a Sequential) runs its elements; indexing or iterating one
            # gives an element.
            elements = [e for arg in call.args for e in _elements(arg, lists)] \
                if name == "Sequential" else _elements(call.args[0], lists) if call.args else []
            if any(e is None for e in elements):
                return Marker("module_list", UNSEEN_MODULE_CLASS)  # elements we cannot list
            element = None
            for node in elements:
                marker = _element_marker(project, module, node)
                element = marker if element is None else join(element, marker)
            return Marker("module_list", element.ref if element is not None else ())
        return Marker("module")
    found = project.resolve_in_module(module, dotted)
    if isinstance(found, ClassInfo):
        ref = project.ref_for_info(found)
        if project.kinds(ref).nn_module:
            return Marker("module", ref)
    return None


def _elements(node: ast.expr, lists: dict[str, list] | None = None) -> list[ast.expr | None]:
    """The element expressions of a module container's argument (`[Block() for _ in
    range(n)]`, `{"a": Head()}`, `*[...]`, a local list in `lists`); None for one we
    cannot list."""
    kind = node.__class__
    if kind is ast.Starred:
        return _elements(node.value, lists)
    if kind is ast.Name:
        return (lists or {}).get(node.id) or [None]
    if kind is ast.List or kind is ast.Tuple:
        return [e for element in node.elts for e in (
            _elements(element, lists) if element.__class__ is ast.Starred else [element])]
    if kind is ast.ListComp or kind is ast.GeneratorExp:
        return [node.elt]
    if kind is ast.Dict:
        return list(node.values)
    if kind is ast.DictComp:
        return [node.value]
    if kind is ast.Call:
        return [node]  # `nn.Sequential(Block(), ...)`: an element itself
    return [None]


def _local_lists(method: FunctionInfo) -> dict[str, list] | None:
    """The elements of a method's local lists (`blocks = []`, `blocks.append(Block(i))`),
    for the module containers built from them; None where the method builds none."""
    text = method.source_text
    if text is not None and "ModuleList(" not in text and "Sequential(" not in text:
        return None
    lists: dict[str, list] = {}
    for node in method.statements:
        kind = node.__class__
        if kind is ast.Assign and len(node.targets) == 1 and \
                node.targets[0].__class__ is ast.Name:
            value = node.value
            lists.setdefault(node.targets[0].id, []).extend(
                _elements(value) if value.__class__ in (ast.List, ast.ListComp) else [None])
        elif kind is ast.Call and node.func.__class__ is ast.Attribute and \
                node.func.value.__class__ is ast.Name and node.args and \
                node.func.attr in ("append", "extend"):
            lists.setdefault(node.func.value.id, []).extend(
                [node.args[0]] if node.func.attr == "append" else _elements(node.args[0]))
    return lists


def _element_marker(project: ProjectIndex, module: ModuleIndex, node: ast.expr | None
                    ) -> Marker:
    """The module an element expression of a module container builds: one of its class
    (a project class even where its bases are out of sight: a container holds modules),
    or of a class we cannot see."""
    value = constructed_value(project, module, node) if node.__class__ is ast.Call else None
    if value.__class__ is Marker and value.kind == "module_list":
        return Marker("module", value.ref)  # a nested Sequential: its elements run
    if value is None and node.__class__ is ast.Call:
        dotted = dotted_name(node.func)
        found = project.resolve_in_module(module, dotted) if dotted else None
        if isinstance(found, ClassInfo):
            return Marker("module", project.ref_for_info(found))
    return value if value.__class__ is Marker else Marker("module", UNSEEN_MODULE_CLASS)


def _reassigned(previous: Value, value: Value) -> Value:
    """`self.x` assigned again: submodules on several paths (`self.norm = A()` or `B()`)
    join into the union of their classes; other values, the last one stays."""
    if previous.__class__ is Marker and value.__class__ is Marker and \
            previous.kind == value.kind and value.kind in MODULE_KINDS:
        return join(previous, value)
    return value


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


def _is_python_value(node: ast.expr, names: set[str], keys: set[str] = frozenset()) -> bool:
    """Whether `node` is a Python value by its form alone: numbers, booleans and strings;
    `float()`, `int()`, `len()`, `round()` results; a tensor's metadata (`p.shape`,
    `p.numel()`, `p.dim()`) and what is computed from such values (`shape[0]`,
    `math.prod(shape[1:])`, `len(shape) < 2`, a non-empty tuple of them); `names`:
    names known to hold such values, `keys`: literal keys whose entries do
    (`state["shape"][0]`). (`None` and `[]` are not: a tensor often takes their place
    later.) Iterative: a sum of thousands of terms must not exhaust the stack."""
    pending = [node]
    while pending:
        node = pending.pop()
        kind = node.__class__
        if kind is ast.Constant:
            if not isinstance(node.value, (int, float, str)):  # (a bool is an int)
                return False
        elif kind is ast.Name:
            if node.id not in names:
                return False
        elif kind is ast.Attribute:
            if node.attr not in METADATA_ATTRIBUTES or node.attr in DEVICE_ATTRIBUTES:
                return False
        elif kind is ast.Call:
            func = node.func
            if func.__class__ is ast.Name and func.id in _NUMBER_BUILTINS:
                continue
            if func.__class__ is ast.Attribute and func.attr in METADATA_METHODS \
                    and func.attr not in ("type", "data_ptr"):
                continue
            if func.__class__ is ast.Name and func.id in ("min", "max") or \
                    func.__class__ is ast.Attribute and func.value.__class__ is ast.Name \
                    and func.value.id == "math":
                if not node.args or node.keywords:
                    return False
                pending.extend(node.args)
            else:
                return False
        elif kind is ast.Subscript:
            index = node.slice
            if index.__class__ is ast.Constant and isinstance(index.value, str):
                if index.value not in keys:
                    return False
            else:
                pending.append(node.value)
        elif kind is ast.UnaryOp:
            pending.append(node.operand)
        elif kind is ast.BinOp:
            pending += (node.left, node.right)
        elif kind is ast.Compare:
            pending.append(node.left)
            pending.extend(node.comparators)
        elif kind is ast.BoolOp:
            pending.extend(node.values)
        elif kind is ast.IfExp:
            pending += (node.body, node.orelse)
        elif kind is ast.Tuple or kind is ast.List:
            if not node.elts:
                return False
            pending.extend(node.elts)
        else:
            return False
    return True


_NUMBER_BUILTINS = frozenset({"float", "int", "len", "round"})


# Text pre-filters: each regex starts with a literal, which `re` finds fast (alternations
# and character classes first are several times slower), and the rest are substring tests.

# `self.x = ...` or `register_buffer(`: what `ClassAttributes._of_class` looks for.
_SELF_ATTRIBUTE_STORE = re.compile(r"self\.\w+\s*(?:\\\s*)?=(?!=)")


def _may_set_up_attributes(function: FunctionInfo) -> bool:
    """A text pre-filter for `ClassAttributes._of_class` (True when the text is unknown)."""
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
    """Literal state keys written with Python values (`_is_python_value`) in one function,
    given its nodes; names bound only to such values, and parameters that are numbers,
    count as such values."""
    bindings: dict[str, list[ast.expr]] = {}
    unpacked: set[str] = set()  # bound from a tuple's element: not followed
    # Bound from a tuple a param group holds (`beta1, beta2 = group["betas"]`): a
    # hyperparameter, which no scheduler drives (it schedules a number, not a tuple).
    groups = {node.target.id for node in nodes if node.__class__ is ast.For
              and node.target.__class__ is ast.Name
              and dotted_name(node.iter) == "self.param_groups"}
    from_groups: set[str] = set()
    for node in nodes:
        if node.__class__ is ast.AnnAssign and node.target.__class__ is ast.Name \
                and node.value is not None:
            bindings.setdefault(node.target.id, []).append(node.value)
        if node.__class__ is not ast.Assign:
            continue
        for target in node.targets:
            if target.__class__ is ast.Name:
                bindings.setdefault(target.id, []).append(node.value)
            elif target.__class__ in (ast.Tuple, ast.List):
                elements = {e.id for e in target.elts if e.__class__ is ast.Name}
                value = node.value
                if value.__class__ is ast.Subscript and value.value.__class__ is ast.Name \
                        and value.value.id in groups and isinstance(value.slice, ast.Constant) \
                        and all(e.__class__ is ast.Name for e in target.elts):
                    from_groups |= elements
                else:
                    unpacked |= elements
    for name in unpacked | from_groups:
        bindings.pop(name, None)
    names: set[str] = (set(parameters) | from_groups) - set(bindings) - unpacked
    stores: list[tuple[str, ast.expr]] = []  # (literal key, value)
    for node in nodes:
        if node.__class__ is ast.Assign:
            stores.extend((target.slice.value, node.value) for target in node.targets
                          if isinstance(target, ast.Subscript)
                          and isinstance(target.slice, ast.Constant)
                          and isinstance(target.slice.value, str))
        elif node.__class__ is ast.Call and node.func.__class__ is ast.Attribute \
                and node.func.attr == "setdefault" and len(node.args) == 2 \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            stores.append((node.args[0].value, node.args[1]))
    # A name holds a Python value when each of its assignments gives one, given the names
    # and keys already known (`shape = p.shape`, then `rows = shape[0]`); a key does when
    # one of its stores does (`state["rows"] = state["shape"][0]`).
    keys: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, values in bindings.items():
            if name not in names and all(_is_python_value(v, names, keys) for v in values):
                names.add(name)
                changed = True
        for key, value in stores:
            if key not in keys and _is_python_value(value, names, keys):
                keys.add(key)
                changed = True
    return keys


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


# Where an optimizer sets up what its steps use.
_SETUP_METHODS = ("__init__", "preinitialize")


def _setup_tensor_keys(project: ProjectIndex, module: ModuleIndex, method: FunctionInfo
                       ) -> tuple[set[str], set[str]]:
    """Keys `method` stores a new tensor under: in each param group (`group["k"] =
    cstorch.zeros(())` in a `for group in self.param_groups` loop), and in the optimizer's
    state under a key of its own (`self.state["k"] = cstorch.zeros(1)`)."""
    groups = {node.target.id for node in method.statements
              if node.__class__ is ast.For and node.target.__class__ is ast.Name
              and dotted_name(node.iter) == "self.param_groups"}
    group_keys: set[str] = set()
    shared_keys: set[str] = set()
    for node in method.statements:
        if node.__class__ is not ast.Assign or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        if not (target.__class__ is ast.Subscript and target.slice.__class__ is ast.Constant
                and isinstance(target.slice.value, str) and value.__class__ is ast.Call):
            continue
        container = dotted_name(target.value)
        into = group_keys if container in groups else \
            shared_keys if container == "self.state" else None
        if into is not None:
            dotted = dotted_name(value.func)
            if dotted and project.qualified_name(module, dotted) in TENSOR_FACTORIES or (
                    value.func.__class__ is ast.Attribute
                    and value.func.attr in NEW_TENSOR_METHODS):
                into.add(target.slice.value)
    return group_keys, shared_keys
