"""Facts about a module's program: the torch optimizers and schedulers it instantiates,
a `mode="train_and_eval"` (its float64 uses: `precision`).

Each is found per module on demand, by a text search first: only the lines that name
what is looked for are walked, so a rule looks at a few statements of a large module.
"""

from __future__ import annotations

import ast
import bisect
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Iterable, Iterator

from cslint.semantic.module_index import ModuleIndex, dotted_name
from cslint.semantic.torch_api import TORCH_OPTIM_BASES, TORCH_OPTIMIZER_SUBMODULES


@lru_cache(maxsize=1)
def torch_equivalents() -> dict[str, Any]:
    """`data/torch_equivalents.json`: optimizer signatures and scheduler replacements."""
    text = resources.files("cslint").joinpath("data/torch_equivalents.json").read_text("utf-8")
    return json.loads(text)


# ---- facts -------------------------------------------------------------------------------

@dataclass(frozen=True)
class TorchOptimizerCall:
    """An instantiation of `torch.optim.<name>`."""

    node: ast.Call
    name: str


@dataclass(frozen=True)
class TorchSchedulerCall:
    """An instantiation of `torch.optim.lr_scheduler.<name>`."""

    node: ast.Call
    name: str


@dataclass(frozen=True)
class TrainAndEvalRequested:
    """`mode="train_and_eval"`, as a call's keyword or a dict entry (`node`: the value)."""

    node: ast.expr


def torch_optimizer_calls(module: ModuleIndex, text: str) -> Iterator[TorchOptimizerCall]:
    """The module's instantiations of torch optimizers, in walk order (`text`: its source)."""
    if "optim" not in text:
        return
    for call in iter_calls(module.tree, _torch_lines(module, text)):
        name = torch_optimizer_name(qualified_callee(module, call.func))
        if name is not None:
            yield TorchOptimizerCall(call, name)


def torch_scheduler_calls(module: ModuleIndex, text: str) -> Iterator[TorchSchedulerCall]:
    """The module's instantiations of torch LR schedulers, in walk order."""
    if "lr_scheduler" not in text:
        return
    for call in iter_calls(module.tree, _torch_lines(module, text)):
        name = torch_scheduler_name(qualified_callee(module, call.func))
        if name is not None:
            yield TorchSchedulerCall(call, name)


def train_and_eval_requests(module: ModuleIndex, text: str) -> Iterator[TrainAndEvalRequested]:
    """`mode="train_and_eval"` in a cstorch program, in walk order."""
    if "train_and_eval" not in text or not module.imports_cstorch:
        return
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "mode" and _is_train_and_eval(keyword.value):
                    yield TrainAndEvalRequested(keyword.value)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "mode" \
                        and _is_train_and_eval(value):
                    yield TrainAndEvalRequested(value)


def _is_train_and_eval(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value == "train_and_eval"


# ---- resolving what a call instantiates ----------------------------------------------------

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


def torch_optimizer_name(qualname: str | None) -> str | None:
    """`torch.optim.AdamW` / `torch.optim.adamw.AdamW` -> `AdamW`."""
    if not qualname or not qualname.startswith("torch.optim."):
        return None
    parts = qualname.split(".")[2:]
    if len(parts) == 2 and parts[0] in TORCH_OPTIMIZER_SUBMODULES:
        parts = parts[1:]
    if len(parts) != 1:
        return None
    name = parts[0]
    if not name[:1].isupper() or name in TORCH_OPTIM_BASES:
        return None
    return name


def torch_scheduler_name(qualname: str | None) -> str | None:
    """`torch.optim.lr_scheduler.StepLR` -> `StepLR`."""
    prefix = "torch.optim.lr_scheduler."
    if not qualname or not qualname.startswith(prefix):
        return None
    name = qualname[len(prefix):]
    if "." in name or not name[:1].isupper() or name in TORCH_OPTIM_BASES:
        return None
    return name


# ---- text-led walks ------------------------------------------------------------------------

def _torch_lines(module: ModuleIndex, text: str) -> list[int] | None:
    """Lines that name something the module imported from torch (None: any line may,
    through a star import)."""
    if any(star.split(".")[0] == "torch" for star in module.star_imports):
        return None
    names = [local for local, target in module.imports.items()
             if target == "torch" or target.startswith("torch.")]
    return candidate_lines(text, names)


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
    `lines` is None): subtrees elsewhere are skipped."""
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
