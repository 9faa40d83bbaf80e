"""The cstorch scheduler library: WD twins, checkpoints, strict mode, static graphs, wrappers.

Every LR scheduler and its weight-decay twin, built with the production
argument names of each family, give the same values; each one's state_dict
survives torch.save / torch.load(weights_only=True) into a fresh instance;
each one steps under strict mode with one graph per step.
"""

from __future__ import annotations

import io

import pytest
import torch

import cslint.cstorch as cstorch
from cstorch_helpers import BodyOptimizer, make_params

LR = cstorch.optim.lr_scheduler
WD = cstorch.optim.weight_decay_scheduler


def decoupled_sgd_body(optimizer, group, p, state):
    # Uses both scheduled values as tensors, as the system requires.
    p.sub_(group["lr"] * (p.grad + group["weight_decay"] * p))


def make_optimizer(groups=None) -> BodyOptimizer:
    params = groups if groups is not None else make_params(shapes=((3, 2), (4,)))
    return BodyOptimizer(params, decoupled_sgd_body, lr=0.1, weight_decay=0.0)


class SquareRootLambdaLR(LR.LambdaLR):
    def set_value_lambda(self):
        return [lambda epoch: torch.rsqrt(epoch + 1.0), lambda epoch: 0.99**epoch]


class SquareRootLambdaWD(WD.LambdaWD):
    def set_value_lambda(self):
        return [lambda epoch: torch.rsqrt(epoch + 1.0), lambda epoch: 0.99**epoch]


