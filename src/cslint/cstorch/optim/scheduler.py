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
* in strict mode the closed form runs under the host-conversion guard (and so
  does `get`, which evaluates it, wherever a subclass overrides it), and a
  closed form that returns something other than a tensor raises CS305.

The schedules shared by the learning-rate and weight-decay families follow
the base (ConstantScheduler ... ScalePerParamScheduler), as in production.
Each is one schedule written once, with generic argument names
(`initial_val`, `end_val`, `val`, `base_val`, `max_val`); `lr_scheduler` and
`weight_decay_scheduler` combine it with their base (which names the param
group key), and the LR classes rename the arguments (`initial_learning_rate`
...) with `renamed`.

Every schedule's `_get_closed_form` is a function of the step tensor
`self.last_epoch` written with torch ops only: choices on hyperparameters are
Python (fixed when the graph is compiled), choices on the step are
`torch.where`, `clamp` and the like, and everything is float32 (the system
has no float64).

Schedulers built on other schedulers (SequentialScheduler, ChainedScheduler,
ScalePerParamScheduler) own them: the children are taken off the optimizer's
scheduler registry, their `last_epoch` is derived from the wrapper's on every
step (a SequentialScheduler's child starting at milestone m sees t - m), and
their states are nested in the wrapper's `state_dict`.
"""

from __future__ import annotations

import ast
import inspect
import math
import textwrap
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

import torch

from cslint import advice
from cslint.cstorch import strict_mode
from cslint.cstorch.device_values import LAST_EPOCH, scheduled_origin
from cslint.cstorch.errors import compliance_error
from cslint.cstorch.guard import guarded_region
from cslint.cstorch.optim.optimizer import Optimizer
from cslint.cstorch.provenance import mark
from cslint.cstorch.source_position import SourceSite

__all__ = [
    "Scheduler",
    "ChainedScheduler",
    "ConstantScheduler",
    "CosineAnnealingScheduler",
    "CosineAnnealingWarmRestartsScheduler",
    "CosineDecayScheduler",
    "CyclicScheduler",
    "ExponentialScheduler",
    "InverseExponentialTimeDecayScheduler",
    "InverseSquareRootDecayScheduler",
    "LambdaScheduler",
    "LinearScheduler",
    "MultiStepScheduler",
    "MultiplicativeScheduler",
    "OneCycleScheduler",
    "PiecewiseConstantScheduler",
    "PolynomialScheduler",
    "ScalePerParamScheduler",
    "SequentialScheduler",
    "StepScheduler",
]


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

    def _get_owner(self) -> str:
        """'Class.get' when a subclass overrides `get`, else the closed form's owner."""
        for cls in type(self).__mro__:
            if cls is Scheduler:
                break
            if "get" in cls.__dict__:
                return f"{cls.__name__}.get"
        return self._closed_form_owner()

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
            if strict_mode.is_strict():
                # Guarded here too, not only around the closed form: a
                # subclass may override `get` (or what it calls) and compute
                # the values itself.
                if isinstance(self.last_epoch, torch.Tensor):
                    mark(self.last_epoch, LAST_EPOCH)
                with guarded_region(self._get_owner()):
                    self._last_value = self.get()
            else:
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


# -- the shared schedules ----------------------------------------------------------


def renamed(attribute: str) -> property:
    """A generic argument name read and written as the family's own attribute.

    `initial_val = renamed("initial_learning_rate")` in an LR class lets the
    shared closed form read `self.initial_val` while the scheduler (and its
    state_dict) holds `initial_learning_rate`, as production's do.
    """

    def read(self):
        return getattr(self, attribute)

    def write(self, value) -> None:
        setattr(self, attribute, value)

    return property(read, write, doc=f"The same value as `{attribute}`.")


def _constant(epoch: torch.Tensor, value) -> torch.Tensor:
    """A float32 0-dim tensor holding a hyperparameter, next to the step tensor."""
    return torch.tensor(value, dtype=torch.float32, device=epoch.device)


class ConstantScheduler(Scheduler):
    """The value `val` at every step.

    Args:
        optimizer: the cstorch optimizer to schedule.
        val: the value.
        total_iters: accepted and stored, but the value never changes (as in
            production; torch's ConstantLR uses it as the end of a factor).
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(self, optimizer, val: float, total_iters: int | None = None, param_group_tags=None):
        self.val = val
        super().__init__(optimizer, total_iters=total_iters, param_group_tags=param_group_tags)

    def _get_closed_form(self) -> torch.Tensor:
        return _constant(self.last_epoch, self.val)


class PolynomialScheduler(Scheduler):
    """Polynomial decay from `initial_val` to `end_val` over `total_iters` steps.

    value(t) = (initial_val - end_val) * (1 - t / T)^power + end_val with
    T = total_iters, and end_val from step T on.

    With `cycle=True` the decay restarts as documented (TensorFlow's
    PolynomialDecay): T grows to the first multiple of total_iters that is at
    least t, so the value jumps up after each multiple and decays again.
    Production ignores `cycle`; this follows the documentation.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_val: the value at step 0.
        end_val: the value at step total_iters and after.
        total_iters: the length of the decay.
        power: the exponent of the polynomial (1.0: linear).
        cycle: restart the decay after each total_iters (see above).
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(
        self,
        optimizer,
        initial_val: float,
        end_val: float,
        total_iters: int,
        power: float = 1.0,
        cycle: bool = False,
        param_group_tags=None,
    ):
        self.initial_val = initial_val
        self.end_val = end_val
        self.power = power
        self.cycle = cycle
        super().__init__(optimizer, total_iters=total_iters, param_group_tags=param_group_tags)

    def _get_closed_form(self) -> torch.Tensor:
        step = self.last_epoch
        if self.cycle:
            # ceil(t / T) in integers, at least 1 (step 0 is in the first period).
            periods = torch.div(step + (self.total_iters - 1), self.total_iters, rounding_mode="floor")
            decay_steps = torch.clamp(periods, min=1) * self.total_iters
            remaining = 1.0 - torch.div(step, decay_steps)
        else:
            # Clamped so that a fractional power never sees a negative base.
            remaining = 1.0 - torch.div(torch.clamp(step, max=self.total_iters), self.total_iters)
        decayed = remaining.pow(self.power) * (self.initial_val - self.end_val) + self.end_val
        if self.cycle:
            return decayed
        # end_val from total_iters on, whatever the power (0^0 would be 1).
        return torch.where(step >= self.total_iters, _constant(step, self.end_val), decayed)


class LinearScheduler(PolynomialScheduler):
    """PolynomialScheduler with power 1: a straight line from initial_val to end_val."""

    def __init__(
        self,
        optimizer,
        initial_val: float,
        end_val: float,
        total_iters: int,
        cycle: bool = False,
        param_group_tags=None,
    ):
        super().__init__(
            optimizer,
            initial_val=initial_val,
            end_val=end_val,
            total_iters=total_iters,
            power=1.0,
            cycle=cycle,
            param_group_tags=param_group_tags,
        )


class ExponentialScheduler(Scheduler):
    """value(t) = initial_val * decay_rate^(t / total_iters).

    With `staircase=True` the exponent is floored: the value drops once every
    total_iters steps. torch's ExponentialLR(gamma) is total_iters=1,
    decay_rate=gamma.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_val: the value at step 0.
        total_iters: the steps over which the value is multiplied by decay_rate.
        decay_rate: the factor per total_iters steps.
        staircase: decay in whole steps of total_iters.
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(
        self,
        optimizer,
        initial_val: float,
        total_iters: int,
        decay_rate: float,
        staircase: bool = False,
        param_group_tags=None,
    ):
        self.initial_val = float(initial_val)
        self.decay_rate = decay_rate
        self.staircase = staircase
        super().__init__(optimizer, total_iters=total_iters, param_group_tags=param_group_tags)

    def _get_closed_form(self) -> torch.Tensor:
        exponent = torch.div(self.last_epoch, self.total_iters)
        if self.staircase:
            exponent = torch.floor(exponent)
        return torch.pow(self.decay_rate, exponent) * self.initial_val


class InverseExponentialTimeDecayScheduler(Scheduler):
    """Keras's InverseTimeDecay with the step raised to `step_exponent`.

    value(t) = initial_val / (1 + decay_rate * t^step_exponent / total_iters),
    the quotient floored when `staircase=True`.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_val: the value at step 0.
        step_exponent: the power of the step.
        total_iters: the divisor of the (powered) step.
        decay_rate: the rate of decay.
        staircase: floor t^step_exponent / total_iters.
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(
        self,
        optimizer,
        initial_val: float,
        step_exponent: int,
        total_iters: int,
        decay_rate: float,
        staircase: bool = False,
        param_group_tags=None,
    ):
        self.initial_val = initial_val
        self.step_exponent = step_exponent
        self.decay_rate = decay_rate
        self.staircase = staircase
        super().__init__(optimizer, total_iters=total_iters, param_group_tags=param_group_tags)

    def _get_closed_form(self) -> torch.Tensor:
        progress = torch.div(torch.pow(self.last_epoch.float(), self.step_exponent), self.total_iters)
        if self.staircase:
            progress = torch.floor(progress)
        denominator = progress * self.decay_rate + 1.0
        return torch.div(_constant(self.last_epoch, self.initial_val), denominator)


class InverseSquareRootDecayScheduler(Scheduler):
    """value(t) = initial_val * scale / sqrt(max(t, warmup_steps)).

    Constant (initial_val * scale / sqrt(warmup_steps)) for the first
    warmup_steps steps, then decaying as 1/sqrt(t).

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_val: the factor in front.
        scale: a second factor.
        warmup_steps: the steps the value is held at its start.
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(
        self,
        optimizer,
        initial_val: float = 1.0,
        scale: float = 1.0,
        warmup_steps: int = 1.0,
        param_group_tags=None,
    ):
        self.initial_val = initial_val
        self.scale = scale
        self.warmup_steps = warmup_steps
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def _get_closed_form(self) -> torch.Tensor:
        steps = torch.clamp(self.last_epoch.float(), min=float(self.warmup_steps))
        scale = _constant(self.last_epoch, self.scale)
        return torch.div(scale, torch.sqrt(steps)) * self.initial_val


class CosineDecayScheduler(Scheduler):
    """Keras's CosineDecay from `initial_val` to `end_val` over `total_iters`.

    value(t) = end_val + (initial_val - end_val) * (1 + cos(pi * min(t, T) / T)) / 2
    with T = total_iters: half a cosine, then end_val.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_val: the value at step 0.
        end_val: the value from step total_iters on.
        total_iters: the length of the decay.
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(self, optimizer, initial_val: float, end_val: float, total_iters: int, param_group_tags=None):
        self.initial_val = initial_val
        self.end_val = end_val
        super().__init__(optimizer, total_iters=total_iters, param_group_tags=param_group_tags)

    def _get_closed_form(self) -> torch.Tensor:
        step = torch.clamp(self.last_epoch.float(), max=float(self.total_iters))
        progress = (torch.cos(step * (math.pi / self.total_iters)) + 1.0) * 0.5
        return progress * (self.initial_val - self.end_val) + self.end_val


def _share_epoch(child: Scheduler, epoch: torch.Tensor) -> None:
    """Give `child` the step tensor `epoch`, and its own children theirs."""
    child.last_epoch = epoch
    mark(epoch, LAST_EPOCH)
    if isinstance(child, _SchedulerOfSchedulers):
        child._derive_child_epochs()


def _unregister(optimizer, scheduler: Scheduler) -> None:
    # The wrapper drives the value; the child is one of its parts.
    optimizer._schedulers_registry.pop(scheduler, None)


def _check_children(wrapper: Scheduler, children: Sequence[Scheduler], optimizer) -> None:
    kind = type(wrapper).__name__
    for index, child in enumerate(children):
        if not isinstance(child, Scheduler):
            raise TypeError(f"{kind} expects cstorch schedulers; the one at index {index} is a {type(child).__name__}")
        if child.optimizer is not optimizer:
            raise ValueError(f"{kind} expects all its schedulers to schedule the same optimizer; the one at index {index} does not")
        if child.param_group_key != wrapper.param_group_key:
            raise ValueError(
                f"{kind} schedules {wrapper.param_group_key!r}, but the scheduler at index "
                f"{index} ({type(child).__name__}) schedules {child.param_group_key!r}"
            )


def _check_children_tags(wrapper: Scheduler, children: Sequence[Scheduler], param_group_tags) -> None:
    tags = _normalize_scheduler_tags(param_group_tags)
    for index, child in enumerate(children):
        if child.param_group_tags != tags:
            raise ValueError(
                f"{type(wrapper).__name__} expects its schedulers to have its param_group_tags "
                f"{tags!r}; the one at index {index} has {child.param_group_tags!r}"
            )


class _SchedulerOfSchedulers(Scheduler):
    """Shared by the schedulers built on others: children, their steps, their states.

    `_children` lists them; `_child_epoch(index)` is the step tensor the
    child at `index` sees.
    """

    _children_attribute = "_schedulers"
    _children_state_key = "_schedulers"

    def _children(self) -> list[Scheduler]:
        return list(getattr(self, self._children_attribute))

    def _child_epoch(self, index: int) -> torch.Tensor:
        return self.last_epoch

    def _derive_child_epochs(self) -> None:
        for index, child in enumerate(self._children()):
            _share_epoch(child, self._child_epoch(index))

    def increment_last_epoch(self) -> None:
        super().increment_last_epoch()
        self._derive_child_epochs()

    def state_dict(self) -> dict:
        state = super().state_dict()
        state.pop(self._children_attribute)
        state[self._children_state_key] = [child.state_dict() for child in self._children()]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        own = {key: value for key, value in state_dict.items() if key != self._children_state_key}
        super().load_state_dict(own)
        for child, child_state in zip(self._children(), state_dict[self._children_state_key]):
            child.load_state_dict(child_state)
            _unregister(self.optimizer, child)
        self._derive_child_epochs()

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for child in self._children():
            _unregister(self.optimizer, child)


class SequentialScheduler(_SchedulerOfSchedulers):
    """One scheduler after another, switching at the milestones.

    Before milestones[0] the value is schedulers[0]'s; from milestones[i] on,
    schedulers[i + 1]'s, evaluated at t - milestones[i] (each scheduler starts
    from its own step 0), as torch's SequentialLR.

    Args:
        optimizer: the cstorch optimizer the schedulers schedule.
        schedulers: the schedulers, one more than the milestones.
        milestones: increasing steps (ints) at which the next scheduler takes over.
        last_epoch: the step before the first one (-1 for a fresh run).
        param_group_tags: the tags of the param groups to schedule; the
            schedulers must have the same.
    """

    def __init__(
        self,
        optimizer,
        schedulers: Sequence[Scheduler],
        milestones: Sequence[int],
        last_epoch: int = -1,
        param_group_tags=None,
    ):
        if hasattr(milestones, "tolist"):  # a numpy array or a tensor
            milestones = milestones.tolist()
        if not isinstance(milestones, (list, tuple)) or any(
            not isinstance(milestone, int) or isinstance(milestone, bool) for milestone in milestones
        ):
            raise TypeError(f"{type(self).__name__} expects milestones to be a list of ints, got {milestones!r}")
        schedulers = list(schedulers)
        _check_children(self, schedulers, optimizer)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                f"{type(self).__name__} expects one milestone fewer than schedulers, got "
                f"{len(schedulers)} schedulers and {len(milestones)} milestones"
            )
        self._schedulers = schedulers
        self.milestones = list(milestones)
        for scheduler in schedulers:
            _unregister(optimizer, scheduler)
        _check_children_tags(self, schedulers, param_group_tags)
        super().__init__(optimizer, total_iters=None, last_epoch=last_epoch, param_group_tags=param_group_tags)

    def _child_epoch(self, index: int) -> torch.Tensor:
        if index == 0:
            return self.last_epoch
        return torch.clamp(self.last_epoch - self.milestones[index - 1], min=0)

    def _get_closed_form(self) -> torch.Tensor:
        value = self._schedulers[0]._get_closed_form()
        for milestone, scheduler in zip(self.milestones, self._schedulers[1:]):
            value = torch.where(self.last_epoch < milestone, value, scheduler._get_closed_form())
        return value


