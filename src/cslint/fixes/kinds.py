"""The kinds of fix, and the constructors rules attach them to findings with.

A kind is a frozen dataclass of plain values (findings stay picklable) with two methods:
`locate` finds, by exact span, the `ast` call the finding points at, and `rewrite`
returns the libcst replacement of that call (parsed from the call's own code). Rules
build fixes on every check, which must not load libcst, so the methods import it when
they run (only --fix, --diff and SARIF's fixes call them).
"""

from __future__ import annotations

import ast
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, ClassVar, Iterable

from cslint.diagnostics import Fix, Location
from cslint.semantic.torch_api import LAZY_CREATION_SIGNATURES

if TYPE_CHECKING:
    import libcst as cst

    from cslint.fixes.syntax import CallIndex


class NotApplicable(Exception):
    """The located code does not fit the fix; the message says why."""


@dataclass(frozen=True)
class FixContext:
    """What a rewrite needs to know about the module it rewrites."""

    # The module's name for cerebras.pytorch: its own alias, or `cstorch` when
    # `import cerebras.pytorch as cstorch` is added with the fixes.
    cstorch: str
    # Why that import cannot be added (None when it can, or the module has an alias).
    cstorch_problem: str | None


class CallFix(Fix, ABC):
    """A fix that rewrites one call."""

    # The rewrite makes it a call of cerebras.pytorch: the module must import it, and two
    # such rewrites of one call conflict.
    calls_cstorch: ClassVar[bool] = False

    @abstractmethod
    def locate(self, calls: CallIndex, location: Location) -> ast.Call | None:
        """The call this fix rewrites for a finding at exactly `location`; None when
        no call of the file fits."""

    @abstractmethod
    def rewrite(self, call: cst.Call, context: FixContext) -> cst.Call:
        """The replacement of `call`; raises NotApplicable when the fix does not fit it."""


@dataclass(frozen=True)
class ReplaceCall(CallFix):
    """Call `<cstorch>.<target>(...)` instead, dropping, renaming and appending keywords
    (CS401, CS104). `<cstorch>` is the module's alias of `cerebras.pytorch` /
    `cslint.cstorch`, or `cstorch` with `import cerebras.pytorch as cstorch` added."""

    target: str
    drop: tuple[str, ...] = ()
    rename: tuple[tuple[str, str], ...] = ()  # (old keyword, new keyword)
    add: tuple[tuple[str, str], ...] = ()  # (keyword, Python source of its value)

    calls_cstorch = True

    def locate(self, calls: CallIndex, location: Location) -> ast.Call | None:
        # The finding spans the call itself.
        return calls.calls.get(location)

    def rewrite(self, call: cst.Call, context: FixContext) -> cst.Call:
        import libcst as cst

        from cslint.fixes.syntax import punctuate

        if context.cstorch_problem:
            raise NotApplicable(context.cstorch_problem)
        drop = set(self.drop)
        rename = dict(self.rename)
        entries = []
        for index, arg in enumerate(call.args):
            name = arg.keyword.value if arg.keyword is not None else None
            if name in drop:
                continue
            if name in rename:
                arg = arg.with_changes(keyword=cst.Name(rename[name]))
            entries.append((arg, index))
        present = {a.keyword.value for a, _ in entries if a.keyword is not None}
        for name, source in self.add:
            if name in present:
                continue
            entries.append((cst.Arg(value=cst.parse_expression(source), keyword=cst.Name(name),
                                    equal=cst.AssignEqual(
                                        whitespace_before=cst.SimpleWhitespace(""),
                                        whitespace_after=cst.SimpleWhitespace(""))), None))
        return call.with_changes(func=_dotted_expression(f"{context.cstorch}.{self.target}"),
                                 args=punctuate(call.args, entries))


@lru_cache(maxsize=256)
def _dotted_expression(name: str) -> cst.BaseExpression:
    """`a.b.c` as a libcst expression (nodes are immutable: one serves every call)."""
    import libcst as cst

    return cst.parse_expression(name)


@dataclass(frozen=True)
class ScaleFirstArgument(CallFix):
    """`p.add_(g, alpha=a)` -> `p.add_(a * g)`: fold the `keyword=` scale of a Tensor
    method into its first argument (CS205)."""

    method: str
    keyword: str

    def locate(self, calls: CallIndex, location: Location) -> ast.Call | None:
        return _call_with_keyword_at(calls, location, self.method, self.keyword)

    def rewrite(self, call: cst.Call, context: FixContext) -> cst.Call:
        import libcst as cst

        from cslint.fixes.syntax import dotted

        method = self.method
        if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == method):
            raise NotApplicable(f"not a call of {method}()")
        if dotted(call.func.value).split(".")[0] == "torch":
            raise NotApplicable(f"torch.{method}() scales its second argument, not its first")
        return _fold_keyword(call, self.keyword, 0, _scaled)


