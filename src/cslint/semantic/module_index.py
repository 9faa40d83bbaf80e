"""The per-file index: module name, import table, classes and functions.

Built once per parsed file from the `ast` tree. It holds what other files need
(qualified imports, classes with their qualified bases and methods, module-level
functions) as plain data, and the syntax tree while it is held: a tree released to save
memory is parsed again when an analysis or a check asks for it.
"""

from __future__ import annotations

import ast
import gc
import os
import weakref
from array import array
from collections import deque
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from itertools import accumulate
from pathlib import Path
from typing import Callable, Iterable

from cslint.discovery import module_name_for
from cslint.memory import give_back_freed_memory
from cslint.semantic.torch_api import CSTORCH_PROGRAM_ROOTS
from cslint.source import PYTHON_LINE_BREAK, SourceFile, parse_python

def canonical(qualname: str) -> str:
    """Our `cslint.cstorch` twin names the same API as `cerebras.pytorch`."""
    if qualname == "cslint.cstorch" or qualname.startswith("cslint.cstorch."):
        return "cerebras.pytorch" + qualname[len("cslint.cstorch"):]
    return qualname


def dotted_name(node: ast.expr) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    if node.__class__ is ast.Name:  # most names, without building a list
        return node.id
    parts: list[str] = []
    while node.__class__ is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if node.__class__ is ast.Name:
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def dict_entries(node: ast.AST) -> list[tuple[str, ast.expr]] | None:
    """The (key, value) pairs a dict display (`{"k": v}`, string keys) or a `dict(k=v)`
    call spells out, in order; None for anything else."""
    if isinstance(node, ast.Dict):
        return [(k.value, v) for k, v in zip(node.keys, node.values)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return [(k.arg, k.value) for k in node.keywords if k.arg is not None]
    return None


def entry_aliases(function: ast.AST) -> dict[str, tuple[str, str]]:
    """The local names `function` binds to a dict's entry alone (`k = group["k"]`: `k` ->
    (`group`, "k")) and binds nowhere else: the entry under another name."""
    bindings: dict[str, int] = {}
    found: dict[str, tuple[str, str]] = {}
    for node in nodes_under(function):
        if node.__class__ is ast.Name and node.ctx.__class__ is not ast.Load:
            bindings[node.id] = bindings.get(node.id, 0) + 1
        elif node.__class__ is ast.Assign and len(node.targets) == 1 \
                and node.targets[0].__class__ is ast.Name \
                and isinstance(node.value, ast.Subscript) \
                and isinstance(node.value.value, ast.Name) \
                and isinstance(node.value.slice, ast.Constant) \
                and isinstance(node.value.slice.value, str):
            found[node.targets[0].id] = (node.value.value.id, node.value.slice.value)
    return {name: entry for name, entry in found.items() if bindings.get(name) == 1}


@lru_cache(maxsize=4096)  # messages name the same nodes again and again (a chain's steps)
def source_snippet(node: ast.AST, limit: int = 60) -> str:
    """The source of an expression for a message, on one line, shortened to `limit`."""
    # Names and attribute chains are most snippets; `ast.unparse` costs ~20x more.
    text = dotted_name(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
    if text is None:
        try:
            text = " ".join(ast.unparse(node).split())
        except Exception:  # unparse can fail on malformed synthetic trees
            return "..."
    return text if len(text) <= limit else text[: limit - 3] + "..."


def statements_and_calls(function: ast.AST) -> list[ast.AST]:
    """Every statement of a function (nested blocks included) and the calls that are
    whole statements or whole assigned values (`self.register_buffer(...)`,
    `x = state.setdefault("k", 0)`)."""
    result: list[ast.AST] = []
    stack = list(getattr(function, "body", []))
    while stack:
        node = stack.pop()
        result.append(node)
        # (`getattr` with a default is slow on nodes without the field: it raises inside.)
        if node.__class__ in _VALUE_STATEMENTS and node.value.__class__ is ast.Call:
            result.append(node.value)
        blocks = BLOCK_FIELDS.get(node.__class__)
        if blocks is not None:
            for name in blocks:
                stack.extend(getattr(node, name))
    return result


# Statements whose `value` may be a call (`x = f()`, `f()`, `return f()`).
_VALUE_STATEMENTS = frozenset({ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return})

# The statement lists that compound statements hold (simple statements hold none).
BLOCK_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(f for f in ("body", "orelse", "finalbody", "handlers", "cases")
               if f in cls._fields)
    for cls in (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try,
                ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler,
                *(getattr(ast, name) for name in ("TryStar", "Match", "match_case")
                  if hasattr(ast, name)))
}


def calls_under(root: ast.AST, not_into: frozenset[type] = frozenset()) -> list[ast.Call]:
    """The calls in `root`'s subtree, breadth-first like `ast.walk` (which is several
    times slower: a generator per node); nodes of the classes `not_into` (below the root)
    are left out with their subtrees."""
    return [node for node in nodes_under(root, not_into) if node.__class__ is ast.Call]


def nodes_under(root: ast.AST, not_into: frozenset[type] = frozenset()) -> list[ast.AST]:
    """The nodes of `root`'s subtree, the root first, breadth-first like `ast.walk`
    (several times faster); nodes of the classes `not_into` (below the root) are left
    out with their subtrees."""
    found: list[ast.AST] = []
    queue = deque([root])
    pop, extend, append = queue.popleft, queue.extend, queue.append
    ast_node = ast.AST
    while queue:
        node = pop()
        cls = node.__class__
        if cls in not_into and node is not root:
            continue
        found.append(node)
        fields = _NODE_FIELDS.get(cls)
        if fields is None:
            fields = _NODE_FIELDS[cls] = tuple(
                f for f in cls._fields if f not in _LEAF_FIELDS and
                not (cls is ast.Constant and f == "value"))
        for name in fields:
            child = getattr(node, name, None)
            if child.__class__ is list:
                extend([c for c in child if isinstance(c, ast_node)])
            elif isinstance(child, ast_node):
                append(child)
    return found


# Fields that hold names, operators or contexts, never an expression or statement.
_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "kind", "type_comment",
                          "level", "module", "names", "conversion", "is_async", "simple"})
