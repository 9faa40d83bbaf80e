"""CS1xx: custom optimizers create all state in preinitialize() and update it in place."""

from __future__ import annotations

from typing import Iterable

from cslint import advice
from cslint.diagnostics import Finding, Severity
from cslint.fixes import cstorch_creation_fix
from cslint.rules import (
    FactRule, FixSafety, ModuleContext, Rule, one_per_position, register,
)
from cslint.semantic.official import TORCH_OPTIMIZER
from cslint.semantic.module_index import source_snippet
from cslint.semantic.optimizer_state import (
    EagerStateFill, GroupTensorCreated, OptimizerStateAnalysis, StateCreated,
    StateDictRebound, StateRebound, StateUpdateLost,
)
from cslint.semantic.project import ClassRef

FAMILY = "optimizer-state"


class _StateFactRule(FactRule):
    family = FAMILY
    uses = (OptimizerStateAnalysis,)
    place = staticmethod(one_per_position)  # classes sharing a method find one fact


@register
class StateOutsidePreinitialize(_StateFactRule):
    code = "CS101"
    severity = Severity.ERROR

    def findings(self, context, fact):
        if type(fact) is StateCreated:
            what = f'state "{fact.key}"' if fact.key else "optimizer state"
            how = " under a lazy-initialisation check" if fact.guarded else ""
            yield context.finding(self, fact.node, (
                f"{what} is created{how} in {fact.where}; "
                f"{advice.STATE_OUTSIDE_PREINITIALIZE}"))
        elif type(fact) is GroupTensorCreated:
            yield context.finding(self, fact.node, (
                f'param-group entry "{fact.key}" is made a tensor on the first step only '
                f"(under a check that the group lacks it) in {fact.where}, so that step's "
                f"graph differs from the others'; "
                f"{advice.GROUP_TENSOR_OUTSIDE_PREINITIALIZE.format(key=fact.key)}"))
        elif type(fact) is StateDictRebound:
            yield context.finding(self, fact.node, (
                f"`{source_snippet(fact.node)}` binds a parameter's state to a new dict "
                f"in {fact.where}; {advice.PARAMETER_STATE_REBOUND}"))


@register
class StateReboundInStep(_StateFactRule):
    code = "CS102"
    severity = Severity.WARNING

    def findings(self, context, fact):
        if type(fact) is StateRebound:
            name = f'state["{fact.key}"]' if fact.key else \
                f"state[{source_snippet(fact.key_node)}]"
            yield context.finding(self, fact.node, (
                f"{name} is rebound to a new tensor in {fact.where}; "
                f"{advice.STATE_REBOUND.format(name=name)}"))


@register
class EagerConstantState(_StateFactRule):
    code = "CS104"
    severity = Severity.INFO
    fix_safety = FixSafety.SAFE
    fix_example = ("`torch.zeros_like(p)` becomes `cstorch.zeros_like(p)` when the arguments "
                   "fit the cstorch signature")

    def findings(self, context, fact):
        if type(fact) is EagerStateFill:
            keys = fact.keys
            what = f'state "{keys[0]}"' if keys and len(keys) == 1 else "optimizer state"
            lazy = fact.torch_function.replace("torch.", "cstorch.")
            # The fix applies when cstorch's signature fits.
            yield context.finding(self, fact.node, (
                f"{what} is filled with {fact.torch_function}() in preinitialize(); "
                f"{advice.EAGER_STATE_FILL.format(lazy=lazy)}"), cstorch_creation_fix(fact.node))


@register
class LostStateUpdate(_StateFactRule):
    code = "CS107"
    severity = Severity.WARNING

    def findings(self, context, fact):
        if type(fact) is StateUpdateLost:
            key = f'state["{fact.key}"]' if fact.key else "a state tensor"
            name = fact.name
            yield context.finding(self, fact.node, (
                f"`{name}` holds {key} but is rebound to a new value that is never stored "
                f"back, so the update is lost on every step; "
                f"{advice.LOST_UPDATE.format(name=name, key=key)}"))


def _own_cstorch_optimizers(context: ModuleContext) -> Iterable[ClassRef]:
    """Concrete cstorch optimizer classes defined in this file (not the machinery)."""
    project = context.project
    for info in context.module.classes.values():
        ref = project.ref_for_info(info)
        if project.is_machinery(ref) or project.is_abstract(ref):
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
