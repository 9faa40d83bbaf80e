"""The abstract values of the optimizer-state walk, and the role of the method walked."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from enum import Enum
from typing import Union


class Role(Enum):
    """The entry a walk came from: `preinitialize`, `step`, another method, restoration."""

    PREINIT = "preinitialize"
    STEP = "step"
    OTHER = "other"
    RESTORE = "restore"

    # Members are singletons: hash by identity in C, not Enum's Python-level name hash
    # (roles key every walk of the analysis).
    __hash__ = object.__hash__


# ---- abstract values ---------------------------------------------------------

class _Optimizer:
    def __repr__(self) -> str:
        return "OPTIMIZER"


class _StateMap:
    def __repr__(self) -> str:
        return "STATE_MAP"


class _ParamGroups:
    def __repr__(self) -> str:
        return "PARAM_GROUPS"


class _ParamGroup:
    def __repr__(self) -> str:
        return "PARAM_GROUP"


OPTIMIZER = _Optimizer()  # the optimizer (`self` in its methods)
STATE_MAP = _StateMap()  # `self.state`
PARAM_GROUPS = _ParamGroups()  # `self.param_groups`
PARAM_GROUP = _ParamGroup()  # one of them (`for group in self.param_groups`)


class ParamState:
    """One parameter's state dict (`self.state[p]`); identity matters."""

    def __init__(self, label: str):
        self.label = label

    def __repr__(self) -> str:
        return f"ParamState({self.label})"


# Immutable by convention: `frozen=True` makes each creation ~4x slower.
@dataclass(slots=True, unsafe_hash=True)
class StateTensor:
    """A value read from a parameter's state; `version` tells whether it is still the
    object stored under `key` (a rebinding write bumps the entry's version)."""

    owner: ParamState
    key: str | None
    version: int


@dataclass(slots=True, unsafe_hash=True)
class Derived:
    """A new tensor computed from a state tensor (not the stored object)."""

    source: StateTensor


@dataclass(slots=True, unsafe_hash=True)
class Strings:
    values: frozenset[str]


@dataclass(slots=True, unsafe_hash=True)
class IteratedKey:
    owner: ParamState


@dataclass(slots=True, unsafe_hash=True)
class EagerConstant:
    call: ast.Call
    function: str


@dataclass(slots=True, unsafe_hash=True)
class StateItems:
    """`x.items()` / `.values()` / `.keys()` of a state container."""

    owner: object
    view: str


@dataclass(slots=True, unsafe_hash=True)
class ValueTuple:
    items: tuple


@dataclass(slots=True, unsafe_hash=True)
class DictLiteral:
    entries: tuple  # ((key value, value value, value node), ...)


Value = Union[None, _Optimizer, _StateMap, _ParamGroups, _ParamGroup, ParamState,
              StateTensor, Derived, Strings, IteratedKey, EagerConstant, StateItems,
              ValueTuple, DictLiteral]


def join(a: Value, b: Value) -> Value:
    if a == b or a is b:
        return a
    if isinstance(a, Strings) and isinstance(b, Strings):
        return Strings(a.values | b.values)
    if isinstance(a, ParamState) and isinstance(b, ParamState):
        return a
    return None


def value_signature(value: Value) -> object:
    """What of `value` a walk may depend on (None: nothing)."""
    if isinstance(value, (StateTensor, Derived, ParamState)):
        return type(value).__name__ + (f":{value.key}" if isinstance(value, StateTensor) else "")
    if value is OPTIMIZER or value is STATE_MAP:
        return repr(value)
    return None


def derive(value: Value) -> Value:
    """A new tensor computed from a state tensor (None from anything else)."""
    if isinstance(value, StateTensor):
        return Derived(value)
    if isinstance(value, Derived):
        return value
    return None
