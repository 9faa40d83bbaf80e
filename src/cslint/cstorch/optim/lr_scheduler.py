"""The cstorch learning-rate schedulers (`param_group_key == "lr"`).

`LRScheduler`: like the production class it is also a
`torch.optim.lr_scheduler.LRScheduler`, so frameworks that check for one
accept it; the cstorch `Scheduler` logic comes first in the MRO and torch's is
never run. Subclasses define the closed form as `_get_closed_form_lr` (the
documented name) or `_get_closed_form`.

The library (ConstantLR ... ScalePerParamLR) pairs LRScheduler with the
schedules shared with the weight-decay family (in `scheduler`), under the
production signatures: `initial_learning_rate`, `end_learning_rate`,
`learning_rate`, `base_lr`, `max_lr` for the generic names. The values are the
schedules' (see their docstrings for the formulas and where they depart from
production).
"""

from __future__ import annotations

import types
from collections.abc import Callable

import torch

from cslint.cstorch.optim.scheduler import ChainedScheduler as _ChainedSchedule
from cslint.cstorch.optim.scheduler import (
    ConstantScheduler,
    CosineAnnealingScheduler,
    CosineAnnealingWarmRestartsScheduler,
    CosineDecayScheduler,
    CyclicScheduler,
    ExponentialScheduler,
    InverseExponentialTimeDecayScheduler,
    InverseSquareRootDecayScheduler,
    LambdaScheduler,
    LinearScheduler,
    MultiplicativeScheduler,
    MultiStepScheduler,
    OneCycleScheduler,
    PiecewiseConstantScheduler,
    PolynomialScheduler,
    ScalePerParamScheduler,
    Scheduler,
    SequentialScheduler,
    StepScheduler,
    renamed,
)

__all__ = [
    "ChainedLR",
    "ChainedScheduler",
    "ConstantLR",
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "CosineDecayLR",
    "CyclicLR",
    "ExponentialLR",
    "InverseExponentialTimeDecayLR",
    "InverseSquareRootDecayLR",
    "LRScheduler",
    "LambdaLR",
    "LinearLR",
    "MultiStepLR",
    "MultiplicativeLR",
    "OneCycleLR",
    "PiecewiseConstantLR",
    "PolynomialLR",
    "ScalePerParamLR",
    "SequentialLR",
    "StepLR",
]


class LRScheduler(Scheduler, torch.optim.lr_scheduler.LRScheduler):
    """Base class of cstorch learning-rate schedulers."""

    @property
    def param_group_key(self) -> str:
        return "lr"

    def _get_closed_form(self) -> torch.Tensor:
        if self._closed_form_definition()[1] == "_get_closed_form_lr":
            return self._get_closed_form_lr()
        # A library schedule's, next in the MRO (also for a subclass's
        # `super()._get_closed_form()`).
        return super()._get_closed_form()

    def _get_closed_form_lr(self) -> torch.Tensor:
        raise NotImplementedError(
            f"{type(self).__name__} must define _get_closed_form_lr (or _get_closed_form)"
        )

    def _closed_form_definition(self) -> tuple[type, str] | None:
        """The class and method name of the closed form this schedule uses.

        The most derived definition of either name wins, skipping the two
        bases: a user's `_get_closed_form_lr`, or a library schedule's
        `_get_closed_form` (StepLR's comes from StepScheduler, after this
        class in the MRO).
        """
        for cls in type(self).__mro__:
            if cls in (LRScheduler, Scheduler):
                continue
            for name in ("_get_closed_form", "_get_closed_form_lr"):
                if name in cls.__dict__:
                    return cls, name
        return None

    def _require_closed_form(self) -> None:
        if self._closed_form_definition() is None:
            raise TypeError(
                f"Can't instantiate {type(self).__name__}: it defines neither "
                "_get_closed_form_lr nor _get_closed_form"
            )

    def _closed_form_method(self) -> Callable:
        cls, name = self._closed_form_definition()
        return types.MethodType(cls.__dict__[name], self)

    def _closed_form_owner(self) -> str:
        cls, name = self._closed_form_definition()
        return f"{cls.__name__}.{name}"

    def get_last_lr(self) -> list:
        """The learning rates last written into the groups (0-dim tensors)."""
        return self.get_last_value()

    def get_lr(self) -> list:
        """The closed form's learning rate for each group."""
        return self.get()


