"""Both branches of a tensor test run; `torch.where` keeps what the test takes.

A traced step has no branches: an `if` on a device tensor must become data flow. Where
the branches change tensors in place (`p.addcdiv_(...)`, `torch._foreach_add_(ps, ...)`,
`foreach_addcdiv_(ps, ...)`, `torch.sub(a, b, out=c)`), each changed tensor is copied
before them, both branches run in turn (the second from the copies), and each tensor
then takes, elementwise, the values of the branch the test chose:

    if not first_step:                      exp_avgs_before = [t.clone() for t in exp_avgs]
        torch._foreach_add_(exp_avgs, gs)   torch._foreach_add_(exp_avgs, gs)
                                     ->     for kept, before in zip(exp_avgs, exp_avgs_before):
                                                kept.copy_(torch.where(c, kept, before))

Names a branch binds that later code reads are selected too. Only where every effect of
the branches is known: in-place ops on tensors that exist before them (or that the
branch made itself), and names bound; a call of anything else as a statement, a `for`,
a `return`, an assignment to an entry or attribute and the like leave the `if` as it is.
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cslint.fixes.apply import Edit
from cslint.semantic.module_index import dotted_name

if TYPE_CHECKING:
    from cslint.port.rewrite import _Rewriter

# In-place by name, but changing more than a tensor's values (its shape, its autograd
# state, other tensors): what a copy taken before cannot restore.
_NOT_VALUES_ONLY = frozenset({
    "resize_", "resize_as_", "set_", "as_strided_", "squeeze_", "unsqueeze_", "t_",
    "transpose_", "swapdims_", "swapaxes_", "detach_", "requires_grad_", "share_memory_",
    "clip_grad_norm_", "clip_grad_value_", "backward", "register_hook", "retain_grad"})

# torch functions whose result shares memory with an argument (changing it in place
# would change the argument).
TORCH_VIEWS = frozenset({
    "view_as_real", "view_as_complex", "squeeze", "unsqueeze", "t", "transpose", "narrow",
    "select", "as_strided", "reshape", "flatten", "movedim", "moveaxis", "permute",
    "diagonal", "unbind", "split", "chunk", "tensor_split", "detach", "real", "imag",
    "swapaxes", "swapdims", "unflatten", "atleast_1d", "atleast_2d", "atleast_3d",
    "broadcast_to", "expand_copy", "as_tensor", "asarray", "from_numpy"})

# Python values `torch.where` cannot select between.
_NOT_SELECTABLE = (ast.Tuple, ast.Set, ast.Dict, ast.DictComp, ast.SetComp,
                   ast.GeneratorExp, ast.JoinedStr, ast.Lambda)

_EXPLANATION = "# cslint port: both branches run; torch.where keeps the taken one's values"


def is_in_place(name: str) -> bool:
    """`add_`, `_foreach_mul_`, `foreach_addcdiv_`: PyTorch's mark of an op that changes
    its receiver (or first argument) in place."""
    return name.endswith("_") and not name.endswith("__") and name not in ("_",)


@dataclass
class _Branch:
    """What one branch does: the tensors and lists of tensors it changes in place (by
    their code), the names it binds (at its top level, with the values; deeper, in
    `maybe`), and the names it reads before binding them."""

    tensors: dict[str, ast.expr] = field(default_factory=dict)
    lists: dict[str, ast.expr] = field(default_factory=dict)
    bound: dict[str, list[ast.expr]] = field(default_factory=dict)
    maybe: set[str] = field(default_factory=set)
    fresh: set[str] = field(default_factory=set)  # bound to a new tensor or list
    reads_first: set[str] = field(default_factory=set)
    # Places (by key) changed where the branch surely runs, and only under a test of
    # its own (which may not exist where that test fails: `state["max_sq"]`); how a
    # place reads where it surely exists.
    surely: set[str] = field(default_factory=set)
    maybe_changed: set[str] = field(default_factory=set)
    entries: set[str] = field(default_factory=set)  # lists read as `d.get(key, [])`
    display: dict[str, str] = field(default_factory=dict)

    @property
    def all_bound(self) -> set[str]:
        return set(self.bound) | self.maybe


class _Scan:
    """The effects of a branch's statements, or None (`failed`) where one is unknown."""

    def __init__(self, modules: set[str], code, helpers: "Helpers | None" = None,
                 owner: ast.ClassDef | None = None):
        self.modules = modules  # the names of imported modules (`torch`, `math`, `F`)
        self.code = code  # a node's source text
        self.helpers = helpers
        self.owner = owner  # the class whose method holds the branches
        self.elements: dict[str, ast.expr] = {}  # a loop's variable -> the list it walks
        self.conditional = 0  # how many tests of the branch's own the scan is under
        self.failed = False

    def branch(self, statements: list[ast.stmt]) -> _Branch | None:
        found = _Branch()
        self._block(statements, found, nested=False)
        return None if self.failed else found

    def _block(self, statements: list[ast.stmt], found: _Branch, nested: bool) -> None:
        for statement in statements:
            if self.failed:
                return
            found.reads_first |= {n.id for n in ast.walk(statement)
                                  if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                                  and n.id not in found.all_bound}
            if isinstance(statement, ast.Pass) or (
                    isinstance(statement, ast.Expr)
                    and isinstance(statement.value, ast.Constant)):
                continue
            if isinstance(statement, (ast.Assign, ast.AnnAssign)):
                self._assignment(statement, found, nested)
            elif isinstance(statement, ast.AugAssign):
                # `x += y` on a tensor changes it in place: only one the branch made.
                target = statement.target
                if not (isinstance(target, ast.Name) and target.id in found.fresh
                        and self._reads_only(statement.value)):
                    self.failed = True
            elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
                self._call_statement(statement.value, found)
            elif isinstance(statement, ast.If):
                if not self._reads_only(statement.test):
                    self.failed = True
                    return
                self.conditional += 1
                # A place changed on both sides of an `if`/`else` exists either way: as
                # sure as one changed beside the `if`.
                held = found.maybe_changed
                found.maybe_changed = set()
                self._block(statement.body, found, nested=True)
                in_body, found.maybe_changed = found.maybe_changed, set()
                self._block(statement.orelse, found, nested=True)
                in_else = found.maybe_changed
                both = in_body & in_else if statement.orelse else set()
                found.maybe_changed = held | (in_body | in_else) - both
                (found.surely if self.conditional == 1 else found.maybe_changed).update(both)
                self.conditional -= 1
            elif isinstance(statement, ast.For) and not statement.orelse and \
                    (pairs := _element_pairs(statement)) is not None and \
                    all(_place_root(iterable) is not None
                        and _place_root(iterable).id not in found.all_bound
                        for _, iterable in pairs):
                # `for g in grads: g.sigmoid_()` changes the list's tensors; so does
                # `for m, g in zip(moments, grads): m.lerp_(g, w)`, the moments'.
                for name, iterable in pairs:
                    found.maybe.add(name)
                    self.elements[name] = iterable
                self._block(statement.body, found, nested=True)
                for name, _ in pairs:
                    del self.elements[name]
            else:
                self.failed = True

    def _assignment(self, statement: ast.Assign | ast.AnnAssign, found: _Branch,
                    nested: bool) -> None:
        value = statement.value
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        names: list[str] = []
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, (ast.Subscript, ast.Attribute, ast.Starred)):
                    self.failed = True  # an entry or attribute outlives the branch
                    return
                if isinstance(node, ast.Name):
                    names.append(node.id)
        if value is None or not self._reads_only(value, allow_new=True):
            self.failed = True
            return
        for call in (n for n in ast.walk(value) if isinstance(n, ast.Call)):
            changed = self._helper_changes(call)
            if changed:
                self._record(changed, found)
        single = len(targets) == 1 and isinstance(targets[0], ast.Name)
        for name in names:
            if nested:
                found.maybe.add(name)
            else:
                found.bound.setdefault(name, []).append(value if single else None)
            if single and self._fresh(value, found.fresh):
                found.fresh.add(name)
            else:
                found.fresh.discard(name)

    def _call_statement(self, call: ast.Call, found: _Branch) -> None:
        changed = self._changes(call)
        if changed is None:
            changed = self._helper_changes(call)
        if changed is None:
            self.failed = True
            return
        self._record(changed, found)

    def _helper_changes(self, call: ast.Call) -> list[tuple[ast.expr, str]] | None:
        """What a call of one of the project's functions changes (`Helpers`)."""
        if self.helpers is None:
            return None
        return self.helpers.changes(call, self.owner)

    def _record(self, changed: list[tuple[ast.expr, str]], found: _Branch) -> None:
        for node, kind in changed:
            if isinstance(node, ast.Name) and node.id in self.elements:
                node, kind = self.elements[node.id], "list"
            if isinstance(node, ast.Name) and node.id in found.fresh:
                continue  # a tensor the branch made: nothing outside it changes
            base = _place_root(node)
            if base is None or base.id in found.all_bound:
                self.failed = True  # not a place, or one that aliases what the branch bound
                return
            places = found.lists if kind == "list" else found.tensors
            other = found.tensors if kind == "list" else found.lists
            code = self.code(node)
            entry = _entry(node, self.code) if kind == "list" else None
            if entry is not None:
                # One list however it is read: `d["k"]` or `d.get("k", [])`.
                if isinstance(node, ast.Subscript) and not self.conditional:
                    found.display.setdefault(entry, code)
                found.entries.add(entry)
                code = entry
            if code in other:
                self.failed = True
                return
            places.setdefault(code, node)
            (found.maybe_changed if self.conditional else found.surely).add(code)

    def _changes(self, call: ast.Call) -> list[tuple[ast.expr, str]] | None:
        """What a call made as a statement changes in place: [(place, "tensor" | "list")];
        None when it may do anything else."""
        outputs = [k.value for k in call.keywords if k.arg == "out"]
        if any(k.arg is None for k in call.keywords) or \
                any(isinstance(a, ast.Starred) for a in call.args):
            return None
        dotted = dotted_name(call.func)
        if dotted is not None and dotted.split(".")[0] in self.modules:
            # A module's function: `torch._foreach_add_(xs, ...)`, `foreach_lerp_(xs, ...)`.
            name = dotted.rsplit(".", 1)[-1]
            arguments = call.args[1:] if is_in_place(name) else call.args
            if name in _NOT_VALUES_ONLY or not all(
                    self._reads_only(a) for a in (*arguments, *(k.value for k in call.keywords
                                                              if k.arg != "out"))):
                return None
            kind = "list" if "foreach" in name else "tensor"
            changed = [(o, kind) for o in outputs]
            if is_in_place(name):
                if not call.args:
                    return None
                changed.append((call.args[0], kind))
            elif not outputs and dotted.split(".")[0] not in self._pure_modules():
                return None  # a helper of the project's, called for what it does
            return changed
        if isinstance(call.func, ast.Name):
            name = call.func.id
            if not is_in_place(name) or name in _NOT_VALUES_ONLY or not call.args or \
                    not all(self._reads_only(a) for a in
                            (*call.args[1:], *(k.value for k in call.keywords))):
                return None
            kind = "list" if "foreach" in name else "tensor"
            return [(call.args[0], kind)] + [(o, kind) for o in outputs]
        # A chain of methods, run innermost first: `x.mul_(b).add_(g)` changes `x`;
        # `x.sqrt().add_(e)` changes a new tensor only.
        chain: list[ast.Call] = []
        node: ast.expr = call
        while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            chain.append(node)
            node = node.func.value
        if isinstance(node, ast.Call) or outputs:
            return None
        changed: list[tuple[ast.expr, str]] = []
        receiver = "place"
        for link in reversed(chain):
            method = link.func.attr
            if any(k.arg is None for k in link.keywords) or not all(
                    self._reads_only(a) for a in (*link.args, *(k.value for k in link.keywords))):
                return None
            if is_in_place(method) and not method.startswith("_"):
                if method in _NOT_VALUES_ONLY or receiver == "view":
                    return None
                if receiver == "place" and not changed:
                    changed.append((node, "tensor"))
            elif method in ALLOCATING_METHODS:
                receiver = "new"
            else:
                receiver = "view"  # a method that may give its receiver or a view of it
        return changed or None  # (a method call for what else it does: unknown)

    def _pure_modules(self) -> set[str]:
        return {"torch", "math", "F", "np", "numpy", "operator"} & self.modules

    def _reads_only(self, node: ast.expr, allow_new: bool = False) -> bool:
        """Whether evaluating `node` changes nothing that exists outside it: no
        assignment expression, yield or lambda, no in-place op (except, with
        `allow_new`, on a tensor the expression itself made: `x.sqrt().add_(e)`), no
        `out=`."""
        for child in ast.walk(node):
            if isinstance(child, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await,
                                  ast.Lambda)):
                return False
            if not isinstance(child, ast.Call):
                continue
            if any(k.arg == "out" for k in child.keywords):
                return False
            func = child.func
            name = func.attr if isinstance(func, ast.Attribute) else \
                func.id if isinstance(func, ast.Name) else ""
            if not is_in_place(name):
                continue
            receiver = func.value if isinstance(func, ast.Attribute) else None
            if isinstance(receiver, ast.Name) and receiver.id in self.modules:
                return False  # `torch._foreach_add_(...)` inside an expression
            if not (allow_new and receiver is not None and self._fresh(receiver, set())):
                return False
        return True

    def _fresh(self, node: ast.expr, fresh: set[str]) -> bool:
        """Whether `node` gives a new tensor (or list of new tensors, or a number):
        changing it in place changes nothing else."""
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
        if isinstance(node, ast.Name):
            return node.id in fresh
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            return True  # arithmetic makes a new tensor (or number)
        if isinstance(node, ast.ListComp):
            return self._fresh(node.elt, fresh)
        if isinstance(node, ast.List):
            return all(self._fresh(e, fresh) for e in node.elts)
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        dotted = dotted_name(func)
        if dotted is not None and dotted.split(".")[0] in self._pure_modules():
            name = dotted.rsplit(".", 1)[-1]
            return name not in TORCH_VIEWS and not is_in_place(name)
        if isinstance(func, ast.Attribute):
            if func.attr in ALLOCATING_METHODS:
                return True
            if is_in_place(func.attr) and not func.attr.startswith("_"):
                return self._fresh(func.value, fresh)  # `x.sqrt().add_(e)`: still new
        return False