@dataclass(frozen=True)
class FoldDeprecatedScale(CallFix):
    """`p.add_(-lr, g)` -> `p.add_(-lr * g)`, `p.addcdiv_(s, a, b)` -> `p.addcdiv_(s * a,
    b)`: the scale that the deprecated form of a Tensor method takes first, folded into
    the argument after it (CS205, CS204)."""

    method: str

    def locate(self, calls: CallIndex, location: Location) -> ast.Call | None:
        for call in calls.by_first_argument.get(location, ()):
            if isinstance(call.func, ast.Attribute) and call.func.attr == self.method:
                return call
        return None

    def rewrite(self, call: cst.Call, context: FixContext) -> cst.Call:
        import libcst as cst

        from cslint.fixes.syntax import dotted, punctuate

        method = self.method
        if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == method):
            raise NotApplicable(f"not a call of {method}()")
        if dotted(call.func.value).split(".")[0] == "torch":
            raise NotApplicable(f"torch.{method}() has no deprecated form to fold")
        if len(call.args) < 2 or any(a.star or a.keyword is not None for a in call.args):
            raise NotApplicable("not the deprecated form: a scale, then tensors, by position")
        scale, scaled = call.args[0], call.args[1]
        merged = scaled.with_changes(value=_scaled(scale.value, scaled.value))
        # A comment after the scale (`-lr,  # the step`) stays with the folded argument.
        comment = _comment_after(scale)
        if comment is not None:
            after = merged.comma.whitespace_after \
                if isinstance(merged.comma, cst.Comma) else None
            if len(call.args) == 2 and isinstance(after, cst.ParenthesizedWhitespace):
                # The last argument: its own line end and the closing bracket's indent.
                return call.with_changes(args=[merged.with_changes(comma=merged.comma.with_changes(
                    whitespace_after=after.with_changes(first_line=comment)))])
            if len(call.args) > 2:
                merged = merged.with_changes(comma=scale.comma)
                return call.with_changes(args=punctuate(call.args, [(merged, 0)] + [
                    (arg, index) for index, arg in enumerate(call.args) if index > 1]))
        entries = [(merged, 1)] + \
            [(arg, index) for index, arg in enumerate(call.args) if index > 1]
        return call.with_changes(args=punctuate(call.args, entries))


def _scaled(scale: cst.BaseExpression, value: cst.BaseExpression) -> cst.BinaryOperation:
    """`scale * value`, each parenthesized where the product needs it."""
    import libcst as cst

    from cslint.fixes.syntax import parenthesized

    return cst.BinaryOperation(
        left=parenthesized(scale, right_operand=False),
        operator=cst.Multiply(whitespace_before=cst.SimpleWhitespace(" "),
                              whitespace_after=cst.SimpleWhitespace(" ")),
        right=parenthesized(value, right_operand=True))


def _comment_after(arg: cst.Arg) -> "cst.TrailingWhitespace | None":
    """The end of the argument's line where a comment follows its comma."""
    import libcst as cst

    after = arg.comma.whitespace_after if isinstance(arg.comma, cst.Comma) else None
    if isinstance(after, cst.ParenthesizedWhitespace) and after.first_line.comment is not None:
        return after.first_line
    return None


