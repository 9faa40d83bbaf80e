"""The port of one file: rounds of lint -> edits at the findings' spans -> fixes.

Each round lints the code as it now is and takes the first kind of edit that has
something to do, in this order:

1. the import of cerebras.pytorch (or its runtime reference), when the file has a
   torch optimizer class;
2. CS105: the base `torch.optim.Optimizer` -> `cstorch.optim.Optimizer` (an `ABC` listed
   before it goes: cstorch's is one);
3. CS101 under a lazy-initialisation check, in step or in a helper step calls with each
   param group (`self.init_group(group)`): the check and what it creates move into a
   generated `preinitialize()` (a gradient read only for its shape, dtype or device
   becomes the parameter); a Python step counter (`state["step"] = 0` ...
   `state["step"] += 1`) becomes the global step (`enable_global_step=True`,
   `self.increment_global_step(p)`); an optimizer that creates no state gets an empty
   `preinitialize()`. State written with no such check stays where it is (the linter
   then tells a store of the same tensor from a rebinding); checked creations in
   several methods move one method a round, into the same `preinitialize()`;
4. CS204 / CS203 / CS201: `math.sqrt(t)` -> `torch.sqrt(t)`, `max(t, eps)` ->
   `torch.clamp(t, min=eps)`, `a if t > 0 else b` -> `torch.where(t > 0, a, b)`; an
   `if`/`elif`/`else` chain on a tensor whose branches each assign one value to the
   same name -> `x = torch.where(...)`, or each add in place to the same tensor ->
   one `p.add_(torch.where(...))` of the selected increment;
5. CS106: `state_names_to_sparsify()` for releases before 2.5;

and, when none has, the linter's own fixes, unsafe ones included (CS104's cstorch
creation ops, CS205's `alpha=`/`value=` folded into the first argument). The rounds
end when nothing changes. An edit whose result would not parse is not made; what no
round can rewrite is left as it was and reported by the last lint.

Every edit replaces the exact span of the code it rewrites (`cslint.fixes.apply`
splices it into the text as read): comments and formatting elsewhere stay.
"""

from __future__ import annotations

import ast
import builtins
import collections
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from cslint.config import Config
from cslint.diagnostics import Finding, Location
from cslint.discovery import display_path
from cslint.engine import LintResult, lint
from cslint.fixes.apply import CSTORCH_IMPORT, Edit, _parses, cstorch_import_edit, encoded, \
    fix_findings
from cslint.fixes.syntax import CallIndex
from cslint.port.branches import ALLOCATING_METHODS, TORCH_VIEWS, Helpers, \
    assignments_to, bound_to_none_before, fresh_names, is_in_place
from cslint.semantic.module_index import ClassInfo, dict_entries, dotted_name, entry_aliases
from cslint.semantic.torch_api import OPTIM_HELPERS_READING_VALUE
from cslint.source import SourceFile

RUNTIME_IMPORT = "import cslint.cstorch as cstorch"
# Past this, a generated `torch.where(...)` puts one argument on each line.
_LINE_LENGTH = 88
# More rounds than any file needs: each round removes at least one finding's cause.
MAX_ROUNDS = 40

# `math` functions of one number whose torch twin takes a tensor and means the same.
MATH_TO_TORCH = {name: name for name in (
    "sqrt", "exp", "log", "log2", "log10", "log1p", "expm1", "sin", "cos", "tan", "tanh",
    "atan", "floor", "ceil", "erf", "pow", "atan2")} | {"fabs": "abs", "copysign": "copysign"}


class PortError(Exception):
    """A file that cannot be ported; the message is the line for the user."""


@dataclass(frozen=True)
class PortedClass:
    """An optimizer class of the ported file and the codes the linter still reports in it."""

    name: str
    remaining: tuple[str, ...]

    @property
    def ported(self) -> bool:
        return not self.remaining


@dataclass
class PortedFile:
    path: str  # as given
    source: SourceFile  # as read
    ported: bytes
    classes: list[PortedClass] = field(default_factory=list)
    # The findings left in the ported code (of the whole file).
    findings: list[Finding] = field(default_factory=list)
    # By class: the functions of other files its methods call, directly or through one
    # another, as (the file, first line, last line).
    reached: dict[str, list[tuple[Path, int, int]]] = field(default_factory=dict)

    @property
    def original(self) -> bytes:
        return self.source.raw

    @property
    def changed(self) -> bool:
        return self.ported != self.original


def port_file(path: str, config: Config, runtime_reference: bool = False,
              others: dict[Path, bytes] | None = None) -> PortedFile:
    """The port of the file at `path` (nothing is written), the project's other files
    read as `others` gives them (their ports, by absolute path). Raises PortError when
    the file cannot be read or parsed."""
    shown = display_path(Path(path), path)
    linted = lint([path], config, unsaved=others)
    if shown not in linted.sources:
        problem = next((e.render() for e in linted.errors), f"{shown}: cannot be read")
        raise PortError(problem)
    source = linted.sources[shown]
    statement = RUNTIME_IMPORT if runtime_reference else CSTORCH_IMPORT
    for _ in range(MAX_ROUNDS):
        new = _round(linted, shown, statement, config)
        if new is None:
            break
        again = lint([path], config, replaced={shown: new}, unsaved=others)
        if shown not in again.sources or again.errors:
            break  # (does not happen: each round's code parses) keep the last good code
        linted = again
    return PortedFile(path, source, linted.sources[shown].raw,
                      _classes(linted, shown),
                      [f for f in linted.findings if f.path == shown],
                      _reached_elsewhere(linted, shown))


# How many functions a class's calls are followed into (a guard on very large projects).
_MAX_REACHED = 400


def _reached_elsewhere(linted: LintResult, shown: str) -> dict[str, list[tuple[Path, int, int]]]:
    """By optimizer class of the file: the project functions of other files its methods
    call, directly or through one another (`self.apply_weight_decay(...)` of a base
    class's module, `_get_value(step)` of a helpers module), and the methods of the
    objects of project classes they make (GaLore's projector, kept in the state): what
    is left there is left in the class too."""
    project = linted.project
    found: dict[str, list[tuple[Path, int, int]]] = {}
    for ref, kinds in project.classified_classes:
        info = ref.info
        if info is None or info.module.display_path != shown or not kinds.optimizer \
                or project.is_machinery(ref):
            continue
        # (function, the class whose `self` it has)
        pending = [(method, ref) for method in info.methods.values()]
        seen: set[tuple] = set()
        spans: list[tuple[Path, int, int]] = []
        while pending and len(seen) < _MAX_REACHED:
            function, owner = pending.pop()
            if function.key in seen:
                continue
            seen.add(function.key)
            if function.module.display_path != shown:
                spans.append((function.module.path.absolute(), function.lineno,
                              function.end_lineno or function.lineno))
            nodes = list(ast.walk(function.node))
            called = {id(node.func) for node in nodes if isinstance(node, ast.Call)}
            for node in nodes:
                # What it calls, or names to call later (`func = _single_tensor_adamw`).
                if isinstance(node, (ast.Name, ast.Attribute)) and \
                        isinstance(node.ctx, ast.Load):
                    pending += [(callee, callee_owner) for callee, callee_owner in
                                _project_functions(project, owner, function, node,
                                                   id(node) in called)
                                if callee.key not in seen]
        found[info.name] = spans
    return found


def _project_functions(project, ref, function, node: ast.Name | ast.Attribute,
                       called: bool) -> list:
    """The project functions a name in `function` (a method of `ref`'s class, or what
    it reaches) stands for, each with the class its `self` is: `self.m` along the
    class's MRO, a name as its module imports it, and where it is called, every method
    of the plain project class it makes (its objects' methods run later: a projector)."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
            node.value.id == "self":
        if ref is None:
            return []
        found = project.find_method(ref, node.attr)
        return [(found.function, ref)] if found is not None and found.function is not None \
            else []
    dotted = dotted_name(node)
    if dotted is None:
        return []
    _, callee, _ = project.callee(function.module, dotted)
    if callee is not None:
        return [(callee, None)]
    target = project.resolve_in_module(function.module, dotted) if called else None
    if isinstance(target, ClassInfo):
        made = project.ref_for_info(target)
        if project.is_plain_class(made):
            return [(method, made) for method in target.methods.values()]
    return []


def _as_given(path: Path) -> str:
    """`path` relative to the working folder where it is under it (as a user names it)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def with_reached_findings(files: list[PortedFile], config: Config) -> list[PortedFile]:
    """`files` with what is left in the functions of other files their classes call
    (listed, and among each class's remaining codes): those files are checked once,
    every port read in place of its original."""
    spans = {span for file in files for reached in file.reached.values() for span in reached}
    own = {Path(file.path).absolute() for file in files}
    ported = {Path(file.path).absolute(): file.ported for file in files if file.changed}
    helpers = sorted({path for path, _, _ in spans})
    if not helpers:
        return files
    shown = {path: _as_given(path) for path in helpers}
    replaced = {display_path(Path(shown[path]), shown[path]): ported[path] for path in helpers
                if path in ported}
    linted = lint([shown[path] for path in helpers], config, replaced=replaced,
                  unsaved={p: code for p, code in ported.items() if p not in helpers})
    left = linted.findings
    listed: list[Finding] = []  # (each is listed once, with the first file reaching it)
    result = []
    for file in files:
        classes, extra = [], []
        for found in file.classes:
            inside = [f for f in left if any(
                Path(f.path).absolute() == path and start <= f.location.line <= end
                for path, start, end in file.reached.get(found.name, ()))]
            codes = tuple(sorted({*found.remaining, *(f.code for f in inside)}))
            classes.append(PortedClass(found.name, codes))
            # Listed with the file, unless that file is listed itself.
            for finding in inside:
                if Path(finding.path).absolute() not in own and finding not in listed:
                    listed.append(finding)
                    extra.append(finding)
        result.append(replace(file, classes=classes, findings=[*file.findings, *extra]))
    return result


def _classes(linted: LintResult, shown: str) -> list[PortedClass]:
    """The file's optimizer classes, each with the codes found inside it or inside the
    file's module-level functions it calls (directly or through one another:
    `projection(p, grad, ...)` called from `step`)."""
    module = linted.modules.get(shown)
    tree = module.tree if module is not None else None
    functions = {n.name: n for n in tree.body
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))} if tree else {}
    result = []
    for ref, kinds in linted.project.classified_classes:
        info = ref.info
        if info is None or info.module.display_path != shown or not kinds.optimizer \
                or linted.project.is_machinery(ref):
            continue
        spans = [info.node] + [functions[name] for name in _called_functions(info.node,
                                                                             functions)]
        codes = sorted({f.code for f in linted.findings if f.path == shown
                        and any(n.lineno <= f.location.line <= n.end_lineno for n in spans)})
        result.append(PortedClass(info.name, tuple(codes)))
    return result


def _called_functions(owner: ast.AST, functions: dict[str, ast.AST]) -> list[str]:
    """The names of `functions` that code in `owner` calls by name or names to call later
    (torch's `func = _single_tensor_adam`), and those they call."""
    found: list[str] = []
    pending = [owner]
    while pending:
        for node in ast.walk(pending.pop()):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) \
                    and node.id in functions and node.id not in found:
                found.append(node.id)
                pending.append(functions[node.id])
    return found


def _round(linted: LintResult, shown: str, statement: str, config: Config) -> bytes | None:
    """The code after this round's edits; None when there is nothing left to do."""
    source, tree = linted.sources[shown], linted.modules[shown].tree
    findings = [f for f in linted.findings if f.path == shown]
    rewriter = _Rewriter(source, tree, findings, statement)
    rewriter.helpers = _helpers_of(linted, shown)
    torch_classes = [ref.info.node for ref, kinds in linted.project.classified_classes
                     if ref.info is not None and ref.info.module.display_path == shown
                     and kinds.torch_optimizer and not kinds.cstorch_optimizer]
    # Optimizers that nothing derives from, that define step() but no preinitialize()
    # (torch's have none; cstorch's is abstract): they keep no per-parameter state.
    stateless = []
    for ref, kinds in linted.project.classified_classes:
        info = ref.info
        if info is None or info.module.display_path != shown or not kinds.optimizer \
                or linted.project.is_machinery(ref) or "step" not in info.methods \
                or linted.project.subclasses.get(id(ref)):
            continue
        found = linted.project.find_method(ref, "preinitialize", config.cstorch_version)
        # (cstorch's own, abstract, is found where its source is in the project: the
        # runtime reference linted inside its own repository.)
        if found is None or found.abstract:
            stateless.append(info.node)
    steps = (lambda: rewriter.import_edits(bool(torch_classes)), rewriter.base_edits,
             rewriter.shared_state_edits, rewriter.state_alias_edits,
             rewriter.lazy_test_edits, rewriter.lazy_state_edits, rewriter.setup_state_edits,
             lambda: rewriter.stateless_edits(stateless),
             rewriter.preinitialize_call_edits,
             rewriter.group_counter_edits, rewriter.group_accumulator_edits,
             rewriter.lazy_group_entry_edits,
             rewriter.rebound_state_edits, rewriter.written_state_edits,
             rewriter.handed_back_edits,
             rewriter.expression_edits,
             lambda: rewriter.sparsify_edits(config),
             lambda: rewriter.unmoved_state_edits(stateless))
    for make in steps:
        edits = make()
        if not edits:
            continue
        try:
            new = encoded(source, sorted(edits, key=lambda e: (e.start, e.end)))
        except ValueError:
            continue
        if new != source.raw and _parses(new.decode(source.encoding)):
            return new
    fixes = fix_findings({shown: source}, findings, True, {shown: tree})
    for file in fixes.files:
        if file.changed:
            return file.new_raw
    return None


def _helpers_of(linted: LintResult, shown: str) -> Helpers:
    """The project's functions as the file's code calls them: `self.method(...)` along
    the class's MRO, a function by the name the calling module gives it."""
    project = linted.project
    module = linted.modules[shown]
    refs = {(info.lineno, info.name): project.ref_for_info(info)
            for info in module.classes.values()}

    def resolve(call: ast.Call, owner: ast.ClassDef | None, calling=None):
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id == "self":
            ref = refs.get((owner.lineno, owner.name)) if owner is not None else None
            found = project.find_method(ref, func.attr) if ref is not None else None
            info = found.function if found is not None else None
            if info is None or info.kind not in ("method", "staticmethod", "classmethod"):
                return None
            return info.node, info.module, info.kind != "staticmethod"
        dotted = dotted_name(func)
        if dotted is None:
            return None
        _, info, _ = project.callee(calling or module, dotted)
        if info is None or info.kind != "function":
            return None
        return info.node, info.module, False

    return Helpers(resolve)


# ---- the edits of one round -------------------------------------------------------------