# Tensor methods whose result is a new tensor (never their receiver or a view of it).
ALLOCATING_METHODS = frozenset({
    "reciprocal", "sqrt", "rsqrt", "clone", "add", "sub", "mul", "div", "abs", "exp", "log",
    "neg", "pow", "square", "sign", "sigmoid", "tanh", "lerp", "addcmul", "addcdiv",
    "clamp", "maximum", "minimum", "norm", "sum", "mean",
    "clamp_min", "clamp_max", "true_divide", "mm", "matmul", "bmm", "outer", "max", "min",
    "amax", "amin", "std", "var", "sgn", "relu", "softmax", "log_softmax", "exp2", "log2",
    "log1p", "expm1", "cos", "sin", "atan", "atan2", "hypot", "floor", "ceil", "round",
    "trunc", "frac", "fmod", "remainder", "prod", "cumsum", "logical_not", "logical_and",
    "logical_or", "eq", "ne", "lt", "le", "gt", "ge", "where", "masked_fill",
    "index_select", "gather", "dot", "cross", "tril", "triu", "new_zeros", "new_ones",
    "new_full", "new_empty", "new_tensor", "zeros_like", "ones_like"})


def _element_pairs(loop: ast.For) -> list[tuple[str, ast.expr]] | None:
    """(name, list) of each loop variable bound to the elements of a list: `for g in
    grads`, `for m, g in zip(moments, grads)` (distinct names); None for other loops."""
    target, iterated = loop.target, loop.iter
    if isinstance(target, ast.Name):
        return [(target.id, iterated)]
    if isinstance(target, ast.Tuple) and isinstance(iterated, ast.Call) \
            and isinstance(iterated.func, ast.Name) and iterated.func.id == "zip" \
            and len(iterated.args) == len(target.elts) \
            and all(isinstance(e, ast.Name) for e in target.elts) \
            and len({e.id for e in target.elts}) == len(target.elts):
        return [(e.id, a) for e, a in zip(target.elts, iterated.args)]
    return None


