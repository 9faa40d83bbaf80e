"""The cstorch base optimizer, with strict-mode checks.

Mirrors `cerebras.pytorch.optim.Optimizer`: state is created ahead of time in
`preinitialize()` so the system can compile the whole step before the first
iteration. In strict mode (the default) every `step` a subclass runs (defined in its
body, inherited from a mixin, or wrapped by any decorator) runs
with its state frozen (CS101/CS102; attributes that gain a tensor or
containers that grow while it runs are CS101 too) and under the host-conversion guard
(CS201-CS206), and each group's lr is a 0-dim device tensor from the first step
on, as it is on the system (its backend makes the param groups' numbers tensors when
the run starts, after `__init__` and `preinitialize()`, and a scheduler writes the lr
just before each step).
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils.hooks import RemovableHandle
from torch.utils.weak import WeakIdKeyDictionary

from cslint import advice
from cslint.cstorch import strict_mode
from cslint.cstorch.device_values import mark_optimizer_values, scheduled_origin
from cslint.cstorch.errors import compliance_error
from cslint.cstorch.guard import current_owner, guarded_region, host_side
from cslint.cstorch.provenance import mark
from cslint.cstorch.source_position import user_site
from cslint.cstorch.state_freeze import (
    AttributeSnapshot,
    FrozenOptimizerState,
    FrozenParamGroup,
    StateSnapshot,
    attribute_gains_tensor_error,
    holds_tensor,
    layout_differences,
    state_layout,
)

__all__ = ["Optimizer"]


def _loss_closure_on_host(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The loss closure given to `step(closure)` runs host-side, unguarded."""

    def on_host(closure):
        @functools.wraps(closure)
        def run_closure(*closure_args, **closure_kwargs):
            with host_side():
                return closure(*closure_args, **closure_kwargs)

        return run_closure

    if args and callable(args[0]):
        return (on_host(args[0]), *args[1:]), kwargs
    if callable(kwargs.get("closure")):
        return args, {**kwargs, "closure": on_host(kwargs["closure"])}
    return args, kwargs


def _step_owner(cls: type) -> str:
    """'Class.step' naming the class whose body defines the step `cls` runs
    (a mixin's, a base's), for messages."""
    for klass in cls.__mro__:
        if "step" in klass.__dict__:
            return f"{klass.__name__}.step"
    return f"{cls.__name__}.step"


def _guard_step(step: Callable, owner: str) -> Callable:
    """Wrap `step` (called as `step(self, ...)`, like torch's step hook calls
    it) so that it runs frozen and guarded in strict mode."""

    @functools.wraps(step)
    def guarded_step(self, *args, **kwargs):
        if not strict_mode.is_strict():
            return step(self, *args, **kwargs)
        args, kwargs = _loss_closure_on_host(args, kwargs)
        self._lrs_as_device_tensors()
        mark_optimizer_values(self, self.scheduled_keys())
        if not _swappable(type(self)):
            return _checked_after(self, step, owner, args, kwargs)
        original_state = self.state
        # A subclass's step calling super().step() is already frozen.
        swap = not isinstance(original_state, FrozenOptimizerState)
        if not swap:
            with guarded_region(owner, self._has_float64_params):
                return step(self, *args, **kwargs)
        attributes = AttributeSnapshot(self.__dict__)
        wrapped = _wrapped_states(self, original_state)
        self.state = FrozenOptimizerState(original_state, self._describe_param)
        original_groups = self.param_groups
        self.param_groups = [FrozenParamGroup(group, index)
                             for index, group in enumerate(original_groups)]
        try:
            with guarded_region(owner, self._has_float64_params):
                result = step(self, *args, **kwargs)
        finally:
            self.state = original_state
            self.param_groups = original_groups
        for state, before in wrapped:
            before.check(state, self._describe_param, owner)
        attributes.check(self, step, owner)
        return result

    guarded_step._cstorch_guarded_step = True
    return guarded_step


def _swappable(cls: type) -> bool:
    """Whether step may swap `state` and `param_groups` for frozen views: not where
    the class reads them through read-only properties (a wrapper's, which give the
    wrapped optimizer's)."""
    return not any(isinstance(attribute := getattr(cls, name, None), property)
                   and attribute.fset is None for name in ("state", "param_groups"))


