"""Python counters that traced code changes, and where traced code decides with them.

A value kept between steps (an attribute of the object, a name of an enclosing function
or of the module) that traced code counts up (`self.steps += 1`, `seen.append(batch)`)
holds another number at every step. Where traced code decides with it (a Python `if`,
`while` or conditional expression, a `range` bound, a loop over the list) or hands it to
a torch op, each step records a different graph. On the system the step's Python runs
once to record the graph, so the count also stays frozen at its first value.

A counter is known only by its source: set once to a number (or an empty list) where the
object or scope is made, and changed nowhere but by counting in traced code. A reset
anywhere else (`self.count = 0` in another method, `module.count = 0` in the file, a
`clear()`) may run at every step: then it is not a counter this analysis can name.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Iterable, Iterator

from cslint.semantic.module_index import (
    BLOCK_FIELDS, FunctionInfo, ModuleIndex, dict_entries, dotted_name,
    nodes_under,
)
from cslint.semantic.project import ProjectIndex
from cslint.semantic.tensor_values import TensorValueAnalysis
from cslint.source import python_lines


class Decision(Enum):
    """How traced code decides the graph with a counter."""

    BRANCH = "a Python condition"
    LOOP = "a loop's length"
    OP_ARGUMENT = "an argument of a torch op"


@dataclass(frozen=True)
class StepCounter:
    """A Python value that traced code counts up at every step."""

    written: str  # as the code names it: "self.steps", "seen"
    counting: ast.stmt  # the statement that counts
    function: FunctionInfo  # the traced function the counting is in
    history: bool = False  # a list of past values in the state (`state["queue"]`)


@dataclass(frozen=True)
class CounterDecision:
    """Traced code decides the graph with `counter`: `node` is the condition, the loop's
    iterable or the op's argument that reads it."""

    node: ast.expr
    counter: StepCounter
    decision: Decision
    function: FunctionInfo
    through: str | None = None  # the local name computed from the counter, if read that way


_NESTED_SCOPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef})
# Calls in traced code that only report on the host: a branch whose arms only make them
# records no op.
_REPORTING_CALLS = frozenset({"print", "warn", "debug", "info", "warning", "error",
                              "exception", "critical", "log", "write", "flush"})
_LIST_GROWTH = frozenset({"append", "extend", "insert"})
_LIST_SHRINK = frozenset({"clear", "pop", "remove"})


def _walk_scope(root: ast.AST) -> list[ast.AST]:
    """The nodes of a function's own body (not of functions or classes defined in it)."""
    return nodes_under(root, _NESTED_SCOPES)[1:]


def _is_number(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return (isinstance(node, ast.Constant) and type(node.value) in (int, float))


def _is_empty_list(node: ast.expr) -> bool:
    if isinstance(node, ast.List):
        return not node.elts
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "list" and not node.args and not node.keywords)


# ---- what names the counter ----------------------------------------------------------------

class _Subject:
    """How a counter is written, as a test on nodes (`self.<attribute>`, a bare name,
    `group["<key>"]`), and the words a line that reads it contains."""

    def __init__(self, written: str, matches: Callable[[ast.AST], bool],
                 words: tuple[str, ...]):
        self.written = written
        self.matches = matches
        self.words = words


def _attribute_subject(self_name: str, attribute: str) -> _Subject:
    def matches(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == attribute
                and isinstance(node.value, ast.Name) and node.value.id == self_name)
    return _Subject(f"{self_name}.{attribute}", matches, (attribute,))


def _name_subject(name: str) -> _Subject:
    def matches(node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id == name
    return _Subject(name, matches, (name,))


def _counting(statement: ast.AST, subject: _Subject) -> str | None:
    """"number" when `statement` counts `subject` up or down by a constant, "list" when it
    grows it, else None."""
    if isinstance(statement, ast.AugAssign):
        if (subject.matches(statement.target) and isinstance(statement.op, (ast.Add, ast.Sub))
                and _is_number(statement.value)):
            return "number"
    elif isinstance(statement, ast.Assign):
        value = statement.value
        if (len(statement.targets) == 1 and subject.matches(statement.targets[0])
                and isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Sub))
                and subject.matches(value.left) and _is_number(value.right)):
            return "number"
    elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        func = statement.value.func
        if (isinstance(func, ast.Attribute) and func.attr in _LIST_GROWTH
                and subject.matches(func.value)):
            return "list"
    return None