class ConstantLR(LRScheduler, ConstantScheduler):
    """The learning rate `learning_rate` at every step.

    `total_iters` is accepted and ignored, as in production (torch's
    ConstantLR is a factor that ends at total_iters; this is not).

    Args:
        optimizer: the cstorch optimizer to schedule.
        learning_rate: the learning rate.
        total_iters: stored, unused.
        param_group_tags: the tags of the param groups to schedule.
    """

    val = renamed("learning_rate")

    def __init__(self, optimizer, learning_rate: float, total_iters: int | None = None, param_group_tags=None):
        super().__init__(optimizer, val=learning_rate, total_iters=total_iters, param_group_tags=param_group_tags)


class PolynomialLR(LRScheduler, PolynomialScheduler):
    """Polynomial decay of the learning rate (see PolynomialScheduler).

    torch's PolynomialLR(total_iters, power) on a base lr is
    initial_learning_rate=base lr, end_learning_rate=0. With `cycle=True` the
    decay restarts as documented; production ignores `cycle`.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_learning_rate: the learning rate at step 0.
        end_learning_rate: the learning rate from total_iters on.
        total_iters: the length of the decay.
        power: the exponent of the polynomial.
        cycle: restart the decay after each total_iters.
        param_group_tags: the tags of the param groups to schedule.
    """

    initial_val = renamed("initial_learning_rate")
    end_val = renamed("end_learning_rate")

    def __init__(
        self,
        optimizer,
        initial_learning_rate: float,
        end_learning_rate: float,
        total_iters: int,
        power: float = 1.0,
        cycle: bool = False,
        param_group_tags=None,
    ):
        super().__init__(
            optimizer,
            initial_val=initial_learning_rate,
            end_val=end_learning_rate,
            total_iters=total_iters,
            power=power,
            cycle=cycle,
            param_group_tags=param_group_tags,
        )


class LinearLR(LRScheduler, LinearScheduler):
    """A straight line from initial_learning_rate to end_learning_rate.

    torch's LinearLR(start_factor, end_factor, total_iters) on a base lr is
    initial_learning_rate=base lr * start_factor, end_learning_rate=base lr *
    end_factor. With `cycle=True` the line restarts as documented (see
    PolynomialScheduler); production ignores `cycle`.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_learning_rate: the learning rate at step 0.
        end_learning_rate: the learning rate from total_iters on.
        total_iters: the length of the line.
        cycle: restart after each total_iters.
        param_group_tags: the tags of the param groups to schedule.
    """

    initial_val = renamed("initial_learning_rate")
    end_val = renamed("end_learning_rate")

    def __init__(
        self,
        optimizer,
        initial_learning_rate: float,
        end_learning_rate: float,
        total_iters: int,
        cycle: bool = False,
        param_group_tags=None,
    ):
        super().__init__(
            optimizer,
            initial_val=initial_learning_rate,
            end_val=end_learning_rate,
            total_iters=total_iters,
            cycle=cycle,
            param_group_tags=param_group_tags,
        )


class ExponentialLR(LRScheduler, ExponentialScheduler):
    """initial_learning_rate * decay_rate^(t / total_iters) (see ExponentialScheduler).

    torch's ExponentialLR(gamma) is total_iters=1, decay_rate=gamma.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_learning_rate: the learning rate at step 0.
        total_iters: the steps per factor of decay_rate.
        decay_rate: the factor.
        staircase: decay in whole steps of total_iters.
        param_group_tags: the tags of the param groups to schedule.
    """

    initial_val = renamed("initial_learning_rate")

    def __init__(
        self,
        optimizer,
        initial_learning_rate: float,
        total_iters: int,
        decay_rate: float,
        staircase: bool = False,
        param_group_tags=None,
    ):
        super().__init__(
            optimizer,
            initial_val=initial_learning_rate,
            total_iters=total_iters,
            decay_rate=decay_rate,
            staircase=staircase,
            param_group_tags=param_group_tags,
        )


