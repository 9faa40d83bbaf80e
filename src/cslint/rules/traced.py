"""CS2xx: traced code must not depend on tensor values in Python."""

from __future__ import annotations

from typing import Iterable

from cslint.diagnostics import Finding, Severity
from cslint.rules import ModuleContext, Rule, register
from cslint.semantic.tensor_values import TensorValueAnalysis

FAMILY = "traced-code"


def tensor_values(context: ModuleContext) -> TensorValueAnalysis:
    return context.fact("tensor-values", TensorValueAnalysis)


class _TracedRule(Rule):
    family = FAMILY
    severity = Severity.ERROR

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        events = tensor_values(context).events_by_place.get((id(context.module), self.code), ())
        for event in events:
            yield context.finding(self, event.node, event.message, event.fix)


@register
class TensorDependentIf(_TracedRule):
    code = "CS201"


@register
class TensorDependentLoop(_TracedRule):
    code = "CS202"


@register
class TensorDependentExpression(_TracedRule):
    code = "CS203"


@register
class TensorMaterialized(_TracedRule):
    code = "CS204"


@register
class LrAsPythonScalar(_TracedRule):
    code = "CS205"
    fixable = True


@register
class DataDependentShape(_TracedRule):
    code = "CS206"