# A counting statement's text: `+=`, `-=`, a list growing, `x = x + 1`, or an entry set
# from a local that holds it (`group["k"] = k + 1`).
_COUNTING_TEXT = re.compile(r"[-+]=|\.(?:append|extend|insert)\(|^[ \t]*([\w.]+)[ \t]*=[ \t]*\1[ \t]*[-+]"
                            r"|\][ \t]*=[ \t]*\w+[ \t]*[-+][ \t]*\d", re.MULTILINE)


def _counting_candidates(function: FunctionInfo) -> Iterator[tuple[ast.stmt, ast.expr]]:
    """Statements of a function that may count something up, with what they count."""
    text = function.source_text
    if text is not None and _COUNTING_TEXT.search(text) is None:
        return
    for node in function.statements:
        kind = node.__class__
        if kind is ast.AugAssign:
            yield node, node.target
        elif kind is ast.Assign and len(node.targets) == 1:
            yield node, node.targets[0]
        elif (kind is ast.Expr and node.value.__class__ is ast.Call
              and isinstance(node.value.func, ast.Attribute)
              and node.value.func.attr in _LIST_GROWTH):
            yield node, node.value.func.value


def _changed_otherwise(nodes: Iterable[ast.AST], subject: _Subject) -> bool:
    """Whether any of `nodes` sets, deletes or empties `subject` other than by counting."""
    for node in nodes:
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for part in ast.walk(target):
                    hit = subject.matches(part) or (
                        isinstance(part, ast.Subscript) and subject.matches(part.value))
                    if hit and _counting(node, subject) is None:
                        return True
        elif isinstance(node, ast.Delete):
            if any(subject.matches(part) for target in node.targets
                   for part in ast.walk(target)):
                return True
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in _LIST_SHRINK and subject.matches(node.func.value)):
            return True
    return False


# ---- where traced code decides with it -----------------------------------------------------

def _reads_derived(node: ast.AST, derived: dict[str, int]) -> bool:
    """Whether `node` reads a local name, or an entry of a local dict, after a line
    that computed it from the counter."""
    name = _derived_name(node)
    return (name is not None and isinstance(node.ctx, ast.Load)
            and name in derived and node.lineno > derived[name])


def _derived_name(node: ast.AST) -> str | None:
    """`rho` of a name, `state['rho_t']` of an entry of a local dict with a literal
    key (torch-optimizer's AdaBelief keeps `rho_t`, computed from the Python step count,
    in the parameter's state); None for anything else."""
    if node.__class__ is ast.Name:
        return node.id
    if node.__class__ is ast.Subscript and node.value.__class__ is ast.Name \
            and node.slice.__class__ is ast.Constant and isinstance(node.slice.value, str):
        return f"{node.value.id}[{node.slice.value!r}]"
    return None


