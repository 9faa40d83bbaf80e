"""CS3xx: schedulers compute their value in closed form from the step, as a tensor.

Cerebras traces the schedule once: the value must be a function of the step
(`self.last_epoch`) and of hyperparameters, computed with torch ops, not a Python
number updated from its previous value.
"""

from __future__ import annotations

from typing import Iterable

from cslint import advice
from cslint.config import Version
from cslint.diagnostics import Finding, Severity
from cslint.rules import FactRule, RELEASES_BEFORE_2_5, ModuleContext, Rule, one_per_line, register
from cslint.semantic.module_index import FunctionInfo, source_snippet
from cslint.semantic.official import CSTORCH_SCHEDULERS
from cslint.semantic.program import torch_equivalents
from cslint.semantic.project import ClassRef, ProjectIndex
from cslint.semantic.scheduler import (
    BaseRatesChanged, ClosedForm, ClosedFormReturnsNumber, OptimizerValueReadBack,
    PreviousValueRead, ReadBackForm, SchedulerAnalysis, SchedulerStateMutated,
    StateChange, closed_form_status, declared_abstract, is_torch_scheduler_class,
)

FAMILY = "scheduler"


# ---- CS302, CS303, CS305: the facts of the traced methods --------------------------------

def _label(function: FunctionInfo) -> str:
    if function.class_name:
        return f"{function.class_name.rsplit('.', 1)[-1]}.{function.name}()"
    return f"{function.name}()"


class _TracedMethodRule(FactRule):
    family = FAMILY
    severity = Severity.ERROR
    uses = (SchedulerAnalysis,)
    place = staticmethod(one_per_line)  # a statement says it once



@register
class SchedulerRecursiveForm(_TracedMethodRule):
    code = "CS302"

    def findings(self, context, fact):
        label = _label(fact.function)
        if type(fact) is OptimizerValueReadBack:
            snippet = source_snippet(fact.node)
            if fact.form is ReadBackForm.GROUP_ITEM:
                message = (f"{label} reads back the current `{fact.key}` of the optimizer's "
                           f"param group (`{snippet}`), so each value depends on the previous "
                           f"one (a recursive schedule); {advice.RECURSIVE_SCHEDULE}")
            elif fact.form is ReadBackForm.GROUP_GET:
                message = (f"{label} reads back the current `{fact.key}` of the optimizer's "
                           f"param group (`{snippet}`), a recursive schedule; "
                           f"{advice.RECURSIVE_SCHEDULE}")
            else:
                message = (f"{label} reads back the optimizer's current `{fact.key}` "
                           f"(`{snippet}`), a recursive schedule; {advice.RECURSIVE_SCHEDULE}")
            yield context.finding(self, fact.node, message)
        elif type(fact) is PreviousValueRead:
            read = f"self.{fact.attribute}" + ("()" if fact.is_method else "")
            yield context.finding(self, fact.node, (
                f"{label} reads the schedule's previous value ({read}), a recursive schedule; "
                f"{advice.RECURSIVE_SCHEDULE}"))
        elif type(fact) is BaseRatesChanged:
            if fact.by_call:
                message = (f"{label} changes self.base_lrs (`{source_snippet(fact.node)}`), so "
                           f"later values are computed from earlier ones; {advice.KEEP_BASE_RATES}")
            else:
                message = (f"{label} changes self.base_lrs per step, so later values are "
                           f"computed from earlier ones (a recursive schedule); "
                           f"{advice.KEEP_BASE_RATES}")
            yield context.finding(self, fact.node, message)


@register
class SchedulerMutatesState(_TracedMethodRule):
    code = "CS303"

    def findings(self, context, fact):
        if type(fact) is not SchedulerStateMutated:
            return
        label = _label(fact.function)
        target = source_snippet(fact.target)
        if fact.change is StateChange.AUGMENTED:
            message = f"{label} updates `{target}` in place, {advice.CLOSED_FORM_IS_PURE}"
        elif fact.change is StateChange.WRITTEN_INTO:
            message = (f"{label} writes into `{target}`, changing scheduler state, "
                       f"{advice.CLOSED_FORM_IS_PURE}")
        elif fact.change is StateChange.STORED_FROM_STATE:
            message = (f"{label} stores a value computed from the step or scheduler state in "
                       f"`self.{fact.attribute}`, {advice.CLOSED_FORM_IS_PURE}")
        else:
            message = (f"{label} mutates `{target}` (`.{fact.method}(...)`), "
                       f"{advice.CLOSED_FORM_IS_PURE}")
        yield context.finding(self, fact.node, message)