def _checked_after(optimizer, step: Callable, owner: str, args, kwargs):
    """A wrapper's step: the wrapped optimizer's step freezes its own state while it
    runs; what the wrapper adds around it is compared after (`StateSnapshot`)."""
    state = optimizer.state
    states = [(state, StateSnapshot(state))] if isinstance(state, Mapping) else []
    states += _wrapped_states(optimizer, state)
    attributes = AttributeSnapshot(optimizer.__dict__)
    with guarded_region(owner, optimizer._has_float64_params):
        result = step(optimizer, *args, **kwargs)
    for checked, before in states:
        before.check(checked, optimizer._describe_param, owner)
    attributes.check(optimizer, step, owner)
    return result


def _wrapped_states(optimizer, own_state) -> list:
    """(state, StateSnapshot) of each optimizer `optimizer` keeps in an attribute (the
    one a wrapper wraps: timm's Lookahead keeps its slow weights in its base
    optimizer's state): that optimizer's own step freezes it only while it runs."""
    found, seen = [], {id(own_state)}
    for value in optimizer.__dict__.values():
        if isinstance(value, torch.optim.Optimizer) and value is not optimizer:
            state = value.state
            if id(state) not in seen and isinstance(state, dict):
                seen.add(id(state))
                found.append((state, StateSnapshot(state)))
    return found