def _derived_names(nodes: list[ast.AST], hits: list, counting: set[int]) -> dict[str, int]:
    """Local names computed straight from the counter (`scale = beta ** self.steps`), with
    the first line that does so: a read before it sees another value. One step only:
    what is computed from those in turn is mostly tensors, whose ops the first read
    already puts in the graph. `hits`: the spans of the counter's reads."""
    derived: dict[str, int] = {}
    for node in nodes:
        if (isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
                and id(node) not in counting and node.value is not None
                and _contains_any(_span(node.value), hits)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for name in (name for target in targets for name in _bound_names(target)):
                derived[name] = min(derived.get(name, node.lineno), node.lineno)
            for target in targets:
                entry = _derived_name(target) if target.__class__ is ast.Subscript else None
                if entry is not None:
                    derived[entry] = min(derived.get(entry, node.lineno), node.lineno)
    return derived


def _contains_any(span, hits) -> bool:
    start, end = span
    return any(start <= hit_start and hit_end <= end for hit_start, hit_end in hits)


# The expressions a compound statement holds before its blocks.
_HEADER_FIELDS = ("test", "iter", "target", "items", "subject", "type")


def _nodes_on_lines(function: FunctionInfo, words: tuple[str, ...]) -> list[ast.AST]:
    """The nodes of the function's own body on the lines holding one of `words`: simple
    statements whole, compound statements with their headers (the `if` test, the `for`
    iterable)."""
    text = function.source_text
    if text is None:
        return _walk_scope(function.node)
    first = function.node.lineno
    lines = {first + number for number, line in enumerate(text.split("\n"))
             if any(word in line for word in words)}
    found: list[ast.AST] = []
    stack = list(function.node.body)
    while stack:
        statement = stack.pop()
        kind = statement.__class__
        if kind in _NESTED_SCOPES:
            continue
        blocks = BLOCK_FIELDS.get(kind)
        if blocks is None:
            if not lines.isdisjoint(range(statement.lineno, statement.end_lineno + 1)):
                found.extend(nodes_under(statement, _NESTED_SCOPES))
            continue
        for name in blocks:
            stack.extend(getattr(statement, name))
        headers = [part for field in _HEADER_FIELDS
                   for part in _as_list(getattr(statement, field, None))]
        if any(not lines.isdisjoint(range(h.lineno, (h.end_lineno or h.lineno) + 1))
               for h in headers if hasattr(h, "lineno")):
            found.append(statement)
            for header in headers:
                found.extend(nodes_under(header, _NESTED_SCOPES))
    return found


def _as_list(value) -> list:
    if value is None:
        return []
    if isinstance(value, list):  # `with` items
        return [item.context_expr for item in value if isinstance(item, ast.withitem)]
    return [value]


def _span(node: ast.AST) -> tuple[tuple[int, int], tuple[int, int]]:
    return ((node.lineno, node.col_offset),
            (node.end_lineno or node.lineno, node.end_col_offset or node.col_offset))


def _bound_names(target: ast.AST) -> Iterator[str]:
    """The names an assignment target binds (`a`, `a, b`): not the containers an item
    or attribute is stored into (`state["k"] = ...` binds no name)."""
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _bound_names(element)
    elif isinstance(target, ast.Starred):
        yield from _bound_names(target.value)


def _only_reports(statements: list[ast.stmt]) -> bool:
    """Statements that record no op: `pass`, a raise, a print or a log call."""
    for statement in statements:
        if isinstance(statement, (ast.Pass, ast.Raise)):
            continue
        if isinstance(statement, ast.If):  # an `elif` chain of reports
            if _only_reports(statement.body) and _only_reports(statement.orelse):
                continue
            return False
        if isinstance(statement, ast.Expr):
            value = statement.value
            if isinstance(value, ast.Constant):
                continue
            if isinstance(value, ast.Call):
                name = dotted_name(value.func) or ""
                if name.rsplit(".", 1)[-1] in _REPORTING_CALLS:
                    continue
        return False
    return True


def _in_place_method(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr.endswith("_")
            and not func.attr.startswith("_"))


class _DecisionFinder:
    def __init__(self, project: ProjectIndex, module: ModuleIndex):
        self.project = project
        self.module = module
        self._candidates: dict[int, list[tuple[ast.stmt, ast.expr]]] = {}

    def candidates_of(self, function: FunctionInfo) -> list[tuple[ast.stmt, ast.expr]]:
        """`_counting_candidates`, once per function for all its counters."""
        found = self._candidates.get(function.key)
        if found is None:
            found = self._candidates[function.key] = list(_counting_candidates(function))
        return found

    def _is_torch_op(self, func: ast.expr) -> bool:
        if _in_place_method(func):
            return True
        dotted = dotted_name(func)
        if dotted is None:
            return False
        qualified = self.project.qualified_name(self.module, dotted) or ""
        return qualified.startswith("torch.") and not qualified.startswith("torch.optim.")

    def decisions(self, function: FunctionInfo, subject: _Subject, counter: StepCounter,
                  counting: set[int]) -> Iterator[CounterDecision]:
        # Only the lines that name the counter (then also those naming a local computed
        # from it) are walked: the rest of a long step cannot read it.
        nodes = _nodes_on_lines(function, subject.words)
        # Where the function reads the counter: an expression reads it when one of these
        # lies inside it (compared by position: cheaper than walking each expression).
        # A list counts by its length: reading an item (`queue[0]`, a tensor kept from
        # an earlier step) reads no count.
        counts_items = counter.counting.__class__ is ast.Expr
        items = {id(node.value) for node in nodes
                 if node.__class__ is ast.Subscript} if counts_items else ()
        direct = [_span(node) for node in nodes
                  if subject.matches(node) and id(node) not in items]
        if not direct:
            return
        derived = _derived_names(nodes, direct, counting)
        if derived:
            # (An entry's lines are found by its key: `state['rho_t']` by `rho_t`.)
            words = [name.split("[", 1)[1][1:-2] if "[" in name else name for name in derived]
            nodes = _nodes_on_lines(function, (*subject.words, *words))
            hits = direct + [_span(node) for node in nodes if _reads_derived(node, derived)]
        else:
            hits = direct

        def reads(node: ast.AST) -> bool:
            return _contains_any(_span(node), hits)

        def decision(node: ast.expr, kind: Decision) -> CounterDecision:
            while isinstance(node, ast.BoolOp):  # the operand that reads the counter
                node = next(value for value in node.values if reads(value))
            if _contains_any(_span(node), direct):
                return CounterDecision(node, counter, kind, function)
            through = next(_derived_name(part) for part in nodes_under(node)
                           if _reads_derived(part, derived))
            return CounterDecision(node, counter, kind, function, through)

        reporting: set[int] = set()  # nodes inside calls that only report
        op_arguments: list[ast.expr] = []
        for node in nodes:
            if id(node) in counting or id(node) in reporting:
                continue
            kind = node.__class__
            if kind is ast.If or kind is ast.While:
                if reads(node.test) and not (_only_reports(node.body)
                                             and _only_reports(node.orelse)):
                    yield decision(node.test, Decision.BRANCH)
            elif kind is ast.IfExp:
                if reads(node.test):
                    yield decision(node.test, Decision.BRANCH)
            elif kind is ast.comprehension:
                for condition in node.ifs:
                    if reads(condition):
                        yield decision(condition, Decision.BRANCH)
            elif kind is ast.For or kind is ast.AsyncFor:
                if reads(node.iter):
                    yield decision(node.iter, Decision.LOOP)
            elif kind is ast.Call:
                name = (dotted_name(node.func) or "").rsplit(".", 1)[-1]
                if name in _REPORTING_CALLS:
                    reporting.update(id(part) for part in ast.walk(node))
                elif self._is_torch_op(node.func):
                    # A list's length reaches an op only as the list itself
                    # (`torch.stack(queue)`): a local computed from it is mostly an item.
                    op_arguments += [argument for argument in
                                     (*node.args, *(k.value for k in node.keywords))
                                     if (_contains_any(_span(argument), direct)
                                         if counts_items else reads(argument))]
        # Where the count first becomes a constant of the graph: once is enough to say so.
        if op_arguments:
            first = min(op_arguments, key=lambda node: (node.lineno, node.col_offset))
            yield decision(first, Decision.OP_ARGUMENT)


# ---- the counters of a module ------------------------------------------------------------

def counter_decisions(module: ModuleIndex, project: ProjectIndex,
                      tensor_values: TensorValueAnalysis) -> list[CounterDecision]:
    """Where the module's traced code decides the graph with a Python counter it changes,
    in the order of the file."""
    finder = _DecisionFinder(project, module)
    found: dict[int, CounterDecision] = {}
    for info in module.classes.values():
        traced = [method for method in info.methods.values()
                  if method.kind == "method" and tensor_values.walked(method)
                  and method.parameter_names]
        if traced:
            for decision in _attribute_counters(module, project, info, traced, finder):
                found.setdefault(id(decision.node), decision)
            for decision in _entry_counters(module, project, info, traced, finder):
                found.setdefault(id(decision.node), decision)
    # Each with where the scope around it starts (None: the module).
    scopes: list[tuple[FunctionInfo, tuple[int, int] | None]] = list(module.nested_functions)
    scopes += [(function, None) for function in module.functions.values()]
    for function, where in scopes:
        if tensor_values.walked(function):
            # Read only for a candidate counter: most files' trees are not parsed again.
            def enclosing(where=where) -> ast.AST:
                return module.tree if where is None else module.definition_at(*where)

            for decision in _name_counters(function, enclosing, finder):
                found.setdefault(id(decision.node), decision)
    return sorted(found.values(), key=lambda d: (d.node.lineno, d.node.col_offset))


def _attribute_counters(module, project, info, traced, finder) -> Iterator[CounterDecision]:
    """Counters kept on the object: `self.steps += 1` in a traced method."""
    ref = project.ref_for_info(info)
    lineage = [entry.info for entry in project.mro(ref) if entry.info is not None]
    seen: set[str] = set()
    traced_nodes = {method.key for method in traced}
    for method in traced:
        self_name = method.parameter_names[0]
        for statement, target in finder.candidates_of(method):
            if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                    and target.value.id == self_name) or target.attr in seen:
                continue
            subject = _attribute_subject(self_name, target.attr)
            kind = _counting(statement, subject)
            if kind is None:
                continue
            seen.add(target.attr)
            if not _attribute_starts_as(lineage, target.attr, kind):
                continue
            if _attribute_set_elsewhere(module, lineage, target.attr, traced_nodes):
                continue
            counter = StepCounter(subject.written, statement, method)
            for reader in traced:
                if not reader.mentions(target.attr):
                    continue
                reader_subject = _attribute_subject(reader.parameter_names[0], target.attr)
                counting = {id(node) for node, _ in finder.candidates_of(reader)
                            if _counting(node, reader_subject)}
                yield from finder.decisions(reader, reader_subject, counter, counting)