_NODE_FIELDS: dict[type, tuple[str, ...]] = {}


@dataclass
class FunctionInfo:
    name: str
    qualname: str  # module.Class.method or module.function
    # The `def` node while the module's tree is held (None once it is let go).
    definition: ast.FunctionDef | ast.AsyncFunctionDef | None = field(repr=False,
                                                                      compare=False)
    module: "ModuleIndex" = field(repr=False)
    class_name: str | None  # qualname of the defining class
    decorators: tuple[str, ...]  # as written, dotted (unresolved)
    is_abstract: bool
    kind: str  # "method" | "staticmethod" | "classmethod" | "property" | "function"
    # Where the `def` is: what finds the node again in a tree parsed anew.
    lineno: int
    col_offset: int
    end_lineno: int | None
    # The line of the first decorator (the `def` line without any); None: unknown.
    first_lineno: int | None = None

    @property
    def node(self) -> ast.FunctionDef | ast.AsyncFunctionDef:
        """The `def` node, from the module's tree (parsed again if it was released)."""
        return _definition_node(self)

    @property
    def key(self) -> tuple[int, int, int]:
        """Names this function for the whole run, whichever tree its node comes from (a
        tree released and parsed again has new nodes, and a freed node's id may be
        reused)."""
        return (id(self.module), self.lineno, self.col_offset)

    def forget_nodes(self) -> None:
        """Drop what holds nodes of the module's tree, which is being released."""
        self.definition = None
        self.__dict__.pop("statements", None)
        self.__dict__.pop("calls", None)

    @property
    def path(self) -> str:
        return self.module.display_path

    def mentions(self, word: str) -> bool:
        """Whether `word` appears in the function's source text (True when the text is
        unknown): a cheap, conservative prefilter before walking the tree."""
        text = self.source_text
        return text is None or word in text

    @cached_property
    def source_text(self) -> str | None:
        """The function's lines (None when the module's text is unknown)."""
        return self.module.text_of_lines(self.lineno, self.end_lineno)

    @cached_property
    def parameter_names(self) -> tuple[str, ...]:
        """The positional parameters' names."""
        args = self.node.args
        return tuple(a.arg for a in (*args.posonlyargs, *args.args))

    @cached_property
    def binding_names(self) -> tuple[str, ...]:
        """The positional parameters' names, then the keyword-only ones: the order the
        tensor-value analysis gives a call's argument values in."""
        return (*self.parameter_names, *(a.arg for a in self.node.args.kwonlyargs))

    @cached_property
    def parameter_set(self) -> frozenset[str]:
        """Every parameter's name: positional, keyword-only and starred."""
        args = self.node.args
        return frozenset(a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                         *filter(None, (args.vararg, args.kwarg))))

    @cached_property
    def bound_names(self) -> frozenset[str]:
        """The names its body (nested scopes too) binds: assigned, looped over, imported,
        defined, caught."""
        found = set()
        for node in ast.walk(self.node):
            kind = node.__class__
            if kind is ast.Name and node.ctx.__class__ is not ast.Load:
                found.add(node.id)
            elif kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef) \
                    and node is not self.node:
                found.add(node.name)
            elif kind is ast.ExceptHandler and node.name:
                found.add(node.name)
            elif kind in (ast.Import, ast.ImportFrom):
                found.update((a.asname or a.name).split(".")[0] for a in node.names)
        return frozenset(found)

    @cached_property
    def entry_aliases(self) -> dict[str, tuple[str, str]]:
        """`entry_aliases` of the function, computed once (step counters ask per key)."""
        return entry_aliases(self.node)

    @cached_property
    def named_keys(self) -> frozenset:
        """The constants it stores under (`d[key] = v`) or builds a dict with (`{key: v}`,
        `dict(key=v)`)."""
        found = set()
        for node in nodes_under(self.node):
            kind = node.__class__
            if kind is ast.Subscript:
                if node.ctx.__class__ is ast.Store and node.slice.__class__ is ast.Constant:
                    found.add(node.slice.value)
            elif kind is ast.Dict:
                found.update(k.value for k in node.keys if k.__class__ is ast.Constant)
            elif kind is ast.keyword and node.arg is not None:
                found.add(node.arg)
        return frozenset(found)

    @cached_property
    def statements(self) -> list[ast.AST]:
        """`statements_and_calls` of the function, computed once for every analysis."""
        return statements_and_calls(self.node)

    @cached_property
    def calls(self) -> list[ast.Call]:
        """Every call in the function (nested functions included), in `ast.walk` order."""
        return calls_under(self.node)


