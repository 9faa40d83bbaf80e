"""The facts the analysis finds in traced code, for the CS2xx rules to report."""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from enum import Enum
from typing import Union

from cslint.semantic.module_index import FunctionInfo


# ---- facts ------------------------------------------------------------------------------
# `node` is where the fact is; `chain` is how the value became a device tensor, newest
# step first (steps render as text only when a rule reports them).

class Condition(Enum):
    """Where a truth value is taken."""

    IF = "if"
    WHILE = "while"
    EXPRESSION = "expression"  # and/or/not, `x if t else y`, assert, bool(), min/max


@dataclass(frozen=True)
class TruthTest:
    """The truth value of a device tensor (`subject`) decides Python control flow."""

    function: FunctionInfo
    node: ast.AST
    subject: ast.AST
    chain: tuple
    condition: Condition


@dataclass(frozen=True)
class LoopBound:
    """A device tensor bounds a Python loop (`range(n)` with a tensor `n`)."""

    function: FunctionInfo
    node: ast.AST
    chain: tuple


@dataclass(frozen=True)
class HostRead:
    """A device tensor (`subject`) read on the host by `reader` ("`float()`", "logging",
    "formatting", "`.item()`", ...); `listed_by`: the torch constructor (`tensor`,
    `as_tensor`, `asarray`) given `subject`, a list or tuple holding device tensors,
    each read as a number (`torch.tensor([t1, t2])`)."""

    function: FunctionInfo
    node: ast.AST
    subject: ast.AST
    chain: tuple
    reader: str
    listed_by: str | None = None


@dataclass(frozen=True)
class ScalarArgument:
    """A device tensor where PyTorch needs a Python number; `position` says which
    ("`alpha=` of `.add_()`", "a slice bound"). `scheduled`: it is (or is computed
    from) a scheduled hyperparameter. `method`/`keyword`: the Tensor method and keyword
    when it is a scaling keyword of a Tensor method (`p.add_(g, alpha=-lr)`), the method
    alone when it is the scale its deprecated form takes first (`p.add_(-lr, g)`); `foreach`
    and `keyword` when it is that of a foreach op (`torch._foreach_add_(ps, gs, alpha=-lr)`);
    `filled` ("full", "full_like") when it is the fill value of that torch function;
    `listed` (the op, "_foreach_lerp_") when it is a foreach op's number that a list of
    tensors, one per tensor, may give instead (`weight` of `_foreach_lerp_`), with its
    `keyword` and `index` (where it goes as a positional argument)."""

    function: FunctionInfo
    node: ast.AST
    chain: tuple
    scheduled: bool
    position: str
    method: str | None = None
    keyword: str | None = None
    foreach: str | None = None
    filled: str | None = None
    listed: str | None = None
    index: int | None = None


@dataclass(frozen=True)
class ValueDependentShape:
    """An op (`op`: "nonzero", "where(condition)") whose output shape depends on the
    values of a device tensor."""

    function: FunctionInfo
    node: ast.AST
    op: str


@dataclass(frozen=True)
class MaskSelection:
    """A device tensor indexed with a boolean tensor `mask` (a value-dependent shape)."""

    function: FunctionInfo
    node: ast.AST
    mask: ast.AST


TracedFact = Union[TruthTest, LoopBound, HostRead, ScalarArgument, ValueDependentShape,
                   MaskSelection]


def fact_kind(fact: TracedFact) -> object:
    """What makes two facts at one place different findings."""
    if type(fact) is TruthTest:
        return fact.condition
    if type(fact) is ScalarArgument:
        return (ScalarArgument, fact.scheduled)
    return type(fact)


def with_chain(fact: TracedFact, chain: tuple) -> TracedFact:
    return replace(fact, chain=chain)


def fact_order(fact: TracedFact) -> tuple:
    """Which of two facts of one kind at one place is reported: the one with the shortest
    explanation, then by its text. A canonical choice, so the explanation never depends on
    which caller the analysis happened to walk first (the order of files, the cache)."""
    chain = getattr(fact, "chain", ())
    subject = getattr(fact, "subject", None) or getattr(fact, "mask", None)
    where = (subject.lineno, subject.col_offset) if subject is not None else ()
    return (len(chain), tuple(map(str, chain)), where,
            *(str(getattr(fact, name, "")) for name in
              ("condition", "scheduled", "reader", "position", "method", "keyword", "op")))


def reading_order(fact: TracedFact) -> tuple:
    """Facts by place in the file, then canonically (a rule reports one per place)."""
    node = fact.node
    return (node.lineno, node.col_offset, type(fact).__name__, fact_order(fact))
