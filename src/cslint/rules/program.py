"""CS4xx: program-level rules: vanilla torch optimizers and schedulers, float64, modes."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Iterable

from cslint.diagnostics import Finding, Severity
from cslint.fixes import replace_call_fix
from cslint.rules import FixSafety, ModuleContext, Rule, register
from cslint.semantic.precision import Float64Name, Reach, float64_uses
from cslint.semantic.program import (
    torch_equivalents, torch_optimizer_calls, torch_scheduler_calls, train_and_eval_requests,
)
from cslint.semantic.tensor_values import TensorValueAnalysis

FAMILY = "program"


# ---- CS401 and its fix: torch's signature against cstorch's -------------------------------

_REQUIRED = object()


@dataclass(frozen=True)
class Parameter:
    name: str
    default: Any = _REQUIRED
    keyword_only: bool = False

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


def _parameters(entries: list[dict]) -> list[Parameter]:
    """A signature of `torch_equivalents()` as parameters (list defaults as tuples)."""
    result = []
    for entry in entries:
        default = entry.get("default", _REQUIRED)
        if isinstance(default, list):
            default = tuple(default)
        result.append(Parameter(entry["name"], default, bool(entry.get("keyword_only"))))
    return result


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b or (type(a) is type(b) and a == b)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return False


def _source_of_value(value: Any) -> str:
    if isinstance(value, tuple):
        inner = ", ".join(_source_of_value(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def _literal(node: ast.expr) -> tuple[bool, Any]:
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
    if isinstance(value, list):
        value = tuple(value)
    return True, value


def optimizer_fix_plan(name: str, call: ast.Call) -> tuple[dict | None, str]:
    """How to rewrite `torch.optim.<name>(...)` as `cstorch.optim.<name>(...)`:
    ({"drop": [...], "add": [(keyword, source)]}, "") or (None, why not)."""
    entry = torch_equivalents()["optimizers"].get(name)
    if entry is None or entry.get("status") != "drop-in":
        return None, "no drop-in"
    torch_sig = _parameters(entry["torch"])
    cs_sig = _parameters(entry["cstorch"])
    cs_by_name = {p.name: p for p in cs_sig}
    torch_by_name = {p.name: p for p in torch_sig}
    kernel = set(torch_equivalents()["kernel_keywords"])
    given: set[str] = set()
    drop: list[str] = []

    torch_positional = [p for p in torch_sig if not p.keyword_only]
    for index, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            return None, "the call passes *args"
        if index >= len(torch_positional):
            return None, "too many positional arguments"
        torch_param = torch_positional[index]
        if index >= len(cs_sig) or cs_sig[index].name != torch_param.name:
            return None, (f"positional argument {index + 1} is `{torch_param.name}` in torch "
                          "but not in cstorch; pass it by keyword")
        given.add(torch_param.name)
    for keyword in call.keywords:
        if keyword.arg is None:
            return None, "the call passes **kwargs"
        given.add(keyword.arg)
        if keyword.arg in cs_by_name:
            continue
        if keyword.arg in kernel:
            drop.append(keyword.arg)
            continue
        torch_param = torch_by_name.get(keyword.arg)
        known, value = _literal(keyword.value)
        if torch_param is not None and not torch_param.required and known \
                and _same_value(value, torch_param.default):
            drop.append(keyword.arg)
            continue
        return None, f"`{keyword.arg}` has no cstorch equivalent"
    add: list[tuple[str, str]] = []
    for torch_param in torch_sig:
        if torch_param.name in given or torch_param.required:
            continue
        cs_param = cs_by_name.get(torch_param.name)
        if cs_param is None:
            continue
        if cs_param.required or not _same_value(cs_param.default, torch_param.default):
            add.append((torch_param.name, _source_of_value(torch_param.default)))
    for cs_param in cs_sig:
        if cs_param.required and cs_param.name not in given \
                and not any(k == cs_param.name for k, _ in add):
            return None, f"cstorch requires `{cs_param.name}`"
    return {"drop": drop, "add": add}, ""


@register
class VanillaTorchOptimizer(Rule):
    code = "CS401"
    family = FAMILY
    severity = Severity.ERROR
    fix_safety = FixSafety.UNSAFE

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        if not context.module.imports_cstorch:
            return
        table = torch_equivalents()["optimizers"]
        for fact in torch_optimizer_calls(context.module, context.source.text):
            name, call = fact.name, fact.node
            entry = table.get(name, {"status": "unsupported"})
            status = entry.get("status")
            if status == "drop-in":
                plan, why = optimizer_fix_plan(name, call)
                message = (f"torch.optim.{name} runs eagerly and creates its state lazily, "
                           f"which Cerebras cannot trace; use cstorch.optim.{name}")
                fix = None
                if plan is not None:
                    changes = [f"{k}={v}" for k, v in plan["add"]]
                    if plan["drop"]:
                        changes.append("drop " + ", ".join(plan["drop"]))
                    message += (" (the fix keeps torch's defaults"
                                + (": " + ", ".join(changes) if changes else "")
                                + "; it is unsafe because eps placement and first-step "
                                "details still differ)")
                    fix = replace_call_fix(
                        f"optim.{name}", safe=False,
                        description=f"use cstorch.optim.{name} with torch's defaults",
                        drop=plan["drop"], add=plan["add"])
                else:
                    message += f" (no automatic fix: {why})"
                yield context.finding(self, call, message, fix)
            elif status == "different":
                yield context.finding(self, call, (
                    f"torch.optim.{name} runs eagerly and cannot be traced on Cerebras; "
                    f"{entry.get('note', '')}"))
            else:
                yield context.finding(self, call, (
                    f"torch.optim.{name} is not supported on Cerebras systems (no "
                    "cstorch.optim equivalent); use one of the cstorch.optim optimizers or "
                    "write a cstorch.optim.Optimizer"))


# ---- CS402 ----------------------------------------------------------------------------

@register
class VanillaTorchScheduler(Rule):
    code = "CS402"
    family = FAMILY
    severity = Severity.ERROR

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        if not context.module.imports_cstorch:
            return
        table = torch_equivalents()["schedulers"]
        for fact in torch_scheduler_calls(context.module, context.source.text):
            name = fact.name
            entry = table.get(name)
            message = (f"torch.optim.lr_scheduler.{name} sets the learning rate as a Python "
                       "number on the host, which Cerebras cannot trace; ")
            if entry is None or entry.get("cstorch") is None:
                note = entry.get("note") if entry else "it has no cstorch equivalent"
                message += (f"{note}; write a cstorch.optim.lr_scheduler.LRScheduler with a "
                            "closed form of the step")
            else:
                message += (f"use cstorch.optim.lr_scheduler.{entry['signature']}: "
                            f"{entry['note']}")
            yield context.finding(self, fact.node, message)


# ---- CS403 ----------------------------------------------------------------------------

@register
class UnsupportedPrecision(Rule):
    code = "CS403"
    family = FAMILY
    severity = Severity.ERROR
    uses = (TensorValueAnalysis,)  # which functions traced code runs

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        for fact in float64_uses(context.module, context.source.text,
                                 context.analyses.tensor_values):
            if fact.reach is Reach.HOST:
                continue  # float64 on the host only never reaches the device
            if type(fact) is Float64Name:
                yield context.finding(self, fact.node, (
                    f"{fact.name} (float64) is not supported on Cerebras systems: only mixed "
                    "precision is (float32 weights, float16 compute, with the casts inserted "
                    "automatically); use float32"))
            else:
                yield context.finding(self, fact.node, (
                    ".double() converts to float64, which Cerebras systems do not support: "
                    "only mixed precision is (casts are inserted automatically); keep float32"))


# ---- CS404 ----------------------------------------------------------------------------

@register
class TrainAndEvalMode(Rule):
    code = "CS404"
    family = FAMILY
    severity = Severity.ERROR

    MESSAGE = ('mode="train_and_eval" is not supported by cstorch releases before 2.0: the '
               "fabric cannot be reprogrammed for eval after being programmed for train in "
               'one run; run mode="train" and mode="eval" separately')

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        for fact in train_and_eval_requests(context.module, context.source.text):
            yield context.finding(self, fact.node, self.MESSAGE)