def _rebuilt_on_load(attribute: str) -> bool:
    """Attributes a copy or unpickled optimizer gets afresh, not copied.

    Hook tables (torch drops them too), the weak scheduler registry (schedulers
    re-register as they load), and an instance-level `step`: torch's LR
    schedulers wrap `optimizer.step` with a function that points back at the
    original optimizer.
    """
    return attribute in ("_schedulers_registry", "step") or (
        attribute.startswith("_optimizer_") and attribute.endswith("_hooks")
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _normalize_tags(group: dict) -> None:
    tags = group.get("tags")
    if not tags:
        return
    if isinstance(tags, (list, tuple, frozenset)):
        group["tags"] = set(tags)
    elif not isinstance(tags, set):
        group["tags"] = {tags}


class Optimizer(torch.optim.Optimizer, ABC):
    """Abstract base of Cerebras-compliant optimizers.

    Subclasses implement `preinitialize()` (create all state) and `step()`
    (update it in place). `enable_global_step=True` creates `state[p]["step"]`,
    a float32 0-dim tensor on the parameter's device, for each parameter.

    deepcopy and pickle keep every attribute a subclass sets, and the copy is
    checked like the original. Strict mode is per thread; as in torch, one
    optimizer is stepped by one thread at a time.
    """

    def _patch_step_function(self) -> None:
        # torch wraps whatever `type(self).step` resolves to (a function of
        # the class body, one inherited from a mixin, a class-based decorator)
        # here, at construction and on unpickling; the guard goes inside
        # torch's wrapper, so every way of defining step is checked and
        # torch's step hooks run outside it, on the host.
        cls = type(self)
        step = cls.step
        if not getattr(step, "_cstorch_guarded_step", False):
            cls.step = _guard_step(step, _step_owner(cls))
        super()._patch_step_function()

    def __init__(
        self,
        params,
        defaults: dict[str, Any],
        enable_global_step: bool = False,
    ) -> None:
        self.enable_global_step = enable_global_step
        self._optimizer_zero_grad_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_zero_grad_post_hooks: OrderedDict = OrderedDict()
        # Schedulers attached to this optimizer (keys; values unused).
        self._schedulers_registry = WeakIdKeyDictionary()
        # The group keys they drive: what they wrote stays a device value after
        # they are gone, and copies of the optimizer keep it.
        self._scheduled_keys: set[str] = set()
        super().__init__(params, defaults)

        self.preinitialize()
        if enable_global_step:
            for param in self._params():
                self.state[param]["step"] = torch.tensor(
                    0.0, dtype=torch.float32, device=param.device
                )
        # What checkpoints are checked against in load_state_dict.
        self._preinitialized_layout = state_layout(self._params(), self.state)

    def __setattr__(self, name: str, value: Any) -> None:
        # While step runs (its state frozen), an attribute that gains a tensor
        # is state kept outside self.state: CS101 at the line that sets it.
        frozen = self.__dict__.get("state")
        if (
            type(frozen) is FrozenOptimizerState
            and name != "state"
            and frozen.checks_active()
            and holds_tensor(value)
            and not holds_tensor(self.__dict__.get(name))
        ):
            raise attribute_gains_tensor_error(name, value, current_owner())
        super().__setattr__(name, value)

    # -- construction helpers -------------------------------------------------

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        super().add_param_group(param_group)
        _normalize_tags(self.param_groups[-1])

    def _lrs_as_device_tensors(self) -> None:
        """In strict mode, each group's lr a 0-dim tensor on its parameters' device, as
        the system makes it before the step runs (a step, the graph check and a
        `trace`d function call this first)."""
        if strict_mode.is_strict():
            for group in self.param_groups:
                self._group_lr_as_device_tensor(group)

    @staticmethod
    def _group_lr_as_device_tensor(group: dict) -> None:
        # In the step the lr is a tensor on the system (the scheduler computes it
        # from the global step just before), so step code that treats it as a Python
        # number must fail here too. Not before: `__init__` and `preinitialize()` see
        # the number given, as on the system (`self.base_lrs = [g["lr"] ...]`).
        lr = group.get("lr")
        if isinstance(lr, (int, float)) and not isinstance(lr, bool):
            params = group["params"]
            device = params[0].device if params else None
            # Made outside the modes that watch the step (the graph check records its
            # ops): the system makes it before the step runs.
            with _disable_current_modes():
                group["lr"] = torch.tensor(float(lr), dtype=torch.float32, device=device)
        if isinstance(group.get("lr"), torch.Tensor):
            mark(group["lr"], scheduled_origin("lr"))

    def _params(self) -> list:
        """All parameters in torch's state_dict index order."""
        return [param for group in self.param_groups for param in group["params"]]

    def _has_float64_params(self) -> bool:
        """Whether the user gave float64 parameters (strict mode's CS403 lets
        the step follow their dtype)."""
        return any(param.dtype is torch.float64 for param in self._params())

    def _describe_param(self, param) -> str:
        index = 0
        for group in self.param_groups:
            names = group.get("param_names")
            for position, candidate in enumerate(group["params"]):
                if candidate is param:
                    name = f" {names[position]!r}" if names else ""
                    return (
                        f"the parameter{name} at index {index} "
                        f"(shape {tuple(param.shape)})"
                    )
                index += 1
        if isinstance(param, torch.Tensor):
            # No repr: printing a device tensor inside the step is itself CS204.
            return f"a tensor of shape {tuple(param.shape)} that is not a parameter of this optimizer"
        return f"the state key {param!r}"

    def __getstate__(self) -> dict[str, Any]:
        # torch pickles only defaults/state/param_groups, which loses what a
        # subclass keeps in attributes (its copy's step would then fail or
        # differ). Keep every attribute but those rebuilt on load.
        state = {
            name: value
            for name, value in self.__dict__.items()
            if not _rebuilt_on_load(name)
        }
        if isinstance(self.state, FrozenOptimizerState):  # copied while step runs
            state["state"] = self.state.original
        state["param_groups"] = [group.original if isinstance(group, FrozenParamGroup)
                                 else group for group in self.param_groups]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A scheduler unpickled before its optimizer's state is set (a cycle)
        # has registered already: keep that.
        registry = self.__dict__.get("_schedulers_registry", WeakIdKeyDictionary())
        scheduled_keys = self.__dict__.get("_scheduled_keys", set())
        super().__setstate__(state)
        self._schedulers_registry = registry
        self._scheduled_keys = set(state.get("_scheduled_keys", ())) | scheduled_keys
        self.__dict__.setdefault("enable_global_step", False)
        self.__dict__.setdefault("_preinitialized_layout", {})
        self.__dict__.setdefault("_optimizer_zero_grad_pre_hooks", OrderedDict())
        self.__dict__.setdefault("_optimizer_zero_grad_post_hooks", OrderedDict())

    # -- global step -------------------------------------------------------------

    def increment_global_step(self, p: torch.Tensor) -> torch.Tensor:
        """Add 1 to `state[p]["step"]` in place and return it."""
        state = self.state[p]
        if "step" not in state:
            raise RuntimeError(
                f"{type(self).__name__} has no global step for this parameter: "
                "pass enable_global_step=True to cstorch.optim.Optimizer.__init__ "
                "to create state[p]['step']"
            )
        state["step"] += 1.0
        return state["step"]

    # -- schedulers --------------------------------------------------------------

    def register_scheduler(self, scheduler) -> None:
        """Attach a cstorch scheduler: the group key it drives becomes a
        scheduled (device) value. Held weakly, as on the system."""
        # setdefault: a scheduler may re-register while this optimizer is
        # still being unpickled, before its attributes are restored.
        self.__dict__.setdefault("_schedulers_registry", WeakIdKeyDictionary())[scheduler] = None
        self.__dict__.setdefault("_scheduled_keys", set()).add(scheduler.param_group_key)

    def registered_schedulers(self) -> list:
        """The schedulers attached to this optimizer that are still alive."""
        return list(self._schedulers_registry.keys())

    def scheduled_keys(self) -> set[str]:
        """The group keys holding scheduled (device) values: the lr, and every
        key a scheduler attached to this optimizer (or its original) drives."""
        # (A wrapper that never runs this class's __init__ has none of its own.)
        return {"lr", *self.__dict__.get("_scheduled_keys", ())}

    # -- state dict --------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        packed = super().state_dict()
        # Plain dicts only, so torch.load(weights_only=True) accepts the file
        # even when called while the state is frozen.
        packed["state"] = {
            index: dict(entries) if isinstance(entries, dict) else entries
            for index, entries in packed["state"].items()
        }
        return packed

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """torch's load_state_dict, after checking the checkpoint fits.

        Every check runs before anything is loaded, so a refused checkpoint
        leaves the optimizer exactly as it was. The param groups must match
        (torch checks that too, without saying where); in strict mode each
        parameter's state must also have the keys and tensor shapes that
        `preinitialize()` creates (CS101, CS102).
        """
        self._check_checkpoint_groups(state_dict)
        if strict_mode.is_strict():
            self._check_checkpoint_layout(state_dict)
        super().load_state_dict(state_dict)
        for group in self.param_groups:
            _normalize_tags(group)
            if strict_mode.is_strict():
                self._group_lr_as_device_tensor(group)

    def _check_checkpoint_groups(self, state_dict: Any) -> None:
        name = type(self).__name__
        owner = f"{name}.load_state_dict"
        fix = (
            f"load a checkpoint saved by {name}.state_dict() from an optimizer over "
            "the same parameters, in the same param groups"
        )
        if not isinstance(state_dict, Mapping):
            raise TypeError(
                f"{owner} expects the dict optimizer.state_dict() returns, got "
                f"{type(state_dict).__name__}\n  fix: {fix}"
            )
        problems = []
        for section, kind, kind_name in (
            ("state", Mapping, "dict"),
            ("param_groups", (list, tuple), "list"),
        ):
            if section not in state_dict:
                problems.append(f"it has no {section!r} section")
            elif not isinstance(state_dict[section], kind):
                problems.append(
                    f"its {section!r} section is a {type(state_dict[section]).__name__}, "
                    f"not a {kind_name}"
                )
        saved_groups = state_dict.get("param_groups")
        if not isinstance(saved_groups, (list, tuple)):
            saved_groups = self.param_groups  # reported above; nothing to compare
        if len(saved_groups) != len(self.param_groups):
            problems.append(
                f"it has {_count(len(saved_groups), 'param group')} where {name} has "
                f"{len(self.param_groups)}"
            )
        for index, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if not isinstance(saved, Mapping) or "params" not in saved:
                problems.append(f"its param_groups[{index}] has no 'params' list")
            elif len(saved["params"]) != len(group["params"]):
                problems.append(
                    f"its param_groups[{index}] holds "
                    f"{_count(len(saved['params']), 'parameter')} where {name}'s "
                    f"holds {len(group['params'])}"
                )
        if problems:
            raise ValueError(
                f"{owner}: the checkpoint does not fit this optimizer, nothing was "
                f"loaded: {'; '.join(problems)}\n  fix: {fix}"
            )

    def _check_checkpoint_layout(self, state_dict: Mapping) -> None:
        # Checkpoint state is keyed by the ids its param_groups list; torch maps
        # them to this optimizer's parameters by position, and so does this.
        saved_ids = [
            param_id for group in state_dict["param_groups"] for param_id in group["params"]
        ]
        position_of = {param_id: position for position, param_id in enumerate(saved_ids)}
        by_position = {}
        strays = []
        for param_id, entries in state_dict["state"].items():
            if param_id in position_of:
                by_position[position_of[param_id]] = entries
            else:
                strays.append(param_id)
        key_differences, shape_differences = layout_differences(
            self._preinitialized_layout, by_position
        )
        key_differences += [
            f"state[{param_id!r}] belongs to no parameter of the checkpoint's param_groups"
            for param_id in strays
        ]
        if not key_differences and not shape_differences:
            return
        name = type(self).__name__
        code = "CS101" if key_differences else "CS102"
        raise compliance_error(
            code,
            f"the checkpoint's optimizer state does not match the state "
            f"{name}.preinitialize() creates, nothing was loaded: "
            + "; ".join(key_differences + shape_differences),
            advice.CHECKPOINT_LAYOUT.format(optimizer=name),
            owner=f"{name}.load_state_dict",
            site=user_site(),
        )

    # -- zero_grad hooks ---------------------------------------------------------

    def register_zero_grad_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Call `hook(optimizer, args, kwargs)` before each zero_grad.

        It may return None or a new `(args, kwargs)` for zero_grad.
        """
        handle = RemovableHandle(self._optimizer_zero_grad_pre_hooks)
        self._optimizer_zero_grad_pre_hooks[handle.id] = hook
        return handle

    def register_zero_grad_post_hook(self, hook: Callable) -> RemovableHandle:
        """Call `hook(optimizer, args, kwargs)` after each zero_grad.

        (The production release files these with the pre hooks, so they run
        before zero_grad; here they run after it, as documented.)
        """
        handle = RemovableHandle(self._optimizer_zero_grad_post_hooks)
        self._optimizer_zero_grad_post_hooks[handle.id] = hook
        return handle

    def zero_grad(self, *args: Any, **kwargs: Any) -> None:
        """torch's zero_grad between the pre hooks and the post hooks."""
        for hook in list(self._optimizer_zero_grad_pre_hooks.values()):
            result = hook(self, args, kwargs)
            if result is None:
                continue
            if not (isinstance(result, tuple) and len(result) == 2):
                raise RuntimeError(
                    f"zero_grad pre hook {hook!r} must return None or a tuple "
                    f"(new_args, new_kwargs), but returned {result!r}"
                )
            args, kwargs = result
        super().zero_grad(*args, **kwargs)
        for hook in list(self._optimizer_zero_grad_post_hooks.values()):
            hook(self, args, kwargs)

    # -- visitors ------------------------------------------------------------------

    def apply(self, f: Callable) -> Any:
        """Return `f(self)`; an object with an `apply` method gets `f.apply(self)`."""
        if callable(f):
            return f(self)
        apply_method = getattr(f, "apply", None)
        if callable(apply_method):
            return apply_method(self)
        raise TypeError(
            f"{type(self).__name__}.apply expects a callable or an object with "
            f"an apply method, got {type(f).__name__}"
        )

    def visit_state(self, fn: Callable) -> None:
        """Call `fn(value)` on every state value; a non-None result replaces it."""
        for entries in self.state.values():
            for key, value in list(entries.items()):
                replacement = fn(value)
                if replacement is not None:
                    entries[key] = replacement

    def state_names_to_sparsify(self) -> list[str]:
        """State names whose tensors have their parameter's shape.

        Sparsity masks of a parameter apply to these. Subclasses may override.
        The global step is never one of them.
        """
        names: list[str] = []
        for param in self._params():
            for key, value in self.state.get(param, {}).items():
                if self.enable_global_step and key == "step":
                    continue
                if (
                    isinstance(value, torch.Tensor)
                    and value.shape == param.shape
                    and key not in names
                ):
                    names.append(key)
        return names

    # -- to implement --------------------------------------------------------------

    @abstractmethod
    def preinitialize(self) -> None:
        """Create all optimizer state (called once, by __init__)."""

    @abstractmethod
    def step(self, closure: Callable | None = None):
        """Update parameters and state in place; create no new state."""