@dataclass
class ClassInfo:
    name: str
    qualname: str
    definition: ast.ClassDef | None = field(repr=False, compare=False)
    module: "ModuleIndex" = field(repr=False)
    base_names: list[str | None]  # dotted as written; None when not a name
    base_kinds: list[str]  # the class of each base's expression ("Name", "Call", ...)
    methods: dict[str, FunctionInfo]
    # Attribute names assigned on the class body (e.g. `step = _step`); they shadow bases.
    class_attributes: set[str]
    lineno: int
    col_offset: int
    end_lineno: int | None = None
    first_lineno: int | None = None  # as a function's

    @property
    def node(self) -> ast.ClassDef:
        """The `class` node, from the module's tree (parsed again if it was released)."""
        return _definition_node(self)

    @property
    def base_exprs(self) -> list[ast.expr]:
        return list(self.node.bases)

    @property
    def declares_abstract(self) -> bool:
        return any(m.is_abstract for m in self.methods.values())


def _definition_node(entry: "FunctionInfo | ClassInfo") -> ast.AST:
    """A function's or class's node: the one held, else found by position in the module's
    tree, else (the tree let go) parsed from the definition's own lines."""
    node = entry.definition
    if node is None:
        module = entry.module
        if module.held_tree is None:
            node = module.parse_definition(entry)
        if node is None:
            node = module.definition_at(entry.lineno, entry.col_offset)
        entry.definition = node
    return node


