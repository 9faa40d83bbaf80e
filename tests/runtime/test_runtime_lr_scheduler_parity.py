"""The cstorch LR schedulers against torch.optim's and against their documented formulas.

Each schedule is stepped 1000 times (strict mode on) and compared value by
value with torch's scheduler under the parameter mapping the Cerebras docs
give, or with the formula written out here. Ours are float32 closed forms,
torch's float64 recursions: the tolerance is float32 rounding (1e-5 relative,
1e-6 of the largest value), plus the rounding of a hyperparameter to float32
(2^-24 relative) that gamma^t carries t times.
Where our schedule departs from production (following the documentation),
the departure is shown against production's formula, written out here too.
"""

from __future__ import annotations

import math

import pytest
import torch

import cslint.cstorch as cstorch
from cstorch_helpers import CompliantSGD, make_params

LR = cstorch.optim.lr_scheduler
STEPS = 1000
BASE_LR = 0.1


def scheduled_values(make, steps: int = STEPS) -> list[float]:
    """The lr our scheduler gives at steps 0 .. steps - 1."""
    optimizer = CompliantSGD(make_params(shapes=((2,),)), lr=BASE_LR)
    scheduler = make(optimizer)
    values = [float(optimizer.param_groups[0]["lr"])]
    for _ in range(steps - 1):
        scheduler.step()
        values.append(float(optimizer.param_groups[0]["lr"]))
    return values