# name -> (LR scheduler on an optimizer, its WD twin), with the same numbers.
TWINS = {
    "Constant": (
        lambda o: LR.ConstantLR(o, learning_rate=0.02, total_iters=5),
        lambda o: WD.ConstantWD(o, val=0.02, total_iters=5),
    ),
    "Polynomial": (
        lambda o: LR.PolynomialLR(o, initial_learning_rate=0.1, end_learning_rate=0.01, total_iters=8, power=1.5, cycle=True),
        lambda o: WD.PolynomialWD(o, initial_val=0.1, end_val=0.01, total_iters=8, power=1.5, cycle=True),
    ),
    "Linear": (
        lambda o: LR.LinearLR(o, initial_learning_rate=0.01, end_learning_rate=0.1, total_iters=6),
        lambda o: WD.LinearWD(o, initial_val=0.01, end_val=0.1, total_iters=6),
    ),
    "Exponential": (
        lambda o: LR.ExponentialLR(o, initial_learning_rate=0.1, total_iters=3, decay_rate=0.8, staircase=True),
        lambda o: WD.ExponentialWD(o, initial_val=0.1, total_iters=3, decay_rate=0.8, staircase=True),
    ),
    "InverseExponentialTimeDecay": (
        lambda o: LR.InverseExponentialTimeDecayLR(o, initial_learning_rate=0.1, step_exponent=2, total_iters=4, decay_rate=0.5),
        lambda o: WD.InverseExponentialTimeDecayWD(o, initial_val=0.1, step_exponent=2, total_iters=4, decay_rate=0.5),
    ),
    "InverseSquareRootDecay": (
        lambda o: LR.InverseSquareRootDecayLR(o, initial_learning_rate=0.3, scale=2.0, warmup_steps=4),
        lambda o: WD.InverseSquareRootDecayWD(o, initial_val=0.3, scale=2.0, warmup_steps=4),
    ),
    "CosineDecay": (
        lambda o: LR.CosineDecayLR(o, initial_learning_rate=0.1, end_learning_rate=0.01, total_iters=9),
        lambda o: WD.CosineDecayWD(o, initial_val=0.1, end_val=0.01, total_iters=9),
    ),
    "Sequential": (
        lambda o: LR.SequentialLR(
            o,
            [LR.LinearLR(o, 0.01, 0.1, total_iters=4), LR.CosineAnnealingLR(o, 0.1, T_max=6)],
            milestones=[4],
        ),
        lambda o: WD.SequentialWD(
            o,
            [WD.LinearWD(o, 0.01, 0.1, total_iters=4), WD.CosineAnnealingWD(o, 0.1, T_max=6)],
            milestones=[4],
        ),
    ),
    "PiecewiseConstant": (
        lambda o: LR.PiecewiseConstantLR(o, learning_rates=[0.1, 0.05, 0.02], milestones=[3, 7]),
        lambda o: WD.PiecewiseConstantWD(o, vals=[0.1, 0.05, 0.02], milestones=[3, 7]),
    ),
    "MultiStep": (
        lambda o: LR.MultiStepLR(o, initial_learning_rate=0.1, gamma=0.5, milestones=[2, 5, 9]),
        lambda o: WD.MultiStepWD(o, initial_val=0.1, gamma=0.5, milestones=[2, 5, 9]),
    ),
    "Step": (
        lambda o: LR.StepLR(o, initial_learning_rate=0.1, step_size=3, gamma=0.7),
        lambda o: WD.StepWD(o, initial_val=0.1, step_size=3, gamma=0.7),
    ),
    "CosineAnnealing": (
        lambda o: LR.CosineAnnealingLR(o, initial_learning_rate=0.1, T_max=7, eta_min=0.01),
        lambda o: WD.CosineAnnealingWD(o, initial_val=0.1, T_max=7, eta_min=0.01),
    ),
    "Lambda": (
        lambda o: SquareRootLambdaLR(o, initial_learning_rate=0.1),
        lambda o: SquareRootLambdaWD(o, initial_val=0.1),
    ),
    "CosineAnnealingWarmRestarts": (
        lambda o: LR.CosineAnnealingWarmRestarts(o, initial_learning_rate=0.1, T_0=5, eta_min=0.01),
        lambda o: WD.CosineAnnealingWarmRestartsWD(o, initial_val=0.1, T_0=5, eta_min=0.01),
    ),
    "Multiplicative": (
        lambda o: LR.MultiplicativeLR(o, initial_learning_rate=0.1, coefficient=0.9),
        lambda o: WD.MultiplicativeWD(o, initial_val=0.1, coefficient=0.9),
    ),
    "Chained": (
        lambda o: LR.ChainedLR([LR.StepLR(o, 0.1, step_size=4, gamma=0.5), LR.ExponentialLR(o, 0.2, total_iters=1, decay_rate=0.9)]),
        lambda o: WD.ChainedWD([WD.StepWD(o, 0.1, step_size=4, gamma=0.5), WD.ExponentialWD(o, 0.2, total_iters=1, decay_rate=0.9)]),
    ),
    "Cyclic": (
        lambda o: LR.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3, step_size_down=5, mode="exp_range", gamma=0.95),
        lambda o: WD.CyclicWD(o, base_val=0.01, max_val=0.1, step_size_up=3, step_size_down=5, mode="exp_range", gamma=0.95),
    ),
    "OneCycle": (
        lambda o: LR.OneCycleLR(o, initial_learning_rate=0.004, max_lr=0.1, total_steps=12, three_phase=True),
        lambda o: WD.OneCycleWD(o, initial_val=0.004, max_val=0.1, total_steps=12, three_phase=True),
    ),
    "ScalePerParam": (
        lambda o: LR.ScalePerParamLR(o, LR.StepLR(o, 0.1, step_size=3, gamma=0.5)),
        lambda o: WD.ScalePerParamWD(o, WD.StepWD(o, 0.1, step_size=3, gamma=0.5)),
    ),
}

ALL_SCHEDULERS = [
    pytest.param(make, key, id=f"{name}{suffix}")
    for name, pair in TWINS.items()
    for make, key, suffix in ((pair[0], "lr", "LR"), (pair[1], "weight_decay", "WD"))
]


def group_values(optimizer, key) -> list[torch.Tensor]:
    return [group[key].clone() for group in optimizer.param_groups]