# ---- counters in param groups and optimizer state ---------------------------------------

# Parameter names that hold a param group in a helper of `step` (`_update(self, group)`).
_GROUP_PARAMETERS = frozenset({"group", "param_group"})


def _persistent_dicts(method: FunctionInfo) -> set[str]:
    """Local names of `method` bound to a dict kept between steps: a param group (`for
    group in self.param_groups`, a `group` parameter) or a parameter's state (`state =
    self.state[p]`)."""
    self_name = method.parameter_names[0]
    names = set(_GROUP_PARAMETERS & set(method.parameter_names))
    for node in method.statements:
        kind = node.__class__
        if kind is ast.For and isinstance(node.target, ast.Name) and _is_self_attribute(
                node.iter, self_name, "param_groups"):
            names.add(node.target.id)
        elif (kind is ast.Assign and len(node.targets) == 1
              and isinstance(node.targets[0], ast.Name)
              and isinstance(node.value, ast.Subscript)
              and _is_self_attribute(node.value.value, self_name, "state")):
            names.add(node.targets[0].id)
    return names


def _is_self_attribute(node: ast.AST, self_name: str, attribute: str) -> bool:
    """`self.<attribute>`, or the attribute of an object `self` keeps (`self.
    _base_optimizer.param_groups`: the groups of the optimizer a wrapper wraps, timm's
    Lookahead)."""
    if not (isinstance(node, ast.Attribute) and node.attr == attribute):
        return False
    owner = node.value
    if isinstance(owner, ast.Attribute):
        owner = owner.value
    return isinstance(owner, ast.Name) and owner.id == self_name


