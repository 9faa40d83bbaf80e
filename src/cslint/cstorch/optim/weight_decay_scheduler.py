"""The cstorch weight-decay schedulers (`param_group_key == "weight_decay"`).

`WeightDecayScheduler` is the base; the library (ConstantWD ...
ScalePerParamWD) pairs it with the schedules shared with the learning-rate
family (in `scheduler`), whose generic argument names (`val`, `initial_val`,
`end_val`, `base_val`, `max_val`) are the production signatures here. Each
WD scheduler gives the same values as its LR twin.
"""

from __future__ import annotations

from cslint.cstorch.optim.scheduler import (
    ChainedScheduler,
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
)

__all__ = [
    "ChainedWD",
    "ConstantWD",
    "CosineAnnealingWD",
    "CosineAnnealingWarmRestartsWD",
    "CosineDecayWD",
    "CyclicWD",
    "ExponentialWD",
    "InverseExponentialTimeDecayWD",
    "InverseSquareRootDecayWD",
    "LambdaWD",
    "LinearWD",
    "MultiStepWD",
    "MultiplicativeWD",
    "OneCycleWD",
    "PiecewiseConstantWD",
    "PolynomialWD",
    "ScalePerParamWD",
    "SequentialWD",
    "StepWD",
    "WeightDecayScheduler",
]


class WeightDecayScheduler(Scheduler):
    """Base class of cstorch weight-decay schedulers.

    In strict mode the scheduled weight decay is a 0-dim device tensor, so an
    optimizer that tests `if group["weight_decay"] != 0` fails (CS201) as it
    would on the system.
    """

    @property
    def param_group_key(self) -> str:
        return "weight_decay"


class ConstantWD(WeightDecayScheduler, ConstantScheduler):
    """The weight decay `val` at every step (total_iters is stored, unused)."""


class PolynomialWD(WeightDecayScheduler, PolynomialScheduler):
    """Polynomial decay of the weight decay from initial_val to end_val.

    `cycle=True` restarts the decay as documented; production ignores it
    (see PolynomialScheduler).
    """


class LinearWD(WeightDecayScheduler, LinearScheduler):
    """A straight line from initial_val to end_val over total_iters (cycle as in PolynomialWD)."""


class ExponentialWD(WeightDecayScheduler, ExponentialScheduler):
    """initial_val * decay_rate^(t / total_iters), floored exponent with staircase."""


class InverseExponentialTimeDecayWD(WeightDecayScheduler, InverseExponentialTimeDecayScheduler):
    """initial_val / (1 + decay_rate * t^step_exponent / total_iters) (Keras's InverseTimeDecay)."""


class InverseSquareRootDecayWD(WeightDecayScheduler, InverseSquareRootDecayScheduler):
    """initial_val * scale / sqrt(max(t, warmup_steps))."""


class CosineDecayWD(WeightDecayScheduler, CosineDecayScheduler):
    """Keras's CosineDecay of the weight decay from initial_val to end_val."""


class SequentialWD(WeightDecayScheduler, SequentialScheduler):
    """WD schedulers one after another; the one starting at milestone m sees t - m."""


class PiecewiseConstantWD(WeightDecayScheduler, PiecewiseConstantScheduler):
    """vals[i] from milestones[i - 1] until milestones[i].

    Args:
        optimizer: the cstorch optimizer to schedule.
        vals: the weight decays, one more than the milestones.
        milestones: increasing steps at which the next weight decay starts.
        param_group_tags: the tags of the param groups to schedule.
    """

    def __init__(self, optimizer, vals, milestones, param_group_tags=None):
        super().__init__(optimizer, ConstantWD, vals=vals, milestones=milestones, param_group_tags=param_group_tags)


class MultiStepWD(WeightDecayScheduler, MultiStepScheduler):
    """initial_val times gamma at each milestone reached."""


class StepWD(WeightDecayScheduler, StepScheduler):
    """initial_val * gamma^floor(t / step_size)."""


class CosineAnnealingWD(WeightDecayScheduler, CosineAnnealingScheduler):
    """Cosine annealing of the weight decay from initial_val to eta_min over T_max."""


class LambdaWD(WeightDecayScheduler, LambdaScheduler):
    """initial_val times the product of the `set_value_lambda` factors.

    Production multiplies initial_val in once per factor; this follows the
    documentation (see LambdaScheduler).
    """


class CosineAnnealingWarmRestartsWD(WeightDecayScheduler, CosineAnnealingWarmRestartsScheduler):
    """SGDR restarts every T_0 steps, time since restart t mod T_0 as documented.

    Production holds the maximum and the minimum for whole periods instead
    (see CosineAnnealingWarmRestartsScheduler).
    """


class MultiplicativeWD(WeightDecayScheduler, MultiplicativeScheduler):
    """initial_val * coefficient^t."""


class ChainedWD(WeightDecayScheduler, ChainedScheduler):
    """The product of WD schedules: the first's value times each other's relative change."""


class CyclicWD(WeightDecayScheduler, CyclicScheduler):
    """Cyclical weight decay between base_val and max_val; the mode fixes scale_mode."""


class OneCycleWD(WeightDecayScheduler, OneCycleScheduler):
    """The 1cycle policy for the weight decay; it holds its minimum from total_steps - 1 on.

    Production extrapolates past the cycle (see OneCycleScheduler).
    """


class ScalePerParamWD(WeightDecayScheduler, ScalePerParamScheduler):
    """Another WD scheduler's value times each group's "adjust_learning_rate" (else "adjust_val")."""