def run(make, key, steps: int, optimizer=None) -> list[list[float]]:
    optimizer = optimizer or make_optimizer()
    scheduler = make(optimizer)
    values = [[float(v) for v in group_values(optimizer, key)]]
    for _ in range(steps - 1):
        scheduler.step()
        values.append([float(v) for v in group_values(optimizer, key)])
    return values


def test_every_production_scheduler_class_is_in_the_library():
    lr_names = {
        "ConstantLR", "PolynomialLR", "LinearLR", "ExponentialLR", "InverseExponentialTimeDecayLR",
        "InverseSquareRootDecayLR", "CosineDecayLR", "SequentialLR", "PiecewiseConstantLR", "MultiStepLR",
        "StepLR", "CosineAnnealingLR", "LambdaLR", "CosineAnnealingWarmRestarts", "MultiplicativeLR",
        "ChainedScheduler", "ChainedLR", "CyclicLR", "OneCycleLR", "ScalePerParamLR",
    }
    assert lr_names | {"LRScheduler"} == set(LR.__all__)
    wd_names = {name[:-2] + "WD" if name.endswith("LR") else name for name in lr_names}
    wd_names = (wd_names - {"ChainedScheduler", "CosineAnnealingWarmRestarts"}) | {"CosineAnnealingWarmRestartsWD"}
    assert wd_names | {"WeightDecayScheduler"} == set(WD.__all__)
    for name in lr_names:
        assert issubclass(getattr(LR, name), LR.LRScheduler)
    for name in wd_names:
        assert issubclass(getattr(WD, name), WD.WeightDecayScheduler)
    assert issubclass(LR.ChainedScheduler, LR.ChainedLR)


@pytest.mark.parametrize("name", sorted(TWINS))
def test_weight_decay_twin_gives_the_same_values_as_the_lr_scheduler(name):
    make_lr, make_wd = TWINS[name]
    lr_values = run(make_lr, "lr", steps=25)
    assert lr_values == run(make_wd, "weight_decay", steps=25)
    assert len({tuple(values) for values in lr_values}) > 1 or name == "Constant"


@pytest.mark.parametrize("make, key", ALL_SCHEDULERS)
def test_state_dict_round_trips_through_weights_only_load_into_a_fresh_scheduler(make, key):
    optimizer = make_optimizer()
    scheduler = make(optimizer)
    for _ in range(7):
        scheduler.step()
    buffer = io.BytesIO()
    torch.save(scheduler.state_dict(), buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)

    fresh_optimizer = make_optimizer()
    fresh = make(fresh_optimizer)
    fresh.load_state_dict(loaded)
    assert fresh.last_epoch.item() == 7
    for _ in range(10):
        scheduler.step()
        fresh.step()
        for ours, theirs in zip(group_values(optimizer, key), group_values(fresh_optimizer, key)):
            assert torch.equal(ours, theirs)
    assert fresh_optimizer.registered_schedulers() == [fresh]


@pytest.mark.parametrize("make, key", ALL_SCHEDULERS)
def test_scheduler_steps_in_strict_mode_with_one_graph_per_step(make, key):
    assert cstorch.is_strict()
    optimizer = make_optimizer()
    scheduler = make(optimizer)
    for group in optimizer.param_groups:
        assert isinstance(group[key], torch.Tensor) and group[key].dtype == torch.float32

    for _ in range(3):  # the optimizer uses the scheduled values as device tensors
        optimizer.step()
        scheduler.step()
    # The scheduler's step (the closed form included) traces one graph. A
    # callable running both steps cannot be checked: the scheduler writes a
    # new lr tensor each step, which check_static_graph, not knowing the
    # optimizer, numbers afresh.
    cstorch.check_static_graph(scheduler.step, steps=4)