def _entry_subject(names: set[str], key: str, aliases: frozenset[str] = frozenset()
                   ) -> _Subject:
    """`group["key"]` for each dict name of `names`, and the local names `aliases` that
    hold it (`k = group["k"]` ... `group["k"] = k + 1`)."""
    def matches(node: ast.AST) -> bool:
        if node.__class__ is ast.Name:
            return node.id in aliases
        return (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                and node.value.id in names and isinstance(node.slice, ast.Constant)
                and node.slice.value == key)
    return _Subject(key, matches, (f"'{key}'", f'"{key}"', *sorted(aliases)))


def _entry_aliases(method: FunctionInfo, names: set[str], key: str) -> frozenset[str]:
    """The local names `method` binds to `<dict>[key]` alone (`k = group["k"]`) and binds
    nowhere else, for a dict of `names`."""
    return frozenset(name for name, (container, entry) in method.entry_aliases.items()
                     if container in names and entry == key)


def _entry_counters(module, project, info, traced, finder) -> Iterator[CounterDecision]:
    """Counters kept in a param group or a parameter's state: `group["step"] += 1`
    (started as a number: `group["step"] = 0` under a first-step check), or a list that
    grows at every step (`queue = state["queue"]` ... `queue.append(grad.clone())`,
    started empty: `state["queue"] = deque(maxlen=k)`)."""
    lineage = None
    seen: set[str] = set()
    traced_nodes = {method.key for method in traced}
    for method in traced:
        names = None
        for statement, target in finder.candidates_of(method):
            if isinstance(target, ast.Name) and statement.__class__ is ast.Expr:
                # A list grown under a local name bound to the entry alone.
                entry = method.entry_aliases.get(target.id)
                if entry is None or entry[1] in seen:
                    continue
                container, key = entry
            elif (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                    and isinstance(target.slice, ast.Constant)
                    and isinstance(target.slice.value, str)) and target.slice.value not in seen:
                container, key = target.value.id, target.slice.value
            else:
                continue
            if names is None:
                names = _persistent_dicts(method)
            if container not in names:
                continue
            subject = _entry_subject(names, key, _entry_aliases(method, names, key))
            kind = _counting(statement, subject)
            if kind is None or (kind == "list" and _grown_where_made(method, statement, key)):
                continue
            seen.add(key)
            if lineage is None:
                ref = project.ref_for_info(info)
                lineage = [entry.info for entry in project.mro(ref) if entry.info is not None]
            if not _entry_starts_as(module, lineage, key, traced_nodes, kind):
                continue
            counter = StepCounter(f"{container}[{key!r}]", statement, method,
                                  history=kind == "list")
            for reader in traced:
                if not (reader.mentions(f"'{key}'") or reader.mentions(f'"{key}"')):
                    continue  # reads no `group["key"]`
                reader_names = names if reader is method else _persistent_dicts(reader)
                if not reader_names:
                    continue
                reader_subject = _entry_subject(reader_names, key,
                                                _entry_aliases(reader, reader_names, key))
                counting = {id(node) for node, _ in finder.candidates_of(reader)
                            if _counting(node, reader_subject)}
                yield from finder.decisions(reader, reader_subject, counter, counting)


