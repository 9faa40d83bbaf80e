"""CS4xx: program-level rules: vanilla torch optimizers and schedulers, float64, modes."""

from __future__ import annotations

import ast
import bisect
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Iterable, Iterator

from cslint.config import parse_version
from cslint.diagnostics import Finding, Severity
from cslint.rules import FixSafety, ModuleContext, Rule, VersionGate, register
from cslint.semantic.module_index import ModuleIndex, dotted_name

FAMILY = "program"

CSTORCH_PROGRAM_ROOTS = ("cerebras.pytorch", "cslint.cstorch", "cerebras.modelzoo")


# ---- the data table of torch vs cstorch signatures ------------------------------------

@lru_cache(maxsize=1)
def torch_equivalents() -> dict[str, Any]:
    """`data/torch_equivalents.json`: optimizer signatures and scheduler replacements."""
    text = resources.files("cslint").joinpath("data/torch_equivalents.json").read_text("utf-8")
    return json.loads(text)


_REQUIRED = object()


@dataclass(frozen=True)
class Parameter:
    name: str
    default: Any = _REQUIRED
    keyword_only: bool = False

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


def _signature(entries: list[dict]) -> list[Parameter]:
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


# ---- resolving what a call instantiates ---------------------------------------------

def imports_any(module: ModuleIndex, roots: Iterable[str]) -> bool:
    targets = (*module.imports.values(), *module.star_imports)
    return any(t == root or t.startswith(root + ".") for t in targets for root in roots)


def imports_cstorch_program(module: ModuleIndex) -> bool:
    return imports_any(module, CSTORCH_PROGRAM_ROOTS)


def qualified_callee(module: ModuleIndex, func: ast.expr) -> str | None:
    """The qualified name a call's callee refers to through the module's imports
    (`optim.SGD` after `from torch import optim` -> `torch.optim.SGD`)."""
    dotted = dotted_name(func)
    if dotted is None:
        return None
    qualified = module.qualify(dotted)
    if qualified is not None:
        return qualified
    head = dotted.split(".")[0]
    for star in module.star_imports:
        if star.startswith("torch") and head[:1].isupper():
            return f"{star}.{dotted}"
    return None


def _torch_lines(context: ModuleContext) -> list[int] | None:
    """Lines that name something the module imported from torch (None: any line may,
    through a star import)."""
    module = context.module
    if any(star.split(".")[0] == "torch" for star in module.star_imports):
        return None
    names = [local for local, target in module.imports.items()
             if target == "torch" or target.startswith("torch.")]
    return candidate_lines(context.source.text, names)


_OPTIMIZER_SUBMODULES = {
    "sgd", "adam", "adamw", "adadelta", "adagrad", "adamax", "asgd", "nadam", "radam",
    "rmsprop", "rprop", "lbfgs", "sparse_adam", "_adafactor", "adafactor", "_muon", "muon",
}
_NOT_INSTANTIATED = {"Optimizer", "LRScheduler", "_LRScheduler"}


def torch_optimizer_name(qualname: str | None) -> str | None:
    """`torch.optim.AdamW` / `torch.optim.adamw.AdamW` -> `AdamW`."""
    if not qualname or not qualname.startswith("torch.optim."):
        return None
    parts = qualname.split(".")[2:]
    if len(parts) == 2 and parts[0] in _OPTIMIZER_SUBMODULES:
        parts = parts[1:]
    if len(parts) != 1:
        return None
    name = parts[0]
    if not name[:1].isupper() or name in _NOT_INSTANTIATED:
        return None
    return name


def torch_scheduler_name(qualname: str | None) -> str | None:
    """`torch.optim.lr_scheduler.StepLR` -> `StepLR`."""
    prefix = "torch.optim.lr_scheduler."
    if not qualname or not qualname.startswith(prefix):
        return None
    name = qualname[len(prefix):]
    if "." in name or not name[:1].isupper() or name in _NOT_INSTANTIATED:
        return None
    return name


def iter_calls(tree: ast.AST, lines: list[int] | None = None) -> Iterator[ast.Call]:
    for node, _ in walk_lines(tree, lines):
        if isinstance(node, ast.Call):
            yield node


def candidate_lines(text: str, words: Iterable[str]) -> list[int]:
    """1-based numbers of the lines holding any of `words` as a word."""
    if "\r" in text:  # line ends as Python counts them (not str.splitlines's many)
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    # Each word on its own: a pattern that starts with a literal is found fast by `re`
    # (an alternation behind `\b` is tried at every character); the word boundary in
    # front is checked by hand.
    starts: list[int] = []
    for word in set(words):
        for match in re.finditer(re.escape(word) + r"(?!\w)", text):
            start = match.start()
            if start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_"):
                starts.append(start)
    numbers: list[int] = []
    line, counted_to = 1, 0
    for start in sorted(starts):
        line += text.count("\n", counted_to, start)
        counted_to = start
        if not numbers or numbers[-1] != line:
            numbers.append(line)
    return numbers


# Nodes with a source position, and those whose decorators sit above it.
_POSITIONED = (ast.stmt, ast.expr, ast.excepthandler, ast.arg, ast.keyword, ast.alias,
               ast.pattern)