@dataclass(frozen=True)
class ScaleForeachArgument(CallFix):
    """`torch._foreach_add_(ps, gs, alpha=a)` -> `torch._foreach_add_(ps,
    torch._foreach_mul(gs, a))`: fold the `keyword=` scale of a foreach op into the list
    after the one it updates (CS205)."""

    function: str
    keyword: str

    def locate(self, calls: CallIndex, location: Location) -> ast.Call | None:
        return _call_with_keyword_at(calls, location, self.function, self.keyword)

    def rewrite(self, call: cst.Call, context: FixContext) -> cst.Call:
        import libcst as cst

        from cslint.fixes.syntax import dotted

        function = self.function
        if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == function):
            raise NotApplicable(f"not a call of {function}()")
        module = dotted(call.func.value)
        if not module:
            raise NotApplicable(f"{function}() is not called through a module name")
        return _fold_keyword(call, self.keyword, 1, lambda scale, listed: cst.parse_expression(
            f"{module}._foreach_mul(x, y)").with_changes(args=[
                cst.Arg(listed, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                cst.Arg(scale)]))


@dataclass(frozen=True)
class MultiplyOnes(CallFix):
    """`torch.full_like(x, t)` -> `torch.ones_like(x).mul_(t)`, `torch.full(shape, t)` ->
    `torch.ones(shape).mul_(t)`: a tensor fill value (read on the host) becomes a
    multiplication of a new tensor of ones (CS205, CS204). Still a call: it fits
    wherever the call was (`torch.full_like(x, t).div_(d)`)."""

    function: str  # "full" or "full_like"

    def locate(self, calls: CallIndex, location: Location) -> ast.Call | None:
        return _call_with_argument_at(calls, location, self.function, "fill_value", 1)

    def rewrite(self, call: cst.Call, context: FixContext) -> cst.Call:
        import libcst as cst

        from cslint.fixes.syntax import punctuate

        fill, _ = _given_argument(call, self.function, "fill_value", 1)
        if fill is None:
            raise NotApplicable("no fill value")
        if "#" in cst.Module(body=[]).code_for_node(fill):
            raise NotApplicable("a comment goes with the fill value")  # (it would be lost)
        ones = self.function.replace("full", "ones")
        entries = [(arg, index) for index, arg in enumerate(call.args) if arg is not fill]
        created = call.with_changes(func=call.func.with_changes(attr=cst.Name(ones)),
                                    args=punctuate(call.args, entries), lpar=[], rpar=[])
        return cst.Call(func=cst.Attribute(value=created, attr=cst.Name("mul_")),
                        args=[cst.Arg(fill.value)])


@dataclass(frozen=True)
class WeightList(CallFix):
    """`torch._foreach_lerp_(xs, ys, weight=t)` -> `torch._foreach_lerp_(xs, ys, [t] *
    len(xs))`: a tensor where the op takes a Python number goes as a list with one entry
    per tensor of the first list, an overload that takes tensors (CS205, CS204). Only
    where the first list is a name (or an attribute or constant entry of one), which
    `len()` reads again."""

    function: str
    keyword: str
    index: int  # where the number goes as a positional argument

    def locate(self, calls: CallIndex, location: Location) -> ast.Call | None:
        return _call_with_argument_at(calls, location, self.function, self.keyword,
                                      self.index)

    def rewrite(self, call: cst.Call, context: FixContext) -> cst.Call:
        import libcst as cst

        given, by_keyword = _given_argument(call, self.function, self.keyword, self.index)
        positional = [a for a in call.args if a.keyword is None]
        if given is None or len(positional) != self.index + (0 if by_keyword else 1):
            raise NotApplicable(f"no `{self.keyword}` to give as a list")
        listed = positional[0].value
        node = listed
        while isinstance(node, (cst.Attribute, cst.Subscript)):
            if isinstance(node, cst.Subscript) and not (
                    len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)
                    and isinstance(node.slice[0].slice.value, (cst.SimpleString,
                                                               cst.Integer))):
                raise NotApplicable("the first list is not a plain name")
            node = node.value
        if not isinstance(node, cst.Name):
            raise NotApplicable("the first list is not a plain name")
        module = cst.Module(body=[])
        if "#" in module.code_for_node(given):
            raise NotApplicable(f"a comment goes with the `{self.keyword}`")  # (it would be lost)
        value = given.value
        if isinstance(value, (cst.Lambda, cst.IfExp, cst.NamedExpr)):
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        weights = cst.parse_expression(
            f"[{module.code_for_node(value)}] * len({module.code_for_node(listed)})")
        if by_keyword and call.args[-1] is not given:
            raise NotApplicable(f"arguments follow `{self.keyword}=`")
        # In its place, as a positional argument (the list overload names it otherwise).
        replaced = given.with_changes(value=weights, keyword=None,
                                      equal=cst.MaybeSentinel.DEFAULT)
        return call.with_changes(args=[replaced if arg is given else arg
                                       for arg in call.args])


