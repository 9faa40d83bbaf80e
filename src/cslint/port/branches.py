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
_TORCH_VIEWS = frozenset({
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

    @property
    def all_bound(self) -> set[str]:
        return set(self.bound) | self.maybe


class _Scan:
    """The effects of a branch's statements, or None (`failed`) where one is unknown."""

    def __init__(self, modules: set[str], code):
        self.modules = modules  # the names of imported modules (`torch`, `math`, `F`)
        self.code = code  # a node's source text
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
                self._block(statement.body, found, nested=True)
                self._block(statement.orelse, found, nested=True)
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
            self.failed = True
            return
        for node, kind in changed:
            if isinstance(node, ast.Name) and node.id in found.fresh:
                continue  # a tensor the branch made: nothing outside it changes
            base = node
            while isinstance(base, (ast.Subscript, ast.Attribute)):
                if isinstance(base, ast.Subscript) and not isinstance(base.slice, ast.Constant):
                    self.failed = True
                    return
                base = base.value
            if not isinstance(base, ast.Name) or base.id in found.all_bound:
                self.failed = True  # not a place, or one that aliases what the branch bound
                return
            places = found.lists if kind == "list" else found.tensors
            other = found.tensors if kind == "list" else found.lists
            code = self.code(node)
            if code in other:
                self.failed = True
                return
            places.setdefault(code, node)

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
                return None  # a helper of this project's, called for what it does
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
            elif method in _ALLOCATING_METHODS:
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
            return name not in _TORCH_VIEWS and not is_in_place(name)
        if isinstance(func, ast.Attribute):
            if func.attr in _ALLOCATING_METHODS:
                return True
            if is_in_place(func.attr) and not func.attr.startswith("_"):
                return self._fresh(func.value, fresh)  # `x.sqrt().add_(e)`: still new
        return False


# Tensor methods whose result is a new tensor (never their receiver or a view of it).
_ALLOCATING_METHODS = frozenset({
    "reciprocal", "sqrt", "rsqrt", "clone", "add", "sub", "mul", "div", "abs", "exp", "log",
    "neg", "pow", "square", "sign", "sigmoid", "tanh", "lerp", "addcmul", "addcdiv",
    "clamp", "clamp_min", "clamp_max", "maximum", "minimum", "norm", "sum", "mean",
    "sub", "true_divide", "mm", "matmul", "bmm", "outer", "max", "min", "amax", "amin",
    "std", "var", "sign", "sgn", "relu", "softmax", "log_softmax", "exp2", "log2",
    "log1p", "expm1", "cos", "sin", "atan", "atan2", "hypot", "abs", "floor", "ceil",
    "round", "trunc", "frac", "fmod", "remainder", "prod", "cumsum", "logical_not",
    "logical_and", "logical_or", "eq", "ne", "lt", "le", "gt", "ge", "where",
    "masked_fill", "index_select", "gather", "dot", "cross", "tril", "triu",
    "new_zeros", "new_ones", "new_full", "new_empty", "new_tensor", "zeros_like",
    "ones_like"})


def both_branches(r: "_Rewriter", statement: ast.If, condition: str) -> Edit | None:
    """The edit that runs both branches of `statement` and selects with `condition`
    (the test as a tensor), or None where the branches' effects are not all known."""
    from cslint.port.rewrite import _LINE_LENGTH, _bound_before, _module_names, \
        _reindented, _unit_indent

    function = r._function_of(statement)
    if function is None:
        return None
    scan = _Scan(_module_names(r.tree) | ({"torch"} if r.torch else set()), r.code)
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
    # The test is evaluated once, before either branch changes what it reads.
    test_names = {n.id for n in ast.walk(statement.test) if isinstance(n, ast.Name)}
    changed_roots = {_root(node) for node in places.values()}
    live = [name for name in sorted(taken.all_bound | other.all_bound)
            if _read_after(function, statement, name)]
    for name in live:
        if name in taken.maybe or name in other.maybe:
            return None
        if not (name in taken.bound and name in other.bound) and \
                not _bound_before(function, name, statement):
            return None
        if _changed_in_place(function, name):
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
    if not places and "list" not in name_kinds.values():
        return None  # names of tensors or numbers only: the assignment selection's to do

    taken_names = {n.id for n in ast.walk(function) if isinstance(n, ast.Name)} | \
        {a.arg for a in ast.walk(function) if isinstance(a, ast.arg)}

    def fresh_name(stem: str) -> str:
        candidate, number = stem, 2
        while candidate in taken_names:
            candidate, number = f"{stem}_{number}", number + 1
        taken_names.add(candidate)
        return candidate

    indent = r.indent_of(statement)
    unit = _unit_indent(r.text, statement, indent)
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
        lines.append(indent + _copy(before[code], code, kinds[code]))
    kept_names: dict[str, str] = {}
    for name in live:
        if name not in taken.bound or name not in other.bound:
            kept_names[name] = fresh_name(f"{name}_before")
            lines.append(f"{indent}{kept_names[name]} = {name}")
    for inner in statement.body:
        lines.extend(_reindented(r, inner, indent))
    selected_places: dict[str, str] = {}  # place -> the name holding the taken values
    selected_names: dict[str, str] = {}
    if statement.orelse:
        first_changed = {**taken.tensors, **taken.lists}
        for code, node in first_changed.items():
            selected_places[code] = fresh_name(f"{_stem(node)}_taken")
            lines.append(indent + _copy(selected_places[code], code, kinds[code]))
        for name in live:
            if name in taken.bound:
                selected_names[name] = fresh_name(f"{name}_taken")
                lines.append(f"{indent}{selected_names[name]} = {name}")
        for code in first_changed:
            lines.extend(indent + line for line in _restore(code, before[code], kinds[code],
                                                            unit))
        for inner in statement.orelse:
            moved = _reindented(r, inner, indent)
            if inner is statement.orelse[0] and isinstance(inner, ast.If) and \
                    r.source.line_text(inner.lineno)[inner.col_offset:].startswith("elif"):
                # An `elif` is the second branch's `if`.
                at = next(i for i, line in enumerate(moved) if line.lstrip().startswith("elif"))
                moved[at] = moved[at].replace("elif", "if", 1)
            lines.extend(moved)
    for code in places:
        if code in selected_places:
            chosen, otherwise = selected_places[code], code
        elif statement.orelse:
            chosen, otherwise = before[code], code  # changed by the second branch only
        else:
            chosen, otherwise = code, before[code]
        lines.extend(indent + line for line in _select(
            torch, condition, code, chosen, otherwise, kinds[code], unit))
    for name in live:
        chosen = selected_names.get(name, name if not statement.orelse else kept_names.get(name))
        if statement.orelse:
            otherwise = name if name in other.bound else kept_names[name]
        else:
            otherwise = kept_names[name]
        if name_kinds[name] == "list":
            line = f"{indent}{name} = [{torch}.where({condition}, a, b) "
            pairs = f"for a, b in zip({chosen}, {otherwise})]"
            if len(line) + len(pairs) > _LINE_LENGTH:
                lines.extend([line.rstrip(), " " * (len(indent) + len(name) + 4) + pairs])
            else:
                lines.append(line + pairs)
        else:
            lines.append(f"{indent}{name} = {torch}.where({condition}, {chosen}, {otherwise})")
    start, end = r.span(statement)
    new = "\n".join(lines)
    if not _comments(indent + r.code(statement)) <= _comments(new):
        return None  # a comment (on the `if` or `else` line) would be lost
    new = new[len(indent):]
    newline = "\r\n" if "\r\n" in r.text else "\n"
    return Edit(start, end, new.replace("\n", newline))


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


def _stem(node: ast.expr) -> str:
    """A name for copies of a place: `p` -> p, `state["slow_buffer"]` -> slow_buffer,
    `p.data` -> p_data."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and \
            isinstance(node.slice.value, str) and node.slice.value.isidentifier():
        return node.slice.value
    if isinstance(node, ast.Attribute):
        return f"{_stem(node.value)}_{node.attr}"
    return "value"


def _root(node: ast.expr) -> str:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _is_list(node: ast.expr) -> bool:
    if isinstance(node, (ast.List, ast.ListComp)):
        return True
    return isinstance(node, ast.Call) and "_foreach_" in (dotted_name(node.func) or "") \
        and not is_in_place((dotted_name(node.func) or "").rsplit(".", 1)[-1])


def _read_after(function: ast.AST, statement: ast.If, name: str) -> bool:
    """Whether code after `statement` may read `name`: below it in the function, or
    anywhere in a loop around it (the next pass)."""
    inside = {id(n) for n in ast.walk(statement)}
    loads = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == name
             and isinstance(n.ctx, ast.Load) and id(n) not in inside]
    if any(n.lineno > statement.end_lineno for n in loads):
        return True
    loops = [n for n in ast.walk(function) if isinstance(n, (ast.For, ast.While))
             and id(statement) in {id(s) for s in ast.walk(n)}]
    in_loops = {id(n) for loop in loops for n in ast.walk(loop)}
    return any(id(n) in in_loops for n in loads)


def _changed_in_place(function: ast.AST, name: str) -> bool:
    """Whether the function changes what `name` holds in place anywhere: a method
    (`name.add_()`), or a first argument (`torch._foreach_add_(name, ...)`)."""
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