class _Rewriter:
    def __init__(self, source: SourceFile, tree: ast.Module, findings: list[Finding],
                 statement: str):
        self.source = source
        self.text = source.text
        self.tree = tree
        self.findings = findings
        self.statement = statement
        self.positions = CallIndex(source, tree, ())  # spans only: indexes no call
        self.parents: dict[int, ast.AST] = {}
        self.by_location: dict[Location, list[ast.AST]] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
            if isinstance(node, (ast.expr, ast.stmt)):
                self.by_location.setdefault(self.positions.location(node), []).append(node)
        self.torch = _module_alias(tree, "torch")
        # What the project's functions change of their arguments (set by the round).
        self.helpers: Helpers | None = None

    # -- helpers ------------------------------------------------------------------

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.positions.span(node)

    def code(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def ancestors(self, node: ast.AST):
        while id(node) in self.parents:
            node = self.parents[id(node)]
            yield node

    def at(self, finding: Finding, kind) -> list:
        return [n for n in self.by_location.get(finding.location, ()) if isinstance(n, kind)]

    def statements_at(self, finding: Finding) -> list[ast.stmt]:
        """The statements at the finding's span, or holding the expression it spans."""
        found = []
        for node in self.by_location.get(finding.location, ()):
            while not isinstance(node, ast.stmt) and id(node) in self.parents:
                node = self.parents[id(node)]
            if isinstance(node, ast.stmt) and node not in found:
                found.append(node)
        return found

    def coded(self, code: str) -> list[Finding]:
        return [f for f in self.findings if f.code == code]

    def line_start(self, line: int) -> int:
        return self.positions.offset(line, 1)

    def after_line(self, line: int) -> int:
        """Where the line after `line` starts: the end of the text after the last."""
        return self.line_start(line + 1) if line < len(self.source.lines) else len(self.text)

    def indent_of(self, node: ast.stmt) -> str:
        line = self.source.line_text(node.lineno)
        return line[:len(line) - len(line.lstrip())]

    # -- 1. the import --------------------------------------------------------------

    def import_edits(self, needed: bool) -> list[Edit]:
        if not needed:
            return []
        edit = cstorch_import_edit(self.source, self.tree, self.statement)
        return [edit] if edit is not None else []

    # -- 2. the base class ------------------------------------------------------------

    def base_edits(self) -> list[Edit]:
        alias = _cstorch_name(self.tree)
        if alias is None:
            return []
        edits = []
        for finding in self.coded("CS105"):
            for node in self.at(finding, ast.expr)[:1]:
                edits.append(Edit(*self.span(node), f"{alias}.optim.Optimizer"))
                owner = self.parents.get(id(node))
                if isinstance(owner, ast.ClassDef) and node in owner.bases:
                    edits.extend(self._abc_before(owner, owner.bases.index(node)))
        return edits

    def _abc_before(self, owner: ast.ClassDef, index: int) -> list[Edit]:
        """`ABC` listed before the optimizer base goes: cstorch's Optimizer is an ABC
        already, and `class X(ABC, cstorch.optim.Optimizer)` has no consistent MRO."""
        edits = []
        for base, following in zip(owner.bases[:index], owner.bases[1:index + 1]):
            if isinstance(base, ast.Name) and base.id == "ABC" or \
                    isinstance(base, ast.Attribute) and base.attr == "ABC" \
                    and isinstance(base.value, ast.Name) and base.value.id == "abc":
                edits.append(Edit(self.span(base)[0], self.span(following)[0], ""))
        return edits

    # -- 3. lazy state -> preinitialize -------------------------------------------------

    def state_alias_edits(self) -> list[Edit]:
        """`if "z" not in self.state[p]: self.state[p]["z"] = ...` (schedule-free): the
        check reads and writes the parameter's state through a name of its own first
        (`state = self.state[p]` above it), the form the next round moves into
        preinitialize."""
        edits = []
        for finding in self.coded("CS101"):
            for node in self.statements_at(finding)[:1]:
                target = node.targets[0] if isinstance(node, ast.Assign) \
                    and len(node.targets) == 1 else None
                place = target.value if isinstance(target, ast.Subscript) else None
                if not (isinstance(place, ast.Subscript)
                        and dotted_name(place.value) == "self.state"
                        and isinstance(place.slice, ast.Name)):
                    continue
                written = ast.unparse(place)
                guard = next((a for a in self.ancestors(node) if isinstance(a, ast.If)
                              and any(isinstance(n, ast.Subscript) and ast.unparse(n) == written
                                      for n in ast.walk(a.test))), None)
                loop = self.parents.get(id(guard)) if guard is not None else None
                if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)
                        and loop.target.id == place.slice.id and guard in loop.body):
                    continue
                name = fresh_names(self._function_of(loop) or loop)("state")
                start, end = self.span(guard)
                places = sorted((n for n in ast.walk(guard) if isinstance(n, ast.Subscript)
                                 and ast.unparse(n) == written),
                                key=lambda n: (n.lineno, n.col_offset), reverse=True)
                text = self.text[start:end]
                for found in places:
                    first, last = self.span(found)
                    text = text[:first - start] + name + text[last - start:]
                edits.append(Edit(start, end, f"{name} = {written}{_newline(self.text)}"
                                              f"{self.indent_of(guard)}{text}"))
        return _apart(edits)

    def lazy_test_edits(self) -> list[Edit]:
        """The two other ways a step writes its lazy-initialisation test, made the form
        the next rounds move into preinitialize:
        - a flag taken once (`first = len(state) == 0`, then `if first:`, its one use)
          -> the test itself in the `if`;
        - the entry read with `.get` and tested for None (`buf = state.get("k")`, then
          `if buf is None: <make it> else: <update buf>`) -> `if "k" not in state:`,
          the `else` binding `buf = state["k"]` first.
        Only where nothing between the two lines changes the state, and the name is
        bound and read nowhere else (but in the branch that makes the entry)."""
        edits: list[Edit] = []
        newline = _newline(self.text)
        for finding in self.coded("CS101"):
            for node in self.statements_at(finding)[:1]:
                guard = next((a for a in self.ancestors(node) if isinstance(a, ast.If)), None)
                function = self._function_of(node)
                if guard is None or function is None:
                    continue
                found = _tested_lazily(guard, function, self._block_of, self.code)
                owner = next((a for a in self.ancestors(function)
                              if isinstance(a, ast.ClassDef)), None)
                if found is None or owner is None:
                    continue
                state = _state_name_in(function)
                if state is None or _made_lazily_elsewhere(_methods(owner), function,
                                                           [guard], state):
                    continue  # (the next rounds would not move it: left as written)
                taken, test, entry = found
                line = self.line_start(taken.lineno)
                edits.append(Edit(line, self.after_line(taken.end_lineno), ""))
                edits.append(Edit(*self.span(guard.test), test))
                if entry is not None and guard.orelse:
                    first = guard.orelse[0]
                    at = self.line_start(first.lineno)
                    edits.append(Edit(at, at, f"{self.indent_of(first)}{entry}{newline}"))
        return _apart(edits)

    def lazy_state_edits(self) -> list[Edit]:
        classes: dict[int, tuple[ast.ClassDef, list[ast.stmt]]] = {}
        for finding in self.coded("CS101"):
            for node in self.statements_at(finding)[:1]:
                owner = next((a for a in self.ancestors(node) if isinstance(a, ast.ClassDef)),
                             None)
                if owner is not None:
                    classes.setdefault(id(owner), (owner, []))[1].append(node)
        edits: list[Edit] = []
        for owner, created in classes.values():
            plan = _LazyStatePlan(self, owner, created)
            if plan.build():
                edits.extend(plan.edits)
        return edits

    def shared_state_edits(self) -> list[Edit]:
        """`if "k" not in self.state: self.state["k"] = torch.tensor([0])` in a method of
        the class: state of the optimizer as a whole, under a key of its own. The
        creations move to preinitialize() as they are (made always, once), the check goes.
        Only where they read nothing but the module's names: preinitialize() runs inside
        the base class's `__init__`, before the class's own attributes are set."""
        guards: dict[int, tuple[ast.ClassDef, ast.If]] = {}
        for finding in self.coded("CS101"):
            for node in self.statements_at(finding)[:1]:
                key = _shared_state_key(node)
                if key is None:
                    continue
                owner = next((a for a in self.ancestors(node) if isinstance(a, ast.ClassDef)),
                             None)
                guard = next((a for a in self.ancestors(node) if isinstance(a, ast.If)
                              and _tests_shared_key_absent(a.test, key)), None)
                if owner is not None and guard is not None:
                    guards.setdefault(id(guard), (owner, guard))
        module_names = _module_names(self.tree) | _BUILTINS
        for owner, guard in guards.values():
            methods = _methods(owner)
            where = self._function_of(guard)
            if methods.get(getattr(where, "name", None)) is not where \
                    or "step" not in methods or guard.orelse:
                continue
            if not all(_shared_state_key(statement) is not None
                       and _loaded_names(statement.value) <= module_names
                       for statement in guard.body):
                continue
            # A count made as `torch.tensor([0])` that the class reads only as a number
            # (`math.pow(self.state["k"] + 1, 0.5)`, MADGRAD) is made 0-dim: in the
            # tensor math the port turns that into, a [1] shape would make every result
            # 1-D, which torch's scalar arguments (foreach ops, `alpha=`) refuse.
            scalars = {id(listed): self.code(listed.elts[0]) for statement in guard.body
                       if (listed := _one_element_list(statement.value)) is not None
                       and _read_as_number_only(owner, _shared_state_key(statement), guard)}
            moved = self._moved_to_preinitialize(owner, guard.body, scalars)
            if moved is not None:
                return [moved, _removal(self, guard)]
        return []

    def setup_state_edits(self) -> list[Edit]:
        """State `__init__` makes after the base's `__init__`, in a loop over the param
        groups (torch-optimizer's MADGRAD: `for group in self.param_groups: for p in
        group["params"]: state = self.state[p]; state["s"] = torch.zeros_like(p)`): the
        loop moves to preinitialize(), which cstorch's `__init__` runs; a constructor
        argument it reads is read from the defaults it went into (`if momentum != 0` ->
        `if self.defaults["momentum"] != 0`). Only where the loop makes state and binds
        locals alone, and reads no other name of `__init__`."""
        module_names = _module_names(self.tree) | _BUILTINS
        lines = {f.location.line for f in self.coded("CS101")}
        for owner in (n for n in ast.walk(self.tree) if isinstance(n, ast.ClassDef)):
            methods = _methods(owner)
            init = methods.get("__init__")
            if init is None or "step" not in methods:
                continue
            into_defaults = _defaults_of_arguments(init)
            for statement in init.body:
                if not (isinstance(statement, ast.For)
                        and dotted_name(statement.iter) == "self.param_groups"
                        and any(statement.lineno <= line <= statement.end_lineno
                                for line in lines)):
                    continue
                aliases = _state_aliases(statement)
                if not _only_makes_state(statement, aliases):
                    continue
                bound = {n.id for n in ast.walk(statement)
                         if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
                # Keys quoted as the loop quotes its own (`group["params"]`).
                quote = next((self.code(n.slice)[0] for n in ast.walk(statement)
                              if isinstance(n, ast.Subscript)
                              and isinstance(n.slice, ast.Constant)
                              and isinstance(n.slice.value, str)
                              and self.code(n.slice)[:1] in ("'", '"')), '"')
                renamed: dict[int, str] = {}
                for name in (n for n in ast.walk(statement)
                             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                             and n.id not in bound and n.id != "self"):
                    if name.id in into_defaults:
                        key = into_defaults[name.id]
                        renamed[id(name)] = f"self.defaults[{quote}{key}{quote}]"
                    elif name.id not in module_names or _binds(init, name.id):
                        break
                else:
                    moved = self._moved_to_preinitialize(owner, [statement], renamed)
                    if moved is not None:
                        return [moved, _removal(self, statement)]
        return []

    def _moved_to_preinitialize(self, owner: ast.ClassDef, statements: list[ast.stmt],
                                renamed: dict[int, str] | None = None) -> Edit | None:
        """`statements` (of a method of `owner`) at the end of its preinitialize(), made
        before step() when it has none; the nodes in `renamed` (by id) replaced."""
        methods = _methods(owner)
        step, existing = methods["step"], methods.get("preinitialize")
        indent = self.indent_of(step)
        unit = _unit_indent(self.text, step, indent)
        lines = [f"{indent}def preinitialize(self):"] if existing is None else []
        for statement in statements:
            lines.extend(_reindented(self, statement, indent + unit, renamed))
        return self.preinitialize_edit(step, existing, lines)

    def preinitialize_edit(self, step: ast.FunctionDef, existing: ast.FunctionDef | None,
                           lines: list[str]) -> Edit | None:
        """`lines` into the class: a new preinitialize() before `step` (`lines` then
        start with its `def`), in place of the class's own `preinitialize(self): pass`,
        or at the end of its preinitialize(). None where that is the file's last line
        (it is not, after a generated one)."""
        newline = _newline(self.text)
        placeholder = _placeholder_body(existing)
        if existing is None:
            at = self.line_start(_first_line(step))
            return Edit(at, at, newline.join(lines) + newline + newline)
        if placeholder is not None and placeholder.end_lineno < len(self.source.lines):
            return Edit(self.line_start(placeholder.lineno),
                        self.line_start(placeholder.end_lineno + 1),
                        newline.join(lines) + newline)
        if existing.end_lineno < len(self.source.lines):
            at = self.line_start(existing.end_lineno + 1)
            return Edit(at, at, newline.join(lines) + newline)
        return None

    def stateless_edits(self, classes: list[ast.ClassDef]) -> list[Edit]:
        """An empty preinitialize() before step() of each class that creates no state
        (none of the CS101 findings is in it): cstorch's is abstract."""
        edits = []
        lazy = [f.location.line for f in self.coded("CS101")]
        for owner in classes:
            if any(owner.lineno <= line <= owner.end_lineno for line in lazy):
                continue
            step = _methods(owner).get("step")
            if step is not None:
                edits.append(self._placeholder_before(step, "no per-parameter state"))
        return edits

    def _placeholder_before(self, step: ast.FunctionDef, comment: str) -> Edit:
        """`def preinitialize(self): pass  # <comment>` before `step`."""
        indent = self.indent_of(step)
        unit = _unit_indent(self.text, step, indent)
        newline = _newline(self.text)
        method = (f"{indent}def preinitialize(self):{newline}"
                  f"{indent}{unit}pass  # {comment}{newline}{newline}")
        at = self.line_start(_first_line(step))
        return Edit(at, at, method)

    def unmoved_state_edits(self, classes: list[ast.ClassDef]) -> list[Edit]:
        """A preinitialize() that says so before step() of each class whose lazily made
        state could not move (its CS101 findings stay, listed): cstorch's is abstract, and
        a class Python cannot instantiate would hide that the rest of the port runs with
        the numbers unchanged. The last edit of a round: only when nothing else moves."""
        edits = []
        lazy = [f.location.line for f in self.coded("CS101")]
        for owner in classes:
            step = _methods(owner).get("step")
            if step is not None and any(owner.lineno <= line <= owner.end_lineno
                                        for line in lazy):
                edits.append(self._placeholder_before(
                    step, "step() still makes its state (CS101): move it here"))
        return edits

    def preinitialize_call_edits(self) -> list[Edit]:
        """`self.preinitialize()` at the end of `__init__` in a class whose `__init__`
        calls no base's (a wrapper: pytorch-optimizer's ScheduleFreeWrapper keeps the
        wrapped optimizer and a state of its own): cstorch's Optimizer.__init__, which
        calls preinitialize(), never runs there, so the state the port moved into it
        would never be made."""
        edits = []
        newline = _newline(self.text)
        for owner in (n for n in ast.walk(self.tree) if isinstance(n, ast.ClassDef)):
            methods = _methods(owner)
            init, made = methods.get("__init__"), methods.get("preinitialize")
            if init is None or made is None or _placeholder_body(made) is not None \
                    or any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                           and n.func.attr in ("__init__", "preinitialize")
                           for n in ast.walk(owner)):
                continue
            last = init.body[-1]
            if isinstance(last, (ast.Return, ast.Raise)) or \
                    last.end_lineno >= len(self.source.lines):
                continue
            at = self.line_start(last.end_lineno + 1)
            edits.append(Edit(at, at, f"{self.indent_of(last)}self.preinitialize(){newline}"))
        return edits

    # -- 3b. Python counters in param groups -> tensors made in preinitialize ---------------

    def group_counter_edits(self) -> list[Edit]:
        """`group["step"] += 1` from `if "step" not in group: group["step"] = 0` (CS501 where
        the linter sees it): the count becomes a tensor each group gets in preinitialize,
        counted in place, and started again in place (`.fill_(0)`) where a method
        outside step restarts it."""
        alias = _cstorch_name(self.tree) or "cstorch"
        # Every one, reported or not: the linter sees a count only where it meets the
        # graph in the same function; a helper (`self.debias(beta, group["step"])`) hides
        # it from the linter, not from the system.
        for owner in (n for n in ast.walk(self.tree) if isinstance(n, ast.ClassDef)):
            setup = _methods(owner).get("preinitialize")
            if setup is None:
                continue
            for key, (start, starts) in _group_counters(self, owner).items():
                # (A count keeps the type of its start: an int counts in int64.) A tensor
                # the step made on its first call (`_init_scalar()`) is made there as is.
                written = self.code(start) if hasattr(start, "lineno") else repr(start.value)
                value = self.code(start) if isinstance(start, ast.Call) else _zero_dim(
                    alias, ast.literal_eval(start), written)
                edits = self._group_tensor(setup, key, value)
                if edits is None:
                    continue
                if _cstorch_name(self.tree) is None:  # a subclass of a base ported elsewhere
                    imported = cstorch_import_edit(self.source, self.tree, self.statement)
                    if imported is None:
                        continue
                    edits.append(imported)
                for statement, guard in starts:
                    if guard is None:  # a restart, outside step: `group["k"].fill_(0)`
                        target = statement.targets[0]
                        edits.append(Edit(*self.span(statement), f"{self.code(target)}.fill_("
                                                                 f"{self.code(statement.value)})"))
                    elif guard.orelse == [statement]:  # `if "k" in group: += 1 / else: = 1`
                        edits.append(Edit(*self.span(guard), self.code(guard.body[0])))
                    else:
                        edits.append(_removal(self, guard if guard.body == [statement]
                                              else statement))
                return edits
        return []

    def group_accumulator_edits(self) -> list[Edit]:
        """A param-group entry the class's defaults start at a Python number and the step
        replaces with a value computed from itself (`group["weight_sum"] =
        group["weight_sum"] + weight`, `lr_max = group["lr_max"] = torch.maximum(...,
        group["lr_max"])`), or starts at None and the step sets to a value carried to the
        next step (`group["gamma"] = 1.0 / math.sqrt(...)`, read on later steps only; not
        where the code tells it from None): the system would trace the first step's value
        into the graph for good. It becomes a tensor each group gets in preinitialize
        (zero for None), updated with `copy_`."""
        alias = _cstorch_name(self.tree) or "cstorch"
        for owner in (n for n in ast.walk(self.tree) if isinstance(n, ast.ClassDef)):
            methods = _methods(owner)
            setup = methods.get("preinitialize")
            if setup is None or _cstorch_name(self.tree) is None:
                continue
            for key, (start, updates) in _group_accumulators(self, owner).items():
                number = ast.literal_eval(start) if not _is_none(start) else 0.0
                edits = self._group_tensor(setup, key, _zero_dim(alias, number,
                                                                 repr(float(number))))
                if edits is None:
                    continue
                newline = _newline(self.text)
                for statement in updates:
                    target = next(t for t in statement.targets if isinstance(t, ast.Subscript))
                    lines = [self._copied_into(statement, target)]
                    lines += [f"{self.code(t)} = {self.code(target)}" for t in statement.targets
                              if t is not target]
                    edits.append(Edit(*self.span(statement),
                                      (newline + self.indent_of(statement)).join(lines)))
                return edits
        return []

    def _group_tensor(self, setup: ast.FunctionDef, key: ast.expr, value: str
                      ) -> list[Edit] | None:
        """The loop that makes a group's entry the tensor `value`, at the end of
        preinitialize."""
        edit = self._group_tensors(setup, [(key, value)])
        return [edit] if edit is not None else None

    def _group_tensors(self, setup: ast.FunctionDef, entries: list[tuple[ast.expr, str]]
                       ) -> Edit | None:
        """One loop over the groups at the end of preinitialize making each entry (its
        key's node) the tensor its value's code makes."""
        newline = _newline(self.text)
        indent = self.indent_of(setup)
        unit = _unit_indent(self.text, setup, indent)
        lines = [f"{indent}{unit}for group in self.param_groups:"]
        lines += [f"{indent}{unit * 2}group[{self.code(key)}] = {value}"
                  for key, value in entries]
        text = newline.join(lines) + newline
        placeholder = _placeholder_body(setup)
        if placeholder is not None and placeholder.end_lineno < len(self.source.lines):
            return Edit(self.line_start(placeholder.lineno),
                        self.line_start(placeholder.end_lineno + 1), text)
        if setup.end_lineno < len(self.source.lines):
            at = self.line_start(setup.end_lineno + 1)
            return Edit(at, at, text)
        return None

    def lazy_group_entry_edits(self) -> list[Edit]:
        """A param-group entry the step makes a tensor of constants under a check that
        the group lacks it (D-Adaptation's `if "sk_l1" not in group: group["sk_l1"] =
        torch.tensor([0.0], device=device)`; CS101): preinitialize makes it in every
        group, where cstorch makes the optimizer's tensors (its `device=` goes), and the
        check goes; an `elif` after it (Prodigy's, moving the entry to another device)
        stays, as an `if`. Not where the class asks elsewhere whether a group has it."""
        alias = _cstorch_name(self.tree)
        if alias is None:
            return []
        guards: dict[int, tuple[ast.ClassDef, ast.If]] = {}
        for finding in self.coded("CS101"):
            for node in self.statements_at(finding)[:1]:
                entry = _group_entry_made(node)
                guard = self.parents.get(id(node))
                owner = next((a for a in self.ancestors(node) if isinstance(a, ast.ClassDef)),
                             None)
                if entry is not None and owner is not None and isinstance(guard, ast.If) \
                        and node in guard.body \
                        and _membership_test(guard.test, entry[1], entry[0]):
                    guards.setdefault(id(guard), (owner, guard))
        by_owner: dict[int, tuple[ast.ClassDef, list[ast.If]]] = {}
        for owner, guard in guards.values():
            by_owner.setdefault(id(owner), (owner, []))[1].append(guard)
        for owner, owner_guards in by_owner.values():
            setup = _methods(owner).get("preinitialize")
            if setup is None:
                continue
            entries: list[tuple[ast.expr, str]] = []
            edits: list[Edit] = []
            for guard in owner_guards:
                found = self._group_entries_moved(owner, guard, alias)
                if found is not None:
                    entries.extend(found[0])
                    edits.append(found[1])
            if entries:
                made = self._group_tensors(setup, entries)
                if made is not None:
                    return [made] + edits
        return []

    def _group_entries_moved(self, owner: ast.ClassDef, guard: ast.If, alias: str
                             ) -> tuple[list[tuple[ast.expr, str]], Edit] | None:
        """The entries `guard` makes (its every statement), each its key's node and the
        code preinitialize makes it with, and the edit taking the guard away (its
        `elif` kept as an `if`); None where they cannot move."""
        where = self._function_of(guard)
        if where is None or _methods(owner).get(where.name) is not where:
            return None
        made = [(_group_entry_made(s), _constant_tensor(s.value, alias), s)
                for s in guard.body if isinstance(s, ast.Assign)]
        if len(made) != len(guard.body) or any(
                entry is None or value is None or entry[0] != made[0][0][0]
                for entry, value, _ in made):
            return None
        if any(_asks_for_group_key(owner, entry[1], guard) for entry, _, _ in made):
            return None
        entries = [(statement.targets[0].slice, value) for _, value, statement in made]
        orelse = guard.orelse
        if not orelse:
            return entries, _removal(self, guard)
        if not (len(orelse) == 1 and isinstance(orelse[0], ast.If)
                and self.source.line_text(orelse[0].lineno).lstrip().startswith("elif")):
            return None
        # `if "k" not in g: ... elif <test>: <body>` -> `if <test>: <body>`
        start = self.line_start(guard.lineno) + len(self.indent_of(guard))
        elif_start = self.line_start(orelse[0].lineno) + len(self.indent_of(orelse[0])) + \
            len("el")
        return entries, Edit(start, elif_start, "")

    # -- 4. tensor math ------------------------------------------------------------------

    def expression_edits(self) -> list[Edit]:
        candidates: list[Edit] = []
        for finding in self.coded("CS204"):
            edit = self._math_call(finding) or self._dropped_item(finding) or \
                self._capturable_branch(finding)
            if edit is not None:
                candidates.append(edit)
        for finding in self.coded("CS201") + self.coded("CS203"):
            edit = self._capturable_branch(finding)
            if edit is not None:
                candidates.append(edit)
        if self.torch is None:  # only `math.pow` -> `**` needs no torch
            return candidates
        truth_tests = {id(node) for finding in self.coded("CS203")
                       for node in self.by_location.get(finding.location, ())}
        for finding in self.coded("CS203"):
            edit = self._min_max(finding) or self._conditional(finding, truth_tests) or \
                self._boolean_value(finding, truth_tests)
            if edit is not None:
                candidates.append(edit)
        tensor_tests = {id(node) for finding in self.coded("CS201")
                        for node in self.by_location.get(finding.location, ())}
        for finding in self.coded("CS201"):
            edit = self._selecting_if(finding, tensor_tests) or \
                self._first_taken_in_loop(finding, tensor_tests)
            if edit is not None:
                candidates.append(edit)
        return _apart(candidates)

    def handed_back_edits(self) -> list[Edit]:
        """`_get_value(step_t)` in what an optimizer's step runs, where the project's
        `_get_value(x)` only hands its argument back, read on the host when it is a tensor
        (timm's `x.item() if isinstance(x, torch.Tensor) else x`), or torch.optim's own
        (imported from `torch.optim.optimizer`): the argument itself. A Python number
        comes back the same; a tensor stays one on the device (CS204 in the helper
        otherwise)."""
        edits, helper_names = [], set()
        for owner, function in self._traced_functions():
            for node in ast.walk(function):
                if not (isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords
                        and isinstance(node.func, ast.Name)
                        and not isinstance(node.args[0], ast.Starred)):
                    continue
                found = self.helpers.resolve(node, owner) if self.helpers else None
                if found is None:
                    if _imported_as(self.tree, node.func.id) not in OPTIM_HELPERS_READING_VALUE:
                        continue
                elif found[2] or not _hands_back_its_argument(found[0]):
                    continue
                helper_names.add(node.func.id)
                argument, statement = node.args[0], self.parents.get(id(node))
                if isinstance(statement, ast.IfExp) and node is not statement.test \
                        and _side_effect_free(statement.test) and self.code(argument) == \
                        self.code(statement.orelse if node is statement.body else statement.body):
                    # `step_t if capturable else _get_value(step_t)`: `step_t` either way.
                    node, statement = statement, self.parents.get(id(statement))
                if isinstance(statement, ast.Assign) and statement.value is node \
                        and len(statement.targets) == 1 and isinstance(argument, ast.Name) \
                        and isinstance(statement.targets[0], ast.Name) \
                        and statement.targets[0].id == argument.id:
                    edits.append(_removal(self, statement))  # `lr = _get_value(lr)`
                elif (chosen := self._same_either_way(statement, node, argument)) is not None:
                    edits.append(chosen)
                else:
                    edits.append(Edit(*self.span(node), self._operand(argument)))
        chosen = _apart(edits)
        return chosen + self._unused_imports(helper_names, chosen)

    def _same_either_way(self, statement: ast.stmt, call: ast.Call, argument: ast.expr
                         ) -> Edit | None:
        """`if capturable: step = step_t` / `else: step = _get_value(step_t)` (torch's
        NAdam): with the call made its argument, both branches are the same assignment:
        that assignment alone, in place of the `if`."""
        choice = self.parents.get(id(statement))
        if not (isinstance(statement, ast.Assign) and statement.value is call
                and isinstance(choice, ast.If) and _side_effect_free(choice.test)
                and len(choice.body) == 1 and len(choice.orelse) == 1
                and statement in (choice.body[0], choice.orelse[0])):
            return None
        other = choice.orelse[0] if statement is choice.body[0] else choice.body[0]
        head = self.source.line_text(choice.lineno)
        if not isinstance(other, ast.Assign) or head[choice.col_offset:].startswith("elif") \
                or [self.code(t) for t in other.targets] != \
                [self.code(t) for t in statement.targets] \
                or self.code(other.value) != self.code(argument):
            return None
        end = self.after_line(choice.end_lineno)
        targets = " = ".join(self.code(t) for t in statement.targets)
        return Edit(self.line_start(choice.lineno), end,
                    f"{self.indent_of(choice)}{targets} = {self.code(argument)}"
                    f"{_newline(self.text)}")

    def _unused_imports(self, names: set[str], edits: list[Edit]) -> list[Edit]:
        """The `from m import name` of each of `names` that no code reads once `edits`
        are made (what ruff's F401 would report after the port)."""
        found = []
        exported = {n.value for n in ast.walk(self.tree)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        for name in sorted(names - exported):  # (a name in `__all__` stays)
            reads = [n for n in ast.walk(self.tree) if isinstance(n, ast.Name) and n.id == name]
            if any(not any(e.start <= start and end <= e.end for e in edits)
                   for start, end in map(self.span, reads)):
                continue
            for statement in self.tree.body:
                if not isinstance(statement, ast.ImportFrom):
                    continue
                aliases = [a for a in statement.names if (a.asname or a.name) == name]
                if not aliases:
                    continue
                if len(statement.names) == 1:
                    found.append(_removal(self, statement))
                else:
                    found.append(self._alias_removal(statement, aliases[0]))
        return found

    def _alias_removal(self, statement: ast.ImportFrom, alias: ast.alias) -> Edit:
        """`alias` out of `statement`'s names, with the comma and spaces after it (before
        it, when it is the last)."""
        start, end = self.span(alias)
        text = self.text
        if alias is statement.names[-1]:
            comma = text.rindex(",", 0, start)
            return Edit(comma, end, "")
        following = text.index(",", end) + 1
        while following < len(text) and text[following] in " \t":
            following += 1
        if text[following:following + 1] in ("\n", "\r"):
            # The next name starts the next line: this line keeps its indentation.
            line_start = text.rindex("\n", 0, start) + 1
            if not text[line_start:start].strip():
                start = line_start
                following = text.index("\n", following) + 1
        return Edit(start, following, "")

    def _traced_functions(self) -> list[tuple[ast.ClassDef, ast.AST]]:
        """The methods and module functions of the file that the `step` of a class here
        runs (calls, or names to call later), each with its class."""
        functions = {n.name: n for n in self.tree.body
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        reached: list[tuple[ast.ClassDef, ast.AST]] = []
        seen: set[int] = set()
        for owner in (n for n in self.tree.body if isinstance(n, ast.ClassDef)):
            methods = _methods(owner)
            pending = [methods["step"]] if "step" in methods else []
            while pending:
                function = pending.pop()
                if id(function) in seen:
                    continue
                seen.add(id(function))
                reached.append((owner, function))
                for node in ast.walk(function):
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) \
                            and node.id in functions:
                        pending.append(functions[node.id])
                    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                            and node.value.id == "self" and node.attr in methods:
                        pending.append(methods[node.attr])
        return reached

    def _math_call(self, finding: Finding) -> Edit | None:
        """`math.sqrt(t)` of a tensor (the finding spans the call or its argument)."""
        nodes = self.by_location.get(finding.location, ())
        # The finding spans the `math` call itself, or its argument (which may be a
        # call of its own: `math.sqrt(self.debias(beta, step))`).
        pairs = [(node, call) for node in nodes
                 for call in (node, self.parents.get(id(node))) if isinstance(call, ast.Call)]
        for node, call in pairs:
            if call.keywords:
                continue
            func = call.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                    and func.value.id == "math" and func.attr in MATH_TO_TORCH \
                    and (call is node or node in call.args):
                if func.attr == "pow" and len(call.args) == 2:
                    # `a ** b` takes Python numbers and tensors alike: a helper that
                    # callers give either (`debias(beta, step)`) keeps working.
                    base, exponent = (self._operand(a) for a in call.args)
                    return Edit(*self.span(call), f"{base} ** {exponent}")
                if self.torch is None:
                    return None
                return Edit(*self.span(func), f"{self.torch}.{MATH_TO_TORCH[func.attr]}")
        return None

    def rebound_state_edits(self) -> list[Edit]:
        """`state["k"] = <a new tensor>` each step (CS102) -> `state["k"].copy_(...)`,
        updated in place, where preinitialize makes `state["k"]`:
        - a Python number (an accumulator: `state["k"] = state["k"] * beta + lr`) or a
          0-dim tensor; the number is made a 0-dim float32 tensor in preinitialize;
        - a tensor by a call (`cstorch.zeros_like(...)`), when nothing reads the entry's
          old tensor after the statement through a local bound from it (`m =
          state["m"]`): the copy changes that tensor too. Verify proves the shapes."""
        edits: list[Edit] = []
        made: set[int] = set()
        alias = _cstorch_name(self.tree) or "cstorch"
        for finding in self.coded("CS102"):
            for statement in self.statements_at(finding)[:1]:
                if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                        and isinstance(statement.targets[0], ast.Subscript)):
                    continue
                target = statement.targets[0]
                key = target.slice.value if isinstance(target.slice, ast.Constant) else None
                owner = next((a for a in self.ancestors(statement)
                              if isinstance(a, ast.ClassDef)), None)
                setup = _methods(owner).get("preinitialize") if owner is not None else None
                if not isinstance(key, str) or setup is None:
                    continue
                creations = _scalar_creations(setup, key)
                if not creations:
                    function = self._function_of(statement)
                    if not _tensor_created(setup, key) or function is None \
                            or _old_entry_read_after(function, statement, target, key):
                        continue
                for creation, number in creations:
                    if number is not None and id(creation) not in made:
                        made.add(id(creation))
                        edits.append(Edit(*self.span(creation.value),
                                          _zero_dim(alias, number, repr(float(number)))))
                edits.append(Edit(*self.span(statement), self._copied_into(statement, target)))
        return edits

    def written_state_edits(self) -> list[Edit]:
        """`state["k"] = <a tensor>` written at each step of the parameter loop and made
        nowhere else (LAMB's `state["trust_ratio"] = trust_ratio`, kept for whoever logs
        it) -> made in preinitialize, like the parameter or 0-dim of its dtype as the
        value is, and `state["k"].copy_(...)` in step. Only where the value's shape is
        known (from the gradient, the parameter, the state preinitialize makes and the
        locals bound from them), the class never asks whether the state is there (the
        entry would always be), nothing reads the entry but what the copy fills, and the
        value is a new tensor or a local nothing changes in place (the entry was that
        tensor)."""
        by_class: dict[int, tuple[ast.ClassDef, list[tuple[ast.Assign, str, str]]]] = {}
        for finding in self.coded("CS101"):
            for statement in self.statements_at(finding)[:1]:
                found = self._written_each_step(statement)
                if found is not None:
                    owner = found[0]
                    by_class.setdefault(id(owner), (owner, []))[1].append(found[1:])
        edits: list[Edit] = []
        alias = _cstorch_name(self.tree) or "cstorch"
        for owner, written in by_class.values():
            # A key written in several places: each taken, each the same shape, one
            # creation.
            taken: dict[str, set[str]] = {}
            for statement, shape, quoted in written:
                taken.setdefault(quoted, set()).add(shape)
            writes = collections.Counter(
                self.code(node.slice) for node in ast.walk(owner)
                if isinstance(node, ast.Subscript) and _is_written_entry(node, self.parents)
                and self.code(node.slice) in taken)
            counts = collections.Counter(quoted for _, _, quoted in written)
            written = [w for w in written if len(taken[w[2]]) == 1
                       and counts[w[2]] == writes[w[2]]]
            if not written:
                continue
            methods = _methods(owner)
            step, existing = methods["step"], methods.get("preinitialize")
            indent = self.indent_of(step)
            unit = _unit_indent(self.text, step, indent)
            # At the end of preinitialize's loop over the parameters where it ends with
            # one, else in a loop of their own.
            last = _parameter_loop_at_end(existing)
            if last is not None:
                param, state = last[0].target.id, last[1]
                depth = self.indent_of(last[0].body[0])
            else:
                param, state, depth = "p", "self.state[p]", indent + unit * 3
            made = {quoted: shape for _, shape, quoted in written}
            lines = [f"{depth}{state}[{quoted}] = "
                     + (f"{alias}.zeros_like({param})" if shape == _LIKE
                        else f"{alias}.zeros((), dtype={param}.dtype)")
                     for quoted, shape in made.items()]
            if last is not None:
                if last[0].end_lineno >= len(self.source.lines):
                    continue
                at = self.line_start(last[0].end_lineno + 1)
                edit = Edit(at, at, _newline(self.text).join(lines) + _newline(self.text))
            else:
                head = [f"{indent}def preinitialize(self):"] if existing is None else []
                head += [f"{indent}{unit}for group in self.param_groups:",
                         f"{indent}{unit * 2}for p in group[\"params\"]:"]
                edit = self.preinitialize_edit(step, existing, head + lines)
            if edit is None:
                continue
            edits.append(edit)
            edits.extend(Edit(*self.span(statement),
                              self._copied_into(statement, statement.targets[0]))
                         for statement, _, _ in written)
        return edits

    def _written_each_step(self, statement: ast.stmt):
        """(class, statement, shape, the key as written) for `state["k"] = value` as
        `written_state_edits` takes it; None otherwise."""
        from cslint.port.branches import changed_in_place

        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
            return None
        target, value = statement.targets[0], statement.value
        state_name = _state_variable(statement)
        key = _state_key(target, state_name) if state_name is not None else None
        owner = next((a for a in self.ancestors(statement) if isinstance(a, ast.ClassDef)), None)
        function = self._function_of(statement)
        if key is None or owner is None or function is None:
            return None
        methods = _methods(owner)
        if "step" not in methods or methods.get(function.name) is not function or \
                function.name == "preinitialize":
            return None
        # The scope of one parameter: the loop over them, or a method step calls with
        # one (LAMB's `update(self, p, group, ...)`).
        loop = next((a for a in self.ancestors(statement) if isinstance(a, ast.For)), None)
        if loop is not None and self._function_of(loop) is not function:
            loop = None
        scope: ast.For | ast.FunctionDef = loop if loop is not None else function
        bound = [s for s in scope.body if isinstance(s, ast.Assign) and len(s.targets) == 1
                 and isinstance(s.targets[0], ast.Name) and s.targets[0].id == state_name]
        if len(bound) != 1 or bound[0].lineno > statement.lineno or \
                not isinstance(bound[0].value, ast.Subscript) or \
                not isinstance(bound[0].value.slice, ast.Name):
            return None
        param = bound[0].value.slice.id
        elements = _zipped_elements(loop, param) if loop is not None else {}
        if loop is not None:
            if not (isinstance(loop.target, ast.Name) and loop.target.id == param
                    or elements):
                return None
        elif param not in {a.arg for a in function.args.args[1:]} or function is methods["step"]:
            return None
        if _state_binding(bound[0], param) != state_name:
            return None
        # A test of the state above it: the lazy-initialisation rewrite's to do.
        if any(isinstance(a, ast.If) and _mentions(a.test, state_name)
               for a in self.ancestors(statement) if a is not function):
            return None
        # The key: written only so, in this class; read only through the copy; and the
        # class never asks whether the state is there.
        for method in methods.values():
            if _tests_state_elsewhere(method, _state_name_in(method) or state_name, []):
                return None
            for node in ast.walk(method):
                # (Another write like this one, on another path (a foreach one), is
                # taken with it or not at all: `written_state_edits`.)
                if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                        and node.slice.value == key and node is not target \
                        and (isinstance(node.value, ast.Name)
                             or isinstance(node.value, ast.Subscript)) \
                        and not _is_written_entry(node, self.parents) \
                        and not self._read_after_write(node, statement, function):
                    return None
                if isinstance(node, ast.Constant) and node.value == key and \
                        not any(node is n for n in ast.walk(target)) and \
                        not (isinstance(self.parents.get(id(node)), ast.Subscript)
                             and self.parents[id(node)].slice is node):
                    return None  # (`state.get("k")`, `"k" in state`)
        if isinstance(value, (ast.Subscript, ast.Attribute, ast.Starred)) or \
                isinstance(value, ast.Name) and changed_in_place(function, value.id):
            return None
        entries = _entry_shapes(methods.get("preinitialize"))
        if "step" not in entries and any(
                isinstance(node, ast.Attribute) and node.attr == "increment_global_step"
                for method in methods.values() for node in ast.walk(method)):
            entries["step"] = _ZERO_DIM  # (cstorch's global step: a 0-dim tensor)
        # The locals bound once before (in the loop; for the elements of a loop over
        # `zip`, in the function before the loop too).
        candidates = [s for s in [*(function.body if elements else []), *scope.body]
                      if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign))
                      and s.end_lineno < statement.lineno]
        gradients = _gradient_names([c for c in candidates if not isinstance(c, ast.AugAssign)],
                                    param, function)
        values = _gradient_values(candidates, gradients, param,
                                  function if elements else scope, statement.lineno,
                                  state_name, entries, any_value=True)
        values.update(elements)
        shape = _Shapes(gradients, param, values, state_name, entries).of(value)
        if shape not in (_LIKE, _ZERO_DIM):
            return None
        return owner, statement, shape, self.code(target.slice)

    def _read_after_write(self, node: ast.Subscript, statement: ast.Assign,
                          function: ast.AST) -> bool:
        """Whether `node` reads the entry `statement` writes, later in the same block
        (the value this step computed: AdaBelief's `if state["rho_t"] > 4:` under its
        `state["rho_t"] = ...`), as an operand or into locals that nothing keeps: the
        copy the port makes fills the same tensor at every step, so a value kept past
        the step (appended to a list, stored elsewhere) would change with it."""
        block = self._block_of(statement)
        if block is None:
            return False
        at = next(i for i, s in enumerate(block) if s is statement)
        if not any(n is node for later in block[at + 1:] for n in ast.walk(later)):
            return False
        use = self.parents.get(id(node))
        if isinstance(use, (ast.Compare, ast.BinOp, ast.UnaryOp)):
            return True
        names: list[str] = []
        if isinstance(use, ast.Assign) and use.value is node:
            names = [t.id for t in use.targets if isinstance(t, ast.Name)]
            if len(names) != len(use.targets):
                return False
        elif isinstance(use, ast.Tuple):
            assignment = self.parents.get(id(use))
            if not (isinstance(assignment, ast.Assign) and assignment.value is use
                    and len(assignment.targets) == 1
                    and isinstance(assignment.targets[0], ast.Tuple)
                    and len(assignment.targets[0].elts) == len(use.elts)):
                return False
            bound = assignment.targets[0].elts[next(i for i, e in enumerate(use.elts)
                                                    if e is node)]
            if not isinstance(bound, ast.Name):
                return False
            names = [bound.id]
        else:
            return False
        from cslint.port.branches import changed_in_place

        for name in names:
            if changed_in_place(function, name):
                return False
            for other in ast.walk(function):
                kept = isinstance(other, ast.Call) and isinstance(other.func, ast.Attribute) \
                    and other.func.attr in _KEEPING_METHODS and any(
                        isinstance(a, ast.Name) and a.id == name for a in other.args)
                stored = isinstance(other, ast.Assign) and isinstance(other.value, ast.Name) \
                    and other.value.id == name and not all(
                        isinstance(t, ast.Name) for t in other.targets)
                if kept or stored:
                    return False
        return True

    def _copied_into(self, statement: ast.Assign, target: ast.expr) -> str:
        """`target.copy_(<the statement's value>)`; past `_LINE_LENGTH`, the value on a
        line of its own."""
        head, value = f"{self.code(target)}.copy_(", self.code(statement.value)
        indent = self.indent_of(statement)
        if len(indent) + len(head) + len(value) + 1 > _LINE_LENGTH and "\n" not in value:
            method = self._function_of(statement)
            unit = _unit_indent(self.text, method, self.indent_of(method)) \
                if method is not None else "    "
            head += _newline(self.text) + indent + unit
        return f"{head}{value})"

    def _capturable_branch(self, finding: Finding) -> Edit | None:
        """torch.optim's functional updates keep two paths under their `capturable`
        parameter: one of tensor ops only, safe to capture in a graph (what cstorch
        traces), and one that reads the step on the host. A finding on the host path of
        `if capturable: ... else: ...` (or in `if capturable or t.item() != 1:`, or under
        `if not capturable:`) -> the graph-safe path alone, whatever the option (its
        numbers are the same, up to rounding: verify compares them)."""
        for node in self.by_location.get(finding.location, ()):
            for statement in self.ancestors(node):
                if not isinstance(statement, ast.If):
                    continue
                kept = self._capturable_side(statement, node)
                if kept is None:
                    continue
                function = self._function_of(statement)
                head = self.source.line_text(statement.lineno)
                if function is None or "capturable" not in {
                        a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)} \
                        or head[statement.col_offset:].startswith("elif"):
                    return None
                indent, inner = self.indent_of(statement), self.indent_of(kept[0])
                first = kept[0].lineno
                while self.source.line_text(first - 1).strip().startswith("#"):
                    first -= 1
                newline = _newline(self.text)
                lines = [self.source.line_text(n).rstrip("\r\n")
                         for n in range(first, kept[-1].end_lineno + 1)]
                text = newline.join(indent + line[len(inner):] if line.startswith(inner)
                                    else line for line in lines) + newline
                end = self.after_line(statement.end_lineno)
                return Edit(self.line_start(statement.lineno), end, text)
        return None

    @staticmethod
    def _capturable_side(statement: ast.If, node: ast.AST) -> list[ast.stmt] | None:
        """The graph-safe block of `statement` when `node` is on its other side."""
        test = statement.test

        def within(block: list[ast.stmt] | ast.expr) -> bool:
            nodes = block if isinstance(block, list) else [block]
            return any(node is n for part in nodes for n in ast.walk(part))

        if isinstance(test, ast.Name) and test.id == "capturable":
            return statement.body if within(statement.orelse) else None
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and \
                isinstance(test.operand, ast.Name) and test.operand.id == "capturable":
            return statement.orelse or None if within(statement.body) else None
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) and \
                isinstance(test.values[0], ast.Name) and test.values[0].id == "capturable":
            return statement.body if within(test.values[1:]) or within(statement.orelse) \
                else None
        return None

    def _dropped_item(self, finding: Finding) -> Edit | None:
        """`t.item()` whose number feeds only tensor arithmetic (an operand of `+`, `*`,
        ..., an `alpha=`/`value=`, an argument of a tensor's arithmetic method, through
        locals) -> `t`: the value stays a tensor. Not where it reaches a Python decision,
        a conversion, a container or anything else."""
        for node in self.by_location.get(finding.location, ()):
            call = node if isinstance(node, ast.Call) else self.parents.get(id(node))
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "item" and not call.args and not call.keywords):
                continue
            function = self._function_of(call)
            if function is not None and self._feeds_arithmetic_only(call, function, set()):
                return Edit(*self.span(call), self.code(call.func.value))
        return None

    def _feeds_arithmetic_only(self, node: ast.expr, function: ast.AST,
                               seen: set[str]) -> bool:
        """Whether the value of `node` is used only as a tensor may be: see
        `_dropped_item`."""
        parent = self.parents.get(id(node))
        # (`max(eps, t.norm().item() / n)`: the port makes Python's min and max of a
        # tensor torch.clamp / torch.minimum / torch.maximum, CS203)
        while isinstance(parent, ast.BinOp) or isinstance(parent, ast.UnaryOp) and \
                isinstance(parent.op, (ast.USub, ast.UAdd)) or _builtin_min_max(
                    parent, function) and node in parent.args:
            node, parent = parent, self.parents.get(id(parent))
        if isinstance(parent, ast.keyword):
            return parent.arg in ("alpha", "value")
        if isinstance(parent, ast.Call):
            if node not in parent.args:
                return False
            if isinstance(parent.func, ast.Attribute) and parent.func.attr in _TENSOR_ARITHMETIC:
                return True
            return dotted_name(parent.func) in {f"{self.torch}.{name}" for name in
                                                _TENSOR_ARGUMENTS} if self.torch else False
        if isinstance(parent, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and \
                parent.value is node:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                return False
            name = targets[0].id
            if name in seen:
                return True
            seen.add(name)
            uses = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == name
                    and isinstance(n.ctx, ast.Load)]
            return len(seen) <= 4 and all(self._feeds_arithmetic_only(use, function, seen)
                                          for use in uses)
        return False

    def _operand(self, node: ast.expr) -> str:
        """The node's source as an operand of `**` (in parentheses unless atomic)."""
        atomic = isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)) or (
            isinstance(node, ast.Constant) and not (isinstance(node.value, (int, float))
                                                    and node.value < 0))
        return self.code(node) if atomic else f"({self.code(node)})"

    def _min_max(self, finding: Finding) -> Edit | None:
        """`max(t, eps)` -> `torch.clamp(t, min=eps)`; between two tensors, torch.maximum."""
        for call in self.at(finding, ast.Call):
            func = call.func
            if not (isinstance(func, ast.Name) and func.id in ("max", "min")
                    and len(call.args) == 2 and not call.keywords
                    and not any(isinstance(a, ast.Starred) for a in call.args)):
                continue
            first, second = call.args
            bound = "min" if func.id == "max" else "max"
            torch = self.torch
            if _is_number(second):
                new = f"{torch}.clamp({self.code(first)}, {bound}={self.code(second)})"
            elif _is_number(first):
                new = f"{torch}.clamp({self.code(second)}, {bound}={self.code(first)})"
            else:
                # Either may be a Python number: torch.maximum takes tensors only.
                both = "maximum" if func.id == "max" else "minimum"
                new = (f"{torch}.{both}({torch}.as_tensor({self.code(first)}), "
                       f"{torch}.as_tensor({self.code(second)}))")
            return Edit(*self.span(call), new)
        return None

    def _conditional(self, finding: Finding, truth_tests: set[int]) -> Edit | None:
        """`a if t > 0 else b` (the finding spans the test, or a part of it: `a if t == 0
        or s == 0 else b`) -> torch.where, the test's parts joined by the logical ops,
        when neither branch has side effects (both are computed) or makes a list or
        tuple (which torch.where cannot select)."""
        for node in self.by_location.get(finding.location, ()):
            test, expression = node, self.parents.get(id(node))
            while isinstance(expression, ast.BoolOp) or (
                    isinstance(expression, ast.UnaryOp) and isinstance(expression.op, ast.Not)):
                test, expression = expression, self.parents.get(id(expression))
            # Joined tests: only tensor tests (`t == 0 or s == 0`), whose both values
            # torch computes; an option or a None test beside them (`f is not None and t
            # > 1`) may guard what a branch computes, which torch.where would compute
            # always.
            joined = [n for n in ast.walk(test) if n is not test and isinstance(n, ast.expr)
                      and not isinstance(n, (ast.BoolOp, ast.UnaryOp))
                      and isinstance(self.parents.get(id(n)), (ast.BoolOp, ast.UnaryOp))]
            if test is not node and not all(id(n) in truth_tests for n in joined):
                continue
            if isinstance(expression, ast.IfExp) and expression.test is test \
                    and not _makes_a_collection(expression.body) \
                    and not _makes_a_collection(expression.orelse) \
                    and not _is_none(expression.body) and not _is_none(expression.orelse) \
                    and _side_effect_free(expression.body) \
                    and _side_effect_free(expression.orelse) \
                    and (test is node or _side_effect_free(test)):
                return Edit(*self.span(expression),
                            f"{self.torch}.where({self._logical(test, truth_tests)}, "
                            f"{self.code(expression.body)}, {self.code(expression.orelse)})")
        return None

    def _boolean_value(self, finding: Finding, truth_tests: set[int]) -> Edit | None:
        """A truth value of tensors kept as a value (a flag passed on, bound): `bool(t > 0)`
        -> `t > 0`, `t > 0 or s > 1` -> `torch.logical_or(t > 0, s > 1)`. Only where
        every operand is itself a truth value (a comparison, `not`, `bool()`), or the
        value is bound to a name annotated `bool`: `a or b` of those gives one of them,
        equal to the logical op's result. A test's own
        truth (`if`, `while`, `a if t else b`) is the other rewrites'."""
        for node in self.by_location.get(finding.location, ()):
            top, parent = node, self.parents.get(id(node))
            while isinstance(parent, ast.BoolOp) or _is_bool_call(parent) or (
                    isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not)):
                top, parent = parent, self.parents.get(id(parent))
            # (`flag: bool = group["on"] and t > 0`: the annotation says it is a truth value)
            declared = isinstance(parent, ast.AnnAssign) and parent.value is top and \
                isinstance(parent.annotation, ast.Name) and parent.annotation.id == "bool"
            if (top is node and not _is_bool_call(node)) or \
                    isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.Assert,
                                                  ast.comprehension)) or \
                    not (declared or _truth_valued(top)) or not _evaluable_together(top) or \
                    not _side_effect_free(top):
                continue
            return Edit(*self.span(top), self._logical(top, truth_tests))
        return None

    def _first_taken_in_loop(self, finding: Finding, tensor_tests: set[int]) -> Edit | None:
        """AdamP's projection (the paper's code, as pytorch-optimizer, timm and
        torch-optimizer keep it): `for view in [rows, whole]: ...; if t: <update>; return
        perturb, wd`, then `return perturb, wd` after the loop. Every turn runs; its
        update is made on copies of the returned names (`chosen_perturb =
        perturb.clone()`), and taken (`torch.where`) where its test holds and no earlier
        turn's did, the first taken as the `return` did. Only where the update changes
        in place nothing but the returned names and what it made itself, and every call
        of the function binds the returned tensor it changed in place again (`perturb,
        wd = projection(p, g, perturb, ...)`): the caller's tensor is no longer changed."""
        if self.torch is None:
            return None
        for test in self.by_location.get(finding.location, ()):
            statement = self.parents.get(id(test))
            if not (isinstance(statement, ast.If) and statement.test is test
                    and not statement.orelse and len(statement.body) > 1
                    and _has_tensor_operand(test, tensor_tests)
                    and _side_effect_free(test) and _evaluable_together(test)):
                continue
            loop = self.parents.get(id(statement))
            update, last = statement.body[:-1], statement.body[-1]
            returned = _returned_names(last)
            if not (isinstance(loop, ast.For) and not loop.orelse and loop.body[-1] is statement
                    and isinstance(loop.iter, (ast.List, ast.Tuple)) and returned):
                continue
            block = self._block_of(loop) or []
            at = next((i for i, s in enumerate(block) if s is loop), len(block))
            # What runs after the loop before the same `return` (timm's cautious step):
            # only where no turn was taken.
            end_at = next((i for i in range(at + 1, len(block))
                           if isinstance(block[i], ast.Return)), None)
            rest = block[at + 1:end_at] if end_at is not None else []
            if end_at is None or _returned_names(block[end_at]) != returned or any(
                    isinstance(n, (ast.Return, ast.Break, ast.Continue, ast.Yield,
                                   ast.YieldFrom, ast.Global, ast.Nonlocal))
                    for s in update + rest for n in ast.walk(s)):
                continue
            function = self._function_of(loop)
            changed = _changed_in_place(update, returned)
            changed_after = _changed_in_place(rest, returned)
            if function is None or changed is None or changed_after is None or \
                    not self._rebound_by_every_call(function, returned,
                                                    changed | changed_after):
                continue
            fresh_name = fresh_names(function)
            taken, taking, now = (fresh_name(name) for name in ("taken", "taking", "now"))
            chosen = {name: fresh_name(f"chosen_{name}") for name in returned}
            renamed = {id(n): chosen[n.id] for s in update for n in ast.walk(s)
                       if isinstance(n, ast.Name) and n.id in chosen}
            indent = self.indent_of(statement)
            torch_name = self.torch
            lines = [f"{indent}{now} = {self.code(test)}",
                     f"{indent}{taking} = {now} if {taken} is None else "
                     f"{torch_name}.logical_and({now}, {torch_name}.logical_not({taken}))",
                     f"{indent}{taken} = {now} if {taken} is None else "
                     f"{torch_name}.logical_or({taken}, {now})"]
            lines += [f"{indent}{chosen[name]} = {name}" + (".clone()" if name in changed else "")
                      for name in returned]
            for part in update:
                lines += _reindented(self, part, indent, renamed)
            lines += [f"{indent}{name} = {torch_name}.where({taking}, {chosen[name]}, {name})"
                      for name in returned]
            newline = _newline(self.text)
            head = self.text[self.line_start(loop.lineno):self.line_start(statement.lineno)]
            start = self.line_start(loop.lineno)
            last = rest[-1] if rest else statement
            end = self.after_line(last.end_lineno)
            text = f"{self.indent_of(loop)}{taken} = None{newline}{head}" + \
                newline.join(lines) + newline
            if rest:
                outer = self.indent_of(loop)
                between = self.text[self.line_start(statement.end_lineno + 1):
                                    self.line_start(rest[0].lineno)]
                after = [f"{outer}{chosen[name]} = {name}"
                         + (".clone()" if name in changed_after else "") for name in returned]
                renamed = {id(n): chosen[n.id] for s in rest for n in ast.walk(s)
                           if isinstance(n, ast.Name) and n.id in chosen}
                for part in rest:
                    after += _reindented(self, part, outer, renamed)
                after += [f"{outer}{name} = {chosen[name]} if {taken} is None else "
                          f"{torch_name}.where({taken}, {name}, {chosen[name]})"
                          for name in returned]
                text += between + newline.join(after) + newline
            return Edit(start, end, text)
        return None

    def _rebound_by_every_call(self, function: ast.AST, returned: list[str],
                               changed: set[str]) -> bool:
        """Whether each call of `function` in the module (by its name, or as `self.<name>`
        in a method) binds again, from the returned tuple, the name it passes for each
        parameter in `changed` (`perturb, wd = projection(p, g, perturb, ...)`); and there
        is at least one call."""
        if not changed:
            return True
        names = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
        method = names[:1] == ["self"] and self._function_of(function) is None
        if method:
            names = names[1:]
        calls = [n for n in ast.walk(self.tree) if isinstance(n, ast.Call) and (
            isinstance(n.func, ast.Name) and n.func.id == function.name and not method
            or isinstance(n.func, ast.Attribute) and n.func.attr == function.name
            and isinstance(n.func.value, ast.Name) and n.func.value.id == "self" and method)]
        if not calls:
            return False
        for call in calls:
            assignment = self.parents.get(id(call))
            if not (isinstance(assignment, ast.Assign) and assignment.value is call
                    and len(assignment.targets) == 1
                    and isinstance(assignment.targets[0], ast.Tuple)
                    and len(assignment.targets[0].elts) == len(returned)):
                return False
            for name in changed:
                index = names.index(name) if name in names else None
                given = next((k.value for k in call.keywords if k.arg == name), None)
                if given is None and index is not None and index < len(call.args):
                    given = call.args[index]
                target = assignment.targets[0].elts[returned.index(name)]
                if not (isinstance(given, ast.Name) and isinstance(target, ast.Name)
                        and given.id == target.id):
                    return False
        return True

    def _selecting_if(self, finding: Finding, tensor_tests: set[int]) -> Edit | None:
        """`if t > 0: x = a` / `elif c: x = b` / `else: x = c`, each branch the same names
        assigned in the same order -> `x = torch.where(t > 0, a, b if c else c)`, a line a
        name: a test the linter found on a tensor selects with torch.where, another stays
        a Python conditional. With no `else`, a name keeps its value there (it must be
        bound above and never updated in place). Only where every value is computed
        afresh (not a name, attribute or subscript that later in-place updates could be
        meant to reach through; not a list) and free of side effects (each is now
        computed), and no comment beside code inside (one on a line of its own goes
        above). Later lines see the earlier names selected, as each branch saw its own."""
        for test in self.by_location.get(finding.location, ()):
            # The linter reports the tensor operand of `a and t > 0`: the test is the
            # whole expression it is part of.
            while isinstance(self.parents.get(id(test)), ast.BoolOp) or (
                    isinstance(self.parents.get(id(test)), ast.UnaryOp)
                    and isinstance(self.parents[id(test)].op, ast.Not)):
                test = self.parents[id(test)]
            statement = self.parents.get(id(test))
            if not (isinstance(statement, ast.If) and statement.test is test):
                continue
            if not _evaluable_together(test):
                continue
            while isinstance(self.parents.get(id(statement)), ast.If) and \
                    self.parents[id(statement)].orelse == [statement]:
                statement = self.parents[id(statement)]  # an `elif`: from its `if`
            edit = self._selection(statement, tensor_tests)
            if edit is None and not statement.orelse:
                edit = self._selection_with_rest(statement, tensor_tests)
            if edit is not None:
                return edit
        return None

    def _selection(self, statement: ast.If, tensor_tests: set[int]) -> Edit | None:
        """The edit that selects with torch.where what `statement`'s branches do."""
        memo = self._dropped_memo(statement)
        if memo is not None:
            return memo
        returned = self._selected_return(statement, tensor_tests)
        if returned is not None:
            return returned
        chain = self._assignment_chain(statement)
        if chain is None:
            return self._selected_update(statement, tensor_tests) or \
                self._selected_in_place(statement, tensor_tests) or \
                self._both_branches(statement, tensor_tests) or \
                self._both_branches(statement, tensor_tests, swapped=True)
        names, branches, last = chain
        values = [v for _, block in branches for v in block] + \
            [v for v in last if not isinstance(v, str)]
        # Each line tests again: a test must not read a name an earlier line set.
        rebinds_tested = len(names) > 1 and any(
            isinstance(n, ast.Name) and n.id in names
            for t, _ in branches for n in ast.walk(t))
        function = self._function_of(statement)
        by_name = [[block[index] for _, block in branches] +
                   ([last[index]] if not isinstance(last[index], str) else [])
                   for index in range(len(names))]
        if rebinds_tested or \
                not all((_selectable(v) or _unchanged_alias(v, names, function) or
                         (_unchanged_entry(v, names, function)
                          and any(_selectable(w) for w in given)))
                        and _side_effect_free(v, on_new_tensors=True)
                        for given in by_name for v in given) or \
                not all(_side_effect_free(t) for t, _ in branches) or \
                _reads_carried_value(statement, function, values):
            # (Lists of tensors, selected one by one, may still be; entries the
            # branches swap, too.)
            return self._both_branches(statement, tensor_tests) or \
                self._both_branches(statement, tensor_tests, swapped=True)
        start, end = self.span(statement)
        comments = _comment_lines(self.text[start:end])
        if comments is None:
            return None
        lines = comments + [self._selection_line(statement, name, [(t, block[index])
                                                                  for t, block in branches],
                                                 last[index], tensor_tests)
                            for index, name in enumerate(names)]
        return Edit(start, end, (_newline(self.text) + self.indent_of(statement))
                    .join(lines))

    def _dropped_memo(self, statement: ast.If) -> Edit | None:
        """A memo of values computed from the step, its slot taken just above (the RAdam
        paper's code: `buffered = group["buffer"][int(state["step"] % 10)]`, then `if
        state["step"] == buffered[0]: n_sma, step_size = buffered[1], buffered[2]`, else
        compute them and store them in the slot) saves work the graph does anyway, and
        its test reads the step on the host: the computation runs every step, the memo
        goes. Only where the `if` reads back exactly what the `else` stores, and nothing
        after it reads the slot."""
        block = self._block_of(statement)
        if block is None or not statement.orelse:
            return None
        at = next(i for i, s in enumerate(block) if s is statement)
        taken = block[at - 1] if at else None
        if not (isinstance(taken, ast.Assign) and len(taken.targets) == 1
                and isinstance(taken.targets[0], ast.Name)
                and isinstance(taken.value, ast.Subscript)):
            return None
        slot = taken.targets[0].id

        def entry(node: ast.AST) -> object:
            """The constant index of `slot[i]`, else a sentinel."""
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
                    node.value.id == slot and isinstance(node.slice, ast.Constant):
                return node.slice.value
            return _NO_ENTRY

        test = statement.test
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1
                and isinstance(test.ops[0], ast.Eq)):
            return None
        sides = [test.left, test.comparators[0]]
        keys = [entry(side) for side in sides]
        if (keys[0] is _NO_ENTRY) == (keys[1] is _NO_ENTRY):
            return None
        key_entry = keys[0] if keys[0] is not _NO_ENTRY else keys[1]
        read: dict[str, object] = {}  # name -> the entry the `if` binds it to
        for line in statement.body:
            if not (isinstance(line, ast.Assign) and len(line.targets) == 1):
                return None
            target, value = line.targets[0], line.value
            pairs = list(zip(target.elts, value.elts)) if isinstance(target, ast.Tuple) and \
                isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts) \
                else [(target, value)]
            for name, stored in pairs:
                if not isinstance(name, ast.Name) or entry(stored) is _NO_ENTRY:
                    return None
                read[name.id] = entry(stored)
        kept, written = [], {}
        for line in statement.orelse:
            if isinstance(line, ast.Assign) and len(line.targets) == 1 and \
                    entry(line.targets[0]) is not _NO_ENTRY:
                written[entry(line.targets[0])] = line
                continue
            if any(isinstance(n, ast.Name) and n.id == slot for n in ast.walk(line)):
                return None
            kept.append(line)
        if key_entry not in written or set(written) != {key_entry, *read.values()}:
            return None
        # The slot keeps the key it is tested with (a copy of it), and the computation
        # only binds names: run at every step, it does nothing the memo's hits skipped.
        compared = ast.dump(sides[1] if keys[0] is not _NO_ENTRY else sides[0])
        stored_key = written[key_entry].value
        if isinstance(stored_key, ast.Call) and isinstance(stored_key.func, ast.Attribute) \
                and stored_key.func.attr == "clone" and not stored_key.args:
            stored_key = stored_key.func.value
        if ast.dump(stored_key) != compared or not _binds_names_only(kept):
            return None
        for name, index in read.items():
            store = written[index]
            if not (isinstance(store.value, ast.Name) and store.value.id == name
                    and any(isinstance(n, ast.Name) and n.id == name
                            and isinstance(n.ctx, ast.Store)
                            for line in kept if line.lineno < store.lineno
                            for n in ast.walk(line))):
                return None
        function = self._function_of(statement)
        own = {id(n) for part in (taken, statement) for n in ast.walk(part)}
        if function is None or not kept or any(
                isinstance(n, ast.Name) and n.id == slot and id(n) not in own
                for n in ast.walk(function)):
            return None  # (the slot read elsewhere: more than a memo)
        indent = self.indent_of(statement)
        lines = [line for kept_line in kept for line in _reindented(self, kept_line, indent)]
        start, _ = self.span(taken)
        _, end = self.span(statement)
        return Edit(start, end, _newline(self.text).join(lines)[len(indent):])

    def _selection_with_rest(self, statement: ast.If, tensor_tests: set[int]) -> Edit | None:
        """`if t: <work>; continue` at the top of a loop's body (`return` at the top of a
        function that returns nothing) runs the rest of the block only where `t` is
        false: the selection of `if t: <work> / else: <the rest>`, the code it is."""
        parent = self.parents.get(id(statement))
        leave = statement.body[-1]
        if isinstance(leave, ast.Continue):
            if not isinstance(parent, (ast.For, ast.While)) or parent.orelse:
                return None
        elif isinstance(leave, ast.Return) and leave.value is None:
            if not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) or any(
                    isinstance(n, ast.Return) and n.value is not None
                    for n in _own_nodes(parent)):
                return None
        else:
            return None
        block = parent.body
        at = next((i for i, s in enumerate(block) if s is statement), None)
        work = statement.body[:-1]  # (none: `if t: return`, nothing done where t holds)
        if at is None or at + 1 == len(block) or any(
                isinstance(n, ast.Return) for s in work for n in _own_nodes(s)) or any(
                isinstance(n, (ast.Continue, ast.Break))
                for s in work for n in _own_nodes(s, loops=False)):
            return None  # (another way out of the work)
        merged = ast.If(test=statement.test, body=work, orelse=block[at + 1:])
        ast.copy_location(merged, statement)
        merged.end_lineno, merged.end_col_offset = block[-1].end_lineno, block[-1].end_col_offset
        # The code as the merged `if` reads it, while its selection is made.
        parents = {id(s): self.parents.get(id(s))
                   for s in [*block[at:], *work, statement.test]}
        self.parents[id(merged)] = parent
        for inner in [merged.test, *merged.body, *merged.orelse]:
            self.parents[id(inner)] = merged
        parent.body = block[:at] + [merged]
        try:
            return self._selection(merged, tensor_tests)
        finally:
            parent.body = block
            del self.parents[id(merged)]
            self.parents.update(parents)

    def _selected_return(self, statement: ast.If, tensor_tests: set[int]) -> Edit | None:
        """`if t > 0: return a` followed by `return b` (or with `else: return b`) ->
        `return torch.where(t > 0, a, b)`: both values computed, free of side effects
        (but in-place ops on a tensor a value makes itself) and selectable (not a list,
        None or a tuple), no comment beside code inside (one on a line of its own goes
        above). Names the branch computes first for its value alone (`w = step /
        warmup`, read nowhere else) are computed always."""
        if not (statement.body and isinstance(statement.body[-1], ast.Return)):
            return None
        function = self._function_of(statement)
        temporaries = statement.body[:-1]
        if any(not _branch_temporary(t, statement, True, function) or
               isinstance(t.value, ast.Name) for t in temporaries):
            return None
        chosen = statement.body[-1].value
        if statement.orelse:
            if not (len(statement.orelse) == 1 and isinstance(statement.orelse[0], ast.Return)):
                return None
            last = statement.orelse[0]
        else:
            block = self._block_of(statement)
            at = next((i for i, s in enumerate(block) if s is statement), None) \
                if block is not None else None
            if at is None or at + 1 >= len(block) or \
                    not isinstance(block[at + 1], ast.Return):
                return None
            last = block[at + 1]
        otherwise = last.value
        test = statement.test
        values = [chosen, otherwise]
        if any(v is None or _makes_a_collection(v) or _is_none(v) or
               not _side_effect_free(v, on_new_tensors=True) for v in values) or \
                not _side_effect_free(test) or not _evaluable_together(test) or \
                not _has_tensor_operand(test, tensor_tests):
            return None
        start, end = self.span(statement)[0], self.span(last)[1]
        comments = _comment_lines(self.text[start:end])
        if comments is None:
            return None
        condition = self._condition(test, tensor_tests)
        if condition is None:
            return None
        indent = self.indent_of(statement)
        lines = [indent + comment for comment in comments]
        lines += [line for t in temporaries for line in _reindented(self, t, indent)]
        lines.append(indent + self._where(statement, "return ", "", [
            (condition, test), (self.code(chosen), chosen), (self.code(otherwise), otherwise)]))
        return Edit(start, end, _newline(self.text).join(lines)[len(indent):])

    def _block_of(self, statement: ast.stmt) -> list[ast.stmt] | None:
        """The statement list that holds `statement`."""
        parent = self.parents.get(id(statement))
        for name in ("body", "orelse", "finalbody"):
            block = getattr(parent, name, None)
            if isinstance(block, list) and any(s is statement for s in block):
                return block
        return None

    def _both_branches(self, statement: ast.If, tensor_tests: set[int],
                       swapped: bool = False) -> Edit | None:
        """Branches that change tensors in place (or bind lists of them): both run, each
        changed tensor selected; with `swapped`, branches that swap entries of a dict
        (`cslint.port.branches`)."""
        from cslint.port.branches import both_branches, swapped_entries  # (they read
        # this module's helpers)

        test = statement.test
        if not _has_tensor_operand(test, tensor_tests) or not _side_effect_free(test) or \
                not _evaluable_together(test) or \
                _reads_carried_value(statement, self._function_of(statement),
                                     [statement]):
            return None
        condition = self._condition(test, tensor_tests)
        if condition is None:
            return None
        return (swapped_entries if swapped else both_branches)(self, statement, condition)

    def _assignment_chain(self, statement: ast.If) -> tuple[
            list[str], list[tuple[ast.expr, list[ast.expr]]], list[ast.expr | str]] | None:
        """For `if a: x = 1; y = 2 / elif b: ... / else: x = 3; y = 4`: (["x", "y"],
        [(a, [1, 2]), (b, [...])], [3, 4]); with no `else`, the names themselves (as
        strings) where each is bound above in the function and never updated in place.
        None unless every branch assigns the same names in the same order."""
        branches: list[tuple[ast.expr, list[ast.expr]]] = []
        names: list[str] | None = None
        node: ast.stmt = statement
        while True:
            block = _assignment_block(node.body)
            if block is None or names not in (None, [n for n, _ in block]):
                return None
            names = [n for n, _ in block]
            branches.append((node.test, [v for _, v in block]))
            if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
                node = node.orelse[0]
                continue
            break
        if node.orelse:
            block = _assignment_block(node.orelse)
            if block is None or [n for n, _ in block] != names:
                return None
            return names, branches, [v for _, v in block]
        function = self._function_of(statement)
        # (A name None above: torch.where cannot keep it; `cslint.port.branches` may.)
        if function is None or not all(_bound_before(function, name, statement)
                                       and not _updated_in_place(function, name)
                                       and not bound_to_none_before(function, name, statement)
                                       for name in names):
            return None
        return names, branches, list(names)

    def _selection_line(self, statement: ast.If, name: str,
                        branches: list[tuple[ast.expr, ast.expr]], last: ast.expr | str,
                        tensor_tests: set[int]) -> str:
        """`name = torch.where(...)` for one name of an assignment chain (one argument a
        line past `_LINE_LENGTH`)."""
        selected = last if isinstance(last, str) else self.code(last)
        for branch_test, value in reversed(branches[1:]):
            selected = self._select(branch_test, value, selected, tensor_tests)
        first_test, first_value = branches[0]
        condition = self._condition(first_test, tensor_tests)
        if condition is None:
            return f"{name} = {self._select(first_test, first_value, selected, tensor_tests)}"
        rest = branches[1][1] if len(branches) > 1 else last
        return self._where(statement, f"{name} = ", "", [
            (condition, first_test), (self.code(first_value), first_value),
            (selected, None if isinstance(rest, str) else rest)])

    def _where(self, statement: ast.stmt, head: str, tail: str,
               arguments: list[tuple[str, ast.AST | None]]) -> str:
        """`{head}torch.where(a, b, c){tail}` in place of `statement`; past
        `_LINE_LENGTH`, one argument a line. An argument's code over several lines keeps
        its lines' indentation relative to the line its node starts on (given with it)."""
        line = f"{head}{self.torch}.where({', '.join(code for code, _ in arguments)}){tail}"
        indent = self.indent_of(statement)
        if len(indent) + len(line) <= _LINE_LENGTH:
            return line
        inner = indent + _unit_indent(self.text, statement, indent)
        newline = _newline(self.text)
        lines = "".join(
            f"{newline}{inner}{_shifted(code, len(inner) - self._line_indent(node))},"
            for code, node in arguments)
        return f"{head}{self.torch}.where({lines}{newline}{indent}){tail}"

    def _function_of(self, node: ast.AST) -> ast.AST | None:
        return next((a for a in self.ancestors(node)
                     if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))), None)

    def _line_indent(self, node: ast.AST | None) -> int:
        """The indentation of the line where `node` starts (0 for none)."""
        if node is None:
            return 0
        line = self.source.line_text(node.lineno)
        return len(line) - len(line.lstrip())

    def _select(self, test: ast.expr, value: ast.expr | str, otherwise: str,
                tensor_tests: set[int]) -> str:
        """`value` where `test` holds, else `otherwise`, as one expression."""
        chosen = value if isinstance(value, str) else self.code(value)
        condition = self._condition(test, tensor_tests)
        if condition is None:
            return f"({chosen} if {self.code(test)} else {otherwise})"
        return f"{self.torch}.where({condition}, {chosen}, {otherwise})"

    def _condition(self, test: ast.expr, tensor_tests: set[int]) -> str | None:
        """The condition `torch.where` is given for `test`; None for an option
        (`group["degenerated_to_sgd"]`), which stays a Python choice."""
        if _has_tensor_operand(test, tensor_tests):
            return self._logical(test, tensor_tests)
        if id(test) not in tensor_tests and \
                not any(isinstance(n, ast.Compare) for n in ast.walk(test)):
            return None
        if id(test) not in tensor_tests or isinstance(test, ast.BoolOp):
            # A comparison the linter could not type may be of a tensor (the next
            # branch's `step_size > 0`), and `not option or t > 0` is a Python bool or
            # a tensor as the option is: torch.where takes either as a tensor.
            return f"{self.torch}.as_tensor({self.code(test)})"
        return self.code(test)

    def _logical(self, test: ast.expr, tensor_tests: set[int]) -> str:
        """`a and t > 0` as a tensor: `torch.logical_and(torch.as_tensor(a), t > 0)`.
        Python's `and` would ask a tensor operand for its truth (a host read); the
        logical ops take each operand's truth elementwise, a Python one as a tensor. A
        name is made a tensor too: a flag found a tensor on one path may be a bool on
        another (`bool(t)` is `t`)."""
        if _is_bool_call(test):
            inner = test.args[0]  # (the linter may report the call or its argument)
            return self._logical(inner, tensor_tests | {id(inner)}
                                 if id(test) in tensor_tests else tensor_tests)
        if isinstance(test, ast.BoolOp):
            name = "logical_and" if isinstance(test.op, ast.And) else "logical_or"
            operands = [self._logical(value, tensor_tests) for value in test.values]
            combined = operands[-1]
            for operand in reversed(operands[:-1]):
                combined = f"{self.torch}.{name}({operand}, {combined})"
            return combined
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return f"{self.torch}.logical_not({self._logical(test.operand, tensor_tests)})"
        if isinstance(test, ast.Compare) and _has_tensor_operand(test, tensor_tests) and \
                not _may_hold_a_number(test, self._function_of(test)):
            return self.code(test)
        return f"{self.torch}.as_tensor({self.code(test)})"

    def _selected_update(self, statement: ast.If, tensor_tests: set[int]) -> Edit | None:
        """`if t > 0: p.addcdiv_(a, b, value=-s)` / `elif s > 0: p.add_(a, alpha=-s)`:
        each branch one in-place addition to the same name -> one addition of the
        selected increment, `p.add_(torch.where(t > 0, a / b * (-s), ...))` (zero where
        no branch runs). Only with side-effect-free tests and arguments."""
        branches: list[tuple[ast.expr, str]] = []
        receiver = None
        node: ast.If = statement
        otherwise = "0.0"
        while True:
            update = _increment(node.body)
            if update is None or receiver not in (None, update[0]):
                return None
            receiver = update[0]
            branches.append((node.test, self._increment_code(update[1])))
            if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
                node = node.orelse[0]
                continue
            if node.orelse:
                last = _increment(node.orelse)
                if last is None or last[0] != receiver:
                    return None
                otherwise = self._increment_code(last[1])
            break
        arguments = [argument for call in _increment_calls(statement)
                     for argument in (*call.args, *(k.value for k in call.keywords))]
        if not all(_side_effect_free(t) for t, _ in branches) or \
                not all(_side_effect_free(argument) for argument in arguments) or \
                _reads_carried_value(statement, self._function_of(statement), arguments):
            return None
        start, end = self.span(statement)
        comments = _comment_lines(self.text[start:end])
        if comments is None:
            return None
        # Comments of the branches on lines of their own: above what replaces them.
        above = "".join(comment + _newline(self.text) + self.indent_of(statement)
                        for comment in comments)
        selected = otherwise
        for test, increment in reversed(branches[1:]):
            selected = self._select(test, increment, selected, tensor_tests)
        test, increment = branches[0]
        condition = self._condition(test, tensor_tests)
        if condition is None:
            return Edit(start, end, f"{above}{receiver}.add_("
                                    f"{self._select(test, increment, selected, tensor_tests)})")
        return Edit(start, end, above + self._where(statement, f"{receiver}.add_(", ")", [
            (condition, test), (increment, None), (selected, None)]))

    def _selected_in_place(self, statement: ast.If, tensor_tests: set[int]) -> Edit | None:
        """`if t > 1: c.div_(t)` / `else: p.mul_(m).add_(g)`: each statement one chain of
        in-place ops on a name -> that name copies, selected by the test, the chain's
        result computed out of place or its own value:
        `c.copy_(torch.where(t > 1, c.div(t), c))`. Statements run in their order, each
        selecting (what a branch not taken would change stays). Only with a tensor test
        (an `if`, an optional `else`) that names none of the updated tensors, side-effect
        free arguments, and no comment beside code inside (one on a line of its own goes
        above)."""
        test = statement.test
        if not _has_tensor_operand(test, tensor_tests) or not _side_effect_free(test) or \
                (statement.orelse and isinstance(statement.orelse[0], ast.If)):
            return None
        function = self._function_of(statement)
        updates = [(s, True) for s in statement.body] + [(s, False) for s in statement.orelse]
        # A temporary a branch computes for itself runs unconditionally, as it is.
        temporaries = {id(s) for s, taken in updates
                       if _branch_temporary(s, statement, taken, function)}
        chains = [(None if id(s) in temporaries else _in_place_chain(s), taken)
                  for s, taken in updates]
        if any(chain is None and id(s) not in temporaries
               for (chain, _), (s, _) in zip(chains, updates)) or \
                not any(chain is not None for chain, _ in chains) or \
                _reads_carried_value(statement, function, [s for s, _ in updates]):
            return None
        # The test must not read what the branches update or compute (it is evaluated
        # again for each statement).
        receivers = {n.id for (chain, _) in chains if chain is not None
                     for n in ast.walk(chain[0]) if isinstance(n, ast.Name)} | \
            {_targets(s)[0].id for s, _ in updates if id(s) in temporaries}
        if any(isinstance(n, ast.Name) and n.id in receivers for n in ast.walk(test)):
            return None
        start, end = self.span(statement)
        comments = _comment_lines(self.text[start:end])
        if comments is None:
            return None
        condition = self._condition(test, tensor_tests)
        indent = self.indent_of(statement)
        lines = list(comments)
        for (chain, taken), (original, _) in zip(chains, updates):
            if chain is None:
                lines.append(_shifted(self.code(original),
                                      len(indent) - self._line_indent(original)))
                continue
            place, calls = chain
            receiver = self.code(place)
            value = receiver
            for call in calls:
                arguments = ", ".join(self.code(a) for a in (*call.args, *call.keywords))
                value = f"{value}.{_OUT_OF_PLACE[call.func.attr]}({arguments})" \
                    if call.func.attr != "copy_" else self.code(call.args[0])
            chosen = (value, receiver) if taken else (receiver, value)
            lines.append(self._where(statement, f"{receiver}.copy_(", ")", [
                (condition, test), (chosen[0], None), (chosen[1], None)]))
        return Edit(start, end, (_newline(self.text) + indent).join(lines))

    def _increment_code(self, call: ast.Call) -> str:
        """What `p.add_(x, alpha=a)` / `sub_` / `addcdiv_` / `addcmul_` adds to `p`."""
        method = call.func.attr
        keywords = {k.arg: self._operand(k.value) for k in call.keywords}
        operands = [self._operand(a) for a in call.args]
        if method in ("add_", "sub_"):
            (value,) = operands
            scale = keywords.get("alpha")
            if method == "sub_":
                value = f"(-{value})"
        else:
            first, second = operands
            value = f"{first} / {second}" if method == "addcdiv_" else f"{first} * {second}"
            scale = keywords.get("value")
        return f"{value} * {scale}" if scale is not None else value

    # -- 5. state_names_to_sparsify ---------------------------------------------------------

    def sparsify_edits(self, config: Config) -> list[Edit]:
        edits = []
        for finding in self.coded("CS106"):
            # The finding points at the class's name.
            for owner in [n for n in ast.walk(self.tree) if isinstance(n, ast.ClassDef)
                          and n.lineno == finding.location.line][:1]:
                methods = _methods(owner)
                preinit = methods.get("preinitialize")
                if preinit is None:
                    continue
                keys = []
                for node in ast.walk(preinit):
                    key = _state_key_written(node)
                    if key is not None and key not in keys:
                        keys.append(key)
                anchor = methods.get("step") or preinit
                indent = self.indent_of(anchor)
                newline = _newline(self.text)
                inner = indent + _unit_indent(self.text, anchor, indent)
                method = (f"{indent}def state_names_to_sparsify(self):{newline}"
                          f"{inner}return {keys!r}{newline}{newline}")
                at = self.line_start(_first_line(anchor))
                edits.append(Edit(at, at, method))
        return edits