def _entry_starts_as(module: ModuleIndex, lineage, key: str, traced: set[tuple],
                     kind: str) -> bool:
    """Whether the class's methods set `<dict>[key]` to a number (the first step's
    `group["step"] = 0`; `kind` "number") or an empty list (`[]`, `deque(maxlen=k)`;
    "list") and to nothing else but by counting: no tensor (`torch.tensor(0.0)`: an
    in-place count on a tensor is no Python counter), no reset at every call of traced
    code, in a method traced code does not run, or in the module's other code; a list
    also emptied nowhere (`.clear()`, `.pop()`: its length may then stay put)."""
    starts = _is_number if kind == "number" else _is_empty_sequence
    any_dict = _Subject(key, lambda node: isinstance(node, ast.Subscript)
                        and isinstance(node.slice, ast.Constant) and node.slice.value == key,
                        (key,))
    started = False
    for info in lineage:
        for name, method in info.methods.items():
            if not method.parameter_names or not (
                    method.mentions(f"'{key}'") or method.mentions(f'"{key}"')):
                continue
            for node in method.statements:
                if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if not any(any_dict.matches(target) for target in targets):
                    continue
                dicts = _subscript_names(targets)
                if _counting(node, _entry_subject(dicts, key,
                                                  _entry_aliases(method, dicts, key))):
                    continue
                if not starts(node.value):
                    if _restores_state(name):
                        continue
                    return False  # a tensor, or a value computed elsewhere
                if method.key not in traced and name not in _CONSTRUCTORS:
                    return False  # a reset that may run before each step
                if method.key in traced and id(node) in _unconditional(method.node):
                    return False  # started afresh at each call
                started = True
            if kind == "list" and _shrinks_entry(method, key):
                return False
    if not started and (kind == "list" or not _in_defaults(lineage, key)):
        return False
    return not _written_outside(module, lineage, key, re.compile(
        rf"\[\s*['\"]{re.escape(key)}['\"]\s*\]\s*=(?!=)"))


def _grown_where_made(method: FunctionInfo, statement: ast.stmt, key: str) -> bool:
    """Whether `statement` grows the list under `key` in the block of an `if` that also
    makes the list (`if len(state) == 0: state["blocks"] = []` ... `state["blocks"].append(
    b)`): it is filled once, where it is made, not at every step."""
    made = [node.lineno for node in method.statements
            if node.__class__ is ast.Assign and _is_empty_sequence(node.value)
            and any(isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)
                    and target.slice.value == key for target in node.targets)]
    if not made:
        return False
    for node in method.statements:
        if node.__class__ is ast.If:
            first, last = node.body[0].lineno, node.body[-1].end_lineno or node.lineno
            if first <= statement.lineno <= last and any(first <= line <= last for line in made):
                return True
    return False