@dataclass(frozen=True)
class StackTensors(CallFix):
    """`torch.tensor(xs, dtype=d)` -> `torch.stack(xs).to(dtype=d)`: a list of device
    tensors (read one by one on the host) stacked on the device (CS204). Only where the
    data is a name or a list built of expressions (no Python number written in it, which
    `stack` does not take) and the other arguments are `dtype=` / `device=`. Unsafe, as
    the rule's other fix: a list that also holds numbers fails at run time."""

    function: str  # "tensor", "as_tensor" or "asarray"

    def locate(self, calls: CallIndex, location: Location) -> ast.Call | None:
        return _call_with_argument_at(calls, location, self.function, "data", 0)

    def rewrite(self, call: cst.Call, context: FixContext) -> cst.Call:
        import libcst as cst

        data, by_keyword = _given_argument(call, self.function, "data", 0)
        if data is None or by_keyword:
            raise NotApplicable("no positional data argument")
        others = [a for a in call.args if a is not data]
        if any(a.keyword is None or a.keyword.value not in ("dtype", "device")
               for a in others):
            raise NotApplicable("arguments other than dtype= and device=")
        value = data.value
        if isinstance(value, (cst.List, cst.Tuple)) and any(
                isinstance(e.value, (cst.Integer, cst.Float, cst.UnaryOperation))
                for e in value.elements):
            raise NotApplicable("a Python number in the list")
        if "#" in cst.Module(body=[]).code_for_node(call):
            raise NotApplicable("a comment inside the call")  # (it would be lost)
        stacked = cst.Call(func=call.func.with_changes(attr=cst.Name("stack")),
                           args=[cst.Arg(value)])
        if not others:
            return stacked
        keywords = [cst.Arg(a.value, keyword=a.keyword, equal=a.equal) for a in others]
        return cst.Call(func=cst.Attribute(value=stacked, attr=cst.Name("to")),
                        args=[k.with_changes(comma=cst.MaybeSentinel.DEFAULT)
                              for k in keywords])


def _call_with_argument_at(calls: CallIndex, location: Location, function: str,
                           keyword: str, index: int) -> ast.Call | None:
    """The call of `function` whose argument spanning `location` is its `keyword=` or
    its positional argument `index`."""
    found = _call_with_keyword_at(calls, location, function, keyword)
    if found is not None:
        return found
    for call in calls.calls.values():
        if _calls(call, function) and len(call.args) > index \
                and calls.location(call.args[index]) == location:
            return call
    return None


def _given_argument(call: cst.Call, function: str, keyword: str, index: int
                    ) -> tuple[cst.Arg | None, bool]:
    """The argument given as `keyword=` or at position `index` (None: not given), and
    whether by keyword; NotApplicable for another call or one with *args/**kwargs."""
    import libcst as cst

    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == function):
        raise NotApplicable(f"not a call of {function}()")
    if any(a.star for a in call.args):
        raise NotApplicable("the call passes *args or **kwargs")
    named = [a for a in call.args if a.keyword is not None and a.keyword.value == keyword]
    if named:
        return named[0], True
    positional = [a for a in call.args if a.keyword is None]
    return (positional[index] if len(positional) > index else None), False


def _calls(call: ast.Call, function: str) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr == function


def _call_with_keyword_at(calls: CallIndex, location: Location, name: str, keyword: str
                          ) -> ast.Call | None:
    """The call of `name` (a method or module function) whose `keyword=` value spans
    `location`: where CS205 points."""
    for call, found in calls.keyword_values.get(location, ()):
        if found.arg == keyword and isinstance(call.func, ast.Attribute) \
                and call.func.attr == name:
            return call
    return None


def _fold_keyword(call: cst.Call, keyword: str, position: int, combine) -> cst.Call:
    """`call` without its `keyword=` argument, the positional argument at `position`
    replaced by `combine(scale, argument)`."""
    from cslint.fixes.syntax import punctuate

    if any(a.star for a in call.args):
        raise NotApplicable("the call passes *args or **kwargs")
    scale = [a for a in call.args if a.keyword is not None and a.keyword.value == keyword]
    positional = [a for a in call.args if a.keyword is None]
    if len(scale) != 1 or len(positional) <= position:
        raise NotApplicable(f"no `{keyword}=` keyword with an argument to fold it into")
    scaled = positional[position]
    folded = combine(scale[0].value, scaled.value)
    entries = [(arg.with_changes(value=folded) if arg is scaled else arg, index)
               for index, arg in enumerate(call.args) if arg is not scale[0]]
    return call.with_changes(args=punctuate(call.args, entries))


# ---- constructors (used by rules) ---------------------------------------------------------

def replace_call_fix(target: str, *, safe: bool, description: str,
                     drop: Iterable[str] = (), add: Iterable[tuple[str, str]] = (),
                     rename: Iterable[tuple[str, str]] = ()) -> ReplaceCall:
    """Call `<cstorch alias>.<target>` instead; drop the keywords in `drop`, rename
    keywords (old, new), append `add` keywords as (name, Python source)."""
    return ReplaceCall(safe, description, target, tuple(drop),
                       tuple((old, new) for old, new in rename),
                       tuple((name, source) for name, source in add))


