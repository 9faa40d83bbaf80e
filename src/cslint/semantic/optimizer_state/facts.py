"""The facts about optimizer state the analysis finds, for the CS1xx rules to report."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Union

from cslint.semantic.module_index import FunctionInfo


# ---- facts -------------------------------------------------------------------
# `where` names the class and the entry method (and helper) the walk came from:
# "MyAdam.step()", "MyAdam.reset() -> _init_buffers()".

@dataclass(frozen=True)
class StateCreated:
    """A state entry written outside `preinitialize` that it did not create (`guarded`:
    under a lazy-initialisation check such as `if len(state) == 0`)."""

    function: FunctionInfo
    node: ast.AST
    key: str | None
    guarded: bool
    where: str


@dataclass(frozen=True)
class GroupTensorCreated:
    """A tensor made under a key of a param group in `step`, under a check that the
    group lacks the key (`if "k" not in group: group["k"] = torch.zeros(1)`): made by
    the first step only, so the first step's graph differs from the others'."""

    function: FunctionInfo
    node: ast.AST
    key: str
    where: str


@dataclass(frozen=True)
class StateDictRebound:
    """A parameter's whole state bound to a new dict outside `preinitialize`."""

    function: FunctionInfo
    node: ast.AST
    where: str


@dataclass(frozen=True)
class StateRebound:
    """A state entry `preinitialize` created, bound to another object in `step`."""

    function: FunctionInfo
    node: ast.AST
    key: str | None
    key_node: ast.AST
    where: str


@dataclass(frozen=True)
class EagerStateFill:
    """A state entry filled with a constant by an eager torch op in `preinitialize`
    (`node` is that call, `torch_function` its qualified name)."""

    function: FunctionInfo
    node: ast.Call
    keys: tuple[str, ...] | None
    torch_function: str


@dataclass(frozen=True)
class StateUpdateLost:
    """A name holding a state tensor rebound in `step` to a new value that is never
    stored back."""

    function: FunctionInfo
    node: ast.AST
    name: str
    key: str | None


StateFact = Union[StateCreated, GroupTensorCreated, StateDictRebound, StateRebound,
                  EagerStateFill, StateUpdateLost]