def both_branches(r: "_Rewriter", statement: ast.If, condition: str) -> Edit | None:
    """The edit that runs both branches of `statement` and selects with `condition`
    (the test as a tensor), or None where the branches' effects are not all known."""
    from cslint.port.rewrite import _LINE_LENGTH, _bound_before, _module_names, \
        _reindented, _unit_indent

    function = r._function_of(statement)
    if function is None:
        return None
    owner = next((a for a in r.ancestors(statement) if isinstance(a, ast.ClassDef)), None)
    scan = _Scan(_module_names(r.tree) | ({"torch"} if r.torch else set()), r.code,
                 r.helpers, owner)
    taken = scan.branch(statement.body)
    other = scan.branch(statement.orelse) if statement.orelse else _Branch()
    if taken is None or other is None:
        return None
    # The second branch must see what was there before the first: not the names the
    # first rebinds.
    if other.reads_first & taken.all_bound:
        return None
    kinds = {**{c: "tensor" for c in (*taken.tensors, *other.tensors)},
             **{c: "list" for c in (*taken.lists, *other.lists)}}
    if {*taken.tensors, *other.tensors} & {*taken.lists, *other.lists}:
        return None  # a place changed as a tensor in one branch, as a list in the other
    places = {**taken.tensors, **taken.lists, **other.tensors, **other.lists}
    surely = taken.surely | other.surely
    entries = taken.entries | other.entries
    if any(key not in surely and key not in entries
           for key in taken.maybe_changed | other.maybe_changed):
        # Changed under a test of the branch's own only: it may not exist (None, a
        # missing entry) where that test fails, and copying it would fail there.
        return None
    display = {**other.display, **taken.display}
    shown = {key: display.get(key, key) for key in places}
    # The test is evaluated once, before either branch changes what it reads.
    test_names = {n.id for n in ast.walk(statement.test) if isinstance(n, ast.Name)}
    changed_roots = {_root(node) for node in places.values()}
    if changed_roots & (taken.all_bound | other.all_bound):
        return None  # the copies are put back through names a branch rebinds
    live = [name for name in sorted(taken.all_bound | other.all_bound)
            if _read_after(function, statement, name)]
    none_before: set[str] = set()  # names None before the `if`, bound where it holds
    for name in live:
        if name in taken.maybe or name in other.maybe:
            return None
        if not (name in taken.bound and name in other.bound):
            if not _bound_before(function, name, statement):
                return None
            if bound_to_none_before(function, name, statement):
                # torch.where cannot keep a None (`de_nom = None` above, set where the
                # test holds): where nothing asks whether it is None, code that reads it
                # reads it where the test held (it would fail on None elsewhere), and the
                # other elements may hold anything: ones. Else the `if` stays.
                if name in other.bound or _tested_for_none(function, name):
                    return None
                none_before.add(name)
        if changed_in_place(function, name):
            return None  # a selected copy would no longer alias what it named
    name_kinds: dict[str, str] = {}
    for name in live:
        values = taken.bound.get(name, []) + other.bound.get(name, [])
        if any(v is None or isinstance(v, _NOT_SELECTABLE) or
               (isinstance(v, ast.Constant) and not isinstance(v.value, (int, float)))
               for v in values):
            return None
        collections = [_is_list(v) for v in values]
        if any(collections) and not all(collections):
            return None
        name_kinds[name] = "list" if all(collections) else "tensor"
    if not places and "list" not in name_kinds.values() and \
            (not live or r._assignment_chain(statement) is not None):
        # Nothing to select; or one value a name in each branch: the assignment
        # selection's to do.
        return None

    fresh_name = fresh_names(function)
    indent = r.indent_of(statement)
    # (The `if t: return` whose rest is selected has no body of its own.)
    unit = _unit_indent(r.text, statement, indent) if statement.body else \
        _unit_indent(r.text, function, r.indent_of(function))
    torch = r.torch
    lines: list[str] = [indent + _EXPLANATION]
    if test_names & (taken.all_bound | other.all_bound | changed_roots) or \
            not isinstance(statement.test, ast.Name):
        chosen = fresh_name("taken")
        lines.append(f"{indent}{chosen} = {condition}")
        condition = chosen
    before: dict[str, str] = {}
    for code, node in places.items():
        before[code] = fresh_name(f"{_stem(node)}_before")
        lines.append(indent + _copy(before[code], shown[code], kinds[code]))
    kept_names: dict[str, str] = {}
    for name in live:
        if (name not in taken.bound or name not in other.bound) and name not in none_before:
            kept_names[name] = fresh_name(f"{name}_before")
            lines.append(f"{indent}{kept_names[name]} = {name}")
    if_comments, else_comments = _header_comments(r, statement)
    lines.extend(indent + comment for comment in if_comments)
    for inner in statement.body:
        lines.extend(_reindented(r, inner, indent))
    selected_places: dict[str, str] = {}  # place -> the name holding the taken values
    selected_names: dict[str, str] = {}
    if statement.orelse:
        first_changed = {**taken.tensors, **taken.lists}
        for code, node in first_changed.items():
            selected_places[code] = fresh_name(f"{_stem(node)}_taken")
            lines.append(indent + _copy(selected_places[code], shown[code], kinds[code]))
        for name in live:
            if name in taken.bound:
                selected_names[name] = fresh_name(f"{name}_taken")
                lines.append(f"{indent}{selected_names[name]} = {name}")
        for code in first_changed:
            lines.extend(indent + line for line in _restore(shown[code], before[code],
                                                            kinds[code], unit))
        lines.extend(indent + comment for comment in else_comments)
        for inner in statement.orelse:
            lines.extend(_reindented(r, inner, indent))  # (an `elif` becomes an `if`)
    for code in places:
        place = shown[code]
        if code in selected_places:
            chosen, otherwise = selected_places[code], place
        elif statement.orelse:
            chosen, otherwise = before[code], place  # changed by the second branch only
        else:
            chosen, otherwise = place, before[code]
        lines.extend(indent + line for line in _select(
            torch, condition, place, chosen, otherwise, kinds[code], unit))
    for name in live:
        chosen = selected_names.get(name, name if not statement.orelse else kept_names.get(name))
        if statement.orelse:
            otherwise = name if name in other.bound else kept_names.get(name)
        else:
            otherwise = kept_names.get(name)
        if name_kinds[name] == "list":
            line = f"{indent}{name} = [{torch}.where({condition}, a, b) "
            pairs = f"for a, b in zip({chosen}, {otherwise})]"
            if len(line) + len(pairs) > _LINE_LENGTH:
                lines.extend([line.rstrip(), " " * (len(indent) + len(name) + 4) + pairs])
            else:
                lines.append(line + pairs)
        else:
            if name in none_before:
                otherwise = f"{torch}.ones_like({chosen})"
            lines.append(f"{indent}{name} = {torch}.where({condition}, {chosen}, {otherwise})")
    start, end = r.span(statement)
    new = "\n".join(lines)
    if not _comments(indent + r.code(statement)) <= _comments(new):
        return None  # a comment (on the `if` or `else` line) would be lost
    new = new[len(indent):]
    newline = "\r\n" if "\r\n" in r.text else "\n"
    return Edit(start, end, new.replace("\n", newline))