def _placeholder_body(function: ast.FunctionDef | None) -> ast.stmt | None:
    """The lone `pass` or `...` of a method that does nothing yet (after its docstring)."""
    if function is None:
        return None
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str) and len(body) > 1:
        body = body[1:]
    if len(body) != 1:
        return None
    statement = body[0]
    if isinstance(statement, ast.Pass) or (
            isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and statement.value.value is Ellipsis):
        return statement
    return None


class _LazyStatePlan:
    """What moving one class's lazily created state into preinitialize() takes; `build`
    says whether it can be done safely, and the edits that do it are in `edits`."""

    def __init__(self, rewriter: _Rewriter, owner: ast.ClassDef, created: list[ast.stmt]):
        self.r = rewriter
        self.owner = owner
        self.created = created
        self.edits: list[Edit] = []
        # A helper's `kwargs.get("k", d)` the prelude takes, by id, with what step's
        # calls give it (`_passed_keyword`); the helper and step, while one is built.
        self.passed: dict[int, str] = {}
        self.calling: tuple[ast.FunctionDef, ast.FunctionDef, str] | None = None

    def build(self) -> bool:
        """Whether the checked creations of one method (step, or a helper it calls)
        can move; a later round takes the next method's."""
        methods = _methods(self.owner)
        if methods.get("step") is None:
            return False
        by_method: dict[tuple[int, str], list[ast.If]] = {}
        for node in self.created:
            found = self._guard(node, methods)
            if found is None:
                # Written with no lazy-initialisation check (`state["k"] = m` each step,
                # `self.state[p]["k"] = ...`): it stays where it is; moving the checked
                # creations does not change what it does.
                continue
            where, state_name, guard = found
            guards = by_method.setdefault((id(where), state_name), [])
            if guard not in guards:
                guards.append(guard)
        for (_, state_name), guards in by_method.items():
            where = self.r._function_of(guards[0])
            if self._build_one(methods, where, state_name, guards):
                self.edits.extend(self._made_again_at_setup(methods.get("__init__"), guards,
                                                            state_name))
                return True
            self.edits.clear()
        return False

    def _made_again_at_setup(self, init: ast.FunctionDef | None, guards: list[ast.If],
                             state_name: str) -> list[Edit]:
        """torch's Adagrad makes its state in `__init__` too (`for group in
        self.param_groups: for p in group["params"]: state = self.state[p];
        state["sum"] = ...`): where preinitialize now makes every key such a loop makes,
        the loop goes (it would replace preinitialize's tensors after it ran)."""
        if init is None:
            return []
        moved = {key for guard in guards for key in _state_keys_stored(guard, {state_name})}
        edits = []
        for statement in init.body:
            if not (isinstance(statement, ast.For)
                    and dotted_name(statement.iter) == "self.param_groups"):
                continue
            aliases = _state_aliases(statement)
            keys = _state_keys_stored(statement, aliases)
            if keys and keys <= moved and _only_makes_state(statement, aliases):
                edits.append(_removal(self.r, statement))
        return edits

    def _build_one(self, methods: dict[str, ast.FunctionDef], where: ast.FunctionDef,
                   state_name: str, guards: list[ast.If]) -> bool:
        r = self.r
        step = methods["step"]
        # One made in an earlier round (state created lazily in two methods) or the
        # class's own: the new creations go at its end.
        existing = methods.get("preinitialize")
        loops = self._loops(guards, step) if where is step else \
            self._helper_loops(guards, where, step)
        if loops is None or _tests_state_elsewhere(where, state_name, guards) or \
                _made_lazily_elsewhere(methods, where, guards, state_name):
            return False
        group, blocks, param_loop = loops
        param = param_loop.target.id
        params = _unfiltered(param_loop.iter, where)
        if _mentions_grad(params):
            return False
        # (`grad_shape: tuple[int, ...] = grad.shape` too: annotated)
        candidates = [s for block in blocks for s in block
                      if isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None
                      and s.end_lineno < guards[0].lineno
                      and all(isinstance(t, (ast.Name, ast.Tuple)) for t in _targets(s))]
        gradients = _gradient_names(candidates, param, where)
        # `grad = p.grad` then `if grad.dtype in {torch.float16, ...}: grad = grad.float()`:
        # its dtype is not always the parameter's, so preinitialize casts the parameter
        # as step casts the gradient, for what reads its shape, dtype or device.
        casts = _cast_gradients(candidates, param, param_loop, where, guards[0].lineno)
        gradients |= casts.keys()
        values = _gradient_values(candidates, gradients, param, param_loop,
                                  max(guard.lineno for guard in guards), state_name)
        # The guards' statements: creations (and option tests around them) only.
        counter: list[ast.stmt] = []
        counted_by: dict[int, ast.If] = {}  # the guard of each counter statement
        moved: list[ast.stmt] = []
        guarded: dict[int, list[ast.stmt]] = {}  # what each guard moves
        # State the first step makes from the gradient's values, and what the guard does
        # to it after (`self.maximize_gradient(state["m"])`): `_FirstStep`.
        first_steps: dict[int, _FirstStep] = {}  # by id of their check
        for guard in guards:
            # The first step's locals (`buf = grad.clone()` before `state["buf"] = buf`).
            first_values: dict[str, ast.expr] = {}
            first_work: list[ast.stmt] = []
            for statement in guard.body:
                if _is_step_counter(statement, state_name):
                    counter.append(statement)
                    counted_by[id(statement)] = guard
                elif id(guard) in first_steps and first_steps[id(guard)].follows(statement):
                    continue
                elif (seeded := _seeded_key(statement, state_name, gradients, param,
                                            {**values, **first_values})) is not None \
                        and (id(guard) not in first_steps or first_steps[id(guard)].nested is None):
                    if id(guard) not in first_steps:
                        first_steps[id(guard)] = _FirstStep(guard, state_name, _option_conjuncts(
                            guard.test, state_name, gradients))
                    first_steps[id(guard)].statements.extend(first_work)
                    first_work.clear()
                    first_steps[id(guard)].add(*seeded, statement)
                elif _only_creates(statement, state_name) \
                        and not _reads_values_of(statement, gradients, param) \
                        or self._local_to_guard(statement, guard, where, state_name,
                                                gradients, param):
                    moved.append(statement)
                    guarded.setdefault(id(guard), []).append(statement)
                elif (local := _first_value_local(statement, state_name, gradients, param,
                                                  {**values, **first_values})) is not None:
                    first_values[local] = statement.value
                    first_work.append(statement)
                elif id(guard) not in first_steps and (seeded := _seeded_block(
                        statement, state_name, gradients, param, where)) is not None:
                    # `if <option>: m = grad.clone(); <calls changing m>; state["m"] = m`
                    first_step = first_steps[id(guard)] = _FirstStep(
                        guard, state_name,
                        _option_conjuncts(guard.test, state_name, gradients) + [statement.test])
                    for key, assignment in seeded:
                        first_step.add(key, _LIKE, assignment)
                    first_step.statements = list(statement.body)  # (the local's work too)
                    first_step.nested = statement
                elif (creations := _under_gradient_test(statement, state_name,
                                                          gradients)) is not None:
                    # `if p.grad.is_sparse: state["k"] = zeros_like(p)`: preinitialize has
                    # no gradient to test, so the state is made for every parameter
                    # (zeros the step never reads where the test is false).
                    moved.extend(creations)
                    guarded.setdefault(id(guard), []).extend(creations)
                else:
                    return False
            if first_work:
                return False  # a local no state entry takes
            if guard.orelse and not all(_recasts_what_it_made(s, guard, state_name)
                                        for s in guard.orelse):
                # `else: state["k"].lerp_(g, w)`: it runs on every step, before the first
                # step's values are taken.
                first_step = first_steps.get(id(guard))
                if first_step is None or first_step.nested is not None \
                        or not first_step.take_updates(guard.orelse):
                    return False
            if id(guard) in first_steps and not first_steps[id(guard)].settled(where):
                return False
        increments = self._increments(state_name) if counter else []
        if increments is None and all(not _is_number(c.value, 0) for c in counter):
            # A 0-dim tensor counted in place elsewhere (torch's Adafactor: `step_t += 1`
            # on the list `_init_group` fills): state like any other, made as it is.
            for statement in counter:
                moved.append(statement)
                guarded.setdefault(id(counted_by[id(statement)]), []).insert(0, statement)
            counter, increments = [], []
        if increments is None:
            return False
        init_edit = self._enable_global_step(methods.get("__init__")) if counter else None
        if counter and init_edit is None:
            return False
        if len(first_steps) > 1:
            # Each check runs on its own first step: a flag each, named by its state.
            for first_step in first_steps.values():
                first_step.flag = f"{next(iter(first_step.keys))}_{_FirstStep.FLAG}"
        if not all(f.ready(self.owner, where) for f in first_steps.values()):
            return False
        known = {group, param, state_name} | set(gradients)
        self.calling = (where, step, group) if where is not step else None
        self.passed = {}
        # The tests of options each check's creations keep: those of the `if`s around
        # it, and those beside the state's test in its own (`len(state) == 0 and
        # self.p_bound is not None`: `p.norm().mul_(self.p_bound)` needs its option).
        conditions = {id(g): [c.test for c in
                              self._option_tests(g, param_loop, state_name, gradients)]
                      + _option_conjuncts(g.test, state_name, gradients)
                      for g in guards}
        prelude = self._prelude(moved + [t for g in guards for t in conditions[id(g)]],
                                known, candidates)
        if prelude is None:
            # An option test needs what only step has: the creations go unconditionally
            # (zeros the step never reads when the option is off).
            conditions = {id(g): [] for g in guards}
            prelude = self._prelude(moved, known, candidates)
        if prelude is None:
            return False
        if any(_reads_parameter_values(s, param) for s in prelude + moved) \
                and _steps_an_optimizer_before(step, where, guards[0]):
            # A wrapper steps the optimizer it wraps before its state is made from the
            # parameters (torch-optimizer's Lookahead: `slow = torch.clone(fast.data)`
            # after `self.optimizer.step()`): preinitialize would take them before.
            return False
        # A gradient only gives the new state its shape, dtype and device: the
        # parameter's are the same.
        renamed: dict[int, str] = dict(self.passed)
        cast_uses: set[str] = set()  # the cast gradients read: made from the parameter
        for statement in prelude + moved:
            shape_only = _shape_only_uses(statement, gradients, param)
            for name in shape_only:
                if isinstance(name, ast.Name) and name.id in casts:
                    cast_uses.add(name.id)
                else:
                    renamed[id(name)] = param
            kept = {id(name) for name in shape_only}
            if any((isinstance(n, ast.Name) and n.id in gradients
                    or isinstance(n, ast.Attribute) and n.attr == "grad")
                   and id(n) not in renamed and id(n) not in kept
                   for n in ast.walk(statement)):
                return False  # its values (`torch.clone(grad)`): not known before step

        text = r.text
        indent = r.indent_of(step)
        unit = _unit_indent(text, step, indent)
        lines = [f"{indent}def preinitialize(self):"] if existing is None else []
        lines += [f"{indent}{unit}for {group} in self.param_groups:",
                 f"{indent}{unit * 2}for {param} in {r.code(params)}:",
                 f"{indent}{unit * 3}{state_name} = self.state[{param}]"]
        body = unit * 3 + indent
        for name in sorted(cast_uses):
            binding, cast_tests = casts[name]
            lines.append(f"{body}{name} = {param}")
            for test in cast_tests:
                lines.extend(_reindented(r, test, body))
        for statement in prelude:
            lines.extend(_reindented(r, statement, body, renamed, param))
        alias = _cstorch_name(r.tree) or "cstorch"
        for guard in guards:
            depth = body
            first_step = first_steps.get(id(guard))
            seeded = first_step is not None
            for condition in conditions[id(guard)] if guarded.get(id(guard)) or seeded else ():
                lines.append(f"{depth}if {r.code(condition)}:")
                depth += unit
            for statement in guarded.get(id(guard), ()):
                lines.extend(_reindented(r, statement, depth, renamed, param))
            if seeded:
                # The first step's values are the gradient's: made with their shape.
                lines.extend(f"{depth}{state_name}[{r.code(key)}] = "
                             + (f"{alias}.zeros_like({param})" if shape == _LIKE else
                                f"{alias}.zeros((), dtype={param}.dtype)")
                             for key, shape in zip(first_step.key_nodes, first_step.shapes))
                lines.append(f"{depth}{state_name}[{first_step.flag_code(r)}] = "
                             f"{alias}.zeros(())")
        edit = r.preinitialize_edit(step, existing, lines)
        if edit is None:
            return False
        self.edits.append(edit)
        for guard in guards:
            if id(guard) in first_steps:
                self.edits.append(Edit(*r.span(guard), first_steps[id(guard)].selection(r)))
            else:
                self.edits.append(self._removal(guard))
        for statement in increments:
            loop = next(a for a in r.ancestors(statement) if isinstance(a, ast.For))
            self.edits.append(Edit(*r.span(statement),
                                   f"self.increment_global_step({loop.target.id})"))
        if counter:
            # The count a Python int was is now one tensor counted in place: a copy of it
            # kept elsewhere (RAdam's cache, `buffered[0] = state["step"]`) must be a copy.
            for value in _counter_values_kept(self.owner, state_name):
                self.edits.append(Edit(*r.span(value), f"{r.code(value)}.clone()"))
        if init_edit is not None:
            self.edits.append(init_edit)
        return True

    def _option_tests(self, guard: ast.If, loop: ast.For, state_name: str,
                      gradients: set[str]) -> list[ast.If]:
        """The `if`s of options around `guard` inside the parameter loop (`if
        group["momentum"]:` around `if "buf" not in state:`), outermost first: the
        creations keep them. Tests of the state or the gradient are not kept."""
        tests = []
        child: ast.AST = guard
        for ancestor in self.r.ancestors(guard):
            if ancestor is loop:
                break
            if isinstance(ancestor, ast.If) and child in ancestor.body \
                    and not _mentions(ancestor.test, state_name) \
                    and not _mentions_grad(ancestor.test) \
                    and not _loaded_names(ancestor.test) & gradients \
                    and _side_effect_free(ancestor.test):
                tests.append(ancestor)
            child = ancestor
        return tests[::-1]

    def _guard(self, node: ast.stmt, methods: dict[str, ast.FunctionDef]
               ) -> tuple[ast.FunctionDef, str, ast.If] | None:
        """The method that writes state in `node`, the state's name, and the outermost
        `if` around it in that method that tests the state (None when there is none)."""
        where = next((a for a in self.r.ancestors(node)
                      if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        state_name = _state_variable(node)
        if where is None or methods.get(where.name) is not where or state_name is None:
            return None
        guard = None
        for ancestor in self.r.ancestors(node):
            if ancestor is where:
                break
            if isinstance(ancestor, ast.If) and _mentions(ancestor.test, state_name):
                guard = ancestor
        return None if guard is None else (where, state_name, guard)

    @staticmethod
    def _local_to_guard(statement: ast.stmt, guard: ast.If, step: ast.FunctionDef,
                        state_name: str, gradients: set[str], param: str) -> bool:
        """Work the guard does for its creations alone, on names used only there:
        `init = group["initial_accumulator_value"]`, `shape[0] = rank`, and `if p.dim()
        == 2:` (a test of options or of shapes) over such work and creations; no value
        of the gradient or of the state is read (what preinitialize cannot have)."""
        names: set[str] = set()
        checks: list[ast.stmt] = []

        def local_work(node: ast.stmt) -> bool:
            if isinstance(node, ast.Pass):
                return True
            if _validates(node):
                # (`if group["fused"]: _device_dtype_check_for_fused(p)`: checked where
                # the state is made, once per parameter, as on the first step)
                checks.append(node)
                return not _mentions(node, state_name) and not _mentions_grad(node) \
                    and not _loaded_names(node) & gradients
            if isinstance(node, ast.FunctionDef):
                # A helper of the creations (timm's Adafactor: `def _remove_dim(shape,
                # dim)`), reading neither the state nor the gradient.
                names.add(node.name)
                return not node.decorator_list and not _mentions(node, state_name) \
                    and not _mentions_grad(node) and not _loaded_names(node) & gradients
            if isinstance(node, ast.If):
                return not _mentions(node.test, state_name) \
                    and not _reads_values_of(node.test, gradients, param) \
                    and all(local_work(s) or _only_creates(s, state_name)
                            and not _reads_values_of(s, gradients, param)
                            for s in node.body + node.orelse)
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else None
            if not targets or getattr(node, "value", None) is None:
                return False
            for target in targets:
                # (`dc, dr = factored_dims`: each name its own)
                for part in target.elts if isinstance(target, ast.Tuple) else [target]:
                    root = part.value if isinstance(part, ast.Subscript) else part
                    if not isinstance(root, ast.Name) or (
                            isinstance(part, ast.Subscript) and _mentions(part, state_name)):
                        return False
                    names.add(root.id)
            # (`shape = p.grad.shape`: the parameter's shape, renamed where it moves)
            return not _reads_grad_values(node.value) \
                and not _mentions(node.value, state_name) \
                and not _reads_values_of(node.value, gradients, param)

        if not local_work(statement) or not (names or checks):
            return False
        inside = {id(n) for n in ast.walk(guard)}
        # Read elsewhere only after being bound again (timm's Adafactor binds `dim_col,
        # dim_row = factored_dims` in the check and again where step reads them).
        return not any(isinstance(n, ast.Name) and n.id in names and id(n) not in inside
                       and isinstance(n.ctx, ast.Load)
                       and not _bound_again_before(step, n, guard.end_lineno)
                       for n in ast.walk(step))

    def _loops(self, guards: list[ast.If], step: ast.FunctionDef
               ) -> tuple[str, list[list[ast.stmt]], ast.For] | None:
        """`for group in self.param_groups:` and, inside, `for p in ...:` around every
        guard (the same two loops): the group's name, the loops' bodies, the inner loop."""
        found = None
        for guard in guards:
            loops = [a for a in self.r.ancestors(guard) if isinstance(a, ast.For)]
            outer = next((loop for loop in loops if _group_name(loop) is not None), None)
            inner = loops[0] if loops else None
            if outer is None or inner is None or inner is outer \
                    or not isinstance(inner.target, ast.Name):
                return None
            if found is not None and found != (outer, inner):
                return None
            found = (outer, inner)
        if found is None:
            return None
        outer, inner = found
        return _group_name(outer), [outer.body, inner.body], inner

    def _helper_loops(self, guards: list[ast.If], helper: ast.FunctionDef,
                      step: ast.FunctionDef
                      ) -> tuple[str, list[list[ast.stmt]], ast.For] | None:
        """In a helper that step calls with each param group (`self.init_group(group)`
        in `for group in self.param_groups:`): `for p in group["params"]:` around every
        guard, directly in the helper."""
        loops = set()
        for guard in guards:
            inner = next((a for a in self.r.ancestors(guard) if isinstance(a, ast.For)), None)
            if inner is None or not any(a is helper for a in self.r.ancestors(inner)) \
                    or not isinstance(inner.target, ast.Name):
                return None
            loops.add(inner)
        if len(loops) != 1:
            return None
        (inner,) = loops
        iterated = inner.iter
        if not (isinstance(iterated, ast.Subscript) and isinstance(iterated.value, ast.Name)
                and isinstance(iterated.slice, ast.Constant)
                and iterated.slice.value == "params"
                and self.r.parents.get(id(inner)) is helper):
            return None
        group = iterated.value.id
        positional = [a.arg for a in helper.args.posonlyargs + helper.args.args][1:]
        if group not in positional:
            return None
        position = positional.index(group)
        calls = [n for n in ast.walk(step) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr == helper.name
                 and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"]
        if not calls:
            return None
        for call in calls:
            argument = call.args[position] if position < len(call.args) else next(
                (k.value for k in call.keywords if k.arg == group), None)
            loop = next((a for a in self.r.ancestors(call) if isinstance(a, ast.For)
                         and _group_name(a) is not None), None)
            if not (isinstance(argument, ast.Name) and loop is not None
                    and _group_name(loop) == argument.id):
                return None
        return group, [helper.body, inner.body], inner

    def _increments(self, state_name: str) -> list[ast.stmt] | None:
        """`state["step"] += 1` in a parameter loop: the step counter's only update.
        None when it is written anywhere else in the class."""
        result = []
        for node in ast.walk(self.owner):
            if isinstance(node, ast.AugAssign) and _state_key(node.target, state_name) == "step":
                loop = next((a for a in self.r.ancestors(node) if isinstance(a, ast.For)), None)
                if not (isinstance(node.op, ast.Add) and _is_number(node.value, 1)
                        and loop is not None and isinstance(loop.target, ast.Name)):
                    return None
                result.append(node)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(_state_key(t, state_name) == "step" for t in targets) \
                        and not _is_step_counter(node, state_name):
                    return None
        return result if result else None

    def _enable_global_step(self, init: ast.FunctionDef | None) -> Edit | None:
        """`, enable_global_step=True` in `super().__init__(params, defaults)`."""
        if init is None:
            return None
        for node in ast.walk(init):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "__init__" and isinstance(node.func.value, ast.Call) \
                    and isinstance(node.func.value.func, ast.Name) \
                    and node.func.value.func.id == "super":
                if len(node.args) != 2 or node.keywords \
                        or any(isinstance(a, ast.Starred) for a in node.args):
                    return None
                _, end = self.r.span(node.args[-1])
                return Edit(end, end, ", enable_global_step=True")
        return None

    def _prelude(self, moved: list[ast.AST], known: set[str],
                 candidates: list[ast.Assign]) -> list[ast.stmt] | None:
        """The assignments in the loops, before the first guard, that the moved code
        needs (`amsgrad = group["amsgrad"]`), in their order; None when it needs a name
        that only exists in step (the gradient)."""
        module_names = _module_names(self.r.tree)
        # Names the moved code binds itself (comprehension variables included).
        local = {n.id for s in moved for n in ast.walk(s)
                 if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)} | \
            {n.arg for s in moved for n in ast.walk(s) if isinstance(n, ast.arg)} | \
            {n.name for s in moved for n in ast.walk(s) if isinstance(n, ast.FunctionDef)}
        # `self` is preinitialize's too (`dtype=self.momentum_dtype`).
        needed = set().union(*(_loaded_names(s) for s in moved)) - known - module_names \
            - _BUILTINS - local - {"self"}
        chosen: list[ast.stmt] = []
        while needed:
            name = needed.pop()
            source = next((s for s in reversed(candidates) if name in _assigned_names(s)), None)
            passed = self._passed_keyword(source) if source is not None else None
            if passed is not None:
                # `beta1 = kwargs.get("beta1", 0.9)`: what step's call passes, read from
                # the group (`group["betas"][0]`), in its place.
                call, text = passed
                self.passed[id(call)] = text
                if source not in chosen:
                    chosen.append(source)
                continue
            # (`shape = p.grad.shape`: the parameter's shape; renamed below.)
            if source is None or _reads_grad_values(source.value):
                return None
            if source not in chosen:
                chosen.append(source)
                needed |= _loaded_names(source) - known - module_names - _BUILTINS - {"self"} \
                    - set().union(*(_assigned_names(c) for c in chosen))
        return sorted(chosen, key=lambda s: (s.lineno, s.col_offset))

    def _passed_keyword(self, source: ast.stmt) -> tuple[ast.expr, str] | None:
        """For `name = kwargs.get("k", default)` (or `kwargs["k"]`) in the helper that
        makes the state, where every call of it in step passes `k=n` (or none does, and
        there is a default): the `kwargs` read, and the code of what `n` is there, from
        step's group loop (`beta1, beta2 = group["betas"]` -> `group["betas"][0]`),
        reading nothing but the group and the module's names. None otherwise."""
        if self.calling is None or not isinstance(source, (ast.Assign, ast.AnnAssign)):
            return None
        helper, step, group = self.calling
        keywords = helper.args.kwarg.arg if helper.args.kwarg is not None else None
        read = source.value
        if isinstance(read, ast.Call) and isinstance(read.func, ast.Attribute) \
                and read.func.attr == "get" and not read.keywords and 1 <= len(read.args) <= 2:
            container, key = read.func.value, read.args[0]
            default = read.args[1] if len(read.args) == 2 else None
        elif isinstance(read, ast.Subscript):
            container, key, default = read.value, read.slice, None
        else:
            return None
        if not (keywords and isinstance(container, ast.Name) and container.id == keywords
                and isinstance(key, ast.Constant) and isinstance(key.value, str)
                and read.lineno == read.end_lineno):
            return None
        calls = [n for n in ast.walk(step) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr == helper.name
                 and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"]
        given = {self.r.code(k.value) if (k := next((k for k in c.keywords
                                                      if k.arg == key.value), None))
                 else None for c in calls}
        if not calls or len(given) != 1 or any(k.arg is None for c in calls for k in c.keywords):
            return None
        (passed,) = given
        if passed is None:
            return (read, self.r.code(default)) if default is not None \
                and not _loaded_names(default) - _BUILTINS else None
        call = calls[0]
        loop = next((a for a in self.r.ancestors(call) if isinstance(a, ast.For)
                     and _group_name(a) == group), None)
        if loop is None or not passed.isidentifier():
            return None
        bindings = [b for b in loop.body if isinstance(b, (ast.Assign, ast.AnnAssign))
                    and b.end_lineno < call.lineno and passed in _assigned_names(b)]
        if len(bindings) != 1:
            return None
        (binding,) = bindings
        targets = _targets(binding)
        value = binding.value
        if len(targets) == 1 and isinstance(targets[0], ast.Name):
            text = self.r.code(value)
        elif len(targets) == 1 and isinstance(targets[0], ast.Tuple) and all(
                isinstance(t, ast.Name) for t in targets[0].elts) and \
                isinstance(value, (ast.Subscript, ast.Name)):
            position = [t.id for t in targets[0].elts].index(passed)
            text = f"{self.r.code(value)}[{position}]"
        else:
            return None
        module_names = _module_names(self.r.tree) | _BUILTINS
        if "\n" in text or not _loaded_names(value) <= module_names | {group}:
            return None
        return read, text

    def _removal(self, guard: ast.If) -> Edit:
        """The check's lines out; a loop that held nothing else but the binding of the
        state it read (`for p in active_p: state = self.state[p]; if "z" not in
        state: ...`, the binding read nowhere else) goes whole."""
        r = self.r
        loop = r.parents.get(id(guard))
        if isinstance(loop, ast.For) and not loop.orelse and loop.body[-1] is guard \
                and isinstance(loop.target, ast.Name):
            before = loop.body[:-1]
            names = {_state_binding(s, loop.target.id) for s in before}
            function = r._function_of(loop)
            if before and None not in names and function is not None and not any(
                    isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load)
                    and not any(n is m for m in ast.walk(guard))
                    for n in ast.walk(function)) and _side_effect_free(loop.iter):
                return _removal(r, loop)
            # The binding right before the check, read nowhere else, goes with it
            # (pytorch-optimizer's ScheduleFreeWrapper: `state = self.state[p]` left
            # after the gradient checks of its `init_group`).
            name = _state_binding(before[-1], loop.target.id) if before else None
            if name is not None and function is not None and not any(
                    isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
                    and not any(n is m for m in ast.walk(guard))
                    for n in ast.walk(function)):
                binding, check = _removal(r, before[-1]), _removal(r, guard)
                if binding.new == "" and check.new == "":
                    return Edit(binding.start, check.end, "")
        return _removal(r, guard)


class _FirstStep:
    """State a lazy-initialisation check makes from the gradient's values
    (`state["m"] = grad.clone()`), then changes in place (`self.maximize_gradient(
    state["m"])`). preinitialize makes it zeros like the parameter, and a flag of the
    parameter's state says whether its first step has run; in step, in place of the
    check, the values are computed each step and the state takes them on the first:
    `state["m"].copy_(torch.where(first_step, first_m, state["m"]))`. A class with
    several such checks has a flag for each (`state["m_initialised"]`)."""

    FLAG = "initialised"

    def __init__(self, guard: ast.If, state_name: str, options: list[ast.expr]):
        self.guard = guard
        self.state_name = state_name
        self.options = options  # the option tests beside the state's in the check
        self.flag = self.FLAG
        self.keys: dict[str, str] = {}  # key -> the local its first value goes in
        self.key_nodes: list[ast.expr] = []
        self.shapes: list[str] = []  # of each key: `_LIKE` the parameter or `_ZERO_DIM`
        self.statements: list[ast.stmt] = []  # the creations and what follows them
        # The check's `else`, which updates the state in place on the other steps: it runs
        # on every step, before the first step's values are taken.
        self.updates: list[ast.stmt] = []
        self.aliases: dict[str, str] = {}  # the `else`'s locals bound to entries, by name
        # The option `if` in the check that holds the creations (`if group["ema"]: m =
        # grad.clone(); state["m"] = m`), whose test joins `options`; None: at the top.
        self.nested: ast.If | None = None

    def flag_code(self, r: "_Rewriter") -> str:
        """The flag's key, quoted as the state's keys are."""
        quote = r.code(self.key_nodes[0])[0] if self.key_nodes else '"'
        return f"{quote}{self.flag}{quote}" if quote in "'\"" else repr(self.flag)

    def add(self, key: str, shape: str, statement: ast.Assign) -> None:
        self.keys[key] = "first_" + key
        self.key_nodes.append(_seeded_target(statement, self.state_name).slice)
        self.shapes.append(shape)
        self.statements.append(statement)

    def take_updates(self, orelse: list[ast.stmt]) -> bool:
        """Whether the check's `else` only changes the new state in place: `state["k"].
        lerp_(g, w)`, `buf = state["k"]` and `buf.mul_(m).add_(g)`, with arguments that
        change nothing. Run on every step, it changes the state made in preinitialize on
        the first, where the first step's values are taken after it."""
        aliases: dict[str, str] = {}
        for statement in orelse:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                    and isinstance(statement.targets[0], ast.Name) \
                    and _state_key(statement.value, self.state_name) in self.keys:
                aliases[statement.targets[0].id] = _state_key(statement.value, self.state_name)
                continue
            root = _in_place_root(statement)
            if root is None or not (isinstance(root, ast.Name) and root.id in aliases
                                    or _state_key(root, self.state_name) in self.keys):
                return False
        self.updates, self.aliases = orelse, aliases
        return True

    def settled(self, function: ast.AST) -> bool:
        """Whether each local the check binds to first values (`buf = grad.clone()`;
        `state["k"] = buf`) is read only inside it, or bound by the `else` to the same
        entry (`buf = state["k"]`): then it is that entry either way after the check."""
        inside = {id(n) for n in ast.walk(self.guard)}
        return all(self.aliases.get(local) == key or not any(
            isinstance(n, ast.Name) and n.id == local and id(n) not in inside
            for n in ast.walk(function)) for local, key in self.locals.items())

    @property
    def locals(self) -> dict[str, str]:
        """The locals the check binds to first values, with the key each goes in."""
        bound = {target.id for statement in self.statements
                 if isinstance(statement, ast.Assign) for target in statement.targets
                 if isinstance(target, ast.Name)}
        found = {}
        for statement in self.statements:
            entry = _seeded_target(statement, self.state_name)
            key = _state_key(entry, self.state_name) if entry is not None else None
            if key not in self.keys:
                continue
            # `buf = grad.clone()` then `state["k"] = buf`; `buf = state["k"] = ...`
            if isinstance(statement.value, ast.Name) and statement.value.id in bound:
                found[statement.value.id] = key
            found.update((t.id, key) for t in statement.targets if isinstance(t, ast.Name))
        return found

    def follows(self, statement: ast.stmt) -> bool:
        """A call that changes the new state in place and reads no other state
        (`self.maximize_gradient(state["m"], maximize=self.maximize)`,
        `state["m"].mul_(-1)`): it runs on the first values."""
        if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
            return False
        uses = [n for n in ast.walk(statement) if isinstance(n, ast.Name)
                and n.id == self.state_name]
        places = [n for n in ast.walk(statement) if isinstance(n, ast.Subscript)
                  and _state_key(n, self.state_name) in self.keys]
        if not places or len(uses) != len(places) or _mentions_grad(statement) or \
                any(isinstance(n, ast.Attribute) and n.attr == "state"
                    for n in ast.walk(statement)):
            return False
        self.statements.append(statement)
        return True

    def ready(self, owner: ast.ClassDef, function: ast.AST) -> bool:
        """Whether the names the selection adds are free: the flag in the class's state,
        the locals in the function; and the check's test is a test of the state, with
        options beside it only (`self.mode == "m" and "m" not in state`)."""
        if any(isinstance(n, ast.Constant) and n.value == self.flag for n in ast.walk(owner)):
            return False
        taken = {n.id for n in ast.walk(function) if isinstance(n, ast.Name)} | \
            {a.arg for a in ast.walk(function) if isinstance(a, ast.arg)}
        if taken & ({"first_step"} | set(self.keys.values())) or \
                not all(key.isidentifier() for key in self.keys):
            return False
        test = self.guard.test
        parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) \
            else [test]
        rest = [t for t in parts if t not in self.options]
        return len(rest) == 1 and _mentions(rest[0], self.state_name) and \
            not _mentions_grad(rest[0])

    def selection(self, r: "_Rewriter") -> str:
        """What takes the check's place in step."""
        newline = _newline(r.text)
        indent = r.indent_of(self.guard)
        options = self.options
        depth = indent + (_unit_indent(r.text, self.guard, indent) if options else "")
        state, torch = self.state_name, r.torch or "torch"
        lines = [f"if {' and '.join(_operand_code(r, t) for t in options)}:"] if options else []
        flag = self.flag_code(r)
        lines.append(f"{depth}first_step = {state}[{flag}] == 0")
        renamed = {id(n): self.keys[_state_key(n, state)]
                   for statement in self.statements for n in ast.walk(statement)
                   if isinstance(n, ast.Subscript) and _state_key(n, state) in self.keys}
        # A local the `else` binds to the entry again (`buf = state["k"] = grad.clone()`
        # with `else: buf = state["k"]`) is left out of the first values' assignment.
        dropped = "\x00"
        renamed.update((id(t), dropped) for statement in self.statements
                       if _seeded_target(statement, state) is not None
                       for t in statement.targets
                       if isinstance(t, ast.Name) and t.id in self.aliases)
        for statement in self.statements:
            lines.extend(re.sub(dropped + r"\s*=\s*", "", line)
                         for line in _reindented(r, statement, depth, renamed))
        for statement in self.updates:
            lines.extend(_reindented(r, statement, depth))
        unit = _unit_indent(r.text, self.guard, indent)
        for node in self.key_nodes:
            place = f"{state}[{r.code(node)}]"
            arguments = f"first_step, {self.keys[node.value]}, {place}"
            line = f"{depth}{place}.copy_({torch}.where({arguments}))"
            if len(line) > _LINE_LENGTH:
                line = f"{depth}{place}.copy_({torch}.where({newline}{depth}{unit}{arguments}))"
            lines.append(line)
        lines.append(f"{depth}{state}[{flag}].fill_(1.0)")
        # (The check's span starts after its indentation.)
        return newline.join(lines).lstrip()


def _returned_names(statement: ast.stmt | None) -> list[str]:
    """The names `return a, b` (or `return a`) gives back; [] for any other statement."""
    if not isinstance(statement, ast.Return) or statement.value is None:
        return []
    values = statement.value.elts if isinstance(statement.value, ast.Tuple) \
        else [statement.value]
    if not all(isinstance(v, ast.Name) for v in values):
        return []
    names = [v.id for v in values]
    return names if len(set(names)) == len(names) else []


def _changed_in_place(statements: list[ast.stmt], returned: list[str]) -> set[str] | None:
    """The returned names the statements change in place (`perturb -= x`,
    `perturb.mul_(m)`); None where they change in place anything else but what they made
    themselves (`p_n = ...; p_n.mul_(r)`), or store into an attribute or an entry."""
    made: set[str] = set()
    changed: set[str] = set()
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if not all(isinstance(t, ast.Name) for t in targets):
                    return None
                if isinstance(node, ast.AugAssign):
                    name = node.target.id
                    if name in returned:
                        changed.add(name)
                    elif name not in made:
                        return None
                else:
                    made.update(t.id for t in targets if t.id not in returned)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr.endswith("_") and not node.func.attr.startswith("_"):
                receiver = node.func.value
                while isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute) \
                        and receiver.func.attr.endswith("_"):
                    receiver = receiver.func.value  # (`perturb.mul_(m).add_(x)`)
                if isinstance(receiver, ast.Name) and receiver.id in returned:
                    changed.add(receiver.id)
                elif not (isinstance(receiver, ast.Name) and receiver.id in made) \
                        and not _made_here(_under_views(node.func.value)):
                    return None
    return changed


