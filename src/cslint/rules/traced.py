"""CS2xx: traced code must not depend on tensor values in Python."""

from __future__ import annotations

import ast

from cslint import advice
from cslint.diagnostics import Severity
from cslint.fixes import fold_deprecated_scale_fix, multiply_ones_fix, \
    scale_first_argument_fix, scale_foreach_argument_fix, stack_tensors_fix, weight_list_fix
from cslint.rules import FactRule, FixSafety, Rule, one_per_position, register
from cslint.semantic.module_index import source_snippet
from cslint.semantic.step_counters import counter_decisions
from cslint.semantic.tensor_values import (
    Condition, ValueDependentShape, HostRead, LoopBound, MaskSelection, ScalarArgument,
    TensorValueAnalysis, TruthTest,
)

FAMILY = "traced-code"

CONDITION_WORDS = {Condition.IF: "an `if` condition", Condition.WHILE: "a `while` condition",
                   Condition.EXPRESSION: "a truth test"}


def _chain(chain: tuple) -> str:
    return " <- ".join(map(str, chain[:3]))


def _is_device_tensor(node: ast.AST, chain: tuple) -> str:
    return f"`{source_snippet(node)}` is a device tensor ({_chain(chain)})"


def truth_message(fact: TruthTest) -> str:
    return (f"{CONDITION_WORDS[fact.condition]} depends on a tensor value: "
            f"{_is_device_tensor(fact.subject, fact.chain)}; the graph is traced once, so "
            f"{advice.TRUTH_TEST}")


def scalar_message(fact: ScalarArgument) -> str:
    return (f"{fact.position} needs a Python number but gets a tensor: "
            f"{_is_device_tensor(fact.node, fact.chain)}; {advice.TENSOR_AS_NUMBER}")


class _TracedRule(FactRule):
    family = FAMILY
    severity = Severity.ERROR
    uses = (TensorValueAnalysis,)
    # Facts of several kinds (a host read, a scalar argument) may name one place.
    place = staticmethod(one_per_position)



@register
class TensorDependentIf(_TracedRule):
    code = "CS201"

    def findings(self, context, fact):
        if type(fact) is TruthTest and fact.condition is Condition.IF:
            yield context.finding(self, fact.node, truth_message(fact))


@register
class TensorDependentLoop(_TracedRule):
    code = "CS202"

    def findings(self, context, fact):
        if type(fact) is TruthTest and fact.condition is Condition.WHILE:
            yield context.finding(self, fact.node, truth_message(fact))
        elif type(fact) is LoopBound:
            yield context.finding(self, fact.node, (
                f"the loop bound depends on a tensor value: "
                f"{_is_device_tensor(fact.node, fact.chain)}; {advice.TENSOR_LOOP_BOUND}"))


@register
class TensorDependentExpression(_TracedRule):
    code = "CS203"

    def findings(self, context, fact):
        if type(fact) is TruthTest and fact.condition is Condition.EXPRESSION:
            yield context.finding(self, fact.node, truth_message(fact))


@register
class TensorMaterialized(_TracedRule):
    code = "CS204"
    fix_safety = FixSafety.UNSAFE
    fix_example = ("a tensor passed as `alpha=`/`value=`: `p.add_(g, alpha=t)` becomes "
                   "`p.add_(t * g)`, the floating-point order changes; `torch.tensor(norms)` "
                   "of a list of tensors becomes `torch.stack(norms)`")

    def findings(self, context, fact):
        if type(fact) is HostRead and fact.listed_by:
            yield context.finding(self, fact.node, (
                f"{fact.reader} of a list reads each tensor in it on the host as a number: "
                f"`{source_snippet(fact.subject)}` holds device tensors ({_chain(fact.chain)}); "
                f"{advice.TENSORS_TO_TENSOR}"), stack_tensors_fix(fact.listed_by))
        elif type(fact) is HostRead:
            yield context.finding(self, fact.node, (
                f"{fact.reader} reads a tensor value on the host: "
                f"{_is_device_tensor(fact.subject, fact.chain)}; {advice.HOST_READ}"))
        elif type(fact) is ScalarArgument and not fact.scheduled:
            # `p.add_(g, alpha=t)` -> `p.add_(t * g)`, as for the lr (CS205).
            yield context.finding(self, fact.node, scalar_message(fact), _scalar_fix(fact))


def _scalar_fix(fact):
    """The rewrite of a tensor where a Python number is needed, where there is one: the
    scale folded into a Tensor method's or a foreach op's argument, a fill value
    multiplying ones."""
    if fact.method is not None and fact.keyword is None:
        return fold_deprecated_scale_fix(fact.method)
    if fact.method is not None:
        return scale_first_argument_fix(fact.method, fact.keyword)
    if fact.foreach is not None:
        return scale_foreach_argument_fix(fact.foreach, fact.keyword)
    if fact.filled is not None:
        return multiply_ones_fix(fact.filled)
    if fact.listed is not None:
        return weight_list_fix(fact.listed, fact.keyword, fact.index)
    return None


@register
class LrAsPythonScalar(_TracedRule):
    code = "CS205"
    fix_safety = FixSafety.UNSAFE
    fix_example = ("`p.add_(g, alpha=-lr)` becomes `p.add_(-lr * g)`; the floating-point "
                   "order changes")

    def findings(self, context, fact):
        if type(fact) is ScalarArgument and fact.scheduled:
            # `p.add_(g, alpha=-lr)` -> `p.add_(-lr * g)`.
            fix = _scalar_fix(fact)
            how = advice.SCHEDULED_AS_FOREACH_NUMBER if fact.foreach \
                else advice.SCHEDULED_AS_WEIGHT_LIST if fact.listed \
                else advice.SCHEDULED_AS_NUMBER
            yield context.finding(self, fact.node, (
                f"{fact.position} needs a Python number but `{source_snippet(fact.node)}` "
                "comes from a scheduled hyperparameter, which is a tensor on the system "
                f"({_chain(fact.chain)}); {how}"), fix)


@register
class DataDependentShape(_TracedRule):
    code = "CS206"

    def findings(self, context, fact):
        if type(fact) is ValueDependentShape:
            yield context.finding(self, fact.node, (
                f"`{source_snippet(fact.node)}` ({fact.op}) gives a result whose shape "
                "depends on tensor values, which a static graph cannot hold; "
                f"{advice.DATA_DEPENDENT_SHAPE}"))
        elif type(fact) is MaskSelection:
            yield context.finding(self, fact.node, (
                f"`{source_snippet(fact.node)}` selects with a boolean mask "
                f"`{source_snippet(fact.mask)}`: the result's shape depends on tensor "
                f"values, which a static graph cannot hold; {advice.BOOLEAN_MASK}"))


@register
class GraphChangedByCounter(Rule):
    code = "CS501"
    family = FAMILY
    severity = Severity.ERROR
    uses = (TensorValueAnalysis,)  # which functions traced code runs

    def check(self, context):
        for fact in counter_decisions(context.module, context.project,
                                      context.analyses.tensor_values):
            counter = fact.counter
            counting = counter.counting
            through = f" (through `{fact.through}`)" if fact.through else ""
            yield context.finding(self, fact.node, (
                f"{fact.decision.value} `{source_snippet(fact.node)}` reads "
                f"`{counter.written}`{through}, a Python counter that traced code changes at every "
                f"step (`{source_snippet(counting)}`, line {counting.lineno}): each step "
                "would record another graph, and on the system the step's Python runs once, "
                + ("so the list keeps its first step's length; " + advice.PYTHON_HISTORY
                   if counter.history else
                   "so the count stays at its first value; " + advice.PYTHON_COUNTER)))