def _header_comments(r: "_Rewriter", statement: ast.If) -> tuple[list[str], list[str]]:
    """The comments on the lines of the `if` test (`if t:  # the Adam-style update`) and
    on its `else:` line: each goes above the code of its branch once both run."""
    body_start = statement.body[0].lineno if statement.body else statement.end_lineno + 1
    # (Not the comment lines above the first statement: they go with it.)
    header = "".join(r.source.line_text(n).rstrip("\r\n") + "\n"
                     for n in range(statement.lineno, body_start)
                     if n == statement.lineno
                     or not r.source.line_text(n).lstrip().startswith("#"))
    otherwise = ""
    if statement.body and statement.orelse:
        otherwise = next((line for number in range(statement.body[-1].end_lineno + 1,
                                                    statement.orelse[0].lineno)
                          if (line := r.source.line_text(number)).lstrip().startswith("else")),
                         "")
    return _line_comments(header), _line_comments(otherwise)


def _line_comments(text: str) -> list[str]:
    """The comments of a few lines of code (unindented for the tokenizer), in order."""
    text = text.lstrip(" \t")
    return sorted(_comments(text) - {"\0"}, key=text.find)


def fresh_names(function: ast.AST):
    """A maker of names no name or parameter of `function` has, nor one it made
    before: `taken`, `taken_2`, ..."""
    taken = {n.id for n in ast.walk(function) if isinstance(n, ast.Name)} | \
        {a.arg for a in ast.walk(function) if isinstance(a, ast.arg)}

    def fresh_name(stem: str) -> str:
        candidate, number = stem, 2
        while candidate in taken:
            candidate, number = f"{stem}_{number}", number + 1
        taken.add(candidate)
        return candidate

    return fresh_name


def _copy(name: str, code: str, kind: str) -> str:
    if kind == "list":
        return f"{name} = [t.clone() for t in {code}]"
    return f"{name} = {code}.clone()"


def _restore(code: str, before: str, kind: str, unit: str) -> list[str]:
    if kind == "list":
        return [f"for kept, old in zip({code}, {before}):", f"{unit}kept.copy_(old)"]
    return [f"{code}.copy_({before})"]


def _select(torch: str, condition: str, code: str, chosen: str, otherwise: str, kind: str,
            unit: str) -> list[str]:
    """`code` takes `chosen` where the test holds, else `otherwise` (one of the two is
    `code` itself)."""
    if kind != "list":
        return [f"{code}.copy_({torch}.where({condition}, {chosen}, {otherwise}))"]
    if chosen == code:
        return [f"for kept, old in zip({code}, {otherwise}):",
                f"{unit}kept.copy_({torch}.where({condition}, kept, old))"]
    return [f"for kept, new in zip({code}, {chosen}):",
            f"{unit}kept.copy_({torch}.where({condition}, new, kept))"]


def _entry(node: ast.expr, code) -> str | None:
    """`d.get("k", [])` for a list read as `d["k"]` or `d.get("k", ...)` (a string key)."""
    if isinstance(node, ast.Subscript):
        key, container = node.slice, node.value
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "get" and node.args:
        key, container = node.args[0], node.func.value
    else:
        return None
    if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
        return None
    return f"{code(container)}.get({code(key)}, [])"