# Methods whose result shares its tensor's storage (an in-place op on it changes that).
_VIEWS = frozenset({"view", "reshape", "view_as", "reshape_as", "unsqueeze", "squeeze",
                    "expand", "expand_as", "flatten", "transpose", "t"})


def _under_views(node: ast.expr) -> ast.expr:
    """The tensor `node` views (`x.norm(dim=1).view(s)`: `x.norm(dim=1)`)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in _VIEWS:
        node = node.func.value
    return node


def _tested_lazily(guard: ast.If, function: ast.AST, block_of, code_of) -> tuple | None:
    """For `lazy_test_edits`: (the statement that takes the flag or the entry, the test
    for the `if`, the `else`'s first line or None), or None."""
    test = guard.test
    if isinstance(test, ast.Name):
        flag, via_get = test.id, False
    elif isinstance(test, ast.Compare) and len(test.ops) == 1 and \
            isinstance(test.ops[0], ast.Is) and isinstance(test.left, ast.Name) and \
            isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
        flag, via_get = test.left.id, True
    else:
        return None
    block = block_of(guard)
    if block is None:
        return None
    at = next(i for i, s in enumerate(block) if s is guard)
    taken = next((s for s in reversed(block[:at]) if isinstance(s, ast.Assign)
                  and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                  and s.targets[0].id == flag), None)
    if taken is None:
        return None
    value = taken.value
    if via_get:
        # `state.get("k")`: the entry, or None where the state lacks it.
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                and value.func.attr == "get" and isinstance(value.func.value, ast.Name)
                and len(value.args) == 1 and not value.keywords
                and isinstance(value.args[0], ast.Constant)
                and isinstance(value.args[0].value, str)):
            return None
        state, key = value.func.value.id, code_of(value.args[0])
        new_test = f"{key} not in {state}"
        entry = f"{flag} = {state}[{key}]"
    else:
        state = _lazy_state_name(value)
        if state is None:
            return None
        new_test, entry = code_of(value), None
    # Bound there and (for `.get`) in the branch that makes the entry; read only by the
    # test and that branch and the `else` (as the entry it now binds).
    inside = {id(n) for part in guard.body for n in ast.walk(part)}
    elsewhere = {id(n) for part in guard.orelse for n in ast.walk(part)}
    for node in ast.walk(function):
        if not (isinstance(node, ast.Name) and node.id == flag) or \
                any(node is n for n in ast.walk(taken.targets[0])) or \
                any(node is n for n in ast.walk(test)):
            continue
        if not via_get:
            return None  # the flag read or bound elsewhere
        if id(node) not in inside and id(node) not in elsewhere and \
                node.lineno < guard.lineno:
            return None
        if isinstance(node.ctx, ast.Store) and id(node) not in inside:
            return None
    if via_get and not any(isinstance(n, ast.Name) and n.id == flag and
                           isinstance(n.ctx, ast.Store) for part in guard.body
                           for n in ast.walk(part)) and any(
            isinstance(n, ast.Name) and n.id == flag and n.lineno > guard.end_lineno
            for n in ast.walk(function)):
        return None  # (None after the `if` where it made the entry: read so later)
    # Nothing between the two changes the state.
    for statement in block[block.index(taken) + 1:at]:
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and node.id == state:
                return None
    return taken, new_test, entry