def _is_empty_sequence(node: ast.expr) -> bool:
    """`[]`, `list()`, or a deque made with no items (`deque(maxlen=k)`: it grows to k)."""
    if _is_empty_list(node):
        return True
    return (isinstance(node, ast.Call) and not node.args
            and (dotted_name(node.func) or "").rsplit(".", 1)[-1] == "deque"
            and all(keyword.arg == "maxlen" for keyword in node.keywords))


def _shrinks_entry(method: FunctionInfo, key: str) -> bool:
    """Whether `method` empties or shrinks a list kept under `key` (`state[key].clear()`,
    `history.pop(0)` on a name bound to it)."""
    aliases = {name for name, (_, entry) in method.entry_aliases.items() if entry == key}
    for call in method.calls:
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr in _LIST_SHRINK):
            continue
        owner = func.value
        if (isinstance(owner, ast.Name) and owner.id in aliases) or (
                isinstance(owner, ast.Subscript) and isinstance(owner.slice, ast.Constant)
                and owner.slice.value == key):
            return True
    return False


def _in_defaults(lineage, key: str) -> bool:
    """Whether a class's `__init__` gives `key` a number in the defaults it builds
    (`dict(..., k=0)`, `{"k": 0}`, or a parameter whose default is a number): each param
    group starts the count there."""
    for info in lineage:
        init = info.methods.get("__init__")
        if init is None or not init.mentions(key):
            continue
        arguments = init.node.args
        positional = [*arguments.posonlyargs, *arguments.args]
        numbers = {a.arg for a, d in zip(positional[len(positional) - len(arguments.defaults):],
                                         arguments.defaults) if _is_number(d)}
        numbers |= {a.arg for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults)
                    if d is not None and _is_number(d)}

        def number(value: ast.expr) -> bool:
            return _is_number(value) or isinstance(value, ast.Name) and value.id in numbers

        if any(entry == key and number(value) for node in ast.walk(init.node)
               for entry, value in dict_entries(node) or ()):
            return True
    return False


# Methods that run once, when the object is made (the optimizer's state included).
_CONSTRUCTORS = frozenset({"__init__", "preinitialize"})


def _unconditional(function: ast.AST) -> set[int]:
    """The statements a call of `function` always runs (in loops too): not under an
    `if`, `while`, `match` or exception handler."""
    found: set[int] = set()
    stack = list(function.body)
    while stack:
        node = stack.pop()
        found.add(id(node))
        if isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
            stack.extend(node.body)
        elif isinstance(node, ast.Try):
            stack.extend(node.body)
            stack.extend(node.finalbody)
    return found


def _subscript_names(targets) -> set[str]:
    return {target.value.id for target in targets
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)}


def _attribute_starts_as(lineage, attribute: str, kind: str) -> bool:
    """Whether the class (or a base in the project) starts the attribute as a number or
    an empty list: in `__init__`, or in the class body."""
    starts = _is_number if kind == "number" else _is_empty_list
    for info in lineage:
        for item in info.node.body:
            if (isinstance(item, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == attribute for t in item.targets)):
                return starts(item.value)
        init = info.methods.get("__init__")
        if init is None or not init.parameter_names:
            continue
        subject = _attribute_subject(init.parameter_names[0], attribute)
        for node in _walk_scope(init.node):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(subject.matches(t) for t in targets):
                    return starts(node.value)
    return False


def _attribute_set_elsewhere(module: ModuleIndex, lineage, attribute: str,
                             traced: set[tuple]) -> bool:
    """A reset that may run at every step: the attribute set other than by counting at
    the top of a traced method (each call starts it afresh), in a method that traced code
    does not run (it may be called before each step), or on any object in the module's
    other code (`model.count = 0`). Left alone: a reset under a condition in traced code
    (the count wraps around, the graph still changes) and a restore from a checkpoint."""
    for info in lineage:
        for name, method in info.methods.items():
            if (name in _CONSTRUCTORS or not method.parameter_names
                    or not method.mentions(attribute)):
                continue
            subject = _attribute_subject(method.parameter_names[0], attribute)
            if method.key in traced:
                unconditional = _unconditional(method.node)
                nodes: Iterable[ast.AST] = [node for node in method.statements
                                            if id(node) in unconditional]
            elif _restores_state(name):
                continue
            else:
                nodes = method.statements
            if _changed_otherwise(nodes, subject):
                return True
    return _set_on_other_objects(module, lineage, attribute)