def test_scale_per_param_multiplies_each_group_by_its_adjustment():
    first, second, third = make_params(shapes=((2,), (2,), (2,)))
    optimizer = make_optimizer(
        [
            {"params": [first], "adjust_learning_rate": 0.5},
            {"params": [second], "adjust_val": 4.0},
            {"params": [third]},
        ]
    )
    scheduler = LR.ScalePerParamLR(optimizer, LR.StepLR(optimizer, 0.1, step_size=2, gamma=0.5))
    assert scheduler.adjustment_scalars == [0.5, 4.0, 1.0]
    assert scheduler.lr_adjustment_scalars == [0.5, 4.0, 1.0]
    for _ in range(3):
        scheduler.step()
    assert [float(group["lr"]) for group in optimizer.param_groups] == pytest.approx([0.025, 0.2, 0.05])


def test_sequential_children_see_the_steps_since_their_milestone():
    optimizer = make_optimizer()
    warmup = LR.LinearLR(optimizer, 0.0, 0.1, total_iters=5)
    decay = LR.StepLR(optimizer, 0.1, step_size=3, gamma=0.5)
    scheduler = LR.SequentialLR(optimizer, [warmup, decay], milestones=[5])
    for step in range(1, 12):
        scheduler.step()
        assert warmup.last_epoch.item() == step
        assert decay.last_epoch.item() == max(0, step - 5)
    # t = 11 is step 6 of the StepLR: two decays.
    assert float(optimizer.param_groups[0]["lr"]) == pytest.approx(0.025)


def test_wrapped_schedulers_leave_the_optimizer_registry_to_their_wrapper():
    optimizer = make_optimizer()
    children = [LR.StepLR(optimizer, 0.1, 2, 0.5), LR.ExponentialLR(optimizer, 0.1, 1, 0.9)]
    chained = LR.ChainedScheduler(children)
    assert optimizer.registered_schedulers() == [chained]
    scaled = LR.ScalePerParamLR(optimizer, chained)
    assert optimizer.registered_schedulers() == [scaled]
    for _ in range(4):
        scaled.step()
    assert float(optimizer.param_groups[0]["lr"]) == pytest.approx(0.1 * 0.25 * 0.9**4)


def test_wrappers_reject_children_of_another_key_optimizer_or_tags():
    optimizer = make_optimizer([{"params": make_params(shapes=((2,),)), "tags": "decay"}])
    other_optimizer = make_optimizer()
    with pytest.raises(ValueError, match="schedules 'lr', but the scheduler at index 1 .* 'weight_decay'"):
        LR.SequentialLR(optimizer, [LR.StepLR(optimizer, 0.1, 2, 0.5), WD.StepWD(optimizer, 0.1, 2, 0.5)], [3])
    with pytest.raises(ValueError, match="same optimizer; the one at index 1"):
        LR.ChainedLR([LR.StepLR(optimizer, 0.1, 2, 0.5), LR.StepLR(other_optimizer, 0.1, 2, 0.5)])
    with pytest.raises(ValueError, match="param_group_tags"):
        LR.ScalePerParamLR(optimizer, LR.StepLR(optimizer, 0.1, 2, 0.5), param_group_tags="decay")
    with pytest.raises(ValueError, match="one milestone fewer than schedulers"):
        LR.SequentialLR(optimizer, [LR.StepLR(optimizer, 0.1, 2, 0.5)], [3])
    with pytest.raises(TypeError, match="list of ints"):
        LR.SequentialLR(optimizer, [LR.StepLR(optimizer, 0.1, 2, 0.5)] * 2, [3.5])
    with pytest.raises(ValueError, match="CyclicLR at index 1 has none"):
        LR.ChainedLR([LR.StepLR(optimizer, 0.1, 2, 0.5), LR.CyclicLR(optimizer, 0.01, 0.1)])