def _lazy_state_name(test: ast.expr) -> str | None:
    """The state a first-step test reads: `len(state) == 0`, `not state`, `"k" not in
    state`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and \
            isinstance(test.operand, ast.Name):
        return test.operand.id
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, right, op = test.left, test.comparators[0], test.ops[0]
    if isinstance(op, ast.Eq) and isinstance(left, ast.Call) and \
            isinstance(left.func, ast.Name) and left.func.id == "len" and \
            len(left.args) == 1 and isinstance(left.args[0], ast.Name) and \
            isinstance(right, ast.Constant) and right.value == 0:
        return left.args[0].id
    if isinstance(op, ast.NotIn) and isinstance(left, ast.Constant) and \
            isinstance(left.value, str) and isinstance(right, ast.Name):
        return right.id
    return None


def _apart(edits: list[Edit]) -> list[Edit]:
    """The edits that do not overlap, outermost first: one inside another is made in a
    later round, on the new code."""
    chosen: list[Edit] = []
    for edit in sorted(edits, key=lambda e: (e.start, -e.end)):
        if all(edit.end <= other.start or edit.start >= other.end for other in chosen):
            chosen.append(edit)
    return chosen


def _hands_back_its_argument(function: ast.FunctionDef) -> bool:
    """Whether `function(x)` returns `x` itself or `x` read on the host (`x.item()`,
    `float(x)`, `int(x)`), chosen by tests with no other effect, and does nothing else."""
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    if len(positional) != 1 or arguments.vararg or arguments.kwarg or arguments.kwonlyargs \
            or function.decorator_list:
        return False
    name = positional[0].arg

    def handed_back(node: ast.expr | None) -> bool:
        if isinstance(node, ast.IfExp):
            return _side_effect_free(node.test) and handed_back(node.body) \
                and handed_back(node.orelse)
        if isinstance(node, ast.Name):
            return node.id == name
        if isinstance(node, ast.Call) and not node.keywords:
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "item" and not node.args:
                return handed_back(func.value)
            if isinstance(func, ast.Name) and func.id in ("float", "int") \
                    and len(node.args) == 1:
                return handed_back(node.args[0])
        return False

    def only_hands_back(body: list[ast.stmt]) -> bool:
        for statement in body:
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                continue  # a docstring
            if isinstance(statement, ast.Return):
                if not handed_back(statement.value):
                    return False
            elif isinstance(statement, ast.If):
                if not (_side_effect_free(statement.test) and only_hands_back(statement.body)
                        and only_hands_back(statement.orelse)):
                    return False
            else:
                return False
        return True

    def always_returns(body: list[ast.stmt]) -> bool:
        last = body[-1] if body else None
        return isinstance(last, ast.Return) or isinstance(last, ast.If) \
            and always_returns(last.body) and always_returns(last.orelse)

    return only_hands_back(function.body) and always_returns(function.body)


def _zero_dim(alias: str, number: float, written: str) -> str:
    """A 0-dim tensor of `number` made with cstorch (`written`: the number as the code
    gives it: `1.0` makes a float32 tensor, `1` an int64 one)."""
    return f"{alias}.zeros(())" if number == 0 else f"{alias}.full((), {written})"


def _scalar_creations(setup: ast.FunctionDef, key: str
                      ) -> list[tuple[ast.Assign, float | None]]:
    """The statements of preinitialize that make `<state>[key]` (with the number where
    it is a Python number), when each makes a number or a 0-dim tensor (`cstorch.zeros(
    ())`, `cstorch.full((), 1.0)`), or either of a number and a 0-dim tensor of that
    number (timm's LaProp: `torch.zeros_like(group["lr"]) if torch.is_tensor(group["lr"])
    else 0.`, given the number); none otherwise."""
    found = []
    for node in ast.walk(setup):
        if not (isinstance(node, ast.Assign) and _state_key_written(node) == key):
            continue
        value = node.value
        if _is_number(value):
            found.append((node, ast.literal_eval(value)))
        elif isinstance(value, ast.IfExp) and (number := _number_either_way(value)) is not None:
            found.append((node, number))
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
                value.func.attr in ("zeros", "full") and value.args and \
                isinstance(value.args[0], ast.Tuple) and not value.args[0].elts:
            found.append((node, None))
        else:
            return []
    return found


def _number_either_way(choice: ast.IfExp) -> float | None:
    """n for `<a 0-dim tensor of n> if <test> else n` (or the other way round): a tensor
    of shape `()`, or made like a param-group value (the lr: `torch.zeros_like(group[
    "lr"])`), holding n; None for anything else."""
    for tensor, number in ((choice.body, choice.orelse), (choice.orelse, choice.body)):
        if not (_is_number(number) and isinstance(tensor, ast.Call)
                and isinstance(tensor.func, ast.Attribute) and not tensor.keywords
                and tensor.args):
            continue
        name, arguments = tensor.func.attr, tensor.args
        if name in ("zeros", "ones", "zeros_like", "ones_like") and len(arguments) == 1:
            holds = 1 if name.startswith("ones") else 0
        elif name in ("full", "full_like") and len(arguments) == 2 and _is_number(arguments[1]):
            holds = ast.literal_eval(arguments[1])
        else:
            continue
        shape_or_like = arguments[0]
        zero_dim = isinstance(shape_or_like, ast.Tuple) and not shape_or_like.elts \
            if not name.endswith("_like") else \
            isinstance(shape_or_like, ast.Subscript) and isinstance(shape_or_like.value, ast.Name) \
            and isinstance(shape_or_like.slice, ast.Constant) \
            and isinstance(shape_or_like.slice.value, str)
        if zero_dim and holds == ast.literal_eval(number):
            return ast.literal_eval(number)
    return None


def _unfiltered(iterable: ast.expr, function: ast.AST | None = None) -> ast.expr:
    """The parameters a loop goes over, with a filter on their gradients left out
    (lion-pytorch's `filter(lambda p: exists(p.grad), group["params"])`, schedule-free's
    `active_p = [p for p in group["params"] if p.grad is not None]` bound once in
    `function`): preinitialize makes the state of each, as torch makes it for those with
    one (state never read where there is none)."""
    if isinstance(iterable, ast.Name) and function is not None:
        bound = [n for n in ast.walk(function) if isinstance(n, (ast.Assign, ast.AugAssign,
                                                                  ast.AnnAssign, ast.For))
                 and any(isinstance(t, ast.Name) and t.id == iterable.id
                         for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
        if len(bound) == 1 and isinstance(bound[0], ast.Assign) \
                and isinstance(bound[0].value, ast.ListComp):
            listed = bound[0].value
            generator = listed.generators[0] if len(listed.generators) == 1 else None
            if generator is not None and not generator.is_async \
                    and isinstance(generator.target, ast.Name) \
                    and isinstance(listed.elt, ast.Name) \
                    and listed.elt.id == generator.target.id \
                    and _tests_only_the_gradient(generator.ifs, generator.target.id):
                return generator.iter
        return iterable
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) \
            and iterable.func.id == "filter" and len(iterable.args) == 2 \
            and not iterable.keywords and isinstance(iterable.args[0], ast.Lambda):
        test = iterable.args[0]
        names = [a.arg for a in test.args.args]
        if len(names) != 1:
            return iterable
        if _tests_only_the_gradient([test.body], names[0]):
            return iterable.args[1]
    return iterable


def _tests_only_the_gradient(tests: list[ast.expr], name: str) -> bool:
    """Whether `tests` read the parameter `name` only as `name.grad`."""
    graded = {id(n.value) for test in tests for n in ast.walk(test)
              if isinstance(n, ast.Attribute) and n.attr == "grad"}
    return bool(tests) and all(id(n) in graded for test in tests for n in ast.walk(test)
                               if isinstance(n, ast.Name) and n.id == name)


def _is_written_entry(node: ast.Subscript, parents: dict[int, ast.AST]) -> bool:
    """Whether `node` is the one target of an assignment (`state["k"] = value`)."""
    parent = parents.get(id(node))
    return isinstance(node.ctx, ast.Store) and isinstance(parent, ast.Assign) and \
        parent.targets == [node]


def _zipped_elements(loop: ast.For, param: str) -> dict[str, ast.expr]:
    """For `for p, wn, r in zip(params, norms, ratios)`, the elements other than the
    parameter, each read as an element of what it comes from (`norms[0]`), where the
    loop binds them alone; {} for another loop."""
    target, iterated = loop.target, loop.iter
    if not (isinstance(target, ast.Tuple) and isinstance(iterated, ast.Call)
            and isinstance(iterated.func, ast.Name) and iterated.func.id == "zip"
            and not iterated.keywords and len(iterated.args) == len(target.elts)
            and all(isinstance(e, ast.Name) for e in target.elts)
            and param in [e.id for e in target.elts]):
        return {}
    names = [e.id for e in target.elts]
    if any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in names
           for statement in loop.body for n in ast.walk(statement)):
        return {}
    return {name: ast.copy_location(ast.Subscript(value=source, slice=ast.Constant(0),
                                                  ctx=ast.Load()), source)
            for name, source in zip(names, iterated.args) if name != param}


def _state_binding(statement: ast.AST, param: str | None = None) -> str | None:
    """The name `state = self.state[p]` binds: with `param`, the state of that parameter
    of the optimizer itself; without, any object's `x.state[...]`."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and isinstance(statement.value, ast.Subscript)
            and isinstance(statement.value.value, ast.Attribute)
            and statement.value.value.attr == "state"):
        return None
    if param is not None and ast.unparse(statement.value) != f"self.state[{param}]":
        return None
    return statement.targets[0].id


def _state_name_in(function: ast.AST) -> str | None:
    """The name `function` binds the state of a parameter to (`state = self.state[p]`)."""
    return next((name for node in ast.walk(function)
                 if (name := _state_binding(node)) is not None), None)


def _parameter_loop_at_end(setup: ast.FunctionDef | None) -> tuple[ast.For, str] | None:
    """preinitialize's last statement when it is `for group in self.param_groups:` ending
    with `for p in group["params"]:` that binds `state = self.state[p]`: that inner loop,
    with the state's name."""
    if setup is None or not setup.body or not isinstance(setup.body[-1], ast.For):
        return None
    outer = setup.body[-1]
    inner = outer.body[-1]
    if not (isinstance(outer.target, ast.Name) and isinstance(inner, ast.For)
            and isinstance(inner.target, ast.Name) and not inner.orelse
            and ast.unparse(outer.iter) == "self.param_groups"
            and ast.unparse(inner.iter) == f"{outer.target.id}['params']"):
        return None
    state = next((name for statement in inner.body
                  if (name := _state_binding(statement, inner.target.id)) is not None), None)
    return (inner, state) if state is not None else None


# Methods that keep what they are given in their receiver (a list, a set, a dict).
_KEEPING_METHODS = frozenset({"append", "extend", "insert", "add", "update", "setdefault"})


def _option_names(setup: ast.FunctionDef) -> set[str]:
    """The names preinitialize binds only to the options of a param group (`beta1, beta2
    = group["betas"]`, `eps = group["eps"]`), `group` a name its loop over
    `self.param_groups` binds."""
    groups = {loop.target.id for loop in ast.walk(setup)
              if isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)
              and isinstance(loop.iter, ast.Attribute) and loop.iter.attr == "param_groups"}
    bound: dict[str, bool] = {}
    for node in ast.walk(setup):
        if not isinstance(node, ast.Assign):
            continue
        option = isinstance(node.value, ast.Subscript) and \
            isinstance(node.value.value, ast.Name) and node.value.value.id in groups and \
            isinstance(node.value.slice, ast.Constant)
        for target in node.targets:
            for name in (target.elts if isinstance(target, ast.Tuple) else [target]):
                if isinstance(name, ast.Name):
                    bound[name.id] = bound.get(name.id, True) and option
    return {name for name, only in bound.items() if only}


def _number_arithmetic(value: ast.expr, options: set[str]) -> bool:
    """Arithmetic of number constants and option names, nothing else."""
    for node in ast.walk(value):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                return False
        elif isinstance(node, ast.Name):
            if node.id not in options:
                return False
        elif not isinstance(node, (ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop,
                                   ast.Load)):
            return False
    return True


def _entry_shapes(setup: ast.FunctionDef | None) -> dict[str, str]:
    """The shapes of the state entries preinitialize makes, by key: `_LIKE` the
    parameter (`zeros_like(p)`, `full_like(p, v)`, `p.clone()`), `_ZERO_DIM`
    (`zeros(())`, `full((), v)`) or `_NUMBER` (arithmetic of numbers and the group's
    options: AdaBelief's `state["rho_inf"] = 2.0 / (1.0 - beta2) - 1.0`), where each of
    its creations of the key agrees."""
    shapes: dict[str, set] = {}
    options = _option_names(setup) if setup is not None else set()
    for node in ast.walk(setup) if setup is not None else ():
        key = _state_key_written(node)
        if key is None:
            continue
        value, shape = node.value, None
        if _number_arithmetic(value, options):
            shape = _NUMBER
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            name = value.func.attr
            if name in ("zeros_like", "ones_like", "full_like") and value.args:
                shape = _LIKE
            elif name in ("zeros", "ones", "full") and value.args and \
                    isinstance(value.args[0], ast.Tuple) and not value.args[0].elts:
                shape = _ZERO_DIM
            elif name == "clone" and not value.args:
                shape = _LIKE
        shapes.setdefault(key, set()).add(shape)
    return {key: next(iter(found)) for key, found in shapes.items()
            if len(found) == 1 and None not in found}


def _tensor_created(setup: ast.FunctionDef, key: str) -> bool:
    """Whether preinitialize makes `<state>[key]`, each time by a call (a tensor:
    `cstorch.zeros_like(p)`, `p.clone()`)."""
    values = [node.value for node in ast.walk(setup)
              if isinstance(node, ast.Assign) and _state_key_written(node) == key]
    return bool(values) and all(isinstance(value, ast.Call) for value in values)


def _old_entry_read_after(function: ast.AST, statement: ast.Assign, target: ast.Subscript,
                          key: str) -> bool:
    """Whether a local bound from the entry `target` names (an expression reading it:
    `m = state["m"]`, `r, c = state["r"][:, None], ...`) is read after `statement` and
    before it is bound again: rebinding left that tensor as it was, a copy changes it.
    The local the statement binds the entry to is not such a read (`state["m"] = m`: m is
    the old tensor, copied onto itself, or a new one, which the copy leaves as it is)."""
    owner = target.value

    def reads_entry(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant)
                   and n.slice.value == key and ast.dump(n.value) == ast.dump(owner)
                   for n in ast.walk(node))

    aliases: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for bound in targets:
                pairs = zip(bound.elts, node.value.elts) \
                    if isinstance(bound, ast.Tuple) and isinstance(node.value, ast.Tuple) \
                    and len(bound.elts) == len(node.value.elts) else [(bound, node.value)]
                for name, value in pairs:
                    if reads_entry(value):
                        aliases |= {n.id for n in ast.walk(name) if isinstance(n, ast.Name)
                                    and isinstance(n.ctx, ast.Store)}
    if isinstance(statement.value, ast.Name):
        aliases.discard(statement.value.id)
    after = (statement.end_lineno, statement.end_col_offset)
    # Code in the other arm of an `if` holding the statement does not run after it.
    exclusive = [arm for node in ast.walk(function) if isinstance(node, ast.If)
                 for taken, other in ((node.body, node.orelse), (node.orelse, node.body))
                 if any(statement is n for s in taken for n in ast.walk(s)) for arm in other]
    skipped = {id(n) for arm in exclusive for n in ast.walk(arm)}
    for alias in aliases:
        uses = sorted(((n.lineno, n.col_offset), isinstance(n.ctx, ast.Load))
                      for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == alias
                      and (n.lineno, n.col_offset) > after and id(n) not in skipped)
        if uses and uses[0][1]:
            return True
    return False


def _operand_code(r: "_Rewriter", test: ast.expr) -> str:
    """The test's code as an operand of `and`."""
    code = r.code(test)
    return f"({code})" if isinstance(test, (ast.BoolOp, ast.IfExp, ast.NamedExpr, ast.Lambda)) \
        else code


def _seeded_block(statement: ast.stmt, state_name: str, gradients: set[str], param: str,
                  function: ast.AST) -> list[tuple[str, ast.Assign]] | None:
    """`if <option>: m = grad.clone(); self.maximize_gradient(m, ...); state["m"] = m` in
    a check: state whose first value is the gradient's, through a local the block alone
    uses and changes only by calls given it. The keys with their assignments; None for
    any other statement."""
    if not (isinstance(statement, ast.If) and not statement.orelse
            and not _mentions(statement.test, state_name) and not _mentions_grad(statement.test)
            and not _loaded_names(statement.test) & gradients
            and _side_effect_free(statement.test)):
        return None
    seeded: set[str] = set()
    keys: list[tuple[str, ast.Assign]] = []
    for item in statement.body:
        if isinstance(item, ast.Assign) and len(item.targets) == 1:
            target, value = item.targets[0], item.value
            key = _state_key(target, state_name)
            if key is not None and isinstance(value, ast.Name) and value.id in seeded:
                keys.append((key, item))
                continue
            if isinstance(target, ast.Name) and not _mentions(value, state_name) \
                    and _reads_values_of(value, gradients, param) \
                    and _like_parameter(value, gradients, param):
                seeded.add(target.id)
                continue
            return None
        if isinstance(item, ast.Expr) and isinstance(item.value, ast.Call) \
                and not _mentions(item.value, state_name) \
                and any(isinstance(a, ast.Name) and a.id in seeded for a in item.value.args):
            continue
        return None
    inside = {id(n) for n in ast.walk(statement)}
    if not keys or any(isinstance(n, ast.Name) and n.id in seeded and id(n) not in inside
                       for n in ast.walk(function)):
        return None
    return keys


def _option_conjuncts(test: ast.expr, state_name: str, gradients: set[str]
                      ) -> list[ast.expr]:
    """The operands of an `and` test that test options only (no state, no gradient)."""
    if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)):
        return []
    return [value for value in test.values
            if not _mentions(value, state_name) and not _mentions_grad(value)
            and not _loaded_names(value) & gradients and _side_effect_free(value)]


def _seeded_key(statement: ast.stmt, state_name: str, gradients: set[str],
                param: str, values: dict[str, ast.expr] | None = None
                ) -> tuple[ast.expr, str] | None:
    """The key of `state["k"] = <the gradient's values>` and the shape they have: "like"
    the parameter (`grad.clone()`, `-grad.clone()`, `grad.square()`, `p.grad.clone().
    mul_(c)`) or "0-dim" (`grad.pow(2).sum()`, `torch.norm(grad)`); `values` are the
    locals bound to such values (`grad_norm = grad.norm()`; `state["k"] = grad_norm`)."""
    entry = _seeded_target(statement, state_name)
    if entry is None:
        return None
    key = _state_key(entry, state_name)
    value = statement.value
    values = values or {}
    if key is None or _mentions(value, state_name) or not (
            _reads_values_of(value, gradients, param) or _loaded_names(value) & values.keys()):
        return None
    shape = _Shapes(gradients, param, values, state_name).of(value)
    return (key, shape) if shape in (_LIKE, _ZERO_DIM) else None


def _seeded_target(statement: ast.stmt, state_name: str) -> ast.Subscript | None:
    """The state entry an assignment binds, with locals perhaps (`buf = state["k"] =
    ...`): one entry, the other targets names."""
    if not isinstance(statement, ast.Assign):
        return None
    entries = [t for t in statement.targets if _state_key(t, state_name) is not None]
    if len(entries) != 1 or not all(isinstance(t, ast.Name) for t in statement.targets
                                    if t is not entries[0]):
        return None
    return entries[0]


# The shapes `_Shapes` tells apart.
_LIKE, _ZERO_DIM, _NUMBER = "like", "0-dim", "number"
# Of the foreach ops' per-tensor numbers: `torch._foreach_norm(ps)` gives a list of 0-dim
# tensors (`_SCALARS`), `torch.stack` of it a 1-D tensor (`_VECTOR`); an element of
# either is 0-dim.
_SCALARS, _VECTOR = "0-dim each", "vector"
# Reductions of a whole tensor to a 0-dim one of its dtype: methods given no argument,
# functions of torch given the tensor alone.
_FULL_REDUCTIONS = frozenset({"sum", "mean", "norm", "amax", "amin", "max", "min", "prod",
                              "std", "var"})
# Elementwise ops that keep the shape and dtype of the tensors they are given, with
# numbers as their other arguments (`clamp(0, c)`) or keywords (`clamp(min=0)`).
_SHAPE_KEEPING = frozenset({"clamp", "clamp_", "clamp_min", "clamp_min_", "clamp_max",
                            "clamp_max_", "reciprocal", "reciprocal_", "exp", "log", "rsqrt",
                            "nan_to_num", "nan_to_num_"})
_NUMBER_KEYWORDS = frozenset({"alpha", "value", "min", "max", "weight", "nan", "posinf",
                              "neginf"})


class _Shapes:
    """The shape of a value computed from the gradient, the parameter and the state:
    `_LIKE` the parameter (its dtype too), `_ZERO_DIM` (of the parameter's dtype),
    `_NUMBER` (a number or an option, broadcast), None where unknown (a comparison's
    booleans too). Names in `values` are read through the expressions bound to them;
    the state's entries (`state["m"]`) have the shapes `entries` gives, others none."""

    def __init__(self, gradients: set[str], param: str, values: dict[str, ast.expr],
                 state_name: str | None = None, entries: dict[str, str] | None = None):
        self.gradients, self.param, self.values = gradients, param, values
        self.state_name, self.entries = state_name, entries or {}
        self._reading: set[str] = set()

    def of(self, node: ast.expr) -> str | None:
        gradients, param = self.gradients, self.param
        if isinstance(node, ast.Name) and node.id in self.values:
            if node.id in self._reading:
                return None
            self._reading.add(node.id)
            try:
                return self.of(self.values[node.id])
            finally:
                self._reading.discard(node.id)
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and \
                self.state_name is not None and _mentions(node, self.state_name):
            key = _state_key(node, self.state_name)  # (`self.state[p]["m"]`: not known)
            return self.entries.get(key) if key is not None else None
        if _like_parameter(node, gradients, param) or isinstance(node, ast.Attribute) \
                and node.attr == "data" and self.of(node.value) == _LIKE:
            return _LIKE
        if _scalar(node, gradients, param) and not _loaded_names(node) & self.values.keys():
            return _NUMBER
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and \
                isinstance(node.slice.value, int):
            return _ZERO_DIM if self.of(node.value) in (_SCALARS, _VECTOR) else None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return self.of(node.operand)
        if isinstance(node, ast.BinOp):
            return self._broadcast([node.left, node.right])
        if isinstance(node, ast.IfExp) and _side_effect_free(node.test):
            # (`g.std() if g.ndim > 1 else 0`: a 0-dim tensor or a number, which
            # arithmetic with tensors broadcasts alike.)
            return self._broadcast([node.body, node.orelse])
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)) or any(
                keyword.arg not in _NUMBER_KEYWORDS or self.of(keyword.value) != _NUMBER
                for keyword in node.keywords):
            return None  # (`add(x, alpha=a)`, `clamp(min=0)`: scaled or bounded by numbers)
        method, owner = node.func.attr, node.func.value
        if isinstance(owner, ast.Name) and owner.id == "torch" or \
                isinstance(owner, ast.Attribute) and owner.attr == "linalg" \
                and isinstance(owner.value, ast.Name) and owner.value.id == "torch":
            if not node.args:
                return None
            if method == "_foreach_norm" and len(node.args) == 1:
                return _SCALARS
            first = self.of(node.args[0])
            if method == "stack" and len(node.args) == 1:
                return _VECTOR if first == _SCALARS else None
            if method in _FULL_REDUCTIONS | {"vector_norm"} and len(node.args) == 1 and \
                    not node.keywords:
                # Of any tensor (`torch.linalg.norm(update)`, whatever its shape; the
                # function takes tensors only): 0-dim, of its dtype, which is the
                # parameter's where it is computed from it.
                return _ZERO_DIM if first != _SCALARS else None
            if method == "where" and len(node.args) == 3:
                # Its values' shapes, broadcast with the condition's.
                condition = self._condition(node.args[0])
                rest = self._broadcast(node.args[1:])
                shapes = {condition, rest}
                if None in shapes or rest == _NUMBER:
                    return None  # (numbers alone: an int64 or float32 tensor)
                return _combined(shapes)
            if method in _ELEMENTWISE | _SHAPE_KEEPING and \
                    first in (_LIKE, _ZERO_DIM, _VECTOR) and \
                    all(self.of(a) == _NUMBER for a in node.args[1:]):
                return first
            return None
        receiver = self.of(owner)
        if method == "unbind" and not node.args:
            return _SCALARS if receiver == _VECTOR else None
        if receiver not in (_LIKE, _ZERO_DIM, _VECTOR):
            return None
        if method in _FULL_REDUCTIONS and not node.args:
            return _ZERO_DIM
        if method in _SHAPE_KEEPING:
            return receiver if all(self.of(a) == _NUMBER for a in node.args) else None
        if method in _ELEMENTWISE:
            shapes = {self.of(a) for a in node.args}
            return None if None in shapes else _combined(shapes | {receiver})
        return None

    def _broadcast(self, nodes: list[ast.expr]) -> str | None:
        shapes = {self.of(n) for n in nodes}
        return None if None in shapes else _combined(shapes)

    def _condition(self, node: ast.expr) -> str | None:
        """The shape of a test's booleans (`a == 0`, `torch.logical_or(x, y)`, `(a != 0) &
        (b != 0)`)."""
        if isinstance(node, ast.Compare):
            return self._broadcast([node.left, *node.comparators])
        called = dotted_name(node.func) \
            if isinstance(node, ast.Call) and not node.keywords else None
        # (`torch.as_tensor(t)`: a test that may give a Python bool, as a tensor.)
        if called in ("torch.logical_or", "torch.logical_and") or \
                called == "torch.as_tensor" and len(node.args) == 1:
            parts = node.args
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)):
            parts = [node.left, node.right]
        else:
            return None
        shapes = {self._condition(a) for a in parts}
        return None if None in shapes else _combined(shapes)