def _stem(node: ast.expr) -> str:
    """A name for copies of a place: `p` -> p, `state["slow_buffer"]` -> slow_buffer,
    `p.data` -> p_data."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "get" and node.args:
        return _stem(ast.Subscript(value=node.func.value, slice=node.args[0]))
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and \
            isinstance(node.slice.value, str) and node.slice.value.isidentifier():
        return node.slice.value
    if isinstance(node, ast.Attribute):
        return f"{_stem(node.value)}_{node.attr}"
    return "value"


def _root(node: ast.expr) -> str:
    found = _place_root(node)
    return found.id if found is not None else ""


def _place_root(node: ast.expr) -> ast.Name | None:
    """The name a place is reached from: `p`, `state["slow"]`, `p.data`, and
    `state.get("max_sq", [])` (read again, it gives the same list, or a new empty one
    that nothing else holds); None for anything else."""
    while True:
        if isinstance(node, ast.Name):
            return node
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            node = node.value
        elif isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "get" and not node.keywords and 1 <= len(node.args) <= 2 \
                and isinstance(node.args[0], ast.Constant) and all(
                    isinstance(a, (ast.Constant, ast.List, ast.Tuple)) and
                    not getattr(a, "elts", None) for a in node.args[1:]):
            node = node.func.value
        else:
            return None


def _is_list(node: ast.expr) -> bool:
    if isinstance(node, (ast.List, ast.ListComp)):
        return True
    return isinstance(node, ast.Call) and "_foreach_" in (dotted_name(node.func) or "") \
        and not is_in_place((dotted_name(node.func) or "").rsplit(".", 1)[-1])


def _read_after(function: ast.AST, statement: ast.If, name: str) -> bool:
    """Whether code after `statement` may read `name`: below it in the function, or
    anywhere in a loop around it (the next pass); not in the body of another loop that
    binds it."""
    inside = {id(n) for n in ast.walk(statement)}
    # Another loop that binds the name reads its own values in its body (`for g in
    # grads: ...` after a branch that bound `g`).
    rebound = {id(n) for loop in ast.walk(function)
               if isinstance(loop, (ast.For, ast.AsyncFor)) and id(loop) not in inside
               and id(statement) not in {id(m) for m in ast.walk(loop)}
               and any(isinstance(t, ast.Name) and t.id == name for t in ast.walk(loop.target))
               for part in loop.body for n in ast.walk(part)}
    loads = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == name
             and isinstance(n.ctx, ast.Load) and id(n) not in inside and id(n) not in rebound]
    if any(n.lineno > statement.end_lineno for n in loads):
        return True
    loops = [n for n in ast.walk(function) if isinstance(n, (ast.For, ast.While))
             and id(statement) in {id(s) for s in ast.walk(n)}]
    in_loops = {id(n) for loop in loops for n in ast.walk(loop)}
    # (Loops listed outermost first: the innermost one around a load is its pass.)
    return any(id(n) in in_loops and not _bound_earlier_in_block(
        [loop for loop in loops if any(m is n for m in ast.walk(loop))][-1], n, name)
        for n in loads)


def _bound_earlier_in_block(scope: ast.AST, load: ast.Name, name: str) -> bool:
    """Whether an assignment to `name` comes before `load` in a block of `scope` (a
    loop) that holds it (`step_size = ...` above `p.add_(-step_size * m)`): the load
    reads that pass's own value, not what an earlier pass left."""
    for node in ast.walk(scope):
        for part in ("body", "orelse", "finalbody"):
            block = getattr(node, part, None)
            if not isinstance(block, list):
                continue
            for index, statement in enumerate(block):
                if not any(n is load for n in ast.walk(statement)):
                    continue
                return any(
                    isinstance(earlier, (ast.Assign, ast.AnnAssign)) and any(
                        isinstance(t, ast.Name) and t.id == name
                        for target in (earlier.targets if isinstance(earlier, ast.Assign)
                                       else [earlier.target])
                        for t in ast.walk(target))
                    for earlier in block[:index]) or \
                    _bound_earlier_in_block(statement, load, name)
    return False


def assignments_to(function: ast.AST, names: set[str]) -> list[ast.Assign | ast.AnnAssign]:
    """The assignments in `function` that bind one of `names` (`x = v`, `x: T = v`)."""
    return [n for n in ast.walk(function)
            if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None
            and any(isinstance(t, ast.Name) and t.id in names
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]


def bound_to_none_before(function: ast.AST, name: str, statement: ast.stmt) -> bool:
    """Whether the last assignment to `name` on a line above `statement` binds None."""
    bindings = [n for n in assignments_to(function, {name}) if n.lineno < statement.lineno]
    if not bindings:
        return False
    last = max(bindings, key=lambda n: (n.lineno, n.col_offset))
    return isinstance(last.value, ast.Constant) and last.value.value is None


def _tested_for_none(function: ast.AST, name: str) -> bool:
    """Whether the function compares `name` with None or takes its truth."""
    for node in ast.walk(function):
        if isinstance(node, ast.Compare) and any(
                isinstance(n, ast.Name) and n.id == name for n in [node.left, *node.comparators]) \
                and any(isinstance(n, ast.Constant) and n.value is None
                        for n in [node.left, *node.comparators]):
            return True
        tested = node.test if isinstance(node, (ast.If, ast.While, ast.IfExp)) else \
            node.operand if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) \
            else None
        values = node.values if isinstance(node, ast.BoolOp) else [tested]
        if any(isinstance(v, ast.Name) and v.id == name for v in values):
            return True
    return False


def changed_in_place(function: ast.AST, name: str) -> bool:
    """Whether the function changes what `name` holds in place anywhere: a method
    (`name.add_()`), or a first argument (`torch._foreach_add_(name, ...)`,
    `foreach_add_(name, ...)`); not an argument of another local's method
    (`exp_avg.add_(name)`), which changes that local."""
    locals_ = {n.id for n in ast.walk(function) if isinstance(n, ast.Name)
               and isinstance(n.ctx, ast.Store)} | \
        {a.arg for a in ast.walk(function) if isinstance(a, ast.arg)}
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        method = func.attr if isinstance(func, ast.Attribute) else \
            func.id if isinstance(func, ast.Name) else ""
        if not is_in_place(method):
            continue
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id == name:
            return True
        if isinstance(func, ast.Attribute):
            chained = func.value  # `exp_avg.mul_(b).add_(name)`: exp_avg's method too
            while isinstance(chained, ast.Call) and isinstance(chained.func, ast.Attribute):
                chained = chained.func.value
            receiver = _place_root(chained)
            if receiver is None or (receiver.id in locals_ and receiver.id != "self"):
                # A method of a local tensor or of a new one (`(a - b).add_(name)`): it
                # changes that tensor. (Of a module or `self`: a function, which may
                # change its first argument.)
                continue
        if node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == name:
            return True
    return False