class PiecewiseConstantScheduler(SequentialScheduler):
    """vals[i] from milestones[i - 1] (0 for i = 0) until milestones[i].

    Built as a SequentialScheduler of constants; the last value holds after
    the last milestone. `vals` has one value more than `milestones`.

    Args:
        optimizer: the cstorch optimizer to schedule.
        constant_cls: the constant scheduler of the family (ConstantLR, ConstantWD).
        vals: the values.
        milestones: increasing steps at which the next value starts.
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(
        self,
        optimizer,
        constant_cls: type,
        vals: Sequence[float],
        milestones: Sequence[int],
        param_group_tags=None,
    ):
        boundaries = [0, *milestones]
        constants = [
            constant_cls(optimizer, val, end - start, param_group_tags=param_group_tags)
            for val, start, end in zip(vals, boundaries[:-1], boundaries[1:])
        ]
        constants.append(constant_cls(optimizer, vals[-1], param_group_tags=param_group_tags))
        super().__init__(optimizer, constants, list(milestones), param_group_tags=param_group_tags)


class MultiStepScheduler(Scheduler):
    """initial_val times gamma for each milestone reached: gamma^#{m <= t}.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_val: the value before the first milestone.
        gamma: the factor at each milestone.
        milestones: the steps at which the value is multiplied by gamma.
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(self, optimizer, initial_val: float, gamma: float, milestones: Sequence[int], param_group_tags=None):
        self.initial_val = initial_val
        self.gamma = gamma
        self.milestones = milestones
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def _get_closed_form(self) -> torch.Tensor:
        milestones = torch.tensor(list(self.milestones), dtype=torch.int64, device=self.last_epoch.device)
        reached = torch.sum(self.last_epoch >= milestones)
        return torch.pow(_constant(self.last_epoch, self.gamma), reached) * self.initial_val