def _combined(shapes: set[str | None]) -> str | None:
    """The shape values of `shapes` broadcast to: a parameter's with a 1-D tensor of
    per-tensor numbers is not known."""
    if None in shapes or {_LIKE, _VECTOR} <= shapes or _SCALARS in shapes:
        return None
    for shape in (_LIKE, _VECTOR, _ZERO_DIM):
        if shape in shapes:
            return shape
    return _NUMBER


def _first_value_local(statement: ast.stmt, state_name: str, gradients: set[str], param: str,
                       values: dict[str, ast.expr]) -> str | None:
    """The name of `buf = <the gradient's values>` (`torch.clone(grad).detach()`) in a
    lazy-initialisation check, where a state entry takes it next."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)):
        return None
    value = statement.value
    if _mentions(value, state_name) or not _side_effect_free(value, on_new_tensors=True) or \
            not (_reads_values_of(value, gradients, param) or _loaded_names(value) & values.keys()):
        return None
    return statement.targets[0].id \
        if _Shapes(gradients, param, values, state_name).of(value) in (_LIKE, _ZERO_DIM) \
        else None


def _in_place_root(statement: ast.stmt) -> ast.expr | None:
    """What a statement of in-place ops alone changes (`buf` of `buf.mul_(m).add_(g,
    alpha=a)`), their arguments changing nothing; None for any other statement."""
    if not isinstance(statement, ast.Expr):
        return None
    node = statement.value
    calls = 0
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr.endswith("_") and not node.func.attr.startswith("_"):
        if not all(_side_effect_free(a) for a in [*node.args,
                                                    *(k.value for k in node.keywords)]):
            return None
        node, calls = node.func.value, calls + 1
    return node if calls and isinstance(node, (ast.Name, ast.Subscript)) else None


def _gradient_values(candidates: list[ast.stmt], gradients: set[str], param: str,
                     loop: ast.For, before: int, state_name: str,
                     entries: dict[str, str] | None = None, any_value: bool = False
                     ) -> dict[str, ast.expr]:
    """Locals that hold a value computed from the gradient's values (with `any_value`,
    any value of a shape `_Shapes` knows) at each of the parameter loop's lines before
    line `before`, all of one shape: first bound by one of `candidates` (in order: `grad
    = p.grad`, `grad_norm = grad.pow(2).sum()`, `m, v = state["m"], state["v"]`), then
    perhaps again to the same shape (`if wd: d_p = d_p.add(p, alpha=wd)`), by nothing
    else. The expressions of their first bindings, by name."""

    def pairs(statement: ast.stmt) -> list[tuple[str, ast.expr]]:
        if isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
            # `d_p *= lars_lr` binds `d_p * lars_lr` (of a tensor, in place: the same
            # shape either way).
            combined = ast.BinOp(left=ast.Name(id=statement.target.id, ctx=ast.Load()),
                                 op=statement.op, right=statement.value)
            return [(statement.target.id, ast.copy_location(combined, statement))]
        if isinstance(statement, ast.AnnAssign) and statement.value is not None and \
                isinstance(statement.target, ast.Name):
            return [(statement.target.id, statement.value)]
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
            return []
        target, value = statement.targets[0], statement.value
        if isinstance(target, ast.Name):
            return [(target.id, value)]
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) \
                and len(target.elts) == len(value.elts) \
                and all(isinstance(e, ast.Name) for e in target.elts):
            return [(e.id, v) for e, v in zip(target.elts, value.elts)]
        return []

    stores: dict[str, int] = {}
    bindings: dict[str, list[tuple[ast.stmt, ast.expr]]] = {}
    for node in ast.walk(loop):
        if node.lineno >= before if hasattr(node, "lineno") else True:
            continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            stores[node.id] = stores.get(node.id, 0) + 1
        for name, value in pairs(node):
            bindings.setdefault(name, []).append((node, value))
    found: dict[str, ast.expr] = {}
    for statement in candidates:
        for name, value in pairs(statement):
            assigned = sorted(bindings.get(name, ()),
                              key=lambda a: (a[0].lineno, a[0].col_offset))
            if name in found or name in gradients or not assigned \
                    or assigned[0][0] is not statement or len(assigned) != stores.get(name) \
                    or not (any_value or _reads_values_of(value, gradients, param)
                            or _loaded_names(value) & found.keys()):
                continue
            shape = _Shapes(gradients, param, found, state_name, entries).of(value)
            within = {**found, name: value}
            if shape in (_LIKE, _ZERO_DIM, _VECTOR, _SCALARS) and all(
                    _side_effect_free(v, on_new_tensors=True)
                    and _Shapes(gradients, param, within, state_name, entries).of(v) == shape
                    for _, v in assigned):
                found[name] = value
    return found


def _reads_parameter_values(statement: ast.AST, param: str) -> bool:
    """Whether `statement` reads the parameter `param` for more than its shape, dtype or
    device (`torch.clone(p.data)`), or for the key of its state (`self.state[p]`)."""
    not_values = {id(n) for n in _shape_only_uses(statement, {param}, param)}
    not_values |= {id(n.slice) for n in ast.walk(statement) if isinstance(n, ast.Subscript)}
    return any(isinstance(n, ast.Name) and n.id == param and id(n) not in not_values
               for n in ast.walk(statement))


def _steps_an_optimizer_before(step: ast.FunctionDef, where: ast.FunctionDef,
                               guard: ast.If) -> bool:
    """Whether `step` calls another optimizer's step (`self.optimizer.step()`,
    `super().step()`) before it reaches `guard` (in `where`, step or a method it calls by
    name; anywhere in step where that call is not found)."""
    if where is step:
        reached = guard.lineno
    else:
        calls = [n.lineno for n in ast.walk(step) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr == where.name]
        reached = min(calls, default=step.end_lineno)
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "step" and n.lineno <= reached
               and not (isinstance(n.func.value, ast.Name) and n.func.value.id == "self")
               for n in ast.walk(step))


def _reads_values_of(node: ast.AST, gradients: set[str], param: str) -> bool:
    """Whether `node` reads the gradient (a name bound to it, or `.grad`) for more than
    its shape, dtype or device."""
    shape_only = {id(n) for n in _shape_only_uses(node, gradients, param)}
    return any((isinstance(n, ast.Name) and n.id in gradients or
                isinstance(n, ast.Attribute) and n.attr == "grad") and id(n) not in shape_only
               for n in ast.walk(node))


def _like_parameter(node: ast.expr, gradients: set[str], param: str) -> bool:
    """An expression whose value has the parameter's shape and dtype: the gradient or
    the parameter, through elementwise ops with numbers and options."""
    if isinstance(node, ast.Name):
        return node.id in gradients or node.id == param
    if isinstance(node, ast.Attribute):
        return node.attr == "grad" and isinstance(node.value, ast.Name) \
            and node.value.id == param
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, (ast.USub, ast.UAdd)) and \
            _like_parameter(node.operand, gradients, param)
    if isinstance(node, ast.BinOp):
        left, right = (_like_parameter(side, gradients, param)
                       for side in (node.left, node.right))
        return (left or right) and all(
            like or _scalar(side, gradients, param)
            for like, side in ((left, node.left), (right, node.right)))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and not node.keywords:
        method = node.func.attr
        if isinstance(node.func.value, ast.Name) and node.func.value.id == "torch":
            return method in _ELEMENTWISE and bool(node.args) and \
                _like_parameter(node.args[0], gradients, param) and \
                all(_scalar(a, gradients, param) for a in node.args[1:])
        return method in _ELEMENTWISE and _like_parameter(node.func.value, gradients, param) \
            and all(_scalar(a, gradients, param) or _like_parameter(a, gradients, param)
                    for a in node.args)
    return False


def _scalar(node: ast.expr, gradients: set[str], param: str) -> bool:
    """A number, or a name or option (`group["beta"]`) that is neither the gradient nor
    the parameter: a hyperparameter, broadcast over the tensor."""
    if isinstance(node, ast.UnaryOp):
        return _scalar(node.operand, gradients, param)
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    return isinstance(node, (ast.Name, ast.Subscript, ast.Attribute)) and \
        not _mentions_grad(node) and not any(
            isinstance(n, ast.Name) and (n.id in gradients or n.id == param)
            for n in ast.walk(node))


# Elementwise ops that keep their input's shape and dtype (methods of a tensor, or
# functions of torch given it first).
_ELEMENTWISE = frozenset({
    "clone", "detach", "abs", "abs_", "neg", "neg_", "sign", "sign_", "square", "square_",
    "sqrt", "sqrt_", "mul", "mul_", "add", "add_", "sub", "sub_", "div", "div_", "pow",
    "pow_", "contiguous"})


def _bound_again_before(function: ast.AST, read: ast.Name, after: int) -> bool:
    """Whether a statement after line `after`, earlier in a block that holds `read`,
    binds its name at its top (`a, b = ...`): it runs before the read on every path."""
    parents = {id(c): n for n in ast.walk(function) for c in ast.iter_child_nodes(n)}
    node: ast.AST = read
    while id(node) in parents:
        parent = parents[id(node)]
        for name in ("body", "orelse", "finalbody"):
            block = getattr(parent, name, None)
            if not isinstance(block, list) or not any(s is node for s in block):
                continue
            for earlier in block[:next(i for i, s in enumerate(block) if s is node)]:
                if isinstance(earlier, ast.Assign) and earlier.lineno > after and any(
                        isinstance(t, ast.Name) and t.id == read.id
                        for target in earlier.targets for t in ast.walk(target)):
                    return True
        node = parent
    return False


def _own_nodes(node: ast.AST, loops: bool = True):
    """`node` and the nodes inside it, but those of the functions and classes it defines
    (and, without `loops`, of the loops inside it: their `continue` is their own)."""
    pending = [node]
    while pending:
        current = pending.pop()
        yield current
        for child in ast.iter_child_nodes(current):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                  ast.ClassDef)) or \
                    not loops and isinstance(child, (ast.For, ast.AsyncFor, ast.While)):
                continue
            pending.append(child)


def _state_keys_stored(node: ast.AST, containers: set[str]) -> set[str]:
    """The constant keys stored under `node` into one of `containers` (names bound to a
    parameter's state) or into `self.state[p]` itself."""
    keys = set()
    for target in ast.walk(node):
        if isinstance(target, ast.Subscript) and isinstance(target.ctx, ast.Store) \
                and isinstance(target.slice, ast.Constant) \
                and isinstance(target.slice.value, str) and (
                    isinstance(target.value, ast.Name) and target.value.id in containers
                    or isinstance(target.value, ast.Subscript)
                    and dotted_name(target.value.value) == "self.state"):
            keys.add(target.slice.value)
    return keys


def _state_aliases(statement: ast.stmt) -> set[str]:
    """The names `statement` binds to a parameter's state (`state = self.state[p]`)."""
    return {n.targets[0].id for n in ast.walk(statement)
            if isinstance(n, ast.Assign) and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Subscript)
            and dotted_name(n.value.value) == "self.state"}