class _OwningModule:
    """`FunctionInfo.module` and `ClassInfo.module`, held weakly. The module index holds
    its entries, so a strong back-reference would make a cycle, and a cycle keeps the
    whole syntax tree alive until a full collection, which the engine's frozen collector
    (`cslint.engine.lint`) leaves for later: a process that lints again and again (the
    flake8 plugin, the server) grew by the trees of every run."""

    def __get__(self, entry, owner=None):
        if entry is None:
            return self
        module = entry._module_reference()
        if module is None:
            raise ReferenceError(f"the module index of {entry.qualname} is gone")
        return module

    def __set__(self, entry, module: "ModuleIndex") -> None:
        entry._module_reference = weakref.ref(module)


# (Set on the classes once the dataclass decorator has made `module` a field.)
FunctionInfo.module = ClassInfo.module = _OwningModule()  # type: ignore[assignment]


@dataclass
class ModuleIndex:
    path: Path
    display_path: str
    name: str
    is_package: bool
    imports: dict[str, str]  # local name -> qualified name
    star_imports: list[str]
    classes: dict[str, ClassInfo]  # qualname -> class, at any depth
    top_level_classes: dict[str, str]  # local name -> qualname
    functions: dict[str, FunctionInfo]  # module-level, by name
    # The syntax tree while it is held (`tree` parses the text again once released).
    held_tree: ast.Module | None = field(repr=False)
    # Functions defined inside other functions (e.g. a `@cstorch.trace` step in main()),
    # with where the function that encloses each starts (line, column).
    nested_functions: list[tuple[FunctionInfo, tuple[int, int]]] = field(default_factory=list)
    # The decoded text, or the SourceFile that holds it (so a text held compressed is
    # not held again here): to parse again, and for text prefilters.
    text_owner: str | SourceFile = field(default="", repr=False)
    _line_starts: array | None = field(default=None, repr=False)
    _definitions: dict | None = field(default=None, repr=False)
    # Told when a released tree is parsed again (what keeps trees decides when it goes).
    on_parsed_again: Callable[["ModuleIndex"], None] | None = field(default=None, repr=False)
    # Entries whose nodes come from a parse of their own lines (`parse_definition`).
    _parts: list = field(default_factory=list, repr=False)

    @property
    def source_text(self) -> str:
        owner = self.text_owner
        return owner if isinstance(owner, str) else owner.text

    @property
    def text_length(self) -> int:
        owner = self.text_owner
        return len(owner) if isinstance(owner, str) else owner.text_length

    @property
    def tree(self) -> ast.Module:
        tree = self.held_tree
        if tree is None:
            tree = self.held_tree = _parse_out_of_collector(self.source_text,
                                                            self.display_path)
            self.forget_definition_parses()
            if self.on_parsed_again is not None:
                self.on_parsed_again(self)
        return tree

    def text_of_lines(self, first: int, last: int | None) -> str | None:
        """Lines `first` to `last` (1-based, inclusive; None: to the end) of the text,
        with their line ends; None when the text is unknown."""
        text = self.source_text
        if not text:
            return None
        starts = self._line_starts
        if starts is None:
            # Where each line starts, as Python numbers lines (4 bytes a line, not a
            # string: a large project's lines would cost 100 MB).
            starts = self._line_starts = array("I", [0])
            if "\r" in text:
                starts.extend(match.end() for match in PYTHON_LINE_BREAK.finditer(text))
            else:  # (most texts: the lengths of the lines add up in C, 5x faster)
                starts.extend(accumulate(map((1).__add__, map(len, text.split("\n")[:-1]))))
        start = starts[first - 1] if first - 1 < len(starts) else len(text)
        end = starts[last] if last is not None and last < len(starts) else len(text)
        return text[start:end]

    def parse_definition(self, entry: "FunctionInfo | ClassInfo") -> ast.AST | None:
        """The `def` or `class` node of `entry` from a parse of its own lines only, at the
        positions a parse of the whole file gives (None where that cannot be done): the
        analyses walk a few functions of most files they reach, and a whole tree takes
        about 30 times the memory of its text."""
        first, last = entry.first_lineno, entry.end_lineno
        if first is None or last is None or first < 1:
            return None
        text = self.text_of_lines(first, last)
        if not text:
            return None
        opening = text[:len(text) - len(text.lstrip(" \t\f"))]
        if not text.startswith(("@", "def", "async", "class"), len(opening)):
            return None
        size = len(text)
        # Blank lines keep the line numbers; an `if 1:` line before an indented definition
        # makes a block for it, so its columns stay too.
        if opening:
            if first < 2:
                return None
            text = "\n" * (first - 2) + "if 1:\n" + text
        else:
            text = "\n" * (first - 1) + text
        try:
            part = _parse_out_of_collector(text, self.display_path)
        except (SyntaxError, ValueError, RecursionError):
            return None
        node = _definitions_in(part).get((entry.lineno, entry.col_offset))
        if node is None:
            return None
        if not self._parts:
            _PARSED_ALONE.modules[id(self)] = weakref.ref(self)
        self._parts.append((entry, _PARSED_ALONE.generation))
        _PARSED_ALONE.characters += size
        return node

    def definition_at(self, lineno: int, col_offset: int) -> ast.AST:
        """The `def` or `class` node that starts there."""
        definitions = self._definitions
        if definitions is None:  # (let go with the tree)
            definitions = self._definitions = _definitions_in(self.tree)
        return definitions[(lineno, col_offset)]

    def forget_definition_parses(self, before: int | None = None) -> None:
        """Entries whose nodes come from a parse of their own lines (those parsed before
        generation `before`, or all) let them go, and find them again when asked: in the
        whole tree once it is parsed, so that a rule walking it meets the same nodes."""
        kept = []
        for entry, generation in self._parts:
            if before is not None and generation >= before:
                kept.append((entry, generation))
            elif isinstance(entry, FunctionInfo):
                entry.forget_nodes()
            else:
                entry.definition = None
        self._parts = kept
        if not kept:
            _PARSED_ALONE.modules.pop(id(self), None)

    def release_tree(self) -> None:
        """Let the syntax tree go (its entries find their nodes again in a new parse)."""
        self.forget_definition_parses()
        if self.held_tree is None:
            return
        self.held_tree = None
        self._definitions = None
        for info in self.classes.values():
            info.definition = None
            for method in info.methods.values():
                method.forget_nodes()
        for function in self.functions.values():
            function.forget_nodes()
        for function, _ in self.nested_functions:
            function.forget_nodes()

    @cached_property
    def location(self) -> str:
        """The file's absolute path, posix-style, as imports see it (symlinks kept, like
        the module name): which package a file is in must not depend on how its path was
        typed (`optim/optimizer.py` from inside the package)."""
        return Path(os.path.abspath(self.path)).as_posix()

    def path_ends_with(self, suffix: str) -> bool:
        """Whether the absolute path ends with `suffix` at a folder boundary."""
        return self.location.endswith("/" + suffix)

    def imports_from(self, roots: Iterable[str]) -> bool:
        """Whether the module imports a name from one of the packages `roots`."""
        return any(target == root or target.startswith(root + ".")
                   for target in (*self.imports.values(), *self.star_imports)
                   for root in roots)

    @cached_property
    def imports_cstorch(self) -> bool:
        """Code that runs on Cerebras: it imports cstorch (or our runtime twin) or the
        model zoo."""
        return self.imports_from(CSTORCH_PROGRAM_ROOTS)

    def qualify(self, dotted: str) -> str | None:
        """The qualified name a dotted expression of this module refers to."""
        head, _, rest = dotted.partition(".")
        if head in self.imports:
            base = self.imports[head]
        elif head in self.top_level_classes:
            base = self.top_level_classes[head]
        elif head in self.functions:
            base = self.functions[head].qualname
        else:
            return None
        return f"{base}.{rest}" if rest else base


