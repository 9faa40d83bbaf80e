"""CS1xx: custom optimizers create all state in preinitialize() and update it in place."""

from __future__ import annotations

import ast
from typing import Iterable

from cslint.config import parse_version
from cslint.diagnostics import Finding, Severity
from cslint.fixes import cstorch_creation_fix
from cslint.rules import ModuleContext, Rule, VersionGate, register
from cslint.semantic.official import TORCH_OPTIMIZER
from cslint.semantic.optimizer_state import OptimizerStateAnalysis, iter_events
from cslint.semantic.project import ClassRef

FAMILY = "optimizer-state"


def state_analysis(context: ModuleContext) -> OptimizerStateAnalysis:
    return context.fact("optimizer-state", OptimizerStateAnalysis)


class _StateEventRule(Rule):
    """Rules reporting the events of the shared optimizer-state analysis."""

    family = FAMILY

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        for event in iter_events(state_analysis(context), self.code, context.module):
            yield context.finding(self, event.node, event.message)


@register
class StateOutsidePreinitialize(_StateEventRule):
    code = "CS101"
    severity = Severity.ERROR


@register
class StateReboundInStep(_StateEventRule):
    code = "CS102"
    severity = Severity.WARNING


@register
class EagerConstantState(_StateEventRule):
    code = "CS104"
    severity = Severity.INFO
    fixable = True

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        for event in iter_events(state_analysis(context), self.code, context.module):
            # The event is the eager call; the fix applies when cstorch's signature fits.
            fix = cstorch_creation_fix(event.node) if isinstance(event.node, ast.Call) else None
            yield context.finding(self, event.node, event.message, fix)


@register
class LostStateUpdate(_StateEventRule):
    code = "CS107"
    severity = Severity.WARNING


def _own_cstorch_optimizers(context: ModuleContext) -> Iterable[ClassRef]:
    """Concrete cstorch optimizer classes defined in this file (not the machinery)."""
    project = context.project
    for info in context.module.classes.values():
        ref = project.ref_for_info(info)
        if info.declares_abstract or project.is_machinery(ref):
            continue
        if project.kinds(ref).cstorch_optimizer:
            yield ref


@register
class MissingOptimizerMethod(Rule):
    code = "CS103"
    family = FAMILY
    severity = Severity.ERROR

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        version = context.config.cstorch_version
        for ref in _own_cstorch_optimizers(context):
            for method, purpose in (
                ("preinitialize", "create all optimizer state there"),
                ("step", "update the parameters and state in place there"),
            ):
                found = context.project.find_method(ref, method, version)
                if found is None or found.abstract:
                    yield context.finding(self, ref.info.node, (
                        f"{ref.short_name} is a concrete cstorch optimizer without "
                        f"{method}(); define {method}() and {purpose}"))


@register
class MissingStateNamesToSparsify(Rule):
    code = "CS106"
    family = FAMILY
    severity = Severity.WARNING
    gate = VersionGate(parse_version("2.5"))

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        # Selected by its code without a release: judge by the releases that need it.
        version = context.config.cstorch_version or (0,)
        for ref in _own_cstorch_optimizers(context):
            found = context.project.find_method(ref, "state_names_to_sparsify", version)
            if found is None or found.abstract:
                yield context.finding(self, ref.info.node, (
                    f"{ref.short_name} does not define state_names_to_sparsify(), which "
                    "cstorch releases before 2.5 require; return the names of the state "
                    "tensors shaped like their parameter (e.g. [\"exp_avg\", \"exp_avg_sq\"])"))


@register
class TorchOptimizerBase(Rule):
    code = "CS105"
    family = FAMILY
    severity = Severity.ERROR

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        if not context.module.imports_cstorch:
            return
        project = context.project
        for info in context.module.classes.values():
            ref = project.ref_for_info(info)
            if project.is_machinery(ref):
                continue
            for expr, base_ref in project.base_pairs(ref):
                names = {base_ref.name, project.machinery_root(base_ref) or ""}
                if base_ref.official is not None:
                    names.add(base_ref.official.qualname)
                if TORCH_OPTIMIZER in names:
                    yield context.finding(self, expr, (
                        f"{info.name} derives from torch.optim.Optimizer in code that runs on "
                        "Cerebras; derive from cstorch.optim.Optimizer, create the state in "
                        "preinitialize() and update it in place in step()"))
