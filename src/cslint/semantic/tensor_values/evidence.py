"""Which parameters of a function are tensors by evidence in the function itself.

Where no caller is visible (the entry analysis of a `forward` or a traced function), a
parameter is a device tensor only with such evidence: a tensor annotation (`Tensor`,
`Optional[torch.Tensor]`, `torch.FloatTensor`), or a use that only a tensor allows: the
receiver of a tensor-only method (`x.view(...)`), an operand of `@`, the tensor input of a
torch op (`torch.matmul(x, w)`, `F.softmax(x)`), an argument of an `nn` layer
(`self.linear(x)`), or an argument that a project function or submodule itself uses as a
tensor. A parameter used only as a number, a flag or an object (`torch.arange(n)`,
`if flag:`, `helper.span(n)`) has none and stays unknown; `self` and `cls` never have any.

One pass over a function's statements, memoised per function and class.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from cslint.semantic.module_index import FunctionInfo, dotted_name
from cslint.semantic.project import ClassRef, ProjectIndex
from cslint.semantic.tensor_values.calls import is_torch_library
from cslint.semantic.tensor_values.entries import declares_python_value
from cslint.semantic.tensor_values.values import (
    MODULE_KINDS, ChainStep, Marker, Tensor, module_classes,
)
from cslint.semantic.torch_api import (
    NON_TENSOR_TORCH, NOT_TENSOR_INPUT_FUNCTIONS, TENSOR_INPUT_NAMESPACES,
    TENSOR_METHOD_TENSOR_ARGUMENTS, TENSOR_ONLY_METHODS, TENSOR_PAIR_FUNCTIONS,
    TENSOR_SEQUENCE_FUNCTIONS, TENSOR_TYPE_NAMES, UNDECLARING_ANNOTATIONS,
)

if TYPE_CHECKING:
    from cslint.semantic.tensor_values.class_attributes import ClassAttributes

# Kinds of function whose first parameter is the instance or the class.
METHOD_KINDS = frozenset({"method", "classmethod", "property"})
# Functions whose evidence is being found at once (calls of callees' callees): a bound
# on the Python stack, like the summaries' depth bound.
MAX_DEPTH = 16

_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
# Nodes with nothing to find under them, and fields that hold no expressions.
_LEAVES = frozenset({ast.Name, ast.Constant})
_NOT_EXPRESSIONS = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "kind", "is_async",
                              "conversion", "type_comment", "simple", "level", "names",
                              "name", "asname", "module", "type_params"})
_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(kind: type) -> tuple[str, ...]:
    """The fields of a node class that may hold expressions (statements' targets too)."""
    fields = _FIELDS.get(kind)
    if fields is None:
        fields = _FIELDS[kind] = tuple(f for f in kind._fields if f not in _NOT_EXPRESSIONS)
    return fields


class ParameterEvidence:
    """The parameters each function shows to be tensors, found once per function."""

    def __init__(self, project: ProjectIndex, class_attributes: ClassAttributes):
        self.project = project
        self.attributes_of = class_attributes.attributes_of
        self.forward_of = class_attributes.forward_of
        # Per function, class and closure: the tensor parameters, and those of them a
        # use shows (not only an annotation).
        self._found: dict[tuple, tuple[dict[str, Tensor], frozenset[str]]] = {}
        self._in_progress: set[tuple] = set()

    def tensor_parameters(self, function: FunctionInfo, ref: ClassRef | None,
                          closure: dict | None = None) -> dict[str, Tensor]:
        """The parameters of `function` (run for class `ref`, with a nested function's
        enclosing values `closure`) that are tensors by evidence in the function, each
        a device tensor whose chain says why."""
        found = self._found.get((id(function), id(ref), True))  # a scan for the uses has it
        if found is None or closure:
            found = self._scanned(function, ref, closure, False)
        return found[0]

    def used_as_tensors(self, function: FunctionInfo, ref: ClassRef | None) -> frozenset[str]:
        """The parameters a use in `function` shows to be tensors: what a caller's
        argument is by passing it there (an annotation alone is the callee's word, and
        real code passes lists to parameters annotated `Tensor`)."""
        return self._scanned(function, ref, None, True)[1]

    def _scanned(self, function: FunctionInfo, ref: ClassRef | None, closure: dict | None,
                 uses: bool) -> tuple[dict[str, Tensor], frozenset[str]]:
        """`uses`: look for uses of the annotated parameters too (not needed where only
        whether each parameter is a tensor is asked, and most are annotated)."""
        key = (id(function), id(ref), uses) if not closure else \
            (id(function), id(ref), uses, id(closure))
        found = self._found.get(key)
        if found is None:
            if key in self._in_progress or len(self._in_progress) >= MAX_DEPTH:
                return {}, frozenset()  # recursion: what the outer scan finds so far
            self._in_progress.add(key)
            try:
                scan = _Scan(self, function, ref, closure, uses)
                scan.run()
            finally:
                self._in_progress.discard(key)
            found = self._found[key] = (scan.found, frozenset(scan.used))
        return found


def is_tensor_annotation(annotation: ast.expr) -> bool:
    """`Tensor`, `torch.FloatTensor`, `Optional[Tensor]`, `Tensor | None`, `"Tensor"`."""
    node = annotation
    if node.__class__ is ast.Constant and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return False
    if node.__class__ is ast.Subscript:
        wrapper = (dotted_name(node.value) or "").rsplit(".", 1)[-1]
        if wrapper == "Optional":
            return is_tensor_annotation(node.slice)
        if wrapper == "Union" and node.slice.__class__ is ast.Tuple:
            kept = [e for e in node.slice.elts if not _is_none(e)]
            return len(kept) == 1 and is_tensor_annotation(kept[0])
        return False
    if node.__class__ is ast.BinOp and node.op.__class__ is ast.BitOr:
        if _is_none(node.right):
            return is_tensor_annotation(node.left)
        return _is_none(node.left) and is_tensor_annotation(node.right)
    name = dotted_name(node)
    return name is not None and name.rsplit(".", 1)[-1] in TENSOR_TYPE_NAMES


def _may_name_a_tensor(annotation: ast.expr) -> bool:
    """Whether an annotation may let the value be a tensor: one that names a tensor type
    somewhere (`Union[Tensor, list[Tensor]]`), or declares nothing (`Any`)."""
    for node in ast.walk(annotation):
        kind = node.__class__
        name = node.id if kind is ast.Name else node.attr if kind is ast.Attribute else \
            node.value if kind is ast.Constant and isinstance(node.value, str) else None
        if name is not None and (name in UNDECLARING_ANNOTATIONS or "Tensor" in name
                                 or "Parameter" in name):
            return True
    return False


def _is_none(node: ast.expr) -> bool:
    return node.__class__ is ast.Constant and node.value is None or \
        node.__class__ is ast.Name and node.id == "None"


def _bound_names(target: ast.expr) -> set[str]:
    """The names an assignment target binds."""
    kind = target.__class__
    if kind is ast.Name:
        return {target.id}
    if kind is ast.Tuple or kind is ast.List:
        return {n for element in target.elts for n in _bound_names(element)}
    if kind is ast.Starred:
        return _bound_names(target.value)
    return set()


class _Scan:
    """One pass over a function: for each candidate parameter, the first use that only
    a tensor allows, while the name still holds the parameter (a name rebound on every
    path before a use, `x = x.shape[0]`, no longer does; one rebound in a branch may)."""

    def __init__(self, evidence: ParameterEvidence, function: FunctionInfo,
                 ref: ClassRef | None, closure: dict | None, uses: bool):
        self.evidence = evidence
        self.project = evidence.project
        self.function = function
        self.module = function.module
        self.ref = ref
        self.found: dict[str, Tensor] = {}
        self.used: set[str] = set()  # found by a use
        self.open: set[str] = set()  # candidates without a use found yet
        args = function.node.args
        positional = [*args.posonlyargs, *args.args]
        defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        self.self_name = positional[0].arg if positional and \
            function.kind in METHOD_KINDS else None
        for i, (arg, default) in enumerate([*zip(positional, defaults),
                                            *zip(args.kwonlyargs, args.kw_defaults)]):
            if i == 0 and self.self_name is not None:
                continue
            # A non-tensor default (`output_attentions=False`, `dim=-1`) or annotation
            # makes a Python value; `mask=None` may still be a tensor.
            if default is not None and not _is_none(default):
                continue
            annotation = arg.annotation
            if annotation is not None:
                if is_tensor_annotation(annotation):
                    self.found[arg.arg] = Tensor(True, (ChainStep(
                        "`{}` is a tensor: annotated `{}`", arg.arg, annotation),))
                    if uses:
                        self.open.add(arg.arg)
                    continue
                if declares_python_value(annotation) or not _may_name_a_tensor(annotation):
                    continue  # declared another type: `size: tuple[int, int]`, `cache: Cache`
            self.open.add(arg.arg)
        # Names that hold modules: the enclosing scopes' (`model = cstorch.compile(...)`),
        # loop variables over `self.layers`, locals bound to `self.block`.
        self.modules: dict[str, Marker] = {
            name: value for name, value in (closure or {}).items()
            if value.__class__ is Marker and value.kind in MODULE_KINDS}

    def run(self) -> None:
        if self.open:
            self.block(self.function.node.body, frozenset())

    # ---- statements --------------------------------------------------------------------

    def block(self, body: list[ast.stmt], rebound: frozenset[str]) -> frozenset[str]:
        """Scan `body` with the names `rebound` on every path so far; the names rebound
        on every path through it (sets are never changed in place: branches share them)."""
        for statement in body:
            if not self.open:
                break
            kind = statement.__class__
            if kind is ast.If or kind is ast.While:
                self.expression(statement.test, rebound)
                self.block(statement.body, rebound)
                self.block(statement.orelse, rebound)
            elif kind is ast.For or kind is ast.AsyncFor:
                self.expression(statement.iter, rebound)
                self.note_module_loop(statement.target, statement.iter)
                self.block(statement.body, rebound | _bound_names(statement.target))
                self.block(statement.orelse, rebound)
            elif kind is ast.With or kind is ast.AsyncWith:
                for item in statement.items:
                    self.expression(item.context_expr, rebound)
                    if item.optional_vars is not None:
                        rebound = rebound | _bound_names(item.optional_vars)
                rebound = self.block(statement.body, rebound)
            elif kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                rebound = rebound | {statement.name}  # its own scope: not scanned
            elif hasattr(statement, "handlers"):  # try (and try/except*)
                for part in (statement.body, statement.orelse, statement.finalbody):
                    self.block(part, rebound)
                for handler in statement.handlers:
                    self.block(handler.body, rebound | ({handler.name} if handler.name
                                                        else set()))
            elif hasattr(statement, "cases"):  # match
                self.expression(statement.subject, rebound)
                for case in statement.cases:
                    self.block(case.body, rebound)
            else:
                for child in ast.iter_child_nodes(statement):
                    self.expression(child, rebound)
                if kind is ast.Assign:
                    for target in statement.targets:
                        self.note_module_assignment(target, statement.value)
                        rebound = rebound | _bound_names(target)
                elif kind is ast.AnnAssign and statement.value is not None:
                    rebound = rebound | _bound_names(statement.target)
        return rebound

    def note_module_loop(self, target: ast.expr, iterable: ast.expr) -> None:
        """`for layer in self.layers:`, `for i, layer in enumerate(self.layers):`."""
        if iterable.__class__ is ast.Call and dotted_name(iterable.func) == "enumerate" \
                and iterable.args and target.__class__ is ast.Tuple and len(target.elts) == 2:
            iterable, target = iterable.args[0], target.elts[1]
        container = self.module_value(iterable)
        if target.__class__ is ast.Name and container is not None and \
                container.kind == "module_list":
            self.modules[target.id] = Marker("module", container.ref)

    def note_module_assignment(self, target: ast.expr, value: ast.expr) -> None:
        """`block = self.blocks[i]`."""
        if target.__class__ is ast.Name:
            module = self.module_value(value)
            if module is not None:
                self.modules[target.id] = module

    # ---- expressions -------------------------------------------------------------------

    def expression(self, node: ast.AST, rebound: frozenset[str]) -> None:
        stack = [node]
        while stack:
            node = stack.pop()
            kind = node.__class__
            if kind is ast.Call:
                self.call(node, rebound)
            elif kind is ast.BinOp and node.op.__class__ is ast.MatMult:
                for operand in (node.left, node.right):
                    if self.is_open(operand, rebound):
                        self.note(operand.id, node.lineno, "used in `{}`", node)
            elif kind in _COMPREHENSIONS:
                inner = rebound | {name for generator in node.generators
                                   for name in _bound_names(generator.target)}
                for generator in node.generators:
                    stack.append(generator.iter)
                    for condition in generator.ifs:
                        self.expression(condition, inner)
                for part in ((node.key, node.value) if kind is ast.DictComp else (node.elt,)):
                    self.expression(part, inner)
                continue
            elif kind is ast.Lambda:
                continue  # its own scope
            # (`ast.iter_child_nodes` is a generator over every field: several times slower.)
            for name in _child_fields(kind):
                child = getattr(node, name)
                if child.__class__ is list:
                    stack.extend(c for c in child if c.__class__ not in _LEAVES
                                 and isinstance(c, ast.AST))
                elif child.__class__ not in _LEAVES and isinstance(child, ast.AST):
                    stack.append(child)

    def is_open(self, node: ast.AST, rebound: frozenset[str]) -> bool:
        """`node` names a parameter without evidence yet, still holding its value."""
        return node.__class__ is ast.Name and node.id in self.open and node.id not in rebound

    def note(self, name: str, line: int, use: str, *parts) -> None:
        """`name` is a tensor: `use` (a template of `parts`) at `line` shows it."""
        self.open.discard(name)
        self.used.add(name)
        if name not in self.found:  # (an annotation says it first)
            self.found[name] = Tensor(True, (ChainStep(
                "`{}` is a tensor: " + use + " at line {}", name, *parts, str(line)),))

    def call(self, node: ast.Call, rebound: frozenset[str]) -> None:
        func = node.func
        args = node.args
        if func.__class__ is ast.Attribute and func.attr in TENSOR_ONLY_METHODS:
            if self.is_open(func.value, rebound):
                self.note(func.value.id, node.lineno, "used as `{}`",
                          f"{func.value.id}.{func.attr}(...)")
            position = TENSOR_METHOD_TENSOR_ARGUMENTS.get(func.attr)
            if position is not None and position < len(args) and \
                    self.is_open(args[position], rebound):
                self.note(args[position].id, node.lineno, "passed to `{}`",
                          f".{func.attr}(...)")
        if not any(self.is_open(a, rebound) for a in args) and not any(
                self.is_open(k.value, rebound) for k in node.keywords) and not (
                args and args[0].__class__ in (ast.List, ast.Tuple)):
            return  # no candidate among the arguments
        module = self.module_value(func)
        if module is not None:
            self.module_arguments(node, module, rebound)
            return
        dotted = dotted_name(func)
        if dotted is None:
            return
        if self.self_name is not None and self.ref is not None and \
                dotted.startswith(self.self_name + ".") and dotted.count(".") == 1:
            found = self.project.find_method(self.ref, dotted.partition(".")[2])
            if found is not None and found.function is not None and \
                    not self.project.is_machinery(found.owner):
                self.through(node, found.function, self.ref, 1, rebound)
            return
        qualified, function, _ = self.project.callee(self.module, dotted)
        if function is not None and not is_torch_library(qualified):
            self.through(node, function, None, 0, rebound)
        elif qualified is not None and is_torch_library(qualified):
            self.torch_arguments(node, dotted, qualified, rebound)

    def module_value(self, node: ast.expr) -> Marker | None:
        """The module `node` names: `self.block`, `self.layers[i]`, a local bound to one."""
        kind = node.__class__
        if kind is ast.Name:
            return self.modules.get(node.id)
        if kind is ast.Subscript:
            container = self.module_value(node.value)
            if container is not None and container.kind == "module_list":
                return Marker("module", container.ref)
            return None
        if kind is ast.Attribute and node.value.__class__ is ast.Name and \
                node.value.id == self.self_name and self.ref is not None:
            value = self.evidence.attributes_of(self.ref).get(node.attr)
            if value.__class__ is Marker and value.kind in MODULE_KINDS:
                return value
        return None

    def module_arguments(self, node: ast.Call, module: Marker, rebound: frozenset[str]) -> None:
        """A submodule called: a torch.nn layer takes tensors; a project module's
        `forward` says which of its parameters are; one we cannot see says nothing."""
        for ref in module_classes(module.ref):
            forward = self.evidence.forward_of(ref)
            if forward.__class__ is FunctionInfo:
                self.through(node, forward, ref, 1, rebound)
            elif forward:
                for arg in node.args:
                    if self.is_open(arg, rebound):
                        self.note(arg.id, node.lineno, "passed to the layer `{}`",
                                  node.func)

    def through(self, node: ast.Call, function: FunctionInfo, ref: ClassRef | None,
                offset: int, rebound: frozenset[str]) -> None:
        """A project function called: an argument is a tensor where the function shows
        that parameter to be one."""
        tensors = self.evidence.used_as_tensors(function, ref)
        if not tensors:
            return
        names = function.parameter_names
        for i, arg in enumerate(node.args):
            if arg.__class__ is ast.Starred:
                break
            if self.is_open(arg, rebound) and offset + i < len(names) and \
                    names[offset + i] in tensors:
                self.note(arg.id, node.lineno, "passed to `{}()`, which uses it as a tensor,",
                          node.func)
        for keyword in node.keywords:
            if keyword.arg in tensors and self.is_open(keyword.value, rebound):
                self.note(keyword.value.id, node.lineno,
                          "passed to `{}()`, which uses it as a tensor,", node.func)

    def torch_arguments(self, node: ast.Call, dotted: str, qualified: str,
                        rebound: frozenset[str]) -> None:
        """The tensor inputs of a torch op: `torch.matmul(x, w)`, `F.softmax(x)`,
        `torch.cat([x, y])`; none for ops taking sizes or Python values first."""
        namespace, _, name = qualified.rpartition(".")
        # (Private helpers and classes, `torch.Size(...)`, take other things.)
        if namespace not in TENSOR_INPUT_NAMESPACES or name.startswith("_") or \
                name[:1].isupper() or qualified in NON_TENSOR_TORCH:
            return
        args = node.args
        if name in TENSOR_SEQUENCE_FUNCTIONS:
            inputs = args[0].elts if args and args[0].__class__ in (ast.List, ast.Tuple) else []
        elif name == "einsum":
            inputs = args[1:]
        elif name in NOT_TENSOR_INPUT_FUNCTIONS:
            return
        else:
            inputs = args[:2] if name in TENSOR_PAIR_FUNCTIONS else args[:1]
            inputs = [*inputs, *(k.value for k in node.keywords if k.arg == "input")]
        for arg in inputs:
            if self.is_open(arg, rebound):
                self.note(arg.id, node.lineno, "passed to `{}()`", dotted)