def _only_makes_state(loop: ast.For, containers: set[str]) -> bool:
    """Whether `loop` only binds locals and stores into a parameter's state: loops, `if`s
    and assignments, no call outside an assigned value."""
    for statement in ast.walk(loop):
        if isinstance(statement, ast.stmt) and not isinstance(
                statement, (ast.For, ast.If, ast.Assign, ast.AnnAssign, ast.Pass)):
            return False
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) \
                else [statement.target]
            for target in targets:
                if not (isinstance(target, ast.Name) or isinstance(target, ast.Subscript)
                        and (isinstance(target.value, ast.Name)
                             and target.value.id in containers
                             or dotted_name(target.value) == "self.state")):
                    return False
    return True


def _removal(r: _Rewriter, statement: ast.stmt) -> Edit:
    """The statement's lines out of its method (`pass` where it was its block's only
    statement), with the comments right above it."""
    first, last = statement.lineno, statement.end_lineno
    # The comments right above it describe it: they go with it.
    while first > 1 and r.source.line_text(first - 1).strip().startswith("#"):
        first -= 1
    parent = r.parents[id(statement)]
    siblings = next(body for body in (getattr(parent, name, None)
                                      for name in ("body", "orelse", "finalbody"))
                    if isinstance(body, list) and statement in body)
    # Not two blank lines where it was, nor a blank line opening its block.
    opens_block = siblings[0] is statement and len(siblings) > 1
    if (opens_block or first > 1 and not r.source.line_text(first - 1).strip()) \
            and last < len(r.source.lines) and not r.source.line_text(last + 1).strip():
        last += 1
    start = r.line_start(first)
    end = r.after_line(last)
    if len(siblings) == 1:
        return Edit(start, end, f"{r.indent_of(statement)}pass{_newline(r.text)}")
    return Edit(start, end, "")


def _group_counters(r: _Rewriter, owner: ast.ClassDef
                    ) -> dict[ast.expr, tuple[ast.expr, list[tuple[ast.stmt, ast.If | None]]]]:
    """The param-group keys `owner` counts: counted up only (`group["k"] += 1`, or in
    place, `group["k"].add_(1)`; `group` a `for` over `self.param_groups` or a `group`
    parameter), started only under `if "k" not in group:` at one number, or at one
    tensor made of the module's names alone (timm's `_init_scalar(device="cpu")`), or by
    `if "k" in group: group["k"] += 1 / else: group["k"] = 1`, written nowhere else
    (restoring a checkpoint aside; a method step does not run may set it to a number
    again: a restart). By the key's node (its source), the start value and the starting
    statements with their guards (None for a restart)."""
    found: dict[str, dict] = {}
    rejected: set[str] = set()
    module_names = _module_names(r.tree) | _BUILTINS
    methods = _methods(owner)
    step = methods.get("step")
    called_by_step = {n.func.attr for n in ast.walk(step) if isinstance(n, ast.Call)
                      and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                      and n.func.value.id == "self"} if step is not None else set()
    for name, method in methods.items():
        if name in _RESTORING_METHODS:
            continue
        parameters = {a.arg for a in method.args.args}
        # A method step does not run that sets the count (Adan's `restart_opt`): it
        # starts it again, in place once it is a tensor.
        restarting = name != "step" and name not in called_by_step

        def in_group(node: ast.AST, container: str | None) -> bool:
            """`container` is the param group at `node`: the `for` over them around it,
            or the method's `group` parameter."""
            loop = next((a for a in r.ancestors(node) if isinstance(a, ast.For)
                         and _group_name(a) is not None), None)
            return container is not None and (
                (loop is not None and _group_name(loop) == container)
                or container in parameters and container in ("group", "param_group"))

        for node in ast.walk(method):
            if _counts_in_place(node):
                place = node.value.func.value
                entry = found.setdefault(place.slice.value, {
                    "node": place.slice, "counts": 0, "starts": []})
                if in_group(node, place.value.id if isinstance(place.value, ast.Name)
                            else None):
                    entry["counts"] += 1
                else:
                    rejected.add(place.slice.value)
                continue
            if not isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if not (isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)
                        and isinstance(target.slice.value, str)):
                    continue
                key = target.slice.value
                entry = found.setdefault(key, {"node": target.slice, "counts": 0, "starts": []})
                container = target.value.id if isinstance(target.value, ast.Name) else None
                if isinstance(node, ast.AugAssign):
                    if isinstance(node.op, ast.Add) and _is_number(node.value) \
                            and in_group(node, container):
                        entry["counts"] += 1
                        continue
                elif isinstance(node, ast.Assign) and len(targets) == 1 \
                        and container is not None and (
                            _is_number(node.value) or isinstance(node.value, ast.Call)
                            and _loaded_names(node.value) <= module_names):
                    guard = r.parents.get(id(node))
                    if isinstance(guard, ast.If) and not guard.orelse \
                            and node in guard.body and _membership_test(guard.test, key, container):
                        entry["starts"].append((node, guard, node.value))
                        continue
                    counted = _counted_else_started(guard, node, key, container)
                    if counted is not None:
                        # `if "k" in group: group["k"] += 1 / else: group["k"] = 1`
                        # (timm's Adan): counted from one less than its first value.
                        entry["starts"].append((node, guard, counted))
                        continue
                    if restarting and _is_number(node.value) and in_group(node, container):
                        entry.setdefault("restarts", []).append(node)
                        continue
                rejected.add(key)
    # A count the defaults start (Prodigy's `'step': 1`) is in every group before the
    # step's `if "k" not in group:` could start it: it starts at the defaults' number.
    defaults = _defaults_entries(methods["__init__"]) if "__init__" in methods else {}
    result = {}
    for key, entry in found.items():
        starts = entry["starts"]
        if key in rejected or not entry["counts"] or not starts:
            continue
        values = {ast.literal_eval(value) if not isinstance(value, ast.Call)
                  else ast.dump(value) for _, _, value in starts}
        start = starts[0][2]
        if key in defaults:
            if not _is_number(defaults[key]):
                continue
            values, start = {ast.literal_eval(defaults[key])}, defaults[key]
        if len(values) != 1:
            continue
        result[entry["node"]] = (start, [(s, g) for s, g, _ in starts]
                                 + [(restart, None) for restart in entry.get("restarts", [])])
    return result


# Methods that restore what a checkpoint holds: their writes start nothing.
_RESTORING_METHODS = frozenset({"__setstate__", "load_state_dict"})


def _counts_in_place(node: ast.AST) -> bool:
    """`group["k"].add_(1)` as a statement."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return False
    call = node.value
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr == "add_" and len(call.args) == 1 \
        and not call.keywords and _is_number(call.args[0]) \
        and isinstance(func.value, ast.Subscript) and isinstance(func.value.slice, ast.Constant) \
        and isinstance(func.value.slice.value, str)


def _defaults_entries(init: ast.FunctionDef) -> dict[str, ast.expr]:
    """The entries of the defaults `__init__` binds to `defaults` (a dict display or
    `dict(...)` of keywords), by key."""
    entries: dict[str, ast.expr] = {}
    for node in ast.walk(init):
        if not (isinstance(node, (ast.Assign, ast.AnnAssign)) and
                any(isinstance(t, ast.Name) and t.id == "defaults" for t in _targets(node))):
            continue
        found = dict_entries(node.value)
        if found is None or isinstance(node.value, ast.Call) and node.value.args:
            continue
        entries.update(found)
    return entries


def _group_accumulators(r: _Rewriter, owner: ast.ClassDef
                        ) -> dict[ast.expr, tuple[ast.expr, list[ast.Assign]]]:
    """The param-group keys `owner`'s defaults (a dict display or `dict(...)` bound to
    `defaults` in `__init__`) start at a number and its other methods only rebind from
    themselves (`group["k"] = f(group["k"], ...)`, `group` a `for` over `self.param_groups` or a
    `group` parameter), in a statement of its own (`x = group["k"] = ...` too). By the
    key's node, with its start value and the updating statements."""
    methods = _methods(owner)
    init = methods.get("__init__")
    if init is None:
        return {}
    starts = {key: start for key, start in _defaults_entries(init).items()
              if _is_number(start) or (isinstance(start, ast.Constant) and start.value is None)}
    # A key the defaults lack, read as `group.get("k", n)` with one number throughout
    # (pytorch-optimizer's ScheduleFreeWrapper: `group.get("weight_sum", 0.0) + weight`).
    got: dict[str, list[ast.expr]] = {}
    for name, method in methods.items():
        if name in ("__init__", "preinitialize"):
            continue
        for node in ast.walk(method):
            key = _got_key(node)
            if key is not None and key not in starts:
                got.setdefault(key, []).append(node.args[1])
    starts.update((key, found[0]) for key, found in got.items()
                  if all(_is_number(n) and ast.literal_eval(n) == ast.literal_eval(found[0])
                         for n in found))
    updates: dict[str, list[ast.Assign]] = {}
    nodes: dict[str, ast.expr] = {}
    rejected: set[str] = set()
    for name, method in methods.items():
        if name in ("__init__", "preinitialize"):
            continue
        parameters = {a.arg for a in method.args.args}
        aliases = entry_aliases(method)
        for node in ast.walk(method):
            if not isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                continue
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) \
                else [node.target]
            for target in targets:
                if not (isinstance(target, ast.Subscript)
                        and isinstance(target.slice, ast.Constant)
                        and target.slice.value in starts):
                    continue
                key = target.slice.value
                container = target.value.id if isinstance(target.value, ast.Name) else None
                loop = next((a for a in r.ancestors(node) if isinstance(a, ast.For)
                             and _group_name(a) is not None), None)
                in_group = container is not None and (
                    (loop is not None and _group_name(loop) == container)
                    or container in parameters and container in ("group", "param_group"))
                # (`k = group["k"]` ... `group["k"] = k + 1`: the local is the entry)
                reads_itself = isinstance(node, ast.Assign) and any(
                    isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)
                    and n.value.id == container and isinstance(n.slice, ast.Constant)
                    and n.slice.value == key
                    or isinstance(n, ast.Name) and aliases.get(n.id) == (container, key)
                    or _got_key(n) == key and n.func.value.id == container
                    for n in ast.walk(node.value))
                others = [t for t in targets if t is not target] \
                    if isinstance(node, ast.Assign) else []
                # An entry that starts as None is carried from one step to the next
                # (AvaGrad's `gamma`): what the step sets it to, not from itself.
                carried = _is_none(starts[key])
                if in_group and (reads_itself or carried) and \
                        all(isinstance(t, ast.Name) for t in others) \
                        and isinstance(r.parents.get(id(node)), (ast.For, ast.FunctionDef,
                                                                  ast.If, ast.With)):
                    updates.setdefault(key, []).append(node)
                    nodes.setdefault(key, target.slice)
                else:
                    rejected.add(key)
    # One that starts as None must never be told apart from it (`is None`, its truth,
    # `.get()`): a tensor from the start, it is never None.
    rejected |= {key for key in updates if _is_none(starts[key]) and
                 any(_asks_for_none(node, key) for node in ast.walk(owner))}
    return {nodes[key]: (starts[key], statements) for key, statements in updates.items()
            if key not in rejected}


def _defaults_of_arguments(init: ast.FunctionDef) -> dict[str, str]:
    """The arguments of `init` that go into its defaults as they are (`dict(lr=lr,
    momentum=momentum)`, `{"momentum": momentum}`), each with its key."""
    arguments = {a.arg for a in (*init.args.posonlyargs, *init.args.args,
                                 *init.args.kwonlyargs)}
    found: dict[str, str] = {}
    for node in ast.walk(init):
        for key, value in dict_entries(node) or ():
            if isinstance(value, ast.Name) and value.id in arguments \
                    and not _binds(init, value.id):
                found.setdefault(value.id, key)
    return found


def _binds(function: ast.FunctionDef, name: str) -> bool:
    """Whether `function` binds `name` in its body (its parameters aside)."""
    return any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)
               for statement in function.body for n in ast.walk(statement))


def _got_key(node: ast.AST) -> str | None:
    """"k" of `group.get("k", <number>)` (a name's `.get` with a constant key and a
    number for what is missing); None for anything else."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "get" and isinstance(node.func.value, ast.Name) \
            and len(node.args) == 2 and not node.keywords \
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) \
            and _is_number(node.args[1]):
        return node.args[0].value
    return None


def _group_entry_made(statement: ast.stmt) -> tuple[str, str] | None:
    """(`group`, "k") of `group["k"] = ...`: a name's entry under a string."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
        return None
    target = statement.targets[0]
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
            and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str):
        return target.value.id, target.slice.value
    return None


# torch's creation calls whose tensor preinitialize can make with cstorch's.
_CONSTANT_CREATIONS = frozenset({"torch.tensor", "torch.zeros", "torch.ones", "torch.full"})


def _constant_tensor(value: ast.expr, alias: str) -> str | None:
    """A tensor of constants (`torch.tensor([0.0], device=device)`, `torch.zeros(1,
    device=d)`) as preinitialize makes it: cstorch's creation op, `device=` left out
    (cstorch makes it where the optimizer's tensors are), `dtype=` kept; None for
    anything else."""
    if not isinstance(value, ast.Call):
        return None
    name = dotted_name(value.func)
    if name not in _CONSTANT_CREATIONS or not all(
            k.arg in ("device", "dtype") for k in value.keywords):
        return None
    dtype = next((k.value for k in value.keywords if k.arg == "dtype"), None)
    if dtype is not None and not (isinstance(dtype, ast.Attribute)
                                  and dotted_name(dtype) == f"torch.{dtype.attr}"):
        return None
    try:
        arguments = [ast.literal_eval(a) for a in value.args]
    except ValueError:
        return None
    typed = f", dtype={ast.unparse(dtype)}" if dtype is not None else ""
    if name == "torch.tensor":
        if len(arguments) != 1:
            return None
        data = arguments[0]
        flat = data if isinstance(data, (list, tuple)) else [data]
        if not flat or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                               for x in flat) or len(set(flat)) != 1:
            return None
        shape = f"({len(flat)},)" if isinstance(data, (list, tuple)) else "()"
        # (torch.tensor makes int64 of ints, float32 where one number is a float)
        floating = any(isinstance(x, float) for x in flat)
        if flat[0] == 0 and (floating or dtype is not None):
            return f"{alias}.zeros({shape}{typed})"
        number = float(flat[0]) if floating else flat[0]
        return f"{alias}.full({shape}, {number!r}{typed})"
    shape_arguments = arguments[:-1] if name == "torch.full" else arguments
    if len(shape_arguments) == 1 and isinstance(shape_arguments[0], (list, tuple)):
        shape_arguments = list(shape_arguments[0])  # `torch.zeros((2, 3))`
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in shape_arguments):
        return None
    shape = f"({', '.join(map(str, shape_arguments))}{',' if len(shape_arguments) == 1 else ''})"
    if name != "torch.full":
        return f"{alias}.{name[len('torch.'):]}({shape}{typed})"
    fill = arguments[-1] if arguments else None
    if not isinstance(fill, (int, float)) or isinstance(fill, bool):
        return None
    return f"{alias}.full({shape}, {fill!r}{typed})"


def _asks_for_group_key(owner: ast.ClassDef, key: str, guard: ast.If) -> bool:
    """Whether the class asks, outside `guard`'s test, whether a group holds `key`
    (`key in group`, `group.get(key)`): made in preinitialize, it always would."""
    for node in ast.walk(owner):
        if node is guard.test:
            continue
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) \
                and node.left.value == key and any(isinstance(o, (ast.In, ast.NotIn))
                                                   for o in node.ops):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("get", "setdefault", "pop") and node.args \
                and isinstance(node.args[0], ast.Constant) and node.args[0].value == key:
            return True
    return False


def _shared_state_key(statement: ast.stmt) -> str | None:
    """"k" of `self.state["k"] = ...`: state under a key of its own, not a parameter's."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
        return None
    target = statement.targets[0]
    if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant) \
            and isinstance(target.slice.value, str) and _is_self_state(target.value):
        return target.slice.value
    return None


def _one_element_list(value: ast.expr) -> ast.List | None:
    """The list of `torch.tensor([number], ...)`, on one line; None for anything else."""
    if isinstance(value, ast.Call) and dotted_name(value.func) == "torch.tensor" and value.args \
            and isinstance(listed := value.args[0], ast.List) and len(listed.elts) == 1 \
            and _is_number(listed.elts[0]) and listed.lineno == listed.end_lineno:
        return listed
    return None


def _read_as_number_only(owner: ast.ClassDef, key: str | None, guard: ast.If) -> bool:
    """Whether every read of `self.state[key]` in the class outside `guard` is in an
    argument of a `math` function (a Python number is all it gives) or changes the entry
    in place (`self.state[key].add_(1)`), and there is one."""
    skipped = {id(n) for n in ast.walk(guard)}
    parents = {id(child): node for node in ast.walk(owner) for child in ast.iter_child_nodes(node)}
    reads = [n for n in ast.walk(owner) if isinstance(n, ast.Subscript) and id(n) not in skipped
             and isinstance(n.ctx, ast.Load) and _is_self_state(n.value)
             and isinstance(n.slice, ast.Constant) and n.slice.value == key]

    def as_number(read: ast.Subscript) -> bool:
        parent = parents.get(id(read))
        if isinstance(parent, ast.Attribute) and parent.attr.endswith("_") \
                and isinstance(parents.get(id(parent)), ast.Call):
            return True
        node = read
        while isinstance(parent, (ast.expr, ast.keyword)):
            if isinstance(parent, ast.Call) and node is not parent.func \
                    and (dotted_name(parent.func) or "").startswith("math."):
                return True
            node, parent = parent, parents.get(id(parent))
        return False

    return bool(key) and bool(reads) and all(as_number(read) for read in reads)


def _is_self_state(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "state" \
        and isinstance(node.value, ast.Name) and node.value.id == "self"


def _tests_shared_key_absent(test: ast.expr, key: str) -> bool:
    """`key not in self.state` (`.keys()` too), `self.state.get(key) is None`."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(op, ast.NotIn) and isinstance(left, ast.Constant) and left.value == key:
        if isinstance(right, ast.Call) and isinstance(right.func, ast.Attribute) \
                and right.func.attr == "keys" and not right.args:
            right = right.func.value
        return _is_self_state(right)
    if isinstance(op, ast.Is) and _is_none(right) and isinstance(left, ast.Call) \
            and isinstance(left.func, ast.Attribute) and left.func.attr == "get" \
            and _is_self_state(left.func.value) and len(left.args) == 1 \
            and isinstance(left.args[0], ast.Constant) and left.args[0].value == key:
        return True
    return False


# The optimizer's own attributes that hold its tensors.
_TENSOR_HOLDERS = frozenset({"state", "param_groups"})


def _may_hold_a_number(test: ast.Compare, function: ast.AST | None) -> bool:
    """Whether a name the comparison reads is bound, somewhere in the function, to a
    number, to a choice with a number on one side (`sigma = g.std() if g.ndim > 1
    else 0`) or to what the object keeps (`self.base_lrs[i]`): then the comparison may
    give a Python bool, which torch.where and the logical ops do not take."""
    if function is None:
        return False
    names = {n.id for n in [test.left, *test.comparators] if isinstance(n, ast.Name)}
    if not names:
        return False

    def numeric(value: ast.expr | None) -> bool:
        if isinstance(value, ast.IfExp):
            return numeric(value.body) or numeric(value.orelse)
        if isinstance(value, ast.Subscript):
            value = value.value
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) \
                and value.value.id == "self" and value.attr not in _TENSOR_HOLDERS:
            # What the constructor kept (`self.base_lrs[i]`, AdaBound's lrs as given):
            # numbers on the system, where the lr is a tensor only once the step runs.
            return True
        return isinstance(value, ast.Constant) and isinstance(value.value, (int, float)) \
            and not isinstance(value.value, bool)

    return any(numeric(node.value) for node in assignments_to(function, names))


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _asks_for_none(node: ast.AST, key: str) -> bool:
    """Whether `node` tells the entry `key` apart from None: `x[key] is None`, `not
    x[key]`, `if x[key]:`, `x.get(key)`."""
    def entry(expression: ast.AST) -> bool:
        return isinstance(expression, ast.Subscript) and \
            isinstance(expression.slice, ast.Constant) and expression.slice.value == key
    if isinstance(node, ast.Compare) and (
            any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops)
            or any(_is_none(side) for side in node.comparators)) and \
            any(entry(side) for side in (node.left, *node.comparators)):
        return True
    if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)) and entry(node.test):
        return True
    if isinstance(node, ast.BoolOp) and any(entry(value) for value in node.values):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and entry(node.operand):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        node.func.attr == "get" and bool(node.args) and \
        isinstance(node.args[0], ast.Constant) and node.args[0].value == key


def _made_lazily_elsewhere(methods: dict[str, ast.FunctionDef], where: ast.FunctionDef,
                           guards: list[ast.If], state_name: str) -> bool:
    """Whether another method of the class makes one of the keys these checks make
    under its own test of whether the state has it (pytorch-optimizer's SGDW: a
    foreach path whose `first_step = "momentum_buffer" not in state` chooses its
    first update): made in preinitialize, the state is always there, and that path
    would never take its first step's branch again. Not a check that only makes it
    filled with a constant, with no `else` and no flag kept (GaLore's step making again
    what its `init_group` made before it): on that path the state is only there sooner."""
    moved = {key for guard in guards for key in _state_keys_stored(guard, {state_name})}
    for method in methods.values():
        if method is where:
            continue
        name = _state_name_in(method)
        if name is None:
            continue
        tests = [n for n in ast.walk(method) if _asks_for_state(n, name, moved)]
        flags = {t.targets[0].id for t in ast.walk(method)
                 if isinstance(t, ast.Assign) and len(t.targets) == 1
                 and isinstance(t.targets[0], ast.Name)
                 and any(t.value is test for test in tests)}
        for node in ast.walk(method):
            if not isinstance(node, ast.If) or not (
                    any(node.test is test for test in tests)
                    or isinstance(node.test, ast.Name) and node.test.id in flags):
                continue
            if not _state_keys_stored(node, {name}) & moved:
                continue
            flag = node.test.id if isinstance(node.test, ast.Name) else None
            kept = flag is not None and sum(
                isinstance(n, ast.Name) and n.id == flag and isinstance(n.ctx, ast.Load)
                for n in ast.walk(method)) > 1
            if node.orelse or kept or not all(
                    _constant_allocation(statement.value) for statement in ast.walk(node)
                    if isinstance(statement, ast.Assign)
                    and any(isinstance(t, ast.Subscript) for t in statement.targets)):
                return True
    return False


def _constant_allocation(value: ast.expr) -> bool:
    """A new tensor of a constant (`torch.zeros_like(p)`, `torch.full_like(p, 0.5)`)."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        return False
    name = value.func.attr
    if name in ("zeros_like", "ones_like", "zeros", "ones"):
        return True
    fill = value.args[1] if len(value.args) > 1 else next(
        (k.value for k in value.keywords if k.arg == "fill_value"), None)
    return name in ("full_like", "full") and isinstance(fill, ast.Constant)


def _asks_for_state(node: ast.AST, state_name: str, keys: set[str]) -> bool:
    """`"k" not in state` / `"k" in state` of one of `keys`, `len(state) == 0`, `not
    state`."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and \
            isinstance(node.ops[0], (ast.In, ast.NotIn)):
        left, right = node.left, node.comparators[0]
        return isinstance(left, ast.Constant) and left.value in keys and \
            isinstance(right, ast.Name) and right.id == state_name
    return _lazy_state_name(node) == state_name


def _tests_state_elsewhere(function: ast.FunctionDef, state_name: str,
                           guards: list[ast.If]) -> bool:
    """Whether `function` asks whether the state is there outside the checks that make
    it (timm's Adopt: `first_steps.append(len(state) == 0)`, read later to run the
    first step's own update): made in preinitialize, the state is always there, and
    that code would never run again. Whether an entry the checks make is there (`if
    "full" in state:`, factored or not) stays as it was: it is made under the same tests."""
    inside = {id(n) for guard in guards for n in ast.walk(guard)}
    made = {key for guard in guards for n in ast.walk(guard)
            if (key := _state_key_written(n)) is not None}
    for node in ast.walk(function):
        if id(node) in inside:
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "len" and len(node.args) == 1 \
                and isinstance(node.args[0], ast.Name) and node.args[0].id == state_name:
            return True
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn))
                                                 for op in node.ops) \
                and any(isinstance(c, ast.Name) and c.id == state_name
                        for c in node.comparators) \
                and not (isinstance(node.left, ast.Constant) and node.left.value in made):
            return True
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) \
                and isinstance(node.operand, ast.Name) and node.operand.id == state_name:
            return True
    return False


def _counted_else_started(guard: ast.AST | None, start: ast.Assign, key: str,
                          container: str) -> ast.Constant | None:
    """For `if "k" in group: group["k"] += n / else: group["k"] = m` (`start` the `else`'s
    assignment of a number): m - n, the value it counts up from, as a node; None for
    anything else."""
    if not (isinstance(guard, ast.If) and guard.orelse == [start] and len(guard.body) == 1
            and _is_number(start.value)):
        return None
    counted = guard.body[0]
    if not (isinstance(counted, ast.AugAssign) and isinstance(counted.op, ast.Add)
            and _is_number(counted.value) and _state_key(counted.target, container) == key
            and _membership_test(guard.test, key, container, ast.In)):
        return None
    first, step = ast.literal_eval(start.value), ast.literal_eval(counted.value)
    return ast.Constant(first - step)


def _membership_test(test: ast.expr, key: str, container: str,
                     operator: type[ast.cmpop] = ast.NotIn) -> bool:
    """`"k" not in group` (with `ast.In`: `"k" in group`)."""
    return (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], operator) and isinstance(test.left, ast.Constant)
            and test.left.value == key and isinstance(test.comparators[0], ast.Name)
            and test.comparators[0].id == container)


# ---- syntax helpers -------------------------------------------------------------------

_BUILTINS = set(dir(builtins))


def _module_alias(tree: ast.Module, module: str) -> str | None:
    for statement in tree.body:
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.name == module:
                    return alias.asname or alias.name
    return None


# torch.optim's checks of a parameter that its optimizers run where they make its state:
# they raise or return nothing.
_PARAMETER_CHECKS = frozenset({"_device_dtype_check_for_fused"})


def _validates(statement: ast.stmt) -> bool:
    """A statement that only checks: `raise ...`, or a call of one of torch.optim's
    checks of a parameter."""
    if isinstance(statement, ast.Raise):
        return True
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) \
        and (dotted_name(statement.value.func) or "").rsplit(".", 1)[-1] in _PARAMETER_CHECKS


def _imported_as(tree: ast.Module, name: str) -> str | None:
    """What the module-level `from m import x as name` brings in as `name`: `m.x`."""
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
            for alias in statement.names:
                if (alias.asname or alias.name) == name:
                    return f"{statement.module}.{alias.name}"
    return None


def _cstorch_name(tree: ast.Module) -> str | None:
    for statement in tree.body:
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.name in ("cerebras.pytorch", "cslint.cstorch") and alias.asname:
                    return alias.asname
    return None


def _methods(owner: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {s.name: s for s in owner.body if isinstance(s, ast.FunctionDef)}


def _first_line(statement: ast.stmt) -> int:
    return min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", ()))])


def _newline(text: str) -> str:
    match = re.search(r"\r\n?|\n", text)
    return match.group() if match else "\n"


def _unit_indent(text: str, function: ast.FunctionDef | ast.If, indent: str) -> str:
    """One level of indentation as the function's (or block's) body has it."""
    first = function.body[0]
    lines = text.splitlines()
    body_line = lines[first.lineno - 1]
    body_indent = body_line[:len(body_line) - len(body_line.lstrip())]
    return body_indent[len(indent):] or "    "


def _reindented(r: _Rewriter, statement: ast.stmt, indent: str,
                renamed: dict[int, str] | None = None, param: str | None = None) -> list[str]:
    """The statement's lines (with the comment lines right above it), moved to `indent`,
    the names in `renamed` (by id of the node) replaced, the keywords that cstorch's
    creation ops do not take left out: `memory_format=torch.preserve_format` (torch's
    default) and `device=p.device` of the parameter `param`."""
    first = statement.lineno
    while first > 1 and r.source.line_text(first - 1).strip().startswith("#"):
        first -= 1
    lines = [r.source.line_text(n).rstrip("\r\n") for n in range(first, statement.end_lineno + 1)]
    names = [n for n in ast.walk(statement) if renamed and id(n) in renamed]
    # From the right, so that the offsets of the others on a line stay right.
    for name in sorted(names, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        raw = lines[name.lineno - first].encode()
        lines[name.lineno - first] = (raw[:name.col_offset] + renamed[id(name)].encode()
                                      + raw[name.end_col_offset:]).decode()
    head = lines[statement.lineno - first].encode()
    if isinstance(statement, ast.If) and head[statement.col_offset:].startswith(b"elif"):
        # The `elif` of a chain whose first branch stays: an `if` of its own here.
        lines[statement.lineno - first] = (head[:statement.col_offset] + b"if"
                                           + head[statement.col_offset + 4:]).decode()
    old = r.indent_of(statement)
    moved = [indent + line[len(old):] if line.startswith(old) else line for line in lines]
    text = "\n".join(moved)
    without = re.sub(r",\s*memory_format\s*=\s*torch\.preserve_format\b", "", text)
    if param is not None:
        # The parameter's device is where cstorch creates its state anyway.
        without = re.sub(rf",\s*device\s*=\s*{re.escape(param)}\.device\b", "",
                         without)
    if without != text:
        # `zeros_like(\n    p)`, left by the removal, on one line.
        without = re.sub(r"\(\s*\n\s*([^()\n]*)\)", r"(\1)", without)
    text = without
    return text.split("\n")


def _is_number(node: ast.expr, value: float | None = None) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
        and not isinstance(node.value, bool) and (value is None or node.value == value)


def _side_effect_free(node: ast.expr, on_new_tensors: bool = False) -> bool:
    """No assignment, yield, await or lambda, and no in-place op; with `on_new_tensors`,
    in-place ops on a tensor the expression itself made (`x.sqrt().add_(e)`) are fine:
    what they change exists only inside it."""
    for child in ast.walk(node):
        if isinstance(child, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await, ast.Lambda)):
            return False
        if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) \
                and child.func.attr.endswith("_") and not child.func.attr.startswith("_"):
            if not (on_new_tensors and _made_here(child.func.value)):
                return False  # an in-place op on what exists outside the expression
    return True


