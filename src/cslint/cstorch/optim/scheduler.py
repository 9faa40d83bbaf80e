"""The generic cstorch scheduler: a closed form of the step count.

Mirrors `cerebras.pytorch.optim.scheduler.Scheduler`. On the system a
schedule is a tensor computed from `last_epoch`, itself a device tensor, so
the schedule is part of the compiled graph. Here:

* `last_epoch` is an int64 0-dim tensor (a device value);
* the value used at optimizer step k is f(k) (PyTorch's convention):
  construction sets `last_epoch` to 0 and writes f(0) into the groups, each
  `step()` advances `last_epoch` and writes the next value;
* the value written into `param_group[param_group_key]` is the 0-dim tensor
  the closed form returns, so code that treats it as a number fails;
* in strict mode the closed form runs under the host-conversion guard, and a
  closed form that returns something other than a tensor raises CS305.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable

import torch

from cslint import advice
from cslint.cstorch import strict_mode
from cslint.cstorch.device_values import LAST_EPOCH, scheduled_origin
from cslint.cstorch.errors import compliance_error
from cslint.cstorch.guard import guarded_region
from cslint.cstorch.optim.optimizer import Optimizer
from cslint.cstorch.provenance import mark
from cslint.cstorch.source_position import SourceSite

__all__ = ["Scheduler"]


def _normalize_scheduler_tags(param_group_tags) -> set | None:
    if param_group_tags is None:
        return None
    if isinstance(param_group_tags, (list, tuple, set, frozenset)):
        tags = set(param_group_tags)
        if len(tags) != len(param_group_tags):
            duplicates = sorted(
                {str(tag) for tag in param_group_tags if list(param_group_tags).count(tag) > 1}
            )
            raise ValueError(
                f"param_group_tags contains duplicate values {duplicates}: "
                f"{list(param_group_tags)}"
            )
        return tags
    return {param_group_tags}


def _group_tags(group: dict) -> set:
    # An untagged group (no "tags", or None/empty) is selected by the tag None.
    tags = group.get("tags")
    if not tags:
        return {None}
    if isinstance(tags, (set, frozenset, list, tuple)):
        return set(tags)
    return {tags}


def _return_site(method: Callable) -> SourceSite | None:
    """The line of the method's only `return`, or its `def` line."""
    try:
        lines, first_line = inspect.getsourcelines(method)
        filename = inspect.getsourcefile(method) or "<unknown>"
    except (OSError, TypeError):
        return None
    source = textwrap.dedent("".join(lines))
    lineno = first_line
    try:
        function = ast.parse(source).body[0]
        returns = [
            node
            for node in ast.walk(function)
            if isinstance(node, ast.Return)
        ]
        if len(returns) == 1:
            lineno = first_line + returns[0].lineno - 1
    except (SyntaxError, IndexError):
        pass
    code_line = lines[lineno - first_line].strip() if lineno - first_line < len(lines) else ""
    return SourceSite(filename, lineno, code_line)