def _parse_out_of_collector(text: str, name: str) -> ast.Module:
    """`parse_python`, the cyclic collector paused: a tree is many objects without
    cycles (freed by their reference counts), which it must not scan again and again
    (it made parsing the analyses' functions 3.5 times slower; see `cslint.engine.lint`);
    they are moved out of its view once built."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return parse_python(text, name)
    finally:
        if collecting:
            gc.freeze()
            gc.enable()


class _ParsedAlone:
    """The modules with definitions parsed from their own lines, how much source those
    parses read since the last let-go, and its generation (the let-gos so far)."""

    def __init__(self) -> None:
        self.modules: dict[int, weakref.ref[ModuleIndex]] = {}
        self.characters = 0
        self.generation = 0


_PARSED_ALONE = _ParsedAlone()


def let_go_of_definitions_parsed_alone(budget: int | None = None) -> None:
    """Definitions parsed alone let their nodes go (asked again, they are parsed again),
    and the freed memory goes back to the system: with a `budget`, once more than that
    many characters were parsed so since the last let-go, those parsed before it (what
    the latest entry points walk stays: the code near them and the helpers they share);
    without one, every one. Called where nothing walks a definition's nodes: between the
    analyses' entry points, and after the analyses."""
    if budget is not None and _PARSED_ALONE.characters <= budget:
        return
    before = None if budget is None else _PARSED_ALONE.generation
    for reference in list(_PARSED_ALONE.modules.values()):
        module = reference()
        if module is not None:
            module.forget_definition_parses(before)
    _PARSED_ALONE.characters = 0
    _PARSED_ALONE.generation += 1
    give_back_freed_memory()


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else []
    base = ".".join(parts)
    if target:
        return f"{base}.{target}" if base else target
    return base


