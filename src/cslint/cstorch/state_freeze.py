"""Optimizer state frozen after `preinitialize` (CS101, CS102).

The system compiles the optimizer step once, with the state tensors that
`preinitialize` created. A step that adds a state entry (CS101) or rebinds one
to another object (CS102) traces a graph whose state the system does not have.

torch replaces `optimizer.state` with a plain defaultdict in `__init__`,
`load_state_dict` and `__setstate__`, and dict's C methods (`update`,
`setdefault`, `|=`) bypass `__setitem__`. So the freeze is enforced only while
`step` runs: the optimizer swaps `self.state` for a `FrozenOptimizerState`
holding `FrozenParamState` views, and restores the original mapping after.
Permitted writes (same object, or any write with strict mode off or from
host-side code) go through to the original dicts, so nothing is lost.

The freeze belongs to the thread whose step made it: another thread reading
or writing the state meanwhile is not that step's code, so it is not checked.
"""

from __future__ import annotations

import ast
import collections
import inspect
import textwrap
import threading
from collections.abc import Callable, Iterable, Mapping

import torch

from cslint import advice
from cslint.cstorch.errors import compliance_error
from cslint.cstorch.guard import checks_active, current_owner
from cslint.cstorch.source_position import SourceSite, user_site

__all__ = [
    "AttributeSnapshot",
    "FrozenOptimizerState",
    "FrozenParamGroup",
    "FrozenParamState",
    "StateSnapshot",
    "attribute_gains_tensor_error",
    "state_layout",
    "layout_differences",
]

_MISSING = object()

class _WritesThroughSetItem(dict):
    """A dict whose every write goes through `__setitem__` (dict's own `setdefault`,
    `update` and `|=` are C code that bypasses it)."""

    __slots__ = ()

    def setdefault(self, key, default=None):
        if key in self:
            return dict.__getitem__(self, key)
        self[key] = default
        return self[key]  # (what `__setitem__` stored: a view, for the optimizer state)

    def update(self, *args, **kwargs) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other):
        self.update(other)
        return self


class FrozenParamState(_WritesThroughSetItem):
    """One parameter's state while `step` runs: no new keys, no rebinding."""

    # Made for every parameter at every step: slots keep that cheap.
    __slots__ = ("_plain", "_frozen_state", "_param")

    def __init__(self, plain: dict, frozen_state: FrozenOptimizerState, param) -> None:
        dict.__init__(self, plain)
        self._plain = plain
        self._frozen_state = frozen_state
        self._param = param

    def _describe(self) -> str:
        return self._frozen_state.describe(self._param)

    def _check_write(self, key, value) -> bool:
        """Raise for a forbidden write; True when the write must be applied."""
        current = dict.get(self, key, _MISSING)
        if current is value:
            return False
        if not self._frozen_state.checks_active():
            return True
        if current is _MISSING:
            raise compliance_error(
                "CS101",
                f"adds state entry {key!r} to {self._describe()} while step "
                "runs; the state is fixed once preinitialize() returns",
                advice.STATE_OUTSIDE_PREINITIALIZE,
                owner=current_owner(),
                site=user_site(),
            )
        raise compliance_error(
            "CS102",
            f"rebinds state entry {key!r} of {self._describe()} to a different "
            f"object ({_kind(value)} replacing {_kind(current)}); the compiled "
            "step keeps updating the original",
            advice.STATE_REBOUND.format(name=f"state[{key!r}]"),
            owner=current_owner(),
            site=user_site(),
        )

    def _check_removal(self, key) -> None:
        if self._frozen_state.checks_active():
            raise compliance_error(
                "CS102",
                f"removes state entry {key!r} of {self._describe()} while step "
                "runs; the state is fixed once preinitialize() returns",
                advice.STATE_REMOVED,
                owner=current_owner(),
                site=user_site(),
            )

    def __setitem__(self, key, value) -> None:
        if self._check_write(key, value):
            dict.__setitem__(self, key, value)
            self._plain[key] = value

    def __delitem__(self, key) -> None:
        if key in self:
            self._check_removal(key)
            self._plain.pop(key, None)
        dict.__delitem__(self, key)

    def pop(self, key, *default):
        if key in self:
            self._check_removal(key)
            self._plain.pop(key, None)
        return dict.pop(self, key, *default)

    def popitem(self):
        if self:
            self._check_removal(next(reversed(self)))
        key, value = dict.popitem(self)
        self._plain.pop(key, None)
        return key, value

    def clear(self) -> None:
        if self:
            self._check_removal(next(iter(self)))
        dict.clear(self)
        self._plain.clear()


