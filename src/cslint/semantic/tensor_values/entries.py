"""Where traced code starts: the traced methods and functions, with their argument values."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from cslint.semantic.module_index import FunctionInfo, ModuleIndex, dotted_name, source_snippet
from cslint.semantic.project import ClassRef, ProjectIndex
from cslint.semantic.tensor_values.class_attributes import constructed_value
from cslint.semantic.tensor_values.values import Marker, Value
from cslint.semantic.torch_api import (
    HOST_DECORATORS, NON_TENSOR_ANNOTATIONS, SCHEDULER_TRACED_METHODS, TRACE_DECORATORS,
)

if TYPE_CHECKING:
    from cslint.semantic.tensor_values.evidence import ParameterEvidence


@dataclass(frozen=True)
class Entry:
    """A traced entry point: the function, the class it runs for, the argument values."""

    function: FunctionInfo
    ref: ClassRef | None
    bindings: tuple
    description: str
    closure: dict | None = None


class EntryPoints:
    """The traced entry points of a project: optimizer `step`, scheduler closed forms,
    `nn.Module.forward`, functions decorated or configured as traced."""

    def __init__(self, project: ProjectIndex, evidence: ParameterEvidence):
        self.project = project
        self.evidence = evidence
        config = project.config
        self.trace_decorators = TRACE_DECORATORS | set(config.traced_decorators)
        self.traced_functions = set(config.traced_functions)

    def find(self, between: Callable[[], None] = lambda: None) -> Iterator[Entry]:
        """Every traced entry point, with the values its arguments hold, as it is found:
        the caller walks it while the definitions the evidence for its arguments parsed
        are still held (found all first, transformers' forwards were parsed twice).
        `between` runs before each class and module is looked at, when nothing walks a
        tree (the analysis lets the definitions parsed so far go there: the evidence
        for the arguments of transformers' forwards parsed 650 MB of them)."""
        project = self.project
        for ref, kinds in project.classified_classes:
            if project.is_machinery(ref):
                continue
            between()
            if kinds.optimizer:
                yield from self._method_entry(ref, "step", Marker("optimizer_self", ref))
            if kinds.cstorch_scheduler:
                for name in SCHEDULER_TRACED_METHODS:
                    yield from self._method_entry(ref, name, Marker("scheduler_self", ref))
            if kinds.nn_module:
                yield from self._method_entry(ref, "forward", Marker("module_self", ref),
                                              with_inputs=True)
        for module in project.primary_modules:
            between()
            candidates = [(f, None) for f in module.functions.values()]
            candidates += list(module.nested_functions)
            for info in module.classes.values():
                candidates += [(f, None) for f in info.methods.values()]
            for function, enclosing in candidates:
                if self._is_trace_entry(function):
                    closure = self._enclosing_values(module, enclosing)
                    bindings = self.input_bindings(function, None, closure)
                    yield Entry(function, None, bindings, f"{function.name}()", closure)

    def _method_entry(self, ref: ClassRef, name: str, self_value: Marker,
                      with_inputs: bool = False) -> Iterator[Entry]:
        found = self.project.find_method(ref, name)
        if found is None or found.function is None or found.abstract:
            return
        if self.project.is_machinery(found.owner) or self.is_host_function(found.function):
            return
        function = found.function
        if with_inputs:
            bindings = (self_value, *self.input_bindings(function, ref)[1:])
        else:
            bindings = (self_value,)
        yield Entry(function, ref, bindings, f"{ref.short_name}.{name}()")

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

    def is_host_function(self, function: FunctionInfo) -> bool:
        """Decorated to run on the host with real values (step and checkpoint closures)."""
        return bool(self._decorators(function) & HOST_DECORATORS)

    def input_bindings(self, function: FunctionInfo, ref: ClassRef | None,
                       closure: dict | None = None) -> tuple:
        """Argument values where no caller is visible (positional, then keyword-only):
        a device tensor where the function itself shows one, else unknown."""
        tensors = self.evidence.tensor_parameters(function, ref, closure)
        args = function.node.args
        return tuple(tensors.get(arg.arg)
                     for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs))

    def _enclosing_values(self, module: ModuleIndex, enclosing: tuple[int, int] | None
                          ) -> dict:
        """Names of the enclosing scopes that hold modules (`model = cstorch.compile(...)`,
        `loss_fn = nn.CrossEntropyLoss()`), for traced functions nested in them."""
        values: dict[str, Value] = {}
        scopes = [module.tree] + ([module.definition_at(*enclosing)]
                                  if enclosing is not None else [])
        for scope in scopes:
            for statement in _flat_statements(getattr(scope, "body", [])):
                if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Call):
                    value = constructed_value(self.project, module, statement.value)
                    for target in statement.targets:
                        if isinstance(target, ast.Name) and value is not None:
                            values[target.id] = value
        return values


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
    elif isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        # `torch.Tensor | None`, as `ast.unparse` writes it (within the snippet's limit)
        text = f"{_annotation_text(annotation.left)} | {_annotation_text(annotation.right)}"
        if len(text) <= 80:
            return text
    elif isinstance(annotation, ast.Constant) and annotation.value is None:
        return "None"
    return source_snippet(annotation, 80).replace("typing.", "")


def declares_non_tensor(annotation: ast.expr) -> bool:
    return _annotation_text(annotation) in NON_TENSOR_ANNOTATIONS


def declares_python_value(annotation: ast.expr) -> bool:
    """A non-tensor type, `Optional[int...]` or a `Literal[...]`."""
    return declares_non_tensor(annotation) or _annotation_text(annotation).startswith(
        ("Optional[int", "Literal"))


def _flat_statements(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    for statement in body:
        yield statement
        if isinstance(statement, (ast.If, ast.With, ast.Try, ast.For, ast.While)):
            for name in ("body", "orelse", "finalbody"):
                yield from _flat_statements(getattr(statement, name, []) or [])