class StepScheduler(Scheduler):
    """initial_val * gamma^floor(t / step_size).

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_val: the value for the first step_size steps.
        step_size: the steps between two decays.
        gamma: the factor of each decay.
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(self, optimizer, initial_val: float, step_size: int, gamma: float, param_group_tags=None):
        self.initial_val = float(initial_val)
        self.gamma = gamma
        self.step_size = step_size
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def _get_closed_form(self) -> torch.Tensor:
        decays = torch.div(self.last_epoch, self.step_size, rounding_mode="floor")
        return torch.pow(_constant(self.last_epoch, self.gamma), decays) * self.initial_val


def _cosine_between(high: float, low: float, fraction: torch.Tensor) -> torch.Tensor:
    """high at fraction 0, low at fraction 1, along half a cosine."""
    return (torch.cos(fraction * math.pi) + 1.0) * 0.5 * (high - low) + low


class CosineAnnealingScheduler(Scheduler):
    """eta_min + (initial_val - eta_min) * (1 + cos(pi * t / T_max)) / 2.

    The closed form of torch's CosineAnnealingLR: from initial_val down to
    eta_min at T_max, and (without restarts) back up over the next T_max.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_val: the value at step 0.
        T_max: the steps from the maximum to the minimum.
        eta_min: the minimum.
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(self, optimizer, initial_val: float, T_max: int, eta_min: float = 0.0, param_group_tags=None):
        self.initial_val = float(initial_val)
        self.T_max = float(T_max)
        self.eta_min = eta_min
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def _get_closed_form(self) -> torch.Tensor:
        return _cosine_between(self.initial_val, self.eta_min, torch.div(self.last_epoch, self.T_max))