class FrozenParamGroup(_WritesThroughSetItem):
    """One param group while `step` runs: a tensor under a key the group did not have is
    CS101 (made by the first step only, that step's graph differs from the others');
    every other write goes through to the group. (A Python number a step adds is no
    tensor of the graph: where it decides the graph, that is CS501.)"""

    __slots__ = ("_plain", "_index", "_stepping_thread")

    def __init__(self, plain: dict, index: int) -> None:
        dict.__init__(self, plain)
        self._plain = plain
        self._index = index
        self._stepping_thread = threading.get_ident()

    @property
    def original(self) -> dict:
        return self._plain

    def __setitem__(self, key, value) -> None:
        if key not in self and isinstance(value, torch.Tensor) \
                and threading.get_ident() == self._stepping_thread and checks_active():
            raise compliance_error(
                "CS101",
                f"adds the tensor entry {key!r} to param group {self._index} while step "
                "runs: only the first step makes it, so that step's graph differs from "
                "the others'",
                advice.GROUP_TENSOR_OUTSIDE_PREINITIALIZE.format(key=key),
                owner=current_owner(),
                site=user_site(),
            )
        dict.__setitem__(self, key, value)
        self._plain[key] = value

    def __delitem__(self, key) -> None:
        dict.__delitem__(self, key)
        self._plain.pop(key, None)

    def pop(self, key, *default):
        self._plain.pop(key, None)
        return dict.pop(self, key, *default)


class FrozenOptimizerState(_WritesThroughSetItem):
    """`optimizer.state` while `step` runs.

    Reading the state of a parameter that has none is allowed (torch's
    defaultdict read); binding `state[p]` to a new dict is CS101.
    """

    def __init__(self, original: dict, describe: Callable[[object], str]) -> None:
        super().__init__()
        self._original = original
        self._describe = describe
        self._stepping_thread = threading.get_ident()
        set_view = dict.__setitem__
        for param, plain in original.items():
            if type(plain) is dict:  # `_view`, inlined: this runs per parameter per step
                set_view(self, param, FrozenParamState(plain, self, param))
            else:
                set_view(self, param, self._view(param, plain))

    @property
    def original(self) -> dict:
        """The mapping the step froze (what `optimizer.state` is between steps)."""
        return self._original

    def describe(self, param) -> str:
        return self._describe(param)

    def checks_active(self) -> bool:
        """Whether a write now is the frozen step's own, checked write."""
        return threading.get_ident() == self._stepping_thread and checks_active()

    def _view(self, param, plain):
        if isinstance(plain, dict):
            return FrozenParamState(plain, self, param)
        return plain

    def __missing__(self, param):
        # Mirror the defaultdict read: the original gains an empty dict too.
        plain = self._original[param]
        view = self._view(param, plain)
        dict.__setitem__(self, param, view)
        return view

    def __setitem__(self, param, value) -> None:
        current = dict.get(self, param, _MISSING)
        if current is value:
            return
        if self.checks_active():
            raise compliance_error(
                "CS101",
                f"binds self.state[...] of {self.describe(param)} to a new "
                f"{type(value).__name__} while step runs; the state is fixed "
                "once preinitialize() returns",
                advice.PARAMETER_STATE_REBOUND,
                owner=current_owner(),
                site=user_site(),
            )
        self._original[param] = value
        dict.__setitem__(self, param, self._view(param, value))

    def __delitem__(self, param) -> None:
        self._refuse_removal(param)
        dict.__delitem__(self, param)
        self._original.pop(param, None)

    def pop(self, param, *default):
        if param in self:
            self._refuse_removal(param)
            self._original.pop(param, None)
        return dict.pop(self, param, *default)

    def popitem(self):
        if self:
            self._refuse_removal(next(reversed(self)))
        param, value = dict.popitem(self)
        self._original.pop(param, None)
        return param, value

    def clear(self) -> None:
        if self:
            self._refuse_removal(next(iter(self)))
        dict.clear(self)
        self._original.clear()

    def _refuse_removal(self, param) -> None:
        if self.checks_active():
            raise self._removal_error(param)

    def _removal_error(self, param):
        return compliance_error(
            "CS102",
            f"removes the state of {self.describe(param)} while step runs; the "
            "state is fixed once preinitialize() returns",
            advice.STATE_REMOVED,
            owner=current_owner(),
            site=user_site(),
        )


# ---------------------------------------------------------------------------
# State kept in optimizer attributes (CS101)
#
# `self.buffers = [...]` or `self.history.append(x)` during step keeps state
# outside self.state: the compiled step has no such state, and Python-side
# containers would be filled once, when the step is traced. A write that
# gives an attribute a tensor is caught as it happens (the optimizer's
# `__setattr__`); a container that gains tensors is caught when step returns,
# by comparing sizes with a snapshot taken when it started. Python values
# kept on the side (a log of floats a step closure writes) are host
# bookkeeping, not state, and pass.