def test_hyperparameter_choices_outside_the_documented_ones_are_errors():
    optimizer = make_optimizer()
    with pytest.raises(ValueError, match="supports only T_mult=1"):
        LR.CosineAnnealingWarmRestarts(optimizer, 0.1, T_0=5, T_mult=2)
    with pytest.raises(ValueError, match="mode must be one of"):
        LR.CyclicLR(optimizer, 0.01, 0.1, mode="triangle")
    with pytest.raises(ValueError, match="anneal_strategy must be 'cos' or 'linear'"):
        LR.OneCycleLR(optimizer, 0.004, 0.1, anneal_strategy="cosine")


def test_cyclic_modes_fix_the_scale_mode_as_torch_does():
    optimizer = make_optimizer()
    assert LR.CyclicLR(optimizer, 0.01, 0.1, mode="triangular2", scale_mode="iterations").scale_mode == "cycle"
    assert LR.CyclicLR(optimizer, 0.01, 0.1, mode="exp_range", scale_mode="cycle").scale_mode == "iterations"


def test_lr_schedulers_keep_the_production_attribute_names():
    optimizer = make_optimizer()
    scheduler = LR.OneCycleLR(optimizer, initial_learning_rate=0.004, max_lr=0.1)
    assert (scheduler.initial_val, scheduler.max_val) == (0.004, 0.1)
    scheduler.initial_val = 0.002
    assert scheduler.initial_learning_rate == 0.002
    assert "initial_learning_rate" in scheduler.state_dict()
    assert LR.ConstantLR(optimizer, 0.3).val == 0.3
    cyclic = LR.CyclicLR(optimizer, 0.01, 0.1)
    assert (cyclic.base_val, cyclic.max_val) == (cyclic.base_lr, cyclic.max_lr) == (0.01, 0.1)
    # The closed form is named by the class that wrote it.
    assert scheduler._closed_form_owner() == "OneCycleScheduler._get_closed_form"


def test_polynomial_decay_with_a_fractional_power_holds_the_end_value_after_total_iters():
    values = run(lambda o: LR.PolynomialLR(o, 0.1, 0.02, total_iters=4, power=0.5), "lr", steps=8)
    assert [row[0] for row in values[4:]] == pytest.approx([0.02] * 4)
    assert values[2][0] == pytest.approx(0.08 * 0.5**0.5 + 0.02)


def test_tagged_sequential_scheduler_round_trips_with_its_children():
    def make(optimizer):
        return LR.SequentialLR(
            optimizer,
            [LR.ConstantLR(optimizer, 0.05, param_group_tags="decay"), LR.StepLR(optimizer, 0.1, 2, 0.5, param_group_tags="decay")],
            milestones=[3],
            param_group_tags="decay",
        )

    def tagged_optimizer():
        first, second = make_params(shapes=((2,), (2,)))
        return make_optimizer([{"params": [first], "tags": "decay"}, {"params": [second], "lr": 0.7}])

    optimizer = tagged_optimizer()
    scheduler = make(optimizer)
    for _ in range(4):
        scheduler.step()
    buffer = io.BytesIO()
    torch.save(scheduler.state_dict(), buffer)
    buffer.seek(0)
    fresh_optimizer = tagged_optimizer()
    fresh = make(fresh_optimizer)
    fresh.load_state_dict(torch.load(buffer, weights_only=True))
    assert fresh.param_group_tags == {"decay"}
    for _ in range(5):
        scheduler.step()
        fresh.step()
        assert torch.equal(fresh_optimizer.param_groups[0]["lr"], optimizer.param_groups[0]["lr"])
    assert float(fresh_optimizer.param_groups[1]["lr"]) == pytest.approx(0.7)


class DoubledStepLR(LR.StepLR):
    def _get_closed_form(self):
        return super()._get_closed_form() * 2.0


def test_a_subclass_may_build_on_a_library_closed_form_with_super():
    values = run(lambda o: DoubledStepLR(o, 0.1, step_size=2, gamma=0.5), "lr", steps=5)
    assert [row[0] for row in values] == pytest.approx([0.2, 0.2, 0.1, 0.1, 0.05])