def decorator_name(node: ast.expr) -> str:
    """`torch.no_grad` for `@torch.no_grad()` and `@torch.no_grad`."""
    if isinstance(node, ast.Call):
        node = node.func
    return dotted_name(node) or ""


def is_super_call(node: ast.expr) -> bool:
    """`super()` (the receiver of `super().method(...)`)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "super")


def enables_global_step(init: "FunctionInfo") -> bool:
    """Whether an `__init__` passes a true `enable_global_step` to a base `__init__`
    (a statement-level call, `super().__init__(params, defaults, enable_global_step=True)`):
    each parameter's `state["step"]` is then cstorch's global step, a float32 tensor."""
    if not init.mentions("__init__("):
        return False
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


_ABSTRACT_DECORATORS = {"abstractmethod", "abc.abstractmethod", "abstractproperty",
                        "abc.abstractproperty"}


def _function_info(node, module: "ModuleIndex", qualname: str, class_name: str | None):
    decorators = tuple(decorator_name(d) for d in node.decorator_list)
    if "staticmethod" in decorators:
        kind = "staticmethod"
    elif "classmethod" in decorators:
        kind = "classmethod"
    elif "property" in decorators or any(d.endswith(".setter") for d in decorators):
        kind = "property"
    else:
        kind = "method" if class_name else "function"
    return FunctionInfo(
        name=node.name, qualname=qualname, definition=node, module=module,
        class_name=class_name, decorators=decorators,
        is_abstract=any(d in _ABSTRACT_DECORATORS for d in decorators),
        kind=kind, lineno=node.lineno, col_offset=node.col_offset,
        end_lineno=getattr(node, "end_lineno", None), first_lineno=_first_line(node),
    )


def _first_line(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> int:
    """Where the definition's text starts: its first decorator, else its keyword."""
    return min((d.lineno for d in node.decorator_list), default=node.lineno)