_DECORATED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def walk_lines(tree: ast.AST, lines: list[int] | None
               ) -> Iterator[tuple[ast.AST, ast.AST | None]]:
    """(node, parent) for the nodes whose span touches one of `lines` (every node when
    `lines` is None): subtrees elsewhere are skipped, so a rule looks at a few
    statements of a large module, not at all of it."""
    stack: list[tuple[ast.AST, ast.AST | None]] = [(tree, None)]
    while stack:
        node, parent = stack.pop()
        # (isinstance, not hasattr/getattr defaults: those raise inside on most nodes.)
        if lines is not None and isinstance(node, _POSITIONED):
            start, end = node.lineno, node.end_lineno or node.lineno
            if isinstance(node, _DECORATED):
                for decorator in node.decorator_list:  # above the `def` line
                    start = min(start, decorator.lineno)
            index = bisect.bisect_left(lines, start)
            if index == len(lines) or lines[index] > end:
                continue
        yield node, parent
        stack.extend((child, node) for child in ast.iter_child_nodes(node))


# ---- CS401 ----------------------------------------------------------------------------

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
    torch_sig = _signature(entry["torch"])
    cs_sig = _signature(entry["cstorch"])
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
        module = context.module
        if not module.imports_cstorch or "optim" not in context.source.text:
            return
        table = torch_equivalents()["optimizers"]
        for call in iter_calls(context.tree, _torch_lines(context)):
            name = torch_optimizer_name(qualified_callee(module, call.func))
            if name is None:
                continue
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
                    from cslint.fixes import replace_call_fix

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
        module = context.module
        if not module.imports_cstorch or "lr_scheduler" not in context.source.text:
            return
        table = torch_equivalents()["schedulers"]
        for call in iter_calls(context.tree, _torch_lines(context)):
            name = torch_scheduler_name(qualified_callee(module, call.func))
            if name is None:
                continue
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
            yield context.finding(self, call, message)


# ---- CS403 ----------------------------------------------------------------------------

_FLOAT64_NAMES = {
    "torch.float64": "torch.float64",
    "torch.double": "torch.double",
    "torch.DoubleTensor": "torch.DoubleTensor",
    "torch.cuda.DoubleTensor": "torch.cuda.DoubleTensor",
}


_FLOAT64_WORDS = ("float64", "double", "DoubleTensor")
_DTYPES = frozenset({
    "float16", "half", "float32", "float", "float64", "double", "bfloat16", "uint8", "int8",
    "int16", "short", "int32", "int", "int64", "long", "bool", "complex64", "complex128",
    "cfloat", "cdouble", "float8_e4m3fn", "float8_e5m2",
})


def _is_dtype(module: ModuleIndex, node: ast.expr) -> bool:
    dotted = dotted_name(node)
    qualified = module.qualify(dotted) if dotted else None
    return bool(qualified) and qualified.startswith("torch.") \
        and qualified[len("torch."):] in _DTYPES


@register
class UnsupportedPrecision(Rule):
    code = "CS403"
    family = FAMILY
    severity = Severity.ERROR

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        module = context.module
        text = context.source.text
        if "float64" not in text and "ouble" not in text:
            return
        if not imports_any(module, ("torch",)) and not imports_cstorch_program(module):
            return
        lines = candidate_lines(text, [*_FLOAT64_WORDS, *(
            local for local, target in module.imports.items() if target in _FLOAT64_NAMES)])
        checked: set[int] = set()  # dtype names compared or tabulated, not used
        for node, parent in walk_lines(context.tree, lines):
            if isinstance(node, (ast.Dict, ast.List, ast.Tuple, ast.Set)):
                elements = [*node.keys, *node.values] if isinstance(node, ast.Dict) \
                    else node.elts
                dtypes = [e for e in elements if e is not None and _is_dtype(module, e)]
                if len(dtypes) >= 3:  # a table of dtypes (a mapping, a list to test)
                    checked.update(id(e) for e in dtypes)
            if isinstance(node, ast.Compare):
                for operand in (node.left, *node.comparators):
                    elements = operand.elts if isinstance(
                        operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
                    checked.update(id(e) for e in elements)
            elif isinstance(node, (ast.Attribute, ast.Name)) and isinstance(node.ctx, ast.Load):
                if isinstance(parent, ast.Attribute) or id(node) in checked:
                    continue  # only whole dotted names; checks are fine
                dotted = dotted_name(node)
                qualified = module.qualify(dotted) if dotted else None
                if qualified not in _FLOAT64_NAMES:
                    continue
                yield context.finding(self, node, (
                    f"{_FLOAT64_NAMES[qualified]} (float64) is not supported on Cerebras "
                    "systems: only mixed precision is (float32 weights, float16 compute, "
                    "with the casts inserted automatically); use float32"))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "double" and not node.args and not node.keywords:
                receiver = dotted_name(node.func.value)
                if receiver is not None and "." not in receiver and receiver in module.imports:
                    continue  # a module's `double()` function, not Tensor.double()
                yield context.finding(self, node, (
                    ".double() converts to float64, which Cerebras systems do not support: "
                    "only mixed precision is (casts are inserted automatically); keep float32"))


# ---- CS404 ----------------------------------------------------------------------------

def _is_train_and_eval(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value == "train_and_eval"


@register
class TrainAndEvalMode(Rule):
    code = "CS404"
    family = FAMILY
    severity = Severity.ERROR
    gate = VersionGate(parse_version("2.0"))

    MESSAGE = ('mode="train_and_eval" is not supported by cstorch releases before 2.0: the '
               "fabric cannot be reprogrammed for eval after being programmed for train in "
               'one run; run mode="train" and mode="eval" separately')

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        if "train_and_eval" not in context.source.text \
                or not imports_cstorch_program(context.module):
            return
        for node in ast.walk(context.tree):
            if isinstance(node, ast.Call):
                for keyword in node.keywords:
                    if keyword.arg == "mode" and _is_train_and_eval(keyword.value):
                        yield context.finding(self, keyword.value, self.MESSAGE)
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if isinstance(key, ast.Constant) and key.value == "mode" \
                            and _is_train_and_eval(value):
                        yield context.finding(self, value, self.MESSAGE)