def _made_here(node: ast.expr) -> bool:
    """Whether `node` is a tensor the expression makes: a result of an allocating or
    out-of-place method (`x.sqrt()`), of arithmetic (`(g - m)`), or an in-place op on
    one of those (`(g - m).mul_(b)` gives that same new tensor)."""
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        return True
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    attribute = node.func.attr
    if any(keyword.arg == "out" for keyword in node.keywords):
        return False  # (`torch.add(a, b, out=c)` gives `c`)
    if attribute in ALLOCATING_METHODS or attribute in _OUT_OF_PLACE:
        return True
    if isinstance(node.func.value, ast.Name) and node.func.value.id == "torch":
        # A function of torch makes its result (`torch.stack(norms)`), but for the views
        # and what changes its first argument in place.
        return attribute not in TORCH_VIEWS and not attribute.endswith("_")
    return attribute.endswith("_") and not attribute.startswith("_") and \
        _made_here(node.func.value)


def _shifted(code: str, columns: int) -> str:
    """`code` with its lines after the first indented `columns` more (or less, as far as
    they start with spaces)."""
    lines = code.splitlines(keepends=True)
    for index in range(1, len(lines)):
        line = lines[index]
        if columns >= 0:
            lines[index] = " " * columns + line
        else:
            spaces = len(line) - len(line.lstrip(" "))
            lines[index] = line[min(spaces, -columns):]
    return "".join(lines)


def _assignment_block(body: list[ast.stmt]) -> list[tuple[str, ast.expr]] | None:
    """[(name, value)] when the block is only assignments (`name = value`, `name: T =
    value`), each to a different name; None otherwise."""
    found: list[tuple[str, ast.expr]] = []
    for statement in body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            target = statement.target
        else:
            return None
        if not isinstance(target, ast.Name) or any(n == target.id for n, _ in found):
            return None
        found.append((target.id, statement.value))
    return found or None


def _reads_carried_value(statement: ast.stmt, function: ast.AST | None,
                         values: list[ast.AST]) -> bool:
    """Whether a value reads an entry or attribute (`group["gamma"]`, `self.d`) that
    the function writes after `statement`: a value carried from the last step, which a
    branch may read only once it is set (AvaGrad's `gamma` is None before the first
    step ends). Computing that branch unconditionally could fail."""
    if function is None:
        return False
    # (Not `+=`: what it updates exists before it, as the branch reads it.)
    written = {ast.dump(target) for node in ast.walk(function)
               if isinstance(node, (ast.Assign, ast.AnnAssign))
               and node.lineno > statement.end_lineno
               for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
               for target in ast.walk(target)
               if isinstance(target, (ast.Subscript, ast.Attribute))
               and isinstance(target.ctx, ast.Store)}
    if not written:
        return False
    return any(isinstance(n, (ast.Subscript, ast.Attribute)) and
               ast.dump(_as_store(n)) in written for value in values for n in ast.walk(value))


def _as_store(node: ast.Subscript | ast.Attribute) -> ast.AST:
    """The node as an assignment target (its dump then matches a target's)."""
    if isinstance(node, ast.Subscript):
        return ast.Subscript(value=node.value, slice=node.slice, ctx=ast.Store())
    return ast.Attribute(value=node.value, attr=node.attr, ctx=ast.Store())


def _bound_before(function: ast.AST, name: str, statement: ast.stmt) -> bool:
    """Whether `name` is assigned in the function on a line before `statement`, or is
    one of its parameters."""
    if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
            name in {a.arg for a in (*function.args.posonlyargs, *function.args.args,
                                     *function.args.kwonlyargs)}:
        return True
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
               and n.lineno < statement.lineno for n in ast.walk(function))


def _updated_in_place(function: ast.AST, name: str) -> bool:
    """`name.add_(...)`-like calls on the name anywhere in the function."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr.endswith("_") and not n.func.attr.startswith("_")
               and isinstance(n.func.value, ast.Name) and n.func.value.id == name
               for n in ast.walk(function))


def _comment_lines(code: str) -> list[str] | None:
    """The comments of `code` that have lines of their own (kept above what replaces
    it), stripped; None where a comment shares a line with code (or `#` is in a
    string), which the replacement would lose."""
    comments = []
    for line in code.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comments.append(stripped)
        elif "#" in line:
            return None
    return comments


def _unchanged_alias(node: ast.expr, names: list[str], function: ast.AST | None) -> bool:
    """A name (`c_t = grad` in a branch) that nothing in the function changes in place,
    nor the names the branches bind, and that no other name of the function aliases: it
    is bound only to values made here (not `grad = p.grad`), or is a parameter, and no
    name is bound to it alone. A selected copy then holds the same values as the object
    it would have named, before and after."""
    from cslint.port.branches import changed_in_place

    if not isinstance(node, ast.Name) or function is None or \
            any(changed_in_place(function, name) for name in (node.id, *names)):
        return False
    for assignment in ast.walk(function):
        if not isinstance(assignment, (ast.Assign, ast.AnnAssign)) or assignment.value is None:
            continue
        targets = assignment.targets if isinstance(assignment, ast.Assign) \
            else [assignment.target]
        value = assignment.value
        binds_it = any(isinstance(t, ast.Name) and t.id == node.id for t in targets)
        if binds_it and isinstance(value, (ast.Name, ast.Attribute, ast.Subscript)):
            return False  # another object's alias
        if isinstance(value, ast.Name) and value.id == node.id and not all(
                isinstance(t, ast.Name) and t.id in names for t in targets):
            return False  # aliased by another name
    return True


_NO_ENTRY = object()


def _binds_names_only(statements: list[ast.stmt]) -> bool:
    """Whether the statements do nothing but bind local names (tests and arithmetic
    around them included): no entry, attribute or in-place change, no way out."""
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, (ast.Return, ast.Break, ast.Continue, ast.Raise, ast.Yield,
                                 ast.YieldFrom, ast.Await, ast.Global, ast.Nonlocal,
                                 ast.Delete, ast.FunctionDef, ast.ClassDef, ast.Lambda)):
                return False
            if isinstance(node, (ast.Subscript, ast.Attribute)) and \
                    isinstance(node.ctx, ast.Store):
                return False
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                    node.func.attr in _KEEPING_METHODS or is_in_place(node.func.attr)):
                return False
    return True


def _unchanged_entry(node: ast.expr, names: list[str], function: ast.AST | None) -> bool:
    """An entry or attribute read as it is (`curr_lr = group["lr"]` in one branch, a
    number computed in the other) that nothing in the function changes in place, through
    it or through a name bound to it, nor the names the branches bind: a selected copy
    then holds the same values as the object it would have named."""
    from cslint.port.branches import _place_root, changed_in_place

    if not isinstance(node, (ast.Subscript, ast.Attribute)) or function is None or \
            _place_root(node) is None or \
            any(changed_in_place(function, name) for name in names):
        return False
    place = ast.dump(node)
    for child in ast.walk(function):
        if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) and \
                child.func.attr.endswith("_") and not child.func.attr.startswith("_") and \
                ast.dump(child.func.value) == place:
            return False  # (`group["lr"].mul_(...)`)
        if isinstance(child, ast.Call) and child.args and ast.dump(child.args[0]) == place \
                and (isinstance(child.func, ast.Attribute) and child.func.attr.endswith("_")
                     or isinstance(child.func, ast.Name) and child.func.id.endswith("_")):
            return False  # (`torch._foreach_mul_(group["bufs"], ...)`)
        if isinstance(child, (ast.Assign, ast.AnnAssign)) and child.value is not None and \
                ast.dump(child.value) == place:
            targets = child.targets if isinstance(child, ast.Assign) else [child.target]
            if any(not isinstance(t, ast.Name) or
                   (t.id not in names and changed_in_place(function, t.id))
                   for t in targets):
                return False  # an alias changed in place
    return True


def _selectable(node: ast.expr) -> bool:
    """A value `torch.where` can select: computed by the expression (a number,
    arithmetic, a call's result), not an existing object it names (selecting a copy of
    that would not alias it), and not a list of tensors (a display, a comprehension, a
    `_foreach_` op's result)."""
    return not _makes_a_collection(node) and \
        not isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Starred))


# Tensor methods whose arguments may be tensors as well as numbers.
# torch functions that take a tensor wherever they take a number.
_TENSOR_ARGUMENTS = frozenset({"as_tensor", "minimum", "maximum", "clamp", "where"})


def _builtin_min_max(node: ast.AST | None, function: ast.AST) -> bool:
    """A call of Python's own `min` or `max` (not a name the function binds)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
        and node.func.id in ("min", "max") and not node.keywords and not any(
            isinstance(n, ast.Name) and n.id == node.func.id
            and not isinstance(n.ctx, ast.Load) for n in ast.walk(function))


_TENSOR_ARITHMETIC = frozenset({
    "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "addcmul", "addcmul_",
    "addcdiv", "addcdiv_", "lerp", "lerp_", "copy_", "fill_", "maximum", "minimum", "pow",
    "pow_"})


def _has_tensor_operand(test: ast.expr, tensor_tests: set[int]) -> bool:
    """`test` is a test the linter found on a tensor, or a `not` or `and`/`or` of one."""
    if id(test) in tensor_tests:
        return True
    if isinstance(test, ast.BoolOp):
        return any(_has_tensor_operand(value, tensor_tests) for value in test.values)
    return isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and \
        _has_tensor_operand(test.operand, tensor_tests)


def _evaluable_together(test: ast.expr) -> bool:
    """Whether every operand of an `and`/`or` may be computed whatever the others give:
    not where an earlier one guards a later one (`x is not None and x.norm() > 0`,
    `isinstance(x, Tensor) and ...`, `"k" in state and state["k"] > 0`)."""
    if not isinstance(test, ast.BoolOp):
        return not isinstance(test, ast.UnaryOp) or _evaluable_together(test.operand)
    for value in test.values[:-1]:
        for node in ast.walk(value):
            if isinstance(node, ast.Compare) and any(
                    isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
                return False
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in ("isinstance", "hasattr", "callable", "len"):
                return False
    return all(_evaluable_together(value) for value in test.values)


def _is_bool_call(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id == "bool" and len(node.args) == 1 and not node.keywords


def _truth_valued(node: ast.expr) -> bool:
    """A comparison, or `not`, `bool()`, `and`/`or` of truth values only."""
    if isinstance(node, ast.Compare):
        return True
    if _is_bool_call(node):
        return _truth_valued(node.args[0])
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _truth_valued(node.operand) or isinstance(node.operand, ast.Name)
    if isinstance(node, ast.BoolOp):
        return all(_truth_valued(value) for value in node.values)
    return False


def _makes_a_collection(node: ast.expr) -> bool:
    """A display, a comprehension, or a `_foreach_` op's result: what `torch.where`
    cannot select between (a list of shapes, a list of tensors)."""
    if isinstance(node, (ast.List, ast.ListComp, ast.Tuple, ast.Set, ast.SetComp, ast.Dict,
                         ast.DictComp, ast.GeneratorExp)):
        return True
    return isinstance(node, ast.Call) and (dotted_name(node.func) or "").rsplit(".", 1)[-1] \
        .startswith("_foreach_")


_INCREMENTS = {"add_": ({1}, {"alpha"}), "sub_": ({1}, {"alpha"}),
               "addcdiv_": ({2}, {"value"}), "addcmul_": ({2}, {"value"})}


def _increment(body: list[ast.stmt]) -> tuple[str, ast.Call] | None:
    """(name, call) when the block is one `name.add_(...)`-like statement alone (the
    forms `_INCREMENTS` lists: positional operands, the scale by keyword)."""
    if len(body) != 1 or not isinstance(body[0], ast.Expr):
        return None
    call = body[0].value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name) and call.func.attr in _INCREMENTS):
        return None
    counts, keywords = _INCREMENTS[call.func.attr]
    if len(call.args) not in counts or any(isinstance(a, ast.Starred) for a in call.args) \
            or any(k.arg not in keywords for k in call.keywords):
        return None
    return call.func.value.id, call


# In-place Tensor methods and their out-of-place twins (`copy_` selects its argument).
_OUT_OF_PLACE = {name + "_": name for name in (
    "add", "sub", "mul", "div", "lerp", "addcmul", "addcdiv", "clamp", "clamp_min",
    "clamp_max", "neg", "abs", "sqrt", "rsqrt", "pow", "exp", "log", "sign", "reciprocal",
    "sigmoid", "tanh", "square", "maximum", "minimum")} | {"copy_": "copy_"}


def _in_place_chain(statement: ast.stmt) -> tuple[ast.expr, list[ast.Call]] | None:
    """(place, calls) for `place.mul_(a).add_(b)` alone as a statement (`_is_place`):
    in-place ops with an out-of-place twin (`copy_` only alone), positional or keyword
    arguments free of side effects; None otherwise."""
    if not isinstance(statement, ast.Expr):
        return None
    calls: list[ast.Call] = []
    node = statement.value
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in _OUT_OF_PLACE:
        calls.append(node)
        node = node.func.value
    if not calls or not _is_place(node):
        return None
    calls.reverse()
    if any(c.func.attr == "copy_" for c in calls) and \
            (len(calls) != 1 or len(calls[0].args) != 1 or calls[0].keywords):
        return None
    if not all(_side_effect_free(a) and not isinstance(a, ast.Starred)
               for c in calls for a in (*c.args, *(k.value for k in c.keywords))) or \
            any(k.arg is None for c in calls for k in c.keywords):
        return None
    return node, calls


def _branch_temporary(statement: ast.stmt, branch_of: ast.If, taken: bool,
                      function: ast.AST | None) -> bool:
    """`update = de_nom.reciprocal().lerp_(de_nom, weight=w)` in one branch of
    `branch_of`: a name assigned a value free of outside effects, read nowhere but later
    in its own branch (so computing it when the branch is not taken changes nothing)."""
    if not (isinstance(statement, (ast.Assign, ast.AnnAssign))
            and statement.value is not None and len(_targets(statement)) == 1
            and isinstance(_targets(statement)[0], ast.Name) and function is not None
            and _side_effect_free(statement.value, on_new_tensors=True)):
        return False
    name = _targets(statement)[0].id
    own = branch_of.body if taken else branch_of.orelse
    inside = {id(n) for s in own for n in ast.walk(s)}
    return not any(isinstance(n, ast.Name) and n.id == name and id(n) not in inside
                   for n in ast.walk(function))



def _is_place(node: ast.expr) -> bool:
    """A name, or a constant subscript or attribute of one: `p`, `state["slow"]`."""
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant):
            return False
        node = node.value
    return isinstance(node, ast.Name)


def _increment_calls(statement: ast.If) -> list[ast.Call]:
    """The in-place additions of an `if` chain whose branches `_increment` accepts."""
    calls = []
    node: ast.stmt = statement
    while isinstance(node, ast.If):
        calls.append(node.body[0].value)
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
        else:
            calls.extend(s.value for s in node.orelse)
            break
    return calls


def _is_param_groups(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "param_groups" \
        and isinstance(node.value, ast.Name) and node.value.id == "self"


def _group_name(loop: ast.For) -> str | None:
    """`group` in `for group in self.param_groups:` or
    `for index, group in enumerate(self.param_groups):`; None for any other loop."""
    target, iterated = loop.target, loop.iter
    if isinstance(iterated, ast.Call) and isinstance(iterated.func, ast.Name) \
            and iterated.func.id == "enumerate" and len(iterated.args) == 1 \
            and not iterated.keywords and isinstance(target, ast.Tuple) \
            and len(target.elts) == 2:
        target, iterated = target.elts[1], iterated.args[0]
    if _is_param_groups(iterated) and isinstance(target, ast.Name):
        return target.id
    return None


def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node)) or any(
        isinstance(n, ast.Attribute) and n.attr == "state" for n in ast.walk(node))


def _mentions_grad(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "grad" for n in ast.walk(node))


def _reads_grad_values(node: ast.AST) -> bool:
    """`.grad` read for more than its shape, dtype or device."""
    shape_only = {id(n) for n in _shape_only_uses(node, set(), None)}
    return any(isinstance(n, ast.Attribute) and n.attr == "grad" and id(n) not in shape_only
               for n in ast.walk(node))


def _state_variable(statement: ast.stmt) -> str | None:
    """`state` in `state["k"] = ...`."""
    targets = statement.targets if isinstance(statement, ast.Assign) else \
        [statement.target] if isinstance(statement, (ast.AnnAssign, ast.AugAssign)) else []
    for target in targets:
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            return target.value.id
    return None


def _state_key(target: ast.expr, state_name: str) -> str | None:
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
            and target.value.id == state_name and isinstance(target.slice, ast.Constant) \
            and isinstance(target.slice.value, str):
        return target.slice.value
    return None


def _state_key_written(node: ast.AST) -> str | None:
    if isinstance(node, ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant) \
                    and isinstance(target.slice.value, str):
                return target.slice.value
    return None


def _recasts_what_it_made(statement: ast.stmt, guard: ast.If, state_name: str) -> bool:
    """`state["m"] = state["m"].type_as(p_fp32)` (or `.to(grad)`) in the `else` of a check
    whose body makes `state["m"] = torch.zeros_like(p_fp32)` (or `torch.zeros(shape).
    to(grad)`): fairseq's fp16 pattern, timm's RAdamLegacy, Hugging Face's Adafactor.
    The state has that tensor's dtype and device already, so the cast changes nothing
    once the state is made like it in preinitialize, and goes with the check. Under
    tests of options (`if use_first_moment:`), each branch such casts."""
    if isinstance(statement, ast.If):
        return not _mentions(statement.test, state_name) and \
            not _mentions_grad(statement.test) and _side_effect_free(statement.test) and \
            all(_recasts_what_it_made(s, guard, state_name)
                for s in statement.body + statement.orelse)
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
        return False
    key = _state_key(statement.targets[0], state_name)
    value = statement.value
    if key is None or not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                           and value.func.attr in ("type_as", "to") and len(value.args) == 1
                           and not value.keywords and isinstance(value.args[0], ast.Name)
                           and _state_key(value.func.value, state_name) == key):
        return False
    like = value.args[0].id

    def made_like(made: ast.expr) -> bool:
        """`zeros_like(like)` (torch's or a method's), or any tensor `.to(like)`."""
        if not (isinstance(made, ast.Call) and isinstance(made.func, ast.Attribute)
                and made.args):
            return False
        first = made.args[0]
        if made.func.attr in ("zeros_like", "ones_like", "full_like"):
            return isinstance(first, ast.Name) and first.id == like
        return made.func.attr in ("to", "type_as") and len(made.args) == 1 \
            and isinstance(first, ast.Name) and first.id == like and not made.keywords

    creations = [made for made in ast.walk(guard) if isinstance(made, ast.Assign)
                 and made is not statement and len(made.targets) == 1
                 and _state_key(made.targets[0], state_name) == key
                 and not any(made is n for s in guard.orelse for n in ast.walk(s))]
    return bool(creations) and all(made_like(made.value) for made in creations)


def _counter_values_kept(owner: ast.ClassDef, state_name: str) -> list[ast.Subscript]:
    """The reads of `state_name["step"]` that an assignment keeps in an entry or an
    attribute (`buffered[0] = state["step"]`), not in a local name."""
    found = []
    for node in ast.walk(owner):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript) \
                and _state_key(node.value, state_name) == "step" \
                and any(isinstance(t, (ast.Subscript, ast.Attribute)) for t in node.targets):
            found.append(node.value)
    return found


def _is_step_counter(statement: ast.stmt, state_name: str) -> bool:
    """`state["step"] = 0` (or 0.0, or a 0-dim tensor of 0)."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and _state_key(statement.targets[0], state_name) == "step"):
        return False
    value = statement.value
    if _is_number(value, 0):
        return True
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
        and value.func.attr == "tensor" and len(value.args) == 1 and _is_number(value.args[0], 0)


def _only_creates(statement: ast.stmt, state_name: str) -> bool:
    """Assignments to state entries, under tests of options only and in loops over a
    range (`for i in range(rank): state[f"accumulator_{i}"] = ...`, SM3's)."""
    if isinstance(statement, ast.Assign):
        return all(_entry_of(t, state_name) for t in statement.targets) \
            and not _reads_grad_values(statement.value) \
            and _reads_state_metadata_only(statement.value, state_name)
    if isinstance(statement, ast.If):
        return not _mentions(statement.test, state_name) and not _mentions_grad(statement.test) \
            and all(_only_creates(s, state_name) for s in statement.body + statement.orelse)
    if isinstance(statement, ast.For):
        return isinstance(statement.target, ast.Name) and not statement.orelse \
            and _is_range(statement.iter) and not _mentions(statement.iter, state_name) \
            and not _mentions_grad(statement.iter) \
            and all(_only_creates(s, state_name) for s in statement.body)
    return False


def _entry_of(target: ast.expr, state_name: str) -> bool:
    """`state["k"]`, or `state[f"k_{i}"]` (a key formatted from the loop's names)."""
    return _state_key(target, state_name) is not None or (
        isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
        and target.value.id == state_name and isinstance(target.slice, ast.JoinedStr))


def _is_range(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
        and node.func.id == "range" and not node.keywords \
        and not any(isinstance(a, ast.Starred) for a in node.args)


def _reads_state_metadata_only(node: ast.AST, state_name: str) -> bool:
    """No state read but an entry's device, dtype or shape (`torch.zeros([]).to(
    state["exp_avg"].device)`, timm's NvNovoGrad: made just before, in the same order
    in preinitialize)."""
    metadata = {id(n.value.value) for n in ast.walk(node)
                if isinstance(n, ast.Attribute) and n.attr in ("device", "dtype", "shape")
                and isinstance(n.value, ast.Subscript) and isinstance(n.value.value, ast.Name)}
    return all(id(n) in metadata for n in ast.walk(node)
               if isinstance(n, ast.Name) and n.id == state_name)


def _under_gradient_test(statement: ast.stmt, state_name: str, gradients: set[str]
                         ) -> list[ast.stmt] | None:
    """The creations of `if <a test of the gradient's metadata>: <creations>` (no
    `else`), to be made unconditionally; of `if grad.is_sparse: ... else: <creations>`,
    the dense branch's (the system's gradients are dense; the other branch stays in
    step); None for any other statement."""
    if not (isinstance(statement, ast.If) and not _mentions(statement.test, state_name)):
        return None
    dense = _dense_branch(statement, gradients)
    if dense is not None:
        return list(dense) if all(_only_creates(s, state_name) for s in dense) else None
    if not (not statement.orelse
            and _mentions_grad(statement.test) and _reads_grad_metadata_only(statement.test)
            and all(_only_creates(s, state_name) for s in statement.body)):
        return None
    return list(statement.body)


def _dense_branch(statement: ast.If, gradients: set[str]) -> list[ast.stmt] | None:
    """The branch of `if grad.is_sparse:` (or `if not grad.is_sparse:`) that a dense
    gradient takes; None for any other test, or an empty branch."""
    test, negated = statement.test, False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negated = test.operand, True
    if not (isinstance(test, ast.Attribute) and test.attr == "is_sparse"
            and (isinstance(test.value, ast.Name) and test.value.id in gradients
                 or isinstance(test.value, ast.Attribute) and test.value.attr == "grad")):
        return None
    branch = statement.body if negated else statement.orelse
    return branch or None


def _reads_grad_metadata_only(node: ast.AST) -> bool:
    """Every `.grad` in `node` is read for its layout, shape, dtype or device only
    (`p.grad.is_sparse`, `p.grad.dim()`)."""
    metadata = {id(n.value) for n in ast.walk(node) if isinstance(n, ast.Attribute)
                and n.attr in _SHAPE_ATTRIBUTES | {"is_sparse"}}
    return all(id(n) in metadata for n in ast.walk(node)
               if isinstance(n, ast.Attribute) and n.attr == "grad")


# Calls and attributes of a tensor that give only its shape, dtype or device.
_LIKE_CREATIONS = frozenset({"zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
                             "randn_like"})
# `g.new_zeros(shape)` takes only the dtype and device of `g`.
_NEW_CREATIONS = frozenset({"new_zeros", "new_ones", "new_empty", "new_full"})
_SHAPE_ATTRIBUTES = frozenset({"dtype", "device", "shape", "ndim", "is_complex", "size", "dim",
                               "numel", "layout"})


def _cast_gradients(candidates: list[ast.stmt], param: str, loop: ast.For,
                    function: ast.AST, before: int) -> dict[str, tuple[ast.Assign, list[ast.If]]]:
    """Names bound to the parameter's gradient (`grad = p.grad`, one of `candidates`)
    and, before line `before`, bound again only by casts to float32 under tests of its
    own dtype (`if grad.dtype in {torch.float16, torch.bfloat16}: grad = grad.float()`,
    in the loop's body): each with its binding and those `if`s."""
    found = {}
    for statement in candidates:
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
                and isinstance(statement.value, ast.Attribute)
                and statement.value.attr == "grad"
                and isinstance(statement.value.value, ast.Name)
                and statement.value.value.id == param):
            continue
        name = statement.targets[0].id
        stores = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == name
                  and not isinstance(n.ctx, ast.Load)]
        if any(n.lineno > before for n in stores) or len(stores) < 2:
            continue
        tests = [s for s in loop.body if isinstance(s, ast.If) and s.lineno < before
                 and any(isinstance(n, ast.Name) and n.id == name
                         and not isinstance(n.ctx, ast.Load) for n in ast.walk(s))]

        def is_cast(test: ast.If) -> bool:
            shape_only = {id(n) for n in _shape_only_uses(test.test, {name}, param)}
            reads = [n for n in ast.walk(test.test) if isinstance(n, ast.Name) and n.id == name]
            cast = test.body[0] if len(test.body) == 1 else None
            return not test.orelse and reads and all(id(n) in shape_only for n in reads) \
                and isinstance(cast, ast.Assign) and len(cast.targets) == 1 \
                and isinstance(cast.targets[0], ast.Name) and cast.targets[0].id == name \
                and ast.unparse(cast.value) in (f"{name}.float()", f"{name}.to(torch.float32)")

        if len(stores) == 1 + len(tests) and all(is_cast(t) for t in tests):
            found[name] = (statement, tests)
    return found


def _gradient_names(candidates: list[ast.Assign], param: str,
                    function: ast.FunctionDef) -> set[str]:
    """Names bound to the parameter's gradient (`grad = p.grad`) in the loop and never
    bound to anything else in the function."""
    stores: dict[str, int] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            stores[node.id] = stores.get(node.id, 0) + 1
    names = set()
    for statement in candidates:
        value = statement.value
        targets = _targets(statement)
        if len(targets) == 1 and isinstance(targets[0], ast.Name) \
                and isinstance(value, ast.Attribute) and value.attr == "grad" \
                and isinstance(value.value, ast.Name) and value.value.id == param \
                and stores.get(targets[0].id) == 1:
            names.add(targets[0].id)
    return names


def _shape_only_uses(statement: ast.AST, gradients: set[str], param: str | None
                     ) -> list[ast.expr]:
    """The uses of a gradient name (or `p.grad`; of any name when `param` is None) in
    `statement` that read only its shape,
    dtype or device: `torch.zeros_like(grad)`, `grad.dtype`, `grad.size()`."""
    found = []
    parents = {id(c): n for n in ast.walk(statement) for c in ast.iter_child_nodes(n)}
    for node in ast.walk(statement):
        if isinstance(node, ast.Name) and node.id in gradients:
            used = node
        elif isinstance(node, ast.Attribute) and node.attr == "grad" \
                and isinstance(node.value, ast.Name) and param in (None, node.value.id):
            used = node
        else:
            continue
        parent = parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.value is node \
                and (parent.attr in _SHAPE_ATTRIBUTES or parent.attr in _NEW_CREATIONS):
            found.append(used)
        elif isinstance(parent, ast.Call) and parent.args and parent.args[0] is node \
                and isinstance(parent.func, ast.Attribute) and parent.func.attr in _LIKE_CREATIONS:
            found.append(used)
        elif isinstance(parent, ast.Call) and parent.args == [node] and not parent.keywords \
                and isinstance(parent.func, ast.Attribute) \
                and parent.func.attr in ("to", "type_as") and parent.func.value is not node:
            found.append(used)  # (`x.to(grad)`: its dtype and device)
    return found


def _loaded_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)}


def _assigned_names(statement: ast.Assign) -> set[str]:
    return {n.id for t in _targets(statement) for n in ast.walk(t) if isinstance(n, ast.Name)}


def _targets(statement: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return statement.targets if isinstance(statement, ast.Assign) else [statement.target]


def _module_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in statement.names}
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(statement.name)
        elif isinstance(statement, ast.Assign):
            names |= {n.id for t in statement.targets for n in ast.walk(t)
                      if isinstance(n, ast.Name)}
    return names