def _comments(code: str) -> set[str]:
    """The comments in a statement's code (its first line unindented)."""
    found: set[str] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.COMMENT:
                found.add(token.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        found.add("\0")  # unreadable: count it as a comment that would be lost
    return found


# ---- what the project's functions change ------------------------------------------------

class Helpers:
    """What a call of one of the project's functions changes in place of what it is
    given: each helper's parameters that it changes (as a tensor or as a list of
    tensors), read from its code (`self.apply_weight_decay(p=p, ...)` changes `p`;
    `self.apply_ams_bound_foreach(ams, sqs, max_sqs, eps)` changes `max_sqs` when asked).
    A helper that may do more (assign an entry or attribute, call what is not known for
    what it does, raise) is not known: None."""

    MAX_DEPTH = 4

    def __init__(self, resolve):
        # resolve(call, owner class node or None, module or None) -> (def node, module,
        # whether the first parameter is bound: self or cls) or None
        self.resolve = resolve
        self._summaries: dict[int, dict[str, str] | None] = {}
        self._open: set[int] = set()

    def changes(self, call: ast.Call, owner: ast.ClassDef | None, module=None,
                depth: int = 0) -> list[tuple[ast.expr, str]] | None:
        if depth > self.MAX_DEPTH or any(isinstance(a, ast.Starred) for a in call.args) \
                or any(k.arg is None for k in call.keywords):
            return None
        found = self.resolve(call, owner, module)
        if found is None:
            return None
        function, its_module, bound_first = found
        summary = self.summary(function, owner, its_module, depth)
        if summary is None:
            return None
        arguments = function.args
        positional = [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
        if bound_first:
            positional = positional[1:]
        given: dict[str, ast.expr] = dict(zip(positional, call.args))
        if len(call.args) > len(positional):
            return None  # into *args
        given.update((k.arg, k.value) for k in call.keywords)
        changed = []
        for name, kind in summary.items():
            argument = given.get(name)
            if argument is None or (isinstance(argument, ast.Constant)
                                    and argument.value is None):
                continue  # its default (or None): nothing of the caller's
            changed.append((argument, kind))
        return changed

    def summary(self, function: ast.FunctionDef, owner: ast.ClassDef | None, module,
                depth: int) -> dict[str, str] | None:
        key = id(function)
        if key in self._summaries:
            return self._summaries[key]
        if key in self._open:
            return None  # recursion: not followed
        self._open.add(key)
        try:
            scan = _HelperScan(function, self, owner, module, depth)
            found = scan.run()
        finally:
            self._open.discard(key)
        self._summaries[key] = found
        return found


class _HelperScan:
    """The parameters one function changes in place, through names that alias them
    (`exp_avgs = state["exp_avg"]`, `for p in params`); None where it may do more."""

    def __init__(self, function: ast.FunctionDef, helpers: Helpers,
                 owner: ast.ClassDef | None, module, depth: int):
        arguments = function.args
        self.function = function
        self.parameters = {a.arg for a in (*arguments.posonlyargs, *arguments.args,
                                          *arguments.kwonlyargs)}
        if arguments.vararg is not None or arguments.kwarg is not None:
            self.parameters.add("\0")  # (their changes are not followed)
        self.helpers = helpers
        self.owner = owner
        self.module = module
        self.depth = depth
        # A local name -> the parameters it may alias, and whether through their elements
        # (a loop's variable).
        self.aliases: dict[str, set[tuple[str, bool]]] = {}
        self.changed: dict[str, str] = {}
        self.failed = False
        self.locals = {n.id for n in ast.walk(function)
                       if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        self.scan = _Scan(_imported_modules(function, module), ast.unparse, None, owner)

    def run(self) -> dict[str, str] | None:
        if "\0" in self.parameters:
            return None
        self._block(self.function.body)
        return None if self.failed else self.changed

    def _block(self, statements: list[ast.stmt]) -> None:
        for statement in statements:
            if self.failed:
                return
            if isinstance(statement, ast.Pass) or (
                    isinstance(statement, ast.Expr)
                    and isinstance(statement.value, ast.Constant)):
                continue
            if isinstance(statement, ast.Return):
                if statement.value is not None:
                    self._expression(statement.value)
            elif isinstance(statement, ast.If):
                self._expression(statement.test)
                self._block(statement.body)
                self._block(statement.orelse)
            elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
                self._assignment(statement)
            elif isinstance(statement, ast.AugAssign) and \
                    isinstance(statement.target, ast.Name) and \
                    statement.target.id not in self.parameters and \
                    statement.target.id not in self.aliases:
                self._expression(statement.value)
            elif isinstance(statement, ast.For) and not statement.orelse:
                self._loop(statement)
            elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
                self._call(statement.value)
            else:
                self.failed = True

    def _assignment(self, statement: ast.Assign | ast.AnnAssign) -> None:
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        if statement.value is None:
            return
        self._expression(statement.value)
        names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        if any(isinstance(n, (ast.Subscript, ast.Attribute, ast.Starred))
               for t in targets for n in ast.walk(t)):
            self.failed = True  # an entry or attribute of what it was given, or of self
            return
        reached = set() if self.scan._fresh(statement.value, set()) else \
            self._reached(statement.value)
        for name in names:
            if reached:
                self.aliases[name] = reached
            else:
                self.aliases.pop(name, None)

    def _loop(self, loop: ast.For) -> None:
        self._expression(loop.iter)
        pairs = _element_pairs(loop)
        if pairs is None:
            self.failed = True
            return
        for target, iterable in pairs:
            reached = {(name, True) for name, _ in self._reached(iterable)}
            if reached:
                self.aliases[target] = reached
            else:
                self.aliases.pop(target, None)
        self._block(loop.body)

    def _reached(self, node: ast.expr) -> set[tuple[str, bool]]:
        """The parameters (and whether through elements) a value may share memory with."""
        found: set[tuple[str, bool]] = set()
        for name in (n.id for n in ast.walk(node) if isinstance(n, ast.Name)):
            if name in self.aliases:
                found |= self.aliases[name]
            elif name in self.parameters:
                found.add((name, False))
        return found

    def _expression(self, node: ast.expr) -> None:
        if not self.scan._reads_only(node, allow_new=True):
            # An in-place op inside an expression: on what?
            for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
                if isinstance(call.func, ast.Attribute) and is_in_place(call.func.attr) \
                        and not self.scan._fresh(call.func.value, set()):
                    self._change(call.func.value, "tensor")
            if any(isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await,
                                  ast.Lambda)) for n in ast.walk(node)) or \
                    any(k.arg == "out" for n in ast.walk(node) if isinstance(n, ast.Call)
                        for k in n.keywords) or \
                    any(isinstance(n, ast.Call) and not isinstance(n.func, ast.Attribute)
                        and is_in_place(getattr(n.func, "id", "")) for n in ast.walk(node)):
                self.failed = True
        for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
            self._nested(call, required=False)

    def _call(self, call: ast.Call) -> None:
        changed = self.scan._changes(call)
        if changed is None:
            self._nested(call, required=True)
            return
        for node, kind in changed:
            self._change(node, kind)

    def _nested(self, call: ast.Call, required: bool) -> None:
        changed = self.helpers.changes(call, self.owner, self.module, self.depth + 1)
        if changed is None:
            if required:
                self.failed = True  # called for what it does, which is not known
            return
        for node, kind in changed:
            self._change(node, kind)

    def _change(self, node: ast.expr, kind: str) -> None:
        root = _place_root(node)
        if root is None:
            self.failed = True
            return
        if root.id in self.parameters and root.id not in self.aliases:
            reached = {(root.id, False)}
        else:
            reached = self.aliases.get(root.id, set())
            if not reached:
                # A new local of its own (or self): changing it changes nothing given,
                # unless it is an attribute of self.
                if root.id == "self" or root.id not in self.locals:
                    self.failed = True
                return
        for name, through_elements in reached:
            changed_kind = "list" if through_elements else kind
            if self.changed.get(name, changed_kind) != changed_kind:
                self.failed = True
                return
            self.changed[name] = changed_kind


def _imported_modules(function: ast.FunctionDef, module) -> set[str]:
    """The module names the helper's code may call functions of."""
    from cslint.port.rewrite import _module_names

    names = {"torch", "math"}
    tree = getattr(module, "tree", None)
    if tree is not None:
        names |= _module_names(tree)
    return names


# ---- entries swapped by a tensor test ------------------------------------------------------

_SWAP_EXPLANATION = "# cslint port: copies of the entries the test swaps, put back below"
_WRITE_BACK_EXPLANATION = "# cslint port: the swapped entries put back"


def swapped_entries(r: "_Rewriter", statement: ast.If, condition: str) -> Edit | None:
    """Entries of one dict swapped by a tensor test, then changed in place (PNM's
    positive-negative momentum, which changes the one or the other each step):

        if step % 2 == 1:                       taken = step % 2 == 1
            pos, neg = state["a"], state["b"]   pos = torch.where(taken, state["a"], state["b"])
        else:                            ->     neg = torch.where(taken, state["b"], state["a"])
            pos, neg = state["b"], state["a"]   ... (the code that changes pos, neg)
        ... (pos.lerp_(g, w))                   state["a"].copy_(torch.where(taken, pos, neg))
                                                state["b"].copy_(torch.where(taken, neg, pos))

    and `if t: d["a"], d["b"] = d["b"], d["a"]` of a dict of lists of tensors (the
    foreach form), each list selected element by element. The write-back ends the block
    that holds the `if` (before its last statement where that is a `continue`). Only
    where nothing after the `if` in that block leaves it early, rebinds the names but as
    the same tensors (`p, pos = self.view_as_real(p, pos)`), rebinds the dict, or reads
    the entries themselves (the per-name form), and where a dict of lists is one by a
    return annotation (`dict[str, list[Tensor]]`)."""
    from cslint.port.rewrite import _newline, _unit_indent

    block = r._block_of(statement)
    if block is None:
        return None
    at = next(i for i, s in enumerate(block) if s is statement)
    after = block[at + 1:]
    closing = after[-1] if after and isinstance(after[-1], ast.Continue) else None
    middle = after[:-1] if closing is not None else after
    if any(isinstance(n, (ast.Return, ast.Break, ast.Continue, ast.Yield, ast.YieldFrom))
           for s in middle for n in ast.walk(s)):
        return None
    aliases = _aliased_entries(statement)
    swapped = _swapped_lists(r, statement) if aliases is None else None
    if aliases is None and swapped is None:
        return None
    container, picks = aliases if aliases is not None else swapped
    if any(isinstance(n, ast.Name) and n.id == container and isinstance(n.ctx, ast.Store)
           for s in middle for n in ast.walk(s)):
        return None
    keys = sorted({key for key, _ in picks.values()})
    if aliases is not None and (
            any(_reads_entry(s, container, keys) for s in middle)
            or not all(_keeps_names(s, set(picks)) for s in middle)):
        return None

    fresh_name = fresh_names(r._function_of(statement) or statement)
    # Each entry as the file writes it (its quotes).
    entry = {_entry_key(n): r.code(n) for n in ast.walk(statement)
             if _entry_key(n) in keys}
    torch = r.torch
    indent = r.indent_of(statement)
    unit = _unit_indent(r.text, statement, indent)
    chosen = fresh_name("taken")
    lines = [indent + _SWAP_EXPLANATION, f"{indent}{chosen} = {condition}"]
    back: list[str] = [indent + _WRITE_BACK_EXPLANATION]
    if aliases is not None:
        for name, (first, second) in picks.items():
            lines.append(f"{indent}{name} = {torch}.where({chosen}, {entry[first]}, "
                         f"{entry[second]})")
        for key in keys:
            if_taken = next(n for n, (first, _) in picks.items() if first == key)
            otherwise = next(n for n, (_, second) in picks.items() if second == key)
            back.append(f"{indent}{entry[key]}.copy_({torch}.where({chosen}, "
                        f"{if_taken}, {otherwise}))")
    else:
        kept = {key: fresh_name(f"{key}_kept" if key.isidentifier() else "kept")
                for key in keys}
        lines.extend(f"{indent}{kept[key]} = {entry[key]}" for key in keys)
        for key in keys:
            source = picks[key][0]  # the entry whose list `key` holds where the test holds
            lines.append(f"{indent}{entry[key]} = [{torch}.where({chosen}, b, a) "
                         f"for a, b in zip({kept[key]}, {kept[source]})]")
        for key in keys:
            holder = next(k for k in keys if picks[k][0] == key)
            back.append(f"{indent}for kept, a, b in zip({kept[key]}, {entry[key]}, "
                        f"{entry[holder]}):")
            back.append(f"{indent}{unit}kept.copy_({torch}.where({chosen}, b, a))")
    lines = [part for line in lines for part in _wrapped(line)]
    back = [part for line in back for part in _wrapped(line)]
    newline = _newline(r.text)
    start = r.span(statement)[0]
    if middle:
        end = r.span(middle[-1])[1]
        kept_text = r.text[r.span(statement)[1]:end]
        text = newline.join(lines)[len(indent):] + kept_text + newline + newline.join(back)
    else:
        end = r.span(statement)[1]
        text = newline.join(lines + back)[len(indent):]
    if not _comments(indent + r.code(statement)) <= _comments(text):
        return None
    return Edit(start, end, text)  # (its lines joined with the file's line ending)


def _aliased_entries(statement: ast.If) -> tuple[str, dict[str, tuple[str, str]]] | None:
    """For `if t: a, b = d["x"], d["y"] / else: a, b = d["y"], d["x"]` (or one
    assignment a line): ("d", {"a": ("x", "y"), "b": ("y", "x")}), each name with the
    key it holds where the test holds and where it does not; the two branches bind the
    same names to the same keys, each key once. None otherwise."""
    if not statement.orelse:
        return None
    containers: set[str] = set()

    def bindings(block: list[ast.stmt]) -> dict[str, str] | None:
        found: dict[str, str] = {}
        for assignment in block:
            if not (isinstance(assignment, ast.Assign) and len(assignment.targets) == 1):
                return None
            target, value = assignment.targets[0], assignment.value
            pairs = list(zip(target.elts, value.elts)) \
                if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) \
                and len(target.elts) == len(value.elts) else [(target, value)]
            for name, entry in pairs:
                key = _entry_key(entry)
                if not isinstance(name, ast.Name) or key is None or name.id in found:
                    return None
                containers.add(entry.value.id)
                found[name.id] = key
        return found

    first, second = bindings(statement.body), bindings(statement.orelse)
    if not first or second is None or set(first) != set(second) or len(containers) != 1 \
            or sorted(first.values()) != sorted(second.values()) \
            or len(set(first.values())) != len(first) or first == second:
        return None
    return containers.pop(), {name: (first[name], second[name]) for name in first}