def torch_values(make, steps: int = STEPS) -> list[float]:
    """The lr torch's scheduler gives at steps 0 .. steps - 1."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=BASE_LR)
    scheduler = make(optimizer)
    values = [optimizer.param_groups[0]["lr"]]
    for _ in range(steps - 1):
        optimizer.step()  # no gradients: only keeps torch's call-order check quiet
        scheduler.step()
        values.append(optimizer.param_groups[0]["lr"])
    return values


def assert_same_schedule(ours: list[float], reference: list[float]) -> None:
    assert len(ours) == len(reference)
    scale = max(abs(value) for value in reference)
    for step, (mine, theirs) in enumerate(zip(ours, reference)):
        relative = 1e-5 + step * 2.0**-24
        assert abs(mine - theirs) <= 1e-6 * scale + relative * abs(theirs), (
            f"step {step}: ours {mine!r}, reference {theirs!r}"
        )


class DecayingLambdaLR(LR.LambdaLR):
    def set_value_lambda(self):
        return [lambda epoch: 0.998**epoch]


CYCLIC = dict(base_lr=0.01, max_lr=0.1)

TORCH_TWINS = {
    "StepLR": (
        lambda o: LR.StepLR(o, initial_learning_rate=BASE_LR, step_size=30, gamma=0.5),
        lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=30, gamma=0.5),
    ),
    "MultiStepLR": (
        lambda o: LR.MultiStepLR(o, initial_learning_rate=BASE_LR, gamma=0.3, milestones=[100, 250, 600]),
        lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[100, 250, 600], gamma=0.3),
    ),
    "ExponentialLR": (
        lambda o: LR.ExponentialLR(o, initial_learning_rate=BASE_LR, total_iters=1, decay_rate=0.995),
        lambda o: torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.995),
    ),
    "CosineAnnealingLR": (
        lambda o: LR.CosineAnnealingLR(o, initial_learning_rate=BASE_LR, T_max=300, eta_min=0.001),
        lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=300, eta_min=0.001),
    ),
    "CosineAnnealingWarmRestarts": (
        lambda o: LR.CosineAnnealingWarmRestarts(o, initial_learning_rate=BASE_LR, T_0=70, eta_min=0.001),
        lambda o: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=70, eta_min=0.001),
    ),
    "PolynomialLR": (
        lambda o: LR.PolynomialLR(o, initial_learning_rate=BASE_LR, end_learning_rate=0.0, total_iters=600, power=2.0),
        lambda o: torch.optim.lr_scheduler.PolynomialLR(o, total_iters=600, power=2.0),
    ),
    "LinearLR": (
        lambda o: LR.LinearLR(o, initial_learning_rate=0.25 * BASE_LR, end_learning_rate=BASE_LR, total_iters=400),
        lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=400),
    ),
    "CyclicLR-triangular": (
        lambda o: LR.CyclicLR(o, **CYCLIC, step_size_up=50, step_size_down=80),
        lambda o: torch.optim.lr_scheduler.CyclicLR(o, **CYCLIC, step_size_up=50, step_size_down=80, cycle_momentum=False),
    ),
    "CyclicLR-triangular2": (
        lambda o: LR.CyclicLR(o, **CYCLIC, step_size_up=60, mode="triangular2"),
        lambda o: torch.optim.lr_scheduler.CyclicLR(o, **CYCLIC, step_size_up=60, mode="triangular2", cycle_momentum=False),
    ),
    "CyclicLR-exp_range": (
        lambda o: LR.CyclicLR(o, **CYCLIC, step_size_up=40, mode="exp_range", gamma=0.998),
        lambda o: torch.optim.lr_scheduler.CyclicLR(
            o, **CYCLIC, step_size_up=40, mode="exp_range", gamma=0.998, cycle_momentum=False
        ),
    ),
    "OneCycleLR-cos": (
        lambda o: LR.OneCycleLR(o, initial_learning_rate=0.1 / 25, max_lr=0.1, total_steps=STEPS),
        lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=STEPS, div_factor=25, cycle_momentum=False),
    ),
    "OneCycleLR-linear-three-phase": (
        lambda o: LR.OneCycleLR(
            o, initial_learning_rate=0.1 / 10, max_lr=0.1, total_steps=STEPS, pct_start=0.25,
            final_div_factor=100, three_phase=True, anneal_strategy="linear",
        ),
        lambda o: torch.optim.lr_scheduler.OneCycleLR(
            o, max_lr=0.1, total_steps=STEPS, pct_start=0.25, div_factor=10, final_div_factor=100,
            three_phase=True, anneal_strategy="linear", cycle_momentum=False,
        ),
    ),
    "SequentialLR": (
        lambda o: LR.SequentialLR(
            o,
            [
                LR.LinearLR(o, initial_learning_rate=0.1 * BASE_LR, end_learning_rate=BASE_LR, total_iters=100),
                LR.CosineAnnealingLR(o, initial_learning_rate=BASE_LR, T_max=500),
                LR.StepLR(o, initial_learning_rate=BASE_LR, step_size=50, gamma=0.7),
            ],
            milestones=[100, 600],
        ),
        lambda o: torch.optim.lr_scheduler.SequentialLR(
            o,
            [
                torch.optim.lr_scheduler.LinearLR(o, start_factor=0.1, total_iters=100),
                torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=500),
                torch.optim.lr_scheduler.StepLR(o, step_size=50, gamma=0.7),
            ],
            milestones=[100, 600],
        ),
    ),
    "LambdaLR": (
        lambda o: DecayingLambdaLR(o, initial_learning_rate=BASE_LR),
        lambda o: torch.optim.lr_scheduler.LambdaLR(o, lr_lambda=lambda epoch: 0.998**epoch),
    ),
    "MultiplicativeLR": (
        lambda o: LR.MultiplicativeLR(o, initial_learning_rate=BASE_LR, coefficient=0.997),
        lambda o: torch.optim.lr_scheduler.MultiplicativeLR(o, lr_lambda=lambda epoch: 0.997),
    ),
    "ChainedScheduler": (
        lambda o: LR.ChainedScheduler(
            [
                LR.StepLR(o, initial_learning_rate=BASE_LR, step_size=100, gamma=0.5),
                LR.ExponentialLR(o, initial_learning_rate=BASE_LR, total_iters=1, decay_rate=0.999),
            ]
        ),
        lambda o: torch.optim.lr_scheduler.ChainedScheduler(
            [
                torch.optim.lr_scheduler.StepLR(o, step_size=100, gamma=0.5),
                torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.999),
            ]
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(TORCH_TWINS))
def test_lr_scheduler_matches_its_torch_counterpart_over_1000_steps(name):
    ours, theirs = TORCH_TWINS[name]
    assert_same_schedule(scheduled_values(ours), torch_values(theirs))


def keras_cosine_decay(step, initial, alpha, decay_steps):
    step = min(step, decay_steps)
    cosine = 0.5 * (1 + math.cos(math.pi * step / decay_steps))
    return initial * ((1 - alpha) * cosine + alpha)


def keras_inverse_time_decay(step, initial, decay_steps, rate, staircase, exponent=1):
    progress = step**exponent / decay_steps
    if staircase:
        progress = math.floor(progress)
    return initial / (1 + rate * progress)


KERAS_STYLE = {
    "CosineDecayLR": (
        lambda o: LR.CosineDecayLR(o, initial_learning_rate=0.1, end_learning_rate=0.002, total_iters=600),
        lambda t: keras_cosine_decay(t, 0.1, alpha=0.002 / 0.1, decay_steps=600),
    ),
    "InverseExponentialTimeDecayLR": (
        lambda o: LR.InverseExponentialTimeDecayLR(o, 0.1, step_exponent=1, total_iters=50, decay_rate=0.5),
        lambda t: keras_inverse_time_decay(t, 0.1, decay_steps=50, rate=0.5, staircase=False),
    ),
    "InverseExponentialTimeDecayLR-staircase": (
        lambda o: LR.InverseExponentialTimeDecayLR(o, 0.1, step_exponent=1, total_iters=50, decay_rate=0.5, staircase=True),
        lambda t: keras_inverse_time_decay(t, 0.1, decay_steps=50, rate=0.5, staircase=True),
    ),
    "InverseExponentialTimeDecayLR-squared-step": (
        lambda o: LR.InverseExponentialTimeDecayLR(o, 0.1, step_exponent=2, total_iters=5000, decay_rate=0.25),
        lambda t: keras_inverse_time_decay(t, 0.1, decay_steps=5000, rate=0.25, staircase=False, exponent=2),
    ),
    "InverseSquareRootDecayLR": (
        lambda o: LR.InverseSquareRootDecayLR(o, initial_learning_rate=2.0, scale=0.5, warmup_steps=100),
        lambda t: 2.0 * 0.5 / math.sqrt(max(t, 100)),
    ),
    "ExponentialLR-staircase": (
        lambda o: LR.ExponentialLR(o, initial_learning_rate=0.1, total_iters=80, decay_rate=0.5, staircase=True),
        lambda t: 0.1 * 0.5 ** (t // 80),
    ),
    "PiecewiseConstantLR": (
        lambda o: LR.PiecewiseConstantLR(o, learning_rates=[0.1, 0.05, 0.01], milestones=[200, 700]),
        lambda t: 0.1 if t < 200 else 0.05 if t < 700 else 0.01,
    ),
    "ConstantLR-ignores-total_iters": (
        lambda o: LR.ConstantLR(o, learning_rate=0.03, total_iters=10),
        lambda t: 0.03,
    ),
}


@pytest.mark.parametrize("name", sorted(KERAS_STYLE))
def test_lr_scheduler_matches_its_documented_formula_over_1000_steps(name):
    ours, formula = KERAS_STYLE[name]
    assert_same_schedule(scheduled_values(ours), [formula(step) for step in range(STEPS)])


# -- where we follow the documentation rather than production ---------------------


def production_warm_restarts(step, initial, T_0, eta_min):
    """Production's time since restart: t, then whole periods behind (held)."""
    since_restart = step if step < T_0 else (step // T_0) * T_0 - T_0
    return eta_min + (initial - eta_min) * (1 + math.cos(math.pi * since_restart / T_0)) / 2


def test_warm_restarts_anneal_within_every_period_where_production_holds_whole_periods():
    T_0 = 20
    ours = scheduled_values(lambda o: LR.CosineAnnealingWarmRestarts(o, 0.1, T_0=T_0), steps=4 * T_0)
    documented = [0.1 * (1 + math.cos(math.pi * (t % T_0) / T_0)) / 2 for t in range(4 * T_0)]
    assert_same_schedule(ours, documented)
    # Each period repeats the first: the cosine restarts.
    assert ours[T_0 : 2 * T_0] == ours[:T_0] and ours[3 * T_0 :] == ours[:T_0]
    production = [production_warm_restarts(t, 0.1, T_0, 0.0) for t in range(4 * T_0)]
    assert set(production[T_0 : 2 * T_0]) == {0.1}  # production: the maximum, held
    assert ours[T_0 + 10] == pytest.approx(0.05)


class DefaultLambdaLR(LR.LambdaLR):
    """LambdaLR with production's default factors, t / 30 and 0.95^t."""


def test_lambda_lr_multiplies_the_initial_rate_once_where_production_squares_it():
    ours = scheduled_values(lambda o: DefaultLambdaLR(o, initial_learning_rate=0.5), steps=100)
    documented = [0.5 * (t / 30) * 0.95**t for t in range(100)]
    production = [0.5 * 0.5 * (t / 30) * 0.95**t for t in range(100)]
    assert_same_schedule(ours, documented)
    assert ours[10] != pytest.approx(production[10])


def cycled_polynomial(step, initial, end, total_iters, power):
    """TensorFlow's PolynomialDecay with cycle=True."""
    decay_steps = total_iters * max(1, math.ceil(step / total_iters))
    return (initial - end) * (1 - step / decay_steps) ** power + end


@pytest.mark.parametrize(
    "make, power",
    [
        (lambda o: LR.PolynomialLR(o, 0.1, 0.01, total_iters=100, power=2.0, cycle=True), 2.0),
        (lambda o: LR.LinearLR(o, 0.1, 0.01, total_iters=100, cycle=True), 1.0),
    ],
    ids=["PolynomialLR", "LinearLR"],
)
def test_cycle_restarts_the_decay_over_the_next_multiple_of_total_iters(make, power):
    ours = scheduled_values(make, steps=450)
    assert_same_schedule(ours, [cycled_polynomial(t, 0.1, 0.01, 100, power) for t in range(450)])
    # At each multiple of total_iters the end value is reached, then the decay
    # starts over a longer period (production, ignoring cycle, stays at the end).
    assert ours[100] == pytest.approx(0.01) and ours[200] == pytest.approx(0.01)
    assert ours[101] > 3 * ours[100] and ours[201] > ours[200] and ours[301] > ours[300]


def production_one_cycle_linear(step, initial, peak, total_steps, pct_start, final_div_factor):
    """Production's two-phase linear 1cycle, which extrapolates its last phase."""
    rise_end = pct_start * total_steps - 1
    if step <= rise_end:
        return initial + (peak - initial) * step / rise_end
    pct = (step - rise_end) / (total_steps - 1 - rise_end)
    return peak + (initial / final_div_factor - peak) * pct


@pytest.mark.parametrize("anneal_strategy", ["cos", "linear"])
def test_one_cycle_holds_its_minimum_after_total_steps_where_production_extrapolates(anneal_strategy):
    total_steps = 100
    ours = scheduled_values(
        lambda o: LR.OneCycleLR(o, 0.004, 0.1, total_steps=total_steps, anneal_strategy=anneal_strategy),
        steps=3 * total_steps,
    )
    minimum = 0.004 / 1e4
    assert ours[total_steps - 1] == pytest.approx(minimum, abs=1e-8)
    assert set(ours[total_steps - 1 :]) == {ours[total_steps - 1]}
    if anneal_strategy == "linear":
        assert production_one_cycle_linear(2 * total_steps, 0.004, 0.1, total_steps, 0.3, 1e4) < 0