@register
class ClosedFormNotTensor(_TracedMethodRule):
    code = "CS305"

    def findings(self, context, fact):
        if type(fact) is not ClosedFormReturnsNumber:
            return
        label = _label(fact.function)
        helper = fact.helper
        if helper is None:
            message = (f"{label} returns a Python number (`{source_snippet(fact.node)}`) "
                       f"instead of a tensor; {advice.CLOSED_FORM_NOT_TENSOR}")
        else:
            message = (f"{label} returns self.{helper.name}(), which returns a Python number "
                       f"(line {helper.line} of {helper.function.path}) instead of a tensor; "
                       f"{advice.CLOSED_FORM_NOT_TENSOR}")
        yield context.finding(self, fact.node, message)


# ---- CS301 ---------------------------------------------------------------------------------

@register
class SchedulerMissingClosedForm(Rule):
    code = "CS301"
    family = FAMILY
    severity = Severity.ERROR
    release_note = "which method name counts follows `cstorch-version`"

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        module = context.module
        if not module.classes:
            return
        project = context.project
        version = context.config.cstorch_version
        subclasses = None
        for info in module.classes.values():
            if not info.base_names:
                continue
            ref = project.ref_for_info(info)
            if project.is_machinery(ref) or not project.kinds(ref).cstorch_scheduler:
                continue
            if declared_abstract(ref):
                continue
            if subclasses is None:
                subclasses = project.subclasses
            if subclasses.get(id(ref)):
                continue  # a base of other schedulers: they are checked themselves
            message = self._problem(project, ref, version)
            if message:
                yield context.finding(self, info.node, message)

    def _problem(self, project: ProjectIndex, ref: ClassRef,
                 version: Version | None) -> str | None:
        generic = closed_form_status(project, ref, "_get_closed_form", version)
        lr_form = closed_form_status(project, ref, "_get_closed_form_lr", version)
        if ClosedForm.UNKNOWN in (generic, lr_form):
            return None
        is_lr = CSTORCH_SCHEDULERS[1] in project.known_ancestors(ref)
        name = ref.short_name
        returns = "returning the value as a tensor computed from the step (self.last_epoch)"
        if version is None:
            if ClosedForm.DEFINED in (generic, lr_form):
                return None
            wanted = "_get_closed_form()" + (
                " (cstorch < 2.5: _get_closed_form_lr())" if is_lr else "")
            return f"{name} is a concrete cstorch scheduler without a closed form; define " \
                   f"{wanted} {returns}"
        if RELEASES_BEFORE_2_5.admits(version) and is_lr:
            if lr_form is ClosedForm.DEFINED:
                return None
            extra = (" (it defines _get_closed_form(), the name from cstorch 2.5 on)"
                     if generic is ClosedForm.DEFINED else "")
            return (f"{name} is a concrete cstorch LR scheduler without _get_closed_form_lr(), "
                    f"which cstorch releases before 2.5 require{extra}; define it {returns}")
        if generic is ClosedForm.DEFINED:
            return None
        if lr_form is ClosedForm.DEFINED:
            return (f"{name} defines _get_closed_form_lr(), but from cstorch 2.5 on every "
                    f"scheduler's closed form is _get_closed_form(); rename it")
        return f"{name} is a concrete cstorch scheduler without a closed form; define " \
               f"_get_closed_form() {returns}"


# ---- CS304 ---------------------------------------------------------------------------------

@register
class TorchSchedulerBase(Rule):
    code = "CS304"
    family = FAMILY
    severity = Severity.ERROR

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        module = context.module
        if not module.classes or not module.imports_cstorch:
            return
        project = context.project
        table = torch_equivalents()["schedulers"]
        for info in module.classes.values():
            if not info.base_names:
                continue
            ref = project.ref_for_info(info)
            if project.is_machinery(ref):
                continue
            kinds = project.kinds(ref)
            if kinds.cstorch_scheduler or not kinds.torch_scheduler:
                continue
            for expr, base in project.base_pairs(ref):
                if expr is None:
                    continue
                base_kinds = project.kinds(base)
                if not base_kinds.torch_scheduler or base_kinds.cstorch_scheduler:
                    continue
                if not is_torch_scheduler_class(project, base):
                    continue  # a project base: reported on its own class
                short = base.short_name
                entry = table.get(short) or {}
                replacement = entry.get("cstorch")
                if replacement and replacement != "LRScheduler":
                    use = (f"derive from cstorch.optim.lr_scheduler.{replacement} (signature "
                           f"{entry['signature']}: {entry['note']}), or from "
                           "cstorch.optim.lr_scheduler.LRScheduler with a _get_closed_form()")
                else:
                    use = ("derive from cstorch.optim.lr_scheduler.LRScheduler and define "
                           "_get_closed_form() (cstorch < 2.5: _get_closed_form_lr()) "
                           "returning the learning rate as a tensor of the step")
                yield context.finding(self, expr, (
                    f"{info.name} derives from torch.optim.lr_scheduler.{short}, which sets the "
                    f"learning rate as a Python number that Cerebras cannot trace; {use}"))