_CONTAINERS = (list, dict, set, collections.deque)
_GROWING_CALLS = frozenset(
    {"append", "appendleft", "extend", "extendleft", "insert", "add", "update", "setdefault"}
)


def holds_tensor(value) -> bool:
    """A tensor, or a container with a tensor among its items or values."""
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, dict):
        return any(isinstance(item, torch.Tensor) for item in value.values())
    if isinstance(value, (list, tuple, set, frozenset, collections.deque)):
        return any(isinstance(item, torch.Tensor) for item in value)
    return False


def attribute_gains_tensor_error(name: str, value, owner: str | None):
    return compliance_error(
        "CS101",
        f"sets self.{name} to {_kind(value)} while step runs: state kept in an "
        "optimizer attribute is not part of the compiled step",
        advice.ATTRIBUTE_STATE,
        owner=owner,
        site=user_site(),
    )


class AttributeSnapshot:
    """An optimizer's attribute names and container sizes when step starts."""

    __slots__ = ("names", "sizes")

    def __init__(self, attributes: dict) -> None:
        self.names = attributes.keys() - {"state"}
        self.sizes = {
            name: (value, len(value))
            for name, value in attributes.items()
            if isinstance(value, _CONTAINERS) and name != "state"
        }

    def check(self, optimizer, step: Callable, owner: str) -> None:
        """CS101 for a container attribute that grew, or was created, while step ran."""
        attributes = optimizer.__dict__
        for name, (container, size) in self.sizes.items():
            if (
                attributes.get(name) is container
                and len(container) > size
                and _added_tensors(container, size)
            ):
                raise compliance_error(
                    "CS101",
                    f"self.{name} grows from {size} to {len(container)} entries while "
                    "step runs: state kept in an optimizer attribute is not part of the "
                    "compiled step (the system would fill it once, when it traces the step)",
                    advice.ATTRIBUTE_STATE,
                    owner=owner,
                    site=_attribute_write_site(type(optimizer), name, step, grows=True),
                )
        for name in attributes.keys() - self.names - {"state"}:
            value = attributes[name]
            if isinstance(value, _CONTAINERS) and holds_tensor(value):
                raise compliance_error(
                    "CS101",
                    f"creates self.{name} ({_kind(value)} of {len(value)} entries) while "
                    "step runs: state kept in an optimizer attribute is not part of the "
                    "compiled step",
                    advice.ATTRIBUTE_STATE,
                    owner=owner,
                    site=_attribute_write_site(type(optimizer), name, step, grows=False),
                )


class StateSnapshot:
    """A wrapper's state when step starts, where it cannot be frozen: its `state` is a
    read-only property giving the wrapped optimizer's (pytorch-optimizer's OrthoGrad,
    Lookahead). The wrapped optimizer's own step freezes it while that runs; what the
    wrapper's code adds or rebinds around it is found by comparing after."""

    __slots__ = ("entries",)

    def __init__(self, state: Mapping) -> None:
        self.entries = {id(param): (param, plain, dict(plain))
                        for param, plain in state.items() if isinstance(plain, Mapping)}

    def check(self, state: Mapping, describe: Callable[[object], str], owner: str) -> None:
        """CS101 for a parameter state or entry added since, CS102 for one rebound."""
        for param, plain in state.items():
            if not isinstance(plain, Mapping):
                continue
            found = self.entries.get(id(param))
            if found is None or found[1] is not plain:
                if not plain:
                    continue  # torch's defaultdict read of a parameter with no state
                raise compliance_error(
                    "CS101",
                    f"binds self.state[...] of {describe(param)} to a new "
                    f"{type(plain).__name__} while step runs; the state is fixed "
                    "once preinitialize() returns",
                    advice.PARAMETER_STATE_REBOUND, owner=owner)
            before = found[2]
            for key, value in plain.items():
                current = before.get(key, _MISSING)
                if current is value:
                    continue
                if current is _MISSING:
                    raise compliance_error(
                        "CS101",
                        f"adds state entry {key!r} to {describe(param)} while step "
                        "runs; the state is fixed once preinitialize() returns",
                        advice.STATE_OUTSIDE_PREINITIALIZE, owner=owner)
                raise compliance_error(
                    "CS102",
                    f"rebinds state entry {key!r} of {describe(param)} to a different "
                    f"object ({_kind(value)} replacing {_kind(current)}); the compiled "
                    "step keeps updating the original",
                    advice.STATE_REBOUND.format(name=f"state[{key!r}]"), owner=owner)