def _swapped_lists(r: "_Rewriter", statement: ast.If
                   ) -> tuple[str, dict[str, tuple[str, str]]] | None:
    """For `if t: d["x"], d["y"] = d["y"], d["x"]` where `d` holds lists of tensors:
    ("d", {"x": ("y", "x"), "y": ("x", "y")}), each key with the key whose list it holds
    where the test holds, and its own."""
    if statement.orelse or len(statement.body) != 1:
        return None
    assignment = statement.body[0]
    if not (isinstance(assignment, ast.Assign) and len(assignment.targets) == 1
            and isinstance(assignment.targets[0], ast.Tuple)
            and isinstance(assignment.value, ast.Tuple)
            and len(assignment.targets[0].elts) == len(assignment.value.elts)):
        return None
    targets = [_entry_key(t) for t in assignment.targets[0].elts]
    sources = [_entry_key(v) for v in assignment.value.elts]
    roots = {n.value.id for n in (*assignment.targets[0].elts, *assignment.value.elts)
             if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)}
    if None in targets or None in sources or len(roots) != 1 or \
            sorted(targets) != sorted(sources) or len(set(targets)) != len(targets) or \
            targets == sources:
        return None
    container = roots.pop()
    if not _holds_lists(r, statement, container):
        return None
    return container, {target: (source, target) for target, source in zip(targets, sources)}