class InverseExponentialTimeDecayLR(LRScheduler, InverseExponentialTimeDecayScheduler):
    """Keras's InverseTimeDecay with a step exponent (see InverseExponentialTimeDecayScheduler).

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_learning_rate: the learning rate at step 0.
        step_exponent: the power of the step.
        total_iters: the divisor of the (powered) step.
        decay_rate: the rate of decay.
        staircase: floor the progress.
        param_group_tags: the tags of the param groups to schedule.
    """

    initial_val = renamed("initial_learning_rate")

    def __init__(
        self,
        optimizer,
        initial_learning_rate: float,
        step_exponent: int,
        total_iters: int,
        decay_rate: float,
        staircase: bool = False,
        param_group_tags=None,
    ):
        super().__init__(
            optimizer,
            initial_val=initial_learning_rate,
            step_exponent=step_exponent,
            total_iters=total_iters,
            decay_rate=decay_rate,
            staircase=staircase,
            param_group_tags=param_group_tags,
        )


class InverseSquareRootDecayLR(LRScheduler, InverseSquareRootDecayScheduler):
    """initial_learning_rate * scale / sqrt(max(t, warmup_steps)).

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_learning_rate: the factor in front.
        scale: a second factor.
        warmup_steps: the steps the learning rate is held at its start.
        param_group_tags: the tags of the param groups to schedule.
    """

    initial_val = renamed("initial_learning_rate")

    def __init__(
        self,
        optimizer,
        initial_learning_rate: float = 1.0,
        scale: float = 1.0,
        warmup_steps: int = 1.0,
        param_group_tags=None,
    ):
        super().__init__(
            optimizer,
            initial_val=initial_learning_rate,
            scale=scale,
            warmup_steps=warmup_steps,
            param_group_tags=param_group_tags,
        )


class CosineDecayLR(LRScheduler, CosineDecayScheduler):
    """Keras's CosineDecay from initial_learning_rate to end_learning_rate.

    Keras's alpha is end_learning_rate / initial_learning_rate.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_learning_rate: the learning rate at step 0.
        end_learning_rate: the learning rate from total_iters on.
        total_iters: the length of the decay.
        param_group_tags: the tags of the param groups to schedule.
    """

    initial_val = renamed("initial_learning_rate")
    end_val = renamed("end_learning_rate")

    def __init__(
        self,
        optimizer,
        initial_learning_rate: float,
        end_learning_rate: float,
        total_iters: int,
        param_group_tags=None,
    ):
        super().__init__(
            optimizer,
            initial_val=initial_learning_rate,
            end_val=end_learning_rate,
            total_iters=total_iters,
            param_group_tags=param_group_tags,
        )


class SequentialLR(LRScheduler, SequentialScheduler):
    """LR schedulers one after another, switching at the milestones (see SequentialScheduler).

    As torch's SequentialLR: the scheduler that starts at milestone m sees
    step t - m.

    Args:
        optimizer: the cstorch optimizer the schedulers schedule.
        schedulers: the LR schedulers, one more than the milestones.
        milestones: increasing steps (ints) at which the next one takes over.
        last_epoch: the step before the first one (-1 for a fresh run).
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch: int = -1, param_group_tags=None):
        super().__init__(
            optimizer,
            schedulers=schedulers,
            milestones=milestones,
            last_epoch=last_epoch,
            param_group_tags=param_group_tags,
        )


class PiecewiseConstantLR(LRScheduler, PiecewiseConstantScheduler):
    """learning_rates[i] from milestones[i - 1] until milestones[i].

    Args:
        optimizer: the cstorch optimizer to schedule.
        learning_rates: the learning rates, one more than the milestones.
        milestones: increasing steps at which the next learning rate starts.
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(self, optimizer, learning_rates, milestones, param_group_tags=None):
        super().__init__(
            optimizer,
            ConstantLR,
            vals=learning_rates,
            milestones=milestones,
            param_group_tags=param_group_tags,
        )