def build_module_index(tree: ast.Module, path: Path, display_path: str,
                       module_name: str | None = None,
                       source_text: str | SourceFile = "") -> ModuleIndex:
    name, is_package = module_name_for(path)
    name = module_name or name
    index = ModuleIndex(path=path, display_path=display_path, name=name, is_package=is_package,
                        imports={}, star_imports=[], classes={}, top_level_classes={},
                        functions={}, held_tree=tree, text_owner=source_text)
    _collect(index, tree)
    return index


# ---- the index as plain data (what crosses from a worker process) ------------------------

def index_data(index: ModuleIndex) -> tuple:
    """The index as plain data (tuples, lists, dicts, strings, numbers): no syntax tree,
    no source text. `index_from_data` makes it again."""
    return (str(index.path), index.display_path, index.name, index.is_package,
            index.imports, index.star_imports,
            [_class_data(info) for info in index.classes.values()],
            index.top_level_classes,
            [_function_data(info) for info in index.functions.values()],
            [(_function_data(info), where) for info, where in index.nested_functions])


def index_from_data(data: tuple, source_text: str | SourceFile) -> ModuleIndex:
    """The index `index_data` gave, over the module's source (its tree not yet parsed)."""
    (path, display_path, name, is_package, imports, star_imports, classes,
     top_level_classes, functions, nested) = data
    index = ModuleIndex(path=Path(path), display_path=display_path, name=name,
                        is_package=is_package, imports=imports, star_imports=star_imports,
                        classes={}, top_level_classes=top_level_classes, functions={},
                        held_tree=None, text_owner=source_text)
    for entry in classes:
        info = _class_from_data(entry, index)
        index.classes[info.qualname] = info
    for entry in functions:
        info = _function_from_data(entry, index)
        index.functions[info.name] = info
    index.nested_functions = [(_function_from_data(entry, index), tuple(where))
                              for entry, where in nested]
    return index


def _function_data(info: FunctionInfo) -> tuple:
    return (info.name, info.qualname, info.class_name, info.decorators, info.is_abstract,
            info.kind, info.lineno, info.col_offset, info.end_lineno, info.first_lineno)


def _function_from_data(data: tuple, index: ModuleIndex) -> FunctionInfo:
    name, qualname, class_name, decorators, is_abstract, kind, lineno, col, end, first = data
    return FunctionInfo(name=name, qualname=qualname, definition=None, module=index,
                        class_name=class_name, decorators=tuple(decorators),
                        is_abstract=is_abstract, kind=kind, lineno=lineno, col_offset=col,
                        end_lineno=end, first_lineno=first)


def _class_data(info: ClassInfo) -> tuple:
    return (info.name, info.qualname, info.base_names, info.base_kinds,
            [(key, _function_data(method)) for key, method in info.methods.items()],
            sorted(info.class_attributes), info.lineno, info.col_offset, info.end_lineno,
            info.first_lineno)


def _class_from_data(data: tuple, index: ModuleIndex) -> ClassInfo:
    (name, qualname, base_names, base_kinds, methods, attributes, lineno, col, end,
     first) = data
    return ClassInfo(name=name, qualname=qualname, definition=None, module=index,
                     base_names=base_names, base_kinds=base_kinds,
                     methods={key: _function_from_data(entry, index)
                              for key, entry in methods},
                     class_attributes=set(attributes), lineno=lineno, col_offset=col,
                     end_lineno=end, first_lineno=first)


def _statement_children(node: ast.AST) -> list[ast.AST]:
    """Nested statement lists only: expressions hold no imports or definitions."""
    if node.__class__ is ast.Module:
        return node.body
    children: list[ast.AST] = []
    for name in BLOCK_FIELDS.get(node.__class__, ()):
        children.extend(getattr(node, name))
    return children