def _entry_key(node: ast.expr) -> str | None:
    """"k" of `d["k"]` (a name's entry under a string key)."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    return None


def _holds_lists(r: "_Rewriter", statement: ast.If, container: str) -> bool:
    """Whether `container` is bound, last before `statement`, by unpacking a call of
    the project's whose return annotation gives it as a dict of lists
    (`-> tuple[list[Tensor], list[Tensor], dict[str, list[Tensor]]]`)."""
    function = r._function_of(statement)
    owner = next((a for a in r.ancestors(statement) if isinstance(a, ast.ClassDef)), None)
    if function is None or r.helpers is None:
        return False
    bindings = [n for n in ast.walk(function) if isinstance(n, ast.Assign)
                and n.lineno < statement.lineno and any(
                    isinstance(t, ast.Name) and t.id == container
                    for target in n.targets for t in ast.walk(target))]
    if not bindings:
        return False
    last = max(bindings, key=lambda n: (n.lineno, n.col_offset))
    target = last.targets[0] if len(last.targets) == 1 else None
    if not (isinstance(target, ast.Tuple) and isinstance(last.value, ast.Call)):
        return False
    position = next((i for i, t in enumerate(target.elts)
                     if isinstance(t, ast.Name) and t.id == container), None)
    found = r.helpers.resolve(last.value, owner)
    if found is None or position is None:
        return False
    returns = found[0].returns
    if not (isinstance(returns, ast.Subscript) and _type_name(returns.value) == "tuple"
            and isinstance(returns.slice, ast.Tuple)
            and len(returns.slice.elts) == len(target.elts)):
        return False
    given = returns.slice.elts[position]
    return isinstance(given, ast.Subscript) and _type_name(given.value) == "dict" \
        and isinstance(given.slice, ast.Tuple) and len(given.slice.elts) == 2 \
        and isinstance(given.slice.elts[1], ast.Subscript) \
        and _type_name(given.slice.elts[1].value) == "list"


def _type_name(node: ast.expr) -> str:
    name = (dotted_name(node) or "").rsplit(".", 1)[-1]
    return name.lower() if name in ("Tuple", "Dict", "List") else name


def _reads_entry(statement: ast.stmt, container: str, keys: list[str]) -> bool:
    return any(_entry_key(n) in keys and n.value.id == container for n in ast.walk(statement))


def _keeps_names(statement: ast.stmt, names: set[str]) -> bool:
    """Whether `statement` binds none of `names`, or binds them only as the same tensors
    (`p, pos = self.view_as_real(p, pos)`: each given back where it was passed)."""
    stores = [n for n in ast.walk(statement) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store) and n.id in names]
    if not stores:
        return True
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Tuple)
            and isinstance(statement.value, ast.Call) and not statement.value.keywords):
        return False
    targets, arguments = statement.targets[0].elts, statement.value.args
    return len(targets) == len(arguments) and all(
        isinstance(t, ast.Name) and isinstance(a, ast.Name) and t.id == a.id
        for t, a in zip(targets, arguments) if isinstance(t, ast.Name) and t.id in names)


def _wrapped(line: str) -> list[str]:
    """`line` (generated code) in lines of at most the port's line length where it can
    be: broken after the last `, ` (or before the last ` for `) inside brackets that
    fits, the rest under the innermost open bracket."""
    from cslint.port.rewrite import _LINE_LENGTH

    if len(line) <= _LINE_LENGTH:
        return [line]
    opened: list[int] = []
    quote = ""
    # The break at the fewest open brackets, before ` for ` rather than after `, `, the
    # last of those: (rank, where the rest starts, its indent).
    best: tuple[tuple[int, int, int], int, int] | None = None
    escaped = False
    for at, char in enumerate(line):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "([{":
            opened.append(at)
        elif char in ")]}" and opened:
            opened.pop()
        elif opened and at < _LINE_LENGTH and (line.startswith(", ", at)
                                                or line.startswith(" for ", at)):
            rank = (-len(opened), 1 if char == " " else 0, at)
            if best is None or rank > best[0]:
                best = (rank, at + 2 if char == "," else at + 1, opened[-1] + 1)
    if best is None:
        return [line]
    _, rest, column = best
    return [line[:rest].rstrip(), *_wrapped(" " * column + line[rest:])]