class MultiStepLR(LRScheduler, MultiStepScheduler):
    """initial_learning_rate times gamma at each milestone reached, as torch's MultiStepLR.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_learning_rate: the learning rate before the first milestone.
        gamma: the factor at each milestone.
        milestones: the steps of the decays.
        param_group_tags: the tags of the param groups to schedule.
    """

    initial_val = renamed("initial_learning_rate")

    def __init__(self, optimizer, initial_learning_rate: float, gamma: float, milestones, param_group_tags=None):
        super().__init__(
            optimizer,
            initial_val=initial_learning_rate,
            gamma=gamma,
            milestones=milestones,
            param_group_tags=param_group_tags,
        )


class StepLR(LRScheduler, StepScheduler):
    """initial_learning_rate * gamma^floor(t / step_size), as torch's StepLR.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_learning_rate: the learning rate for the first step_size steps.
        step_size: the steps between decays.
        gamma: the factor of each decay.
        param_group_tags: the tags of the param groups to schedule.
    """

    initial_val = renamed("initial_learning_rate")

    def __init__(self, optimizer, initial_learning_rate: float, step_size: int, gamma: float, param_group_tags=None):
        super().__init__(
            optimizer,
            initial_val=initial_learning_rate,
            step_size=step_size,
            gamma=gamma,
            param_group_tags=param_group_tags,
        )


class CosineAnnealingLR(LRScheduler, CosineAnnealingScheduler):
    """Cosine annealing from initial_learning_rate to eta_min over T_max, as torch's.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_learning_rate: the learning rate at step 0.
        T_max: the steps from the maximum to the minimum.
        eta_min: the minimum learning rate.
        param_group_tags: the tags of the param groups to schedule.
    """

    initial_val = renamed("initial_learning_rate")

    def __init__(self, optimizer, initial_learning_rate: float, T_max: int, eta_min: float = 0.0, param_group_tags=None):
        super().__init__(
            optimizer,
            initial_val=initial_learning_rate,
            T_max=T_max,
            eta_min=eta_min,
            param_group_tags=param_group_tags,
        )


class LambdaLR(LRScheduler, LambdaScheduler):
    """initial_learning_rate times the product of the `set_value_lambda` factors.

    Override `set_value_lambda` to return the factor functions of the step
    tensor. One factor f gives torch's LambdaLR(lr_lambda=f). Production
    multiplies initial_learning_rate in once per factor (its default of two
    factors squares it); this follows the documentation: the initial
    learning rate times the factors.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_learning_rate: the learning rate the factors multiply.
        param_group_tags: the tags of the param groups to schedule.
    """

    initial_val = renamed("initial_learning_rate")

    def __init__(self, optimizer, initial_learning_rate: float, param_group_tags=None):
        super().__init__(optimizer, initial_val=initial_learning_rate, param_group_tags=param_group_tags)


class CosineAnnealingWarmRestarts(LRScheduler, CosineAnnealingWarmRestartsScheduler):
    """SGDR: cosine annealing that restarts every T_0 steps (T_mult must be 1).

    The time since restart is t mod T_0, as documented and as torch's
    CosineAnnealingWarmRestarts; production holds the maximum and the minimum
    for whole periods instead.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_learning_rate: the learning rate at each restart.
        T_0: the steps between restarts.
        T_mult: must be 1, as in production.
        eta_min: the minimum learning rate.
        param_group_tags: the tags of the param groups to schedule.
    """

    initial_val = renamed("initial_learning_rate")

    def __init__(
        self,
        optimizer,
        initial_learning_rate: float,
        T_0: int,
        T_mult: int = 1,
        eta_min: float = 0.0,
        param_group_tags=None,
    ):
        super().__init__(
            optimizer,
            initial_val=initial_learning_rate,
            T_0=T_0,
            T_mult=T_mult,
            eta_min=eta_min,
            param_group_tags=param_group_tags,
        )


class MultiplicativeLR(LRScheduler, MultiplicativeScheduler):
    """initial_learning_rate * coefficient^t, as torch's MultiplicativeLR with a constant factor.

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_learning_rate: the learning rate at step 0.
        coefficient: the factor per step.
        param_group_tags: the tags of the param groups to schedule.
    """

    initial_val = renamed("initial_learning_rate")

    def __init__(self, optimizer, initial_learning_rate: float, coefficient: float, param_group_tags=None):
        super().__init__(
            optimizer,
            initial_val=initial_learning_rate,
            coefficient=coefficient,
            param_group_tags=param_group_tags,
        )