def _collect(index: ModuleIndex, tree: ast.Module) -> None:
    # Iterative: deeply nested input must not exhaust the interpreter's stack here.
    # (node, qualname prefix, enclosing class, whether names bind at module level,
    #  enclosing function)
    stack: list[tuple[ast.AST, str, str | None, bool, ast.AST | None]] = [
        (tree, index.name, None, True, None)]
    while stack:
        node, prefix, class_name, at_module_level, enclosing = stack.pop()
        for child in _statement_children(node):
            kind = child.__class__
            if kind not in _DEFINITIONS:  # most statements: nothing to record or enter
                if kind in BLOCK_FIELDS:
                    # if/try/with/for/match bodies: definitions there bind where the
                    # block is.
                    stack.append((child, prefix, class_name, at_module_level, enclosing))
            elif kind is ast.Import or kind is ast.ImportFrom:
                # Imports anywhere (functions, try/except, TYPE_CHECKING) bind for the whole
                # module: a simplification that favours resolving over missing.
                _record_import(index, child)
            elif kind is ast.ClassDef:
                qualname = f"{prefix}.{child.name}"
                index.classes[qualname] = _class_info(child, index, qualname)
                if at_module_level:
                    index.top_level_classes[child.name] = qualname
                stack.append((child, qualname, qualname, False, None))
            else:  # a function
                qualname = f"{prefix}.{child.name}"
                if at_module_level:
                    index.functions[child.name] = _function_info(child, index, qualname, None)
                elif enclosing is not None:
                    index.nested_functions.append(
                        (_function_info(child, index, qualname, None),
                         (enclosing.lineno, enclosing.col_offset)))
                stack.append((child, f"{qualname}.<locals>", class_name, False, child))


_DEFINITIONS = frozenset({ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef,
                          ast.AsyncFunctionDef})
_DEFINITION_NODES = frozenset({ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef})


def _definitions_in(tree: ast.Module) -> dict[tuple[int, int], ast.AST]:
    """Every `def` and `class` of the tree by where it starts: statements only, as
    `_collect` walks them (expressions hold none, and are most of a tree)."""
    found: dict[tuple[int, int], ast.AST] = {}
    stack: list[ast.AST] = [tree]
    while stack:
        for child in _statement_children(stack.pop()):
            kind = child.__class__
            if kind in _DEFINITION_NODES:
                found[(child.lineno, child.col_offset)] = child
                stack.append(child)
            elif kind in BLOCK_FIELDS:
                stack.append(child)
    return found


def _record_import(index: ModuleIndex, node: ast.Import | ast.ImportFrom) -> None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                index.imports[alias.asname] = alias.name
            else:
                head = alias.name.split(".")[0]
                index.imports.setdefault(head, head)
        return
    if node.level:
        source = _resolve_relative(index.name, index.is_package, node.level, node.module)
    else:
        source = node.module or ""
    for alias in node.names:
        if alias.name == "*":
            index.star_imports.append(source)
        else:
            local = alias.asname or alias.name
            index.imports[local] = f"{source}.{alias.name}" if source else alias.name


def _class_info(node: ast.ClassDef, index: ModuleIndex, qualname: str) -> ClassInfo:
    methods: dict[str, FunctionInfo] = {}
    attributes: set[str] = set()
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            info = _function_info(item, index, f"{qualname}.{item.name}", qualname)
            # A property setter reuses the getter's name; keep the getter.
            if item.name not in methods or info.kind != "property":
                methods[item.name] = info
        elif isinstance(item, ast.Assign):
            attributes.update(t.id for t in item.targets if isinstance(t, ast.Name))
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            attributes.add(item.target.id)
    return ClassInfo(
        name=node.name, qualname=qualname, definition=node, module=index,
        base_names=[dotted_name(_strip_subscript(b)) for b in node.bases],
        base_kinds=[b.__class__.__name__ for b in node.bases],
        methods=methods, class_attributes=attributes, lineno=node.lineno,
        col_offset=node.col_offset, end_lineno=getattr(node, "end_lineno", None),
        first_lineno=_first_line(node),
    )


def _strip_subscript(node: ast.expr) -> ast.expr:
    """`Generic[T]` / `Base[int]` as a base names `Generic` / `Base`."""
    return node.value if isinstance(node, ast.Subscript) else node