class Scheduler(ABC):
    """Schedules one param-group value (`param_group_key`) by a closed form.

    Args:
        optimizer: a `cstorch.optim.Optimizer`.
        total_iters: number of steps the schedule spans (may be None).
        last_epoch: the step before the first one (-1 for a fresh run).
        param_group_tags: a tag or list of tags; only param groups carrying
            one of them are scheduled. `None` in the list selects untagged
            groups; no tags at all schedules every group.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        total_iters: int | None,
        last_epoch: int = -1,
        param_group_tags=None,
    ) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(
                f"{type(optimizer).__name__} is not a cstorch.optim.Optimizer; "
                f"{type(self).__name__} schedules cstorch optimizers only"
            )
        self._require_closed_form()
        self.optimizer = optimizer
        self.total_iters = total_iters
        self.param_group_tags = _normalize_scheduler_tags(param_group_tags)
        self._validate_tags_apply()
        # A device value, as on the system.
        self.last_epoch = torch.tensor(int(last_epoch), dtype=torch.int64)
        self._step_count = 0
        self._last_value = [group.get(self.param_group_key) for group in optimizer.param_groups]
        optimizer.register_scheduler(self)
        # Construction moves last_epoch to its first step and writes f(that step).
        self.step()

    # -- what subclasses provide ---------------------------------------------------

    @property
    @abstractmethod
    def param_group_key(self) -> str:
        """The param-group key this scheduler drives ("lr", "weight_decay", ...)."""

    @abstractmethod
    def _get_closed_form(self) -> torch.Tensor:
        """The value at step `self.last_epoch`, as a tensor computed from it."""

    def _require_closed_form(self) -> None:
        """Subclass hook: LRScheduler accepts `_get_closed_form_lr` instead."""

    def _closed_form_owner(self) -> str:
        """'Class.method' naming the closed form the user wrote."""
        for cls in type(self).__mro__:
            if "_get_closed_form" in cls.__dict__:
                return f"{cls.__name__}._get_closed_form"
        return f"{type(self).__name__}._get_closed_form"

    def _closed_form_method(self) -> Callable:
        return self._get_closed_form

    # -- tags --------------------------------------------------------------------

    def _should_apply_to_param_group(self, param_group: dict) -> bool:
        if self.param_group_tags is None:
            return True
        return bool(self.param_group_tags & _group_tags(param_group))

    def _validate_tags_apply(self) -> None:
        if self.param_group_tags is None:
            return
        available = set()
        for group in self.optimizer.param_groups:
            available |= _group_tags(group)
        unmatched = self.param_group_tags - available
        if unmatched:
            raise ValueError(
                f"{type(self).__name__} was created with param_group_tags "
                f"{sorted(map(str, self.param_group_tags))}, but "
                f"{sorted(map(str, unmatched))} match no param group of the "
                f"optimizer. Available tags: {sorted(map(str, available))} "
                "(None means untagged groups)."
            )

    # -- computing values ------------------------------------------------------------

    def _closed_form_value(self) -> torch.Tensor:
        """Evaluate the closed form (guarded in strict mode; CS305 for non-tensors)."""
        if not strict_mode.is_strict():
            return self._closed_form_method()()
        if isinstance(self.last_epoch, torch.Tensor):
            mark(self.last_epoch, LAST_EPOCH)
        owner = self._closed_form_owner()
        with guarded_region(owner):
            value = self._closed_form_method()()
        if not isinstance(value, torch.Tensor):
            raise compliance_error(
                "CS305",
                f"the closed form returned {type(value).__name__} {value!r}; on "
                "the system the schedule must be a tensor computed from "
                "self.last_epoch",
                advice.CLOSED_FORM_NOT_TENSOR,
                owner=owner,
                site=_return_site(self._closed_form_method()),
            )
        return value

    def get(self) -> list:
        """The closed form's value for each group (None for unscheduled groups)."""
        if not getattr(self, "_get_called_within_step", False):
            warnings.warn(
                "To get the last value computed by the scheduler, use get_last_value().",
                UserWarning,
                stacklevel=2,
            )
        value = self._closed_form_value()
        return [
            value if self._should_apply_to_param_group(group) else None
            for group in self.optimizer.param_groups
        ]

    def increment_last_epoch(self) -> None:
        """Advance `last_epoch` by one, in place."""
        self.last_epoch += 1

    def step(self, *args, **kwargs) -> None:
        """Advance to the next step and write its value into the groups."""
        if args or kwargs:
            warnings.warn(
                f"{type(self).__name__}.step() ignores its arguments: the "
                "schedule follows last_epoch, as on the system",
                UserWarning,
                stacklevel=2,
            )
        # A closed form that raises leaves the scheduler on the step it was on,
        # not one ahead of the values in the groups.
        epoch = self.last_epoch
        epoch_value = epoch.clone() if isinstance(epoch, torch.Tensor) else None
        step_count = self._step_count
        self.increment_last_epoch()
        self._step_count += 1
        try:
            self.update_last_value()
        except BaseException:
            if epoch_value is not None:
                epoch.copy_(epoch_value)  # in place: holders of the tensor see it too
            self.last_epoch = epoch
            self._step_count = step_count
            raise

    def update_last_value(self) -> None:
        """Recompute the value for `last_epoch` and write it into the groups."""
        self._get_called_within_step = True
        try:
            self._last_value = self.get()
        finally:
            self._get_called_within_step = False
        origin = scheduled_origin(self.param_group_key)
        for group, value in zip(self.optimizer.param_groups, self._last_value):
            if value is not None:
                group[self.param_group_key] = value
                if isinstance(value, torch.Tensor):
                    mark(value, origin)

    def get_last_value(self) -> list:
        """The values last written into the groups (None for unscheduled groups)."""
        return self._last_value

    # -- copies ------------------------------------------------------------------

    def __setstate__(self, state: dict) -> None:
        # deepcopy and pickle copy the optimizer along (as torch's schedulers
        # do); the copy must drive that copy, which holds schedulers weakly and
        # so did not bring them along.
        self.__dict__.update(state)
        optimizer = self.__dict__.get("optimizer")
        if isinstance(optimizer, Optimizer):
            optimizer.register_scheduler(self)

    # -- state dict --------------------------------------------------------------

    def state_dict(self) -> dict:
        """Every attribute but the optimizer (last_epoch stays a tensor)."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        # _step_count counts steps of this run, not of the checkpoint's.
        restored = {key: value for key, value in state_dict.items() if key != "_step_count"}
        self.__dict__.update(restored)
        if not isinstance(self.last_epoch, torch.Tensor):
            self.last_epoch = torch.tensor(int(self.last_epoch), dtype=torch.int64)
        self._validate_tags_apply()
        self.optimizer.register_scheduler(self)