class ChainedLR(LRScheduler, _ChainedSchedule):
    """The product of LR schedules (see the generic ChainedScheduler).

    The first scheduler's learning rate times each other one's relative
    change (its learning rate over its initial_learning_rate), as torch's
    ChainedScheduler of multiplicative schedulers.

    Args:
        schedulers: the LR schedulers, all of one optimizer.
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(self, schedulers, param_group_tags=None):
        super().__init__(schedulers=schedulers, param_group_tags=param_group_tags)


class ChainedScheduler(ChainedLR):
    """ChainedLR under torch's name."""


class CyclicLR(LRScheduler, CyclicScheduler):
    """Cyclical learning rates between base_lr and max_lr, as torch's CyclicLR.

    The mode fixes scale_mode, as torch's built-in modes do (see CyclicScheduler).

    Args:
        optimizer: the cstorch optimizer to schedule.
        base_lr: the lower boundary, the learning rate at step 0.
        max_lr: the upper boundary.
        step_size_up: the steps of the rising half.
        step_size_down: the steps of the falling half (default: step_size_up).
        mode: "triangular", "triangular2" or "exp_range".
        gamma: the base of exp_range's scaling.
        scale_mode: "cycle" or "iterations" (fixed by the mode).
        param_group_tags: the tags of the param groups to schedule.
    """

    base_val = renamed("base_lr")
    max_val = renamed("max_lr")

    def __init__(
        self,
        optimizer,
        base_lr: float,
        max_lr: float,
        step_size_up: int = 2000,
        step_size_down: int | None = None,
        mode: str = "triangular",
        gamma: float = 1.0,
        scale_mode: str = "cycle",
        param_group_tags=None,
    ):
        super().__init__(
            optimizer,
            base_val=base_lr,
            max_val=max_lr,
            step_size_up=step_size_up,
            step_size_down=step_size_down,
            mode=mode,
            gamma=gamma,
            scale_mode=scale_mode,
            param_group_tags=param_group_tags,
        )


class OneCycleLR(LRScheduler, OneCycleScheduler):
    """The 1cycle learning rate policy, as torch's OneCycleLR (see OneCycleScheduler).

    torch's OneCycleLR(max_lr, total_steps, div_factor, ...) is
    initial_learning_rate = max_lr / div_factor. From step total_steps - 1 on
    the learning rate holds its minimum; production extrapolates (below zero
    with "linear").

    Args:
        optimizer: the cstorch optimizer to schedule.
        initial_learning_rate: the learning rate at step 0.
        max_lr: the peak.
        total_steps: the length of the cycle.
        pct_start: the fraction of the cycle spent rising.
        final_div_factor: the minimum is initial_learning_rate / final_div_factor.
        three_phase: fall back to the initial learning rate before the final anneal.
        anneal_strategy: "cos" or "linear".
        param_group_tags: the tags of the param groups to schedule.
    """

    initial_val = renamed("initial_learning_rate")
    max_val = renamed("max_lr")

    def __init__(
        self,
        optimizer,
        initial_learning_rate: float,
        max_lr: float,
        total_steps: int = 1000,
        pct_start: float = 0.3,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        anneal_strategy: str = "cos",
        param_group_tags=None,
    ):
        super().__init__(
            optimizer,
            initial_val=initial_learning_rate,
            max_val=max_lr,
            total_steps=total_steps,
            pct_start=pct_start,
            final_div_factor=final_div_factor,
            three_phase=three_phase,
            anneal_strategy=anneal_strategy,
            param_group_tags=param_group_tags,
        )


class ScalePerParamLR(LRScheduler, ScalePerParamScheduler):
    """Another LR scheduler's learning rate times each group's "adjust_learning_rate".

    Args:
        optimizer: the cstorch optimizer to schedule.
        scheduler: the LR scheduler whose learning rate is scaled.
        param_group_tags: the tags of the param groups to schedule.
    """

    adjustment_scalars = renamed("lr_adjustment_scalars")

    def __init__(self, optimizer, scheduler, param_group_tags=None):
        super().__init__(optimizer, scheduler=scheduler, param_group_tags=param_group_tags)