def cstorch_creation_fix(call: ast.Call) -> ReplaceCall | None:
    """CS104's fix: `torch.zeros_like(p)` -> `cstorch.zeros_like(p)`, when the arguments
    fit the cstorch signature (`zeros_like(other, dtype=None)`, `full_like(other, value,
    dtype=None)`, `zeros(shape, dtype=None)`, ...): no `device`, `memory_format`,
    `requires_grad` or the like, and no varargs shapes (`torch.zeros(3, 4)`).
    None when they do not fit."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else \
        func.id if isinstance(func, ast.Name) else None
    if name not in LAZY_CREATION_SIGNATURES:
        return None
    positional, renames = LAZY_CREATION_SIGNATURES[name]
    if any(isinstance(a, ast.Starred) for a in call.args) or len(call.args) > len(positional):
        return None
    given = list(positional[:len(call.args)])
    rename: list[tuple[str, str]] = []
    for keyword in call.keywords:
        if keyword.arg is None:
            return None
        new = renames.get(keyword.arg, keyword.arg)
        if new not in (*positional, "dtype") or new in given:
            return None
        if new != keyword.arg:
            rename.append((keyword.arg, new))
        given.append(new)
    if any(p not in given for p in positional):
        return None
    if name in ("zeros", "ones", "full"):
        shape = call.args[0] if call.args else next(
            k.value for k in call.keywords if renames.get(k.arg, k.arg) == "shape")
        if isinstance(shape, ast.Constant):
            return None  # torch.zeros(5): an int size, not a shape
    return replace_call_fix(name, safe=True, description=f"use cstorch.{name}",
                            rename=rename)


def scale_first_argument_fix(method: str, keyword: str) -> ScaleFirstArgument:
    """CS205's fix: `p.add_(g, alpha=-lr)` -> `p.add_(-lr * g)`, `p.addcdiv_(a, b,
    value=-lr)` -> `p.addcdiv_(-lr * a, b)`. Unsafe: the floating-point order changes.
    For Tensor methods only: in the functional form `torch.add(p, g, alpha=a)` the scaled
    argument is the second one (the fixer refuses calls on `torch` itself)."""
    return ScaleFirstArgument(False, f"fold `{keyword}=` into the first argument of "
                                     f"{method}()", method, keyword)


def fold_deprecated_scale_fix(method: str) -> FoldDeprecatedScale:
    """CS205's and CS204's fix of a Tensor method's deprecated form, its scale first:
    `p.add_(-lr, g)` -> `p.add_(-lr * g)`. Unsafe: the floating-point order changes."""
    return FoldDeprecatedScale(False, f"fold the scale into the argument after it in "
                                      f"{method}()", method)


def scale_foreach_argument_fix(function: str, keyword: str) -> ScaleForeachArgument:
    """CS205's fix for foreach ops: `torch._foreach_add_(ps, gs, alpha=-lr)` ->
    `torch._foreach_add_(ps, torch._foreach_mul(gs, -lr))`. Unsafe: the floating-point
    order changes."""
    return ScaleForeachArgument(False, f"fold `{keyword}=` into the second list of "
                                       f"{function}()", function, keyword)


def multiply_ones_fix(function: str) -> MultiplyOnes:
    """The fix of a tensor fill value of `torch.full` / `torch.full_like` (CS205, CS204):
    `torch.ones_like(x).mul_(t)`. Unsafe, as those rules' other fixes: `full`'s dtype
    follows its fill value where none is given, `ones`' is the default."""
    ones = function.replace("full", "ones")
    return MultiplyOnes(False, f"multiply torch.{ones}() by the fill value", function)


def stack_tensors_fix(function: str) -> StackTensors:
    """The fix of `torch.tensor()` of a list of device tensors (CS204): `torch.stack()`."""
    return StackTensors(False, f"stack the tensors with torch.stack() instead of "
                               f"torch.{function}()", function)


def weight_list_fix(function: str, keyword: str, index: int) -> WeightList:
    """The fix of a tensor `weight` of `torch._foreach_lerp(_)` (CS205, CS204): a list
    with the tensor once per entry of the first list. Unsafe, as those rules' other
    fixes: the op takes its other overload."""
    return WeightList(False, f"give `{keyword}` of {function}() as a list of tensors",
                      function, keyword, index)


# Every kind of fix by class name: the findings cache stores a fix as its kind's name and
# its plain fields, and builds it back only as one of these.
FIX_KINDS: dict[str, type[CallFix]] = {kind.__name__: kind
                                       for kind in (ReplaceCall, ScaleFirstArgument,
                                                    FoldDeprecatedScale,
                                                    ScaleForeachArgument, MultiplyOnes,
                                                    WeightList, StackTensors)}
