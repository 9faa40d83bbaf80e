"""CS3xx: schedulers compute their value in closed form from the step, as a tensor.

Cerebras traces the schedule once: the value must be a function of the step
(`self.last_epoch`) and of hyperparameters, computed with torch ops, not a Python
number updated from its previous value.
"""

from __future__ import annotations

import ast
from typing import Iterable

from cslint.config import Version
from cslint.diagnostics import Finding, Severity
from cslint.rules import ModuleContext, Rule, one_per_line, register
from cslint.rules.program import torch_equivalents
from cslint.semantic.module_index import dotted_name
from cslint.semantic.official import CSTORCH_SCHEDULERS, TORCH_SCHEDULERS
from cslint.semantic.project import ClassRef, ProjectIndex
from cslint.semantic.scheduler import (
    Reach, SchedulerAnalysis, python_number_returns, recursive_reads, state_mutations,
)

FAMILY = "scheduler"


# ---- the rules -----------------------------------------------------------------------------

class _TracedMethodRule(Rule):
    family = FAMILY
    severity = Severity.ERROR
    uses = (SchedulerAnalysis,)
    place = staticmethod(one_per_line)  # a statement says it once

    def events(self, reach: Reach, analysis: SchedulerAnalysis
               ) -> Iterable[tuple[ast.AST, str]]:
        raise NotImplementedError

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        module = context.module
        if not module.classes:
            return
        analysis = context.analyses.scheduler
        reaches = sorted(analysis.in_module(module), key=lambda r: r.function.node.lineno)
        for reach in reaches:
            for node, message in self.events(reach, analysis):
                yield context.finding(self, node, message)


@register
class SchedulerRecursiveForm(_TracedMethodRule):
    code = "CS302"

    def events(self, reach, analysis):
        return recursive_reads(reach)


@register
class SchedulerMutatesState(_TracedMethodRule):
    code = "CS303"

    def events(self, reach, analysis):
        if not reach.cstorch:
            return ()
        return state_mutations(reach)


@register
class ClosedFormNotTensor(_TracedMethodRule):
    code = "CS305"

    def events(self, reach, analysis):
        if not reach.cstorch:
            return ()
        return python_number_returns(reach, analysis)


# ---- CS301 ---------------------------------------------------------------------------------

DEFINED, ABSTRACT, MISSING, UNKNOWN = "defined", "abstract", "missing", "unknown"


def closed_form_status(project: ProjectIndex, ref: ClassRef, name: str,
                       version: Version | None) -> str:
    """Whether `name` is defined along the MRO by a cstorch (or project) class; torch
    schedulers' own `_get_closed_form_lr` (Python numbers) does not count."""
    for entry in project.mro(ref):
        if entry.info is not None:
            function = entry.info.methods.get(name)
            if function is not None:
                if function.is_abstract:
                    return ABSTRACT
                if _torch_only(project, entry):
                    continue
                return DEFINED
            if name in entry.info.class_attributes:
                return DEFINED
        elif entry.official is not None:
            methods, abstract = entry.official.methods_for(version)
            if name in abstract:
                return ABSTRACT
            if name in methods:
                if entry.official.qualname.startswith("torch."):
                    continue
                return DEFINED
        else:
            return UNKNOWN
    return MISSING


def _torch_only(project: ProjectIndex, ref: ClassRef) -> bool:
    kinds = project.kinds(ref)
    return kinds.torch_scheduler and not kinds.cstorch_scheduler


def _abstract_by_declaration(ref: ClassRef) -> bool:
    info = ref.info
    if info.declares_abstract:
        return True
    if any(b in ("ABC", "abc.ABC") for b in info.base_names if b):
        return True
    return any(k.arg == "metaclass" and (dotted_name(k.value) or "").endswith("ABCMeta")
               for k in info.node.keywords)


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
            if _abstract_by_declaration(ref):
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
        if UNKNOWN in (generic, lr_form):
            return None
        is_lr = CSTORCH_SCHEDULERS[1] in project.ancestor_names(ref)
        name = ref.short_name
        returns = "returning the value as a tensor computed from the step (self.last_epoch)"
        if version is None:
            if DEFINED in (generic, lr_form):
                return None
            wanted = "_get_closed_form()" + (
                " (cstorch < 2.5: _get_closed_form_lr())" if is_lr else "")
            return f"{name} is a concrete cstorch scheduler without a closed form; define " \
                   f"{wanted} {returns}"
        if version < (2, 5) and is_lr:
            if lr_form == DEFINED:
                return None
            extra = (" (it defines _get_closed_form(), the name from cstorch 2.5 on)"
                     if generic == DEFINED else "")
            return (f"{name} is a concrete cstorch LR scheduler without _get_closed_form_lr(), "
                    f"which cstorch releases before 2.5 require{extra}; define it {returns}")
        if generic == DEFINED:
            return None
        if lr_form == DEFINED:
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
                if not _is_torch_class(project, base):
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


def _is_torch_class(project: ProjectIndex, ref: ClassRef) -> bool:
    if ref.official is not None:
        return ref.official.qualname.startswith("torch.")
    root = project.machinery_root(ref)
    if root in TORCH_SCHEDULERS:
        return True
    return ref.info is not None and ref.info.module.path.as_posix().endswith(
        "torch/optim/lr_scheduler.py")