class LambdaScheduler(Scheduler):
    """initial_val times the product of the factors from `set_value_lambda`.

    `set_value_lambda()` returns a function of the step tensor, or a list of
    them; each returns a tensor (or a number). The default is the pair
    t / 30 and 0.95^t. The value is initial_val * f1(t) * f2(t) * ...: the
    documented "initial value times a given function". Production multiplies
    in initial_val once per function (its default squares it); this follows
    the documentation.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_val: the value the factors multiply.
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(self, optimizer, initial_val: float, param_group_tags=None):
        self.initial_val = initial_val
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def set_value_lambda(self) -> list[Callable] | Callable:
        """The factors, functions of the step tensor (override to choose)."""

        def linear(epoch: torch.Tensor) -> torch.Tensor:
            return torch.div(epoch, 30)

        def exponential(epoch: torch.Tensor) -> torch.Tensor:
            return torch.pow(_constant(epoch, 0.95), epoch)

        return [linear, exponential]

    def _get_closed_form(self) -> torch.Tensor:
        factors = self.set_value_lambda()
        if callable(factors):
            factors = [factors]
        value = _constant(self.last_epoch, self.initial_val)
        for factor in factors:
            value = torch.mul(value, factor(self.last_epoch))
        return value


class CosineAnnealingWarmRestartsScheduler(Scheduler):
    """SGDR: cosine annealing from initial_val to eta_min, restarting every T_0 steps.

    value(t) = eta_min + (initial_val - eta_min) * (1 + cos(pi * T_cur / T_0)) / 2
    with T_cur = t mod T_0, the steps since the last restart, as documented
    (and as torch's CosineAnnealingWarmRestarts with T_mult=1). Production
    instead holds the maximum for the whole second period and the minimum for
    the third; this follows the documentation.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_val: the value at each restart.
        T_0: the steps between restarts.
        T_mult: must be 1, as in production (periods that grow are not supported).
        eta_min: the minimum.
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(
        self,
        optimizer,
        initial_val: float,
        T_0: int,
        T_mult: int = 1,
        eta_min: float = 0.0,
        param_group_tags=None,
    ):
        if T_mult != 1:
            raise ValueError(f"{type(self).__name__} supports only T_mult=1, got T_mult={T_mult!r}")
        self.initial_val = float(initial_val)
        self.T_0 = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def _get_closed_form(self) -> torch.Tensor:
        since_restart = torch.remainder(self.last_epoch, self.T_0)
        return _cosine_between(self.initial_val, self.eta_min, torch.div(since_restart, self.T_0))


class MultiplicativeScheduler(Scheduler):
    """initial_val * coefficient^t: multiplied by `coefficient` at every step.

    `set_value_lambda()` returns the function of the step that gives the
    factor (by default the constant `coefficient`), as in production.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_val: the value at step 0.
        coefficient: the factor per step.
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(self, optimizer, initial_val: float, coefficient: float, param_group_tags=None):
        self.initial_val = initial_val
        self.coefficient = coefficient
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def set_value_lambda(self) -> Callable:
        """The factor per step, a function of the step tensor."""

        def coefficient(epoch: torch.Tensor) -> float:
            return self.coefficient

        return coefficient

    def _get_closed_form(self) -> torch.Tensor:
        factor = self.set_value_lambda()(self.last_epoch)
        factor = torch.as_tensor(factor, dtype=torch.float32, device=self.last_epoch.device)
        return torch.pow(factor, self.last_epoch) * self.initial_val


class ChainedScheduler(_SchedulerOfSchedulers):
    """The product of several schedules, as torch's ChainedScheduler.

    value(t) = s0(t) * s1(t) / s1.initial_val * s2(t) / s2.initial_val ...:
    the first scheduler's value, scaled by each other one's relative change.
    All share this scheduler's step; the ones after the first need an
    `initial_val` (or its renamed LR form).

    Args:
        schedulers: the schedulers, all of one optimizer.
        param_group_tags: the tags of the param groups to schedule; the
            schedulers must have the same.
    """

    def __init__(self, schedulers: Sequence[Scheduler], param_group_tags=None):
        schedulers = list(schedulers)
        if not schedulers:
            raise ValueError(f"{type(self).__name__} needs at least one scheduler")
        optimizer = schedulers[0].optimizer
        _check_children(self, schedulers, optimizer)
        for index, scheduler in enumerate(schedulers[1:], start=1):
            if not hasattr(scheduler, "initial_val"):
                raise ValueError(
                    f"{type(self).__name__} scales by each scheduler's value relative to its "
                    f"initial_val; {type(scheduler).__name__} at index {index} has none"
                )
        self._schedulers = schedulers
        for scheduler in schedulers:
            _unregister(optimizer, scheduler)
        _check_children_tags(self, schedulers, param_group_tags)
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def _get_closed_form(self) -> torch.Tensor:
        value = self._schedulers[0]._get_closed_form()
        for scheduler in self._schedulers[1:]:
            value = value * torch.div(scheduler._get_closed_form(), scheduler.initial_val)
        return value


_CYCLIC_MODES = {"triangular": "cycle", "triangular2": "cycle", "exp_range": "iterations"}


class CyclicScheduler(Scheduler):
    """Cyclical values between base_val and max_val (Smith's CLR), as torch's CyclicLR.

    Each cycle rises linearly over step_size_up steps from base_val to
    max_val and falls over step_size_down steps. The amplitude is scaled by
    the mode: "triangular" not at all, "triangular2" halved each cycle,
    "exp_range" by gamma^t. The mode fixes scale_mode ("cycle" for the first
    two, "iterations" for exp_range), as torch's built-in modes do; the
    scale_mode argument is kept for the signature.

    Args:
        optimizer: the cstorch optimizer to schedule.
        base_val: the lower boundary, the value at step 0.
        max_val: the upper boundary.
        step_size_up: the steps of the rising half.
        step_size_down: the steps of the falling half (default: step_size_up).
        mode: "triangular", "triangular2" or "exp_range".
        gamma: the base of exp_range's scaling.
        scale_mode: "cycle" or "iterations" (fixed by the mode, see above).
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(
        self,
        optimizer,
        base_val: float,
        max_val: float,
        step_size_up: int = 2000,
        step_size_down: int | None = None,
        mode: str = "triangular",
        gamma: float = 1.0,
        scale_mode: str = "cycle",
        param_group_tags=None,
    ):
        if mode not in _CYCLIC_MODES:
            raise ValueError(f"{type(self).__name__} mode must be one of {sorted(_CYCLIC_MODES)}, got {mode!r}")
        self.base_val = base_val
        self.max_val = max_val
        self.step_size_up = step_size_up
        self.step_size_down = step_size_up if step_size_down is None else step_size_down
        self.mode = mode
        self.gamma = gamma
        self.scale_mode = _CYCLIC_MODES[mode]
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def _triangular_scale_fn(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ones_like(x, dtype=torch.float32)

    def _triangular2_scale_fn(self, x: torch.Tensor) -> torch.Tensor:
        return torch.pow(_constant(x, 0.5), x - 1)

    def _exp_range_scale_fn(self, x: torch.Tensor) -> torch.Tensor:
        return torch.pow(_constant(x, self.gamma), x)

    def set_scale_fn(self) -> Callable:
        """The amplitude scaling of the mode."""
        return {
            "triangular": self._triangular_scale_fn,
            "triangular2": self._triangular2_scale_fn,
            "exp_range": self._exp_range_scale_fn,
        }[self.mode]

    def _get_closed_form(self) -> torch.Tensor:
        total_size = self.step_size_up + self.step_size_down
        rising_fraction = self.step_size_up / total_size
        position = torch.div(self.last_epoch, total_size)
        cycle = torch.floor(position + 1.0)
        x = position - cycle + 1.0  # where in the cycle, in [0, 1)
        height = torch.where(x <= rising_fraction, x / rising_fraction, (x - 1.0) / (rising_fraction - 1.0))
        scaled_by = cycle if self.scale_mode == "cycle" else self.last_epoch
        amplitude = height * (self.max_val - self.base_val)
        return amplitude * self.set_scale_fn()(scaled_by) + self.base_val


class OneCycleScheduler(Scheduler):
    """The 1cycle policy, as torch's OneCycleLR.

    Anneals from initial_val up to max_val over the first pct_start of
    total_steps, then down to initial_val / final_div_factor at step
    total_steps - 1 (three_phase: back to initial_val at 2 * pct_start, then
    down to the minimum). `anneal_strategy` is "cos" or "linear". torch's
    max_lr / div_factor is initial_val here.

    From step total_steps - 1 on the value holds at its minimum. torch raises
    after total_steps and production extrapolates the last phase (with
    "linear", below zero); this follows the documented end of the cycle.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_val: the value at step 0.
        max_val: the peak.
        total_steps: the length of the cycle.
        pct_start: the fraction of the cycle spent rising.
        final_div_factor: the minimum is initial_val / final_div_factor.
        three_phase: fall back to initial_val before annealing to the minimum.
        anneal_strategy: "cos" or "linear".
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(
        self,
        optimizer,
        initial_val: float,
        max_val: float,
        total_steps: int = 1000,
        pct_start: float = 0.3,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        anneal_strategy: str = "cos",
        param_group_tags=None,
    ):
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"{type(self).__name__} anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        self.initial_val = initial_val
        self.max_val = max_val
        self.total_steps = total_steps
        self.pct_start = pct_start
        self.final_div_factor = final_div_factor
        self.three_phase = three_phase
        self.anneal_strategy = anneal_strategy
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def _annealing_cos(self, start: float, end: float, pct: torch.Tensor) -> torch.Tensor:
        return _cosine_between(start, end, pct)

    def _annealing_linear(self, start: float, end: float, pct: torch.Tensor) -> torch.Tensor:
        return pct * (end - start) + start

    def _phases(self) -> list[tuple[float, float, float]]:
        """(last step, start value, end value) of each phase."""
        min_val = self.initial_val / self.final_div_factor
        rise_end = self.pct_start * self.total_steps - 1
        last = self.total_steps - 1
        if self.three_phase:
            return [
                (rise_end, self.initial_val, self.max_val),
                (2 * self.pct_start * self.total_steps - 2, self.max_val, self.initial_val),
                (last, self.initial_val, min_val),
            ]
        return [(rise_end, self.initial_val, self.max_val), (last, self.max_val, min_val)]

    def _get_closed_form(self) -> torch.Tensor:
        anneal = self._annealing_cos if self.anneal_strategy == "cos" else self._annealing_linear
        step = torch.clamp(self.last_epoch.float(), max=float(self.total_steps - 1))
        value = None
        phase_start = 0.0
        for phase_end, start_val, end_val in self._phases():
            pct = torch.div(step - phase_start, phase_end - phase_start)
            in_phase = anneal(start_val, end_val, pct)
            value = in_phase if value is None else torch.where(step > phase_start, in_phase, value)
            phase_start = phase_end
        return value


class ScalePerParamScheduler(_SchedulerOfSchedulers):
    """Another scheduler's value, times a factor per param group.

    The factor of a group is its "adjust_learning_rate" entry, else its
    "adjust_val", else 1.0 (as in production), read once at construction:
    the per-layer scaling of muP.

    Args:
        optimizer: the cstorch optimizer to schedule.
        scheduler: the scheduler whose value is scaled (same optimizer and tags).
        param_group_tags: the tags of the param groups to schedule.
    """

    _children_attribute = "_scheduler_nested"
    _children_state_key = "_scheduler"

    def __init__(self, optimizer, scheduler: Scheduler, param_group_tags=None):
        _check_children(self, [scheduler], optimizer)
        self.adjustment_scalars = [
            group.get("adjust_learning_rate", group.get("adjust_val", 1.0)) for group in optimizer.param_groups
        ]
        self._scheduler_nested = scheduler
        _unregister(optimizer, scheduler)
        _check_children_tags(self, [scheduler], param_group_tags)
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def _children(self) -> list[Scheduler]:
        return [self._scheduler_nested]

    def state_dict(self) -> dict:
        state = super().state_dict()
        state[self._children_state_key] = state[self._children_state_key][0]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict({**state_dict, self._children_state_key: [state_dict[self._children_state_key]]})

    def get(self) -> list:
        """The wrapped scheduler's value times each group's factor."""
        values = super().get()
        return [
            None if value is None else value * scalar
            for value, scalar in zip(values, self.adjustment_scalars)
        ]

    def _get_closed_form(self) -> torch.Tensor:
        return self._scheduler_nested._get_closed_form()