def _set_on_other_objects(module: ModuleIndex, lineage, attribute: str) -> bool:
    """Whether a line of the module outside the lineage's classes may set, delete or
    empty `<anything>.<attribute>`."""
    return _written_outside(module, lineage, attribute, re.compile(
        rf"\.{re.escape(attribute)}\b\s*(?:[-+*/%&|^]?=(?!=)|\[|\.(?:clear|pop|remove)\()"
        rf"|\bdel\b.*\.{re.escape(attribute)}\b"))


def _written_outside(module: ModuleIndex, lineage, word: str, pattern: re.Pattern) -> bool:
    """Whether a line of the module outside the lineage's classes holds `word` and
    matches `pattern` (a write): read from the text, cheaper than walking the tree, and
    a look-alike only makes the analysis report less. Without the text: assume so."""
    lines = python_lines(module.source_text)
    if not lines:
        return True
    spans = [(info.node.lineno, info.node.end_lineno or info.node.lineno)
             for info in lineage if info.module is module]
    return any(word in line and pattern.search(line)
               and not any(first <= number <= last for first, last in spans)
               for number, line in enumerate(lines, start=1))


def _restores_state(method_name: str) -> bool:
    """`load_state_dict`, `__setstate__`: set the count from a checkpoint, once."""
    return "state_dict" in method_name or "setstate" in method_name


def _name_counters(function: FunctionInfo, enclosing: Callable[[], ast.AST],
                   finder: _DecisionFinder) -> Iterator[CounterDecision]:
    """Counters kept in an enclosing scope (`enclosing()`): `nonlocal steps; steps += 1`,
    or `seen.append(batch)` on a list of the enclosing function or of the module."""
    candidates = [(statement, target) for statement, target in finder.candidates_of(function)
                  if isinstance(target, ast.Name)]
    if not candidates:
        return
    declared: set[str] = set()
    local: set[str] = set(function.parameter_names)
    for node in function.statements:
        kind = node.__class__
        if kind is ast.Nonlocal or kind is ast.Global:
            declared.update(node.names)
        else:
            for target in _binding_targets(node):
                local.update(part.id for part in ast.walk(target) if isinstance(part, ast.Name))
    seen: set[str] = set()
    for statement, target in candidates:
        if target.id in seen:
            continue
        subject = _name_subject(target.id)
        kind = _counting(statement, subject)
        if kind is None:
            continue
        seen.add(target.id)
        # A number is counted in its own scope unless declared nonlocal or global; a list
        # grows where it was made unless the function binds the name itself.
        if (kind == "number") != (target.id in declared) or (
                kind == "list" and target.id in local):
            continue
        if not _name_starts_as(enclosing(), function.node, target.id, kind):
            continue
        counter = StepCounter(subject.written, statement, function)
        counting = {id(node) for node, _ in finder.candidates_of(function)
                    if _counting(node, subject)}
        yield from finder.decisions(function, subject, counter, counting)


def _name_starts_as(enclosing: ast.AST, function: ast.AST, name: str, kind: str) -> bool:
    """Whether `name` is bound once in the enclosing scope, to a number or an empty list,
    and changed nowhere else there (its other functions included) but by counting in
    `function`."""
    subject = _name_subject(name)
    bindings = [node for node in _walk_scope(enclosing)
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For,
                                     ast.With, ast.NamedExpr))
                and any(subject.matches(part) for target in _binding_targets(node)
                        for part in ast.walk(target))]
    if len(bindings) != 1 or not isinstance(bindings[0], (ast.Assign, ast.AnnAssign)):
        return False
    starts = _is_number if kind == "number" else _is_empty_list
    if bindings[0].value is None or not starts(bindings[0].value):
        return False
    others = [node for node in ast.walk(enclosing) if node is not bindings[0]
              and not _inside(node, function)]
    return not _changed_otherwise(others, subject)


def _binding_targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.NamedExpr)):
        return [node.target]
    if isinstance(node, ast.With):
        return [item.optional_vars for item in node.items if item.optional_vars is not None]
    return []


def _inside(node: ast.AST, function: ast.AST) -> bool:
    """Whether `node` lies within `function`'s source span."""
    line = getattr(node, "lineno", None)
    if line is None:
        return False
    return (function.lineno <= line <= (function.end_lineno or function.lineno)
            and (line != function.lineno or node.col_offset >= function.col_offset))