def _added_tensors(container, size: int) -> bool:
    """Whether what a container gained holds tensors (a list's new tail; any
    value of a dict or set)."""
    if isinstance(container, (list, collections.deque)):
        return any(isinstance(item, torch.Tensor) for item in list(container)[size:])
    return holds_tensor(container)


def _writes_attribute(node: ast.AST, name: str, grows: bool) -> bool:
    """`self.<name>.append(...)` or `self.<name>[k] = ...` (grows), or
    `self.<name> = ...` (creates)."""

    def is_attribute(target) -> bool:
        return (
            isinstance(target, ast.Attribute)
            and target.attr == name
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        )

    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return grows and node.func.attr in _GROWING_CALLS and is_attribute(node.func.value)
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if grows:
            return any(
                isinstance(target, ast.Subscript) and is_attribute(target.value)
                for target in targets
            )
        return any(is_attribute(target) for target in targets)
    return False


def _attribute_write_site(
    cls: type, name: str, step: Callable, grows: bool
) -> SourceSite | None:
    """The first line of the optimizer's classes that grows (or creates)
    `self.<name>`; else the step's `def` line (the write is elsewhere, e.g.
    in a helper that names the optimizer otherwise)."""
    for klass in cls.__mro__:
        module = klass.__module__ or ""
        if module.startswith("torch") or module == "cslint.cstorch.optim.optimizer":
            continue
        try:
            lines, first_line = inspect.getsourcelines(klass)
            filename = inspect.getsourcefile(klass)
            tree = ast.parse(textwrap.dedent("".join(lines)))
        except (OSError, TypeError, SyntaxError):
            continue
        hits = sorted(
            node.lineno for node in ast.walk(tree) if _writes_attribute(node, name, grows)
        )
        if hits and filename:
            lineno = first_line + hits[0] - 1
            return SourceSite(filename, lineno, lines[hits[0] - 1].strip())
    try:
        lines, first_line = inspect.getsourcelines(inspect.unwrap(step))
        filename = inspect.getsourcefile(inspect.unwrap(step))
    except (OSError, TypeError):
        return None
    # The `def` line, below any decorators.
    offset = next(
        (
            index
            for index, line in enumerate(lines)
            if line.lstrip().startswith(("def ", "async def "))
        ),
        0,
    )
    return SourceSite(filename or "<unknown>", first_line + offset, lines[offset].strip())


def _kind(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    return _with_article(type(value).__name__)


def _with_article(noun: str) -> str:
    return f"an {noun}" if noun[:1] in "aeiou" else f"a {noun}"


# ---------------------------------------------------------------------------
# The layout preinitialize created, to check checkpoints against

Layout = dict  # param index -> {state key: shape tuple, or None for non-tensors}


def state_layout(params: Iterable, state: Mapping) -> Layout:
    """Keys and shapes of each parameter's state, by torch's param index."""
    layout: Layout = {}
    for index, param in enumerate(params):
        entries = state.get(param)
        if not entries:
            continue
        layout[index] = {
            key: tuple(value.shape) if isinstance(value, torch.Tensor) else None
            for key, value in entries.items()
        }
    return layout


def layout_differences(expected: Layout, loaded: Mapping) -> tuple[list[str], list[str]]:
    """(key differences, shape differences) between `expected` and a checkpoint's
    `state` section (param index -> {key: value}), phrased for messages."""
    key_differences: list[str] = []
    shape_differences: list[str] = []
    for index in sorted(set(expected) | set(loaded), key=str):
        want = expected.get(index, {})
        got = loaded.get(index)
        if got is None:
            got = {}
        elif not isinstance(got, Mapping):
            key_differences.append(
                f"state[{index}] is {_kind(got)}, not a dict of state entries"
            )
            continue
        missing = [key for key in want if key not in got]
        unexpected = [key for key in got if key not in want]
        if missing:
            key_differences.append(
                f"state[{index}] lacks {', '.join(map(repr, missing))}"
            )
        if unexpected:
            key_differences.append(
                f"state[{index}] has {', '.join(map(repr, unexpected))} that "
                "preinitialize() does not create"
            )
        for key, shape in want.items():
            if key not in got:
                continue
            value = got[key]
            got_shape = tuple(value.shape) if isinstance(value, torch.Tensor) else None
            if got_shape != shape:
                shape_differences.append(
                    f"state[{index}][{key!r}] is {_describe_shape(got_shape, value)} "
                    f"in the checkpoint but {_describe_shape(shape, None)} from "
                    "preinitialize()"
                )
    return key_differences, shape_differences


def _describe_shape(shape, value) -> str:
    if shape is None:
        return _with_article(type(value).__name__) if value is not None else "not a tensor"
    return f"a tensor of shape {shape}"
