"""cstorch.optim.configure_*: optimizers and schedulers built from config dicts.

The optimizer and scheduler classes here are test-local subclasses of the
cstorch bases, named "Probe..." so that they never share a name with the
library's classes. configure_lr_scheduler builds ConstantLR, SequentialLR,
ChainedLR and ScalePerParamLR by name; the `probe_wrappers` fixture points
those names at the probes here.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import yaml

import cslint.cstorch as cstorch
from cslint.cstorch.optim import configure
from cslint.cstorch.optim.lr_scheduler import LRScheduler
from cslint.cstorch.optim.weight_decay_scheduler import WeightDecayScheduler
from cstorch_helpers import make_params, set_new_grads


# -- test-local optimizers -------------------------------------------------------------


class ProbeSGD(cstorch.optim.Optimizer):
    """SGD with momentum and L2 weight decay, written by the Cerebras rules."""

    def __init__(self, params, lr=0.01, momentum=0.0, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay))

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["momentum_buffer"] = cstorch.zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad + group["weight_decay"] * p
                buffer = self.state[p]["momentum_buffer"]
                buffer.mul_(group["momentum"]).add_(grad)
                p.sub_(group["lr"] * buffer)


class ProbeSGDVariant(ProbeSGD):
    """A subclass of a subclass: found by the recursive walk."""


class ProbeRequiredLR(ProbeSGD):
    def __init__(self, params, lr, momentum=0.0):
        super().__init__(params, lr=lr, momentum=momentum)


class ProbeKeywordsOptimizer(ProbeSGD):
    def __init__(self, params, lr=0.01, **extra):
        self.extra = extra
        super().__init__(params, lr=lr)


class ProbeLearningRateOptimizer(ProbeSGD):
    """Names its learning rate `learning_rate`, as some optimizers do."""

    def __init__(self, params, learning_rate=0.01):
        super().__init__(params, lr=learning_rate)


class ProbeModelParamsOptimizer(ProbeSGD):
    def __init__(self, model_params, lr=0.01):
        super().__init__(model_params, lr=lr)


class _ProbePrivateOptimizer(ProbeSGD):
    """A leading underscore: never configured by name."""


# -- test-local schedulers ---------------------------------------------------------------


class ProbeConstantLR(LRScheduler):
    """The production ConstantLR's signature."""

    def __init__(self, optimizer, learning_rate, total_iters=None, param_group_tags=None):
        self.learning_rate = learning_rate
        super().__init__(optimizer, total_iters=total_iters, param_group_tags=param_group_tags)

    def _get_closed_form_lr(self):
        return torch.tensor(self.learning_rate, dtype=torch.float32)


class ProbeLinearLR(LRScheduler):
    """The production LinearLR's signature (without `cycle`)."""

    def __init__(
        self,
        optimizer,
        initial_learning_rate,
        end_learning_rate,
        total_iters,
        param_group_tags=None,
    ):
        self.initial_learning_rate = initial_learning_rate
        self.end_learning_rate = end_learning_rate
        super().__init__(optimizer, total_iters=total_iters, param_group_tags=param_group_tags)

    def _get_closed_form_lr(self):
        progress = torch.clamp(self.last_epoch / self.total_iters, max=1.0)
        change = self.end_learning_rate - self.initial_learning_rate
        return self.initial_learning_rate + change * progress


class _SequenceOfSchedulers:
    """Each scheduler in turn from its milestone on, seeing the steps since it."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1, param_group_tags=None):
        self.schedulers = list(schedulers)
        self.starts = [0, *milestones]
        self.milestones = list(milestones)
        super().__init__(
            optimizer, total_iters=None, last_epoch=last_epoch, param_group_tags=param_group_tags
        )

    def increment_last_epoch(self):
        super().increment_last_epoch()
        for start, scheduler in zip(self.starts, self.schedulers):
            scheduler.last_epoch = torch.clamp(self.last_epoch - start, min=0)

    def _get_closed_form(self):
        value = self.schedulers[0]._get_closed_form()
        for start, scheduler in zip(self.starts[1:], self.schedulers[1:]):
            value = torch.where(self.last_epoch >= start, scheduler._get_closed_form(), value)
        return value


class ProbeSequentialLR(_SequenceOfSchedulers, LRScheduler):
    """The production SequentialLR's signature."""


class ProbeChainedLR(LRScheduler):
    """The production ChainedLR's signature (schedulers, no optimizer); here the
    product of its schedulers' values."""

    def __init__(self, schedulers, param_group_tags=None):
        self.schedulers = list(schedulers)
        super().__init__(
            self.schedulers[0].optimizer, total_iters=None, param_group_tags=param_group_tags
        )

    def increment_last_epoch(self):
        super().increment_last_epoch()
        for scheduler in self.schedulers:
            scheduler.last_epoch = self.last_epoch

    def _get_closed_form(self):
        value = torch.tensor(1.0)
        for scheduler in self.schedulers:
            value = value * scheduler._get_closed_form()
        return value


class ProbeScalePerParamLR(LRScheduler):
    """The production ScalePerParamLR's signature and rule: each group's lr is the
    wrapped schedule times the group's `adjust_learning_rate` factor."""

    def __init__(self, optimizer, scheduler, param_group_tags=None):
        self.scheduler = scheduler
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def increment_last_epoch(self):
        super().increment_last_epoch()
        self.scheduler.last_epoch = self.last_epoch

    def _get_closed_form(self):
        return self.scheduler._get_closed_form()

    def get(self):
        value = self._closed_form_value()
        return [
            value * group.get("adjust_learning_rate", 1.0)
            if self._should_apply_to_param_group(group)
            else None
            for group in self.optimizer.param_groups
        ]


class ProbeConstantWD(WeightDecayScheduler):
    """The production ConstantWD's signature."""

    def __init__(self, optimizer, val, total_iters=None, param_group_tags=None):
        self.val = val
        super().__init__(optimizer, total_iters=total_iters, param_group_tags=param_group_tags)

    def _get_closed_form(self):
        return torch.tensor(self.val, dtype=torch.float32)


class ProbeLinearWD(WeightDecayScheduler):
    def __init__(self, optimizer, initial_val, end_val, total_iters, param_group_tags=None):
        self.initial_val = initial_val
        self.end_val = end_val
        super().__init__(optimizer, total_iters=total_iters, param_group_tags=param_group_tags)

    def _get_closed_form(self):
        progress = torch.clamp(self.last_epoch / self.total_iters, max=1.0)
        return self.initial_val + (self.end_val - self.initial_val) * progress


class ProbeSequentialWD(_SequenceOfSchedulers, WeightDecayScheduler):
    """The production SequentialWD's signature."""


@pytest.fixture
def probe_wrappers(monkeypatch):
    """configure_lr_scheduler's ConstantLR, SequentialLR, ChainedLR and
    ScalePerParamLR are the probes here (the library's come with their issue)."""
    monkeypatch.setattr(configure, "_CONSTANT_LR", "ProbeConstantLR")
    monkeypatch.setattr(configure, "_SEQUENTIAL_LR", "ProbeSequentialLR")
    monkeypatch.setattr(configure, "_CHAINED_LR", "ProbeChainedLR")
    monkeypatch.setattr(configure, "_SCALE_PER_PARAM_LR", "ProbeScalePerParamLR")


def lrs(optimizer) -> list[float]:
    return [float(group["lr"]) for group in optimizer.param_groups]


def lr_values(optimizer, scheduler, steps: int) -> list[float]:
    """The lr of the first group at steps 0 .. steps-1."""
    values = []
    for _ in range(steps):
        values.append(lrs(optimizer)[0])
        optimizer.step()
        scheduler.step()
    return values


def recorded_warnings(run):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run()
    return result, [str(warning.message) for warning in caught]


# -- configure_optimizer ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["ProbeSGD", "probesgd", "PROBESGD", "pRoBeSgD"])
def test_an_optimizer_is_found_by_its_name_in_any_case(name):
    optimizer = cstorch.optim.configure_optimizer(name, make_params(), lr=0.5, momentum=0.9)
    assert type(optimizer) is ProbeSGD
    assert optimizer.param_groups[0]["momentum"] == 0.9
    assert lrs(optimizer) == [0.5]


def test_a_subclass_of_a_user_optimizer_is_found_too():
    optimizer = cstorch.optim.configure_optimizer("probesgdvariant", make_params())
    assert type(optimizer) is ProbeSGDVariant


def test_an_optimizer_defined_after_import_is_found_when_configured():
    class ProbeLateOptimizer(ProbeSGD):
        pass

    cls, _ = cstorch.optim.configure_optimizer_params("ProbeLateOptimizer", {})
    assert cls is ProbeLateOptimizer


def test_learning_rate_is_passed_as_lr():
    cls, kwargs = cstorch.optim.configure_optimizer_params(
        "ProbeSGD", {"learning_rate": 0.25, "momentum": 0.5}
    )
    assert cls is ProbeSGD
    assert kwargs == {"lr": 0.25, "momentum": 0.5}


def test_a_learning_rate_string_yaml_left_unparsed_is_read_as_a_number():
    # yaml.safe_load reads 1e-3 (no dot) as the string "1e-3".
    assert yaml.safe_load("learning_rate: 1e-3") == {"learning_rate": "1e-3"}
    _, kwargs = cstorch.optim.configure_optimizer_params("ProbeSGD", {"learning_rate": "1e-3"})
    assert kwargs == {"lr": 0.001}


def test_an_optimizer_taking_learning_rate_gets_it_under_that_name():
    _, kwargs = cstorch.optim.configure_optimizer_params(
        "ProbeLearningRateOptimizer", {"learning_rate": 0.3}
    )
    assert kwargs == {"learning_rate": 0.3}


def test_unknown_optimizer_keywords_are_warned_once_and_not_passed():
    (cls, kwargs), messages = recorded_warnings(
        lambda: cstorch.optim.configure_optimizer_params(
            "ProbeSGD",
            {"lr": 0.1, "max_gradient_norm": 1.0, "loss_scaling_factor": "dynamic"},
        )
    )
    assert kwargs == {"lr": 0.1}
    assert len(messages) == 1
    assert "ProbeSGD" in messages[0]
    assert "['loss_scaling_factor', 'max_gradient_norm']" in messages[0]
    assert "['lr', 'momentum', 'weight_decay']" in messages[0]


def test_a_learning_rate_for_an_optimizer_without_one_is_warned_as_unknown():
    class ProbeNoLROptimizer(ProbeSGD):
        def __init__(self, params, momentum=0.0):
            super().__init__(params, momentum=momentum)

    (_, kwargs), messages = recorded_warnings(
        lambda: cstorch.optim.configure_optimizer_params(
            "ProbeNoLROptimizer", {"learning_rate": 0.1}
        )
    )
    assert kwargs == {}
    assert len(messages) == 1 and "['learning_rate']" in messages[0]


def test_an_optimizer_taking_any_keyword_gets_them_all():
    (_, kwargs), messages = recorded_warnings(
        lambda: cstorch.optim.configure_optimizer_params(
            "ProbeKeywordsOptimizer", {"learning_rate": 0.2, "beta": 3}
        )
    )
    assert kwargs == {"lr": 0.2, "beta": 3}
    assert messages == []


@pytest.mark.parametrize(
    "schedule",
    [{"scheduler": "Constant", "learning_rate": 0.3}, [{"scheduler": "Constant"}]],
)
def test_a_schedule_as_learning_rate_leaves_the_optimizers_default_lr(schedule):
    _, kwargs = cstorch.optim.configure_optimizer_params("ProbeSGD", {"learning_rate": schedule})
    assert kwargs == {}


def test_a_schedule_as_learning_rate_fills_a_required_lr_for_the_scheduler_to_overwrite():
    _, kwargs = cstorch.optim.configure_optimizer_params(
        "ProbeRequiredLR", {"learning_rate": [{"scheduler": "Constant"}]}
    )
    assert kwargs == {"lr": configure._PLACEHOLDER_LR}


def test_configuring_an_optimizer_leaves_the_config_unchanged():
    config = {"learning_rate": 0.1, "momentum": 0.9, "unused": 1}
    with pytest.warns(UserWarning):
        cstorch.optim.configure_optimizer_params("ProbeSGD", config)
    assert config == {"learning_rate": 0.1, "momentum": 0.9, "unused": 1}


def test_an_unknown_optimizer_type_lists_the_known_ones():
    with pytest.raises(ValueError) as caught:
        cstorch.optim.configure_optimizer("NoSuchOptimizer", make_params())
    message = str(caught.value)
    assert "'NoSuchOptimizer'" in message
    assert "ProbeSGD" in message and "ProbeSGDVariant" in message
    # Bases, abstract and private classes are never offered.
    assert "'Optimizer'" not in message and "_ProbePrivateOptimizer" not in message


def test_a_private_optimizer_class_is_not_configured_by_name():
    with pytest.raises(ValueError, match="unknown optimizer_type '_ProbePrivateOptimizer'"):
        cstorch.optim.configure_optimizer_params("_ProbePrivateOptimizer", {})


@pytest.mark.parametrize(
    "config, expected",
    [
        ({"lr": 0.1, "learning_rate": 0.2}, r"either `learning_rate` or `lr`, not both"),
        ({"learning_rate": "fast"}, r"learning_rate must be a number.*'fast'"),
        ({"learning_rate": True}, r"learning_rate must be a number.*True"),
    ],
)
def test_a_bad_learning_rate_is_a_value_error(config, expected):
    with pytest.raises(ValueError, match=expected):
        cstorch.optim.configure_optimizer_params("ProbeSGD", config)


def test_a_missing_required_optimizer_argument_is_named():
    expected = r"ProbeRequiredLR requires \['lr'\].*\['lr', 'momentum'\]"
    with pytest.raises(ValueError, match=expected):
        cstorch.optim.configure_optimizer_params("ProbeRequiredLR", {"momentum": 0.9})


def test_an_optimizer_not_taking_params_first_cannot_be_configured():
    with pytest.raises(ValueError, match=r"ProbeModelParamsOptimizer must take `params`"):
        cstorch.optim.configure_optimizer_params("ProbeModelParamsOptimizer", {})


def test_two_user_optimizers_of_one_name_are_ambiguous():
    twins = [type("ProbeTwin", (ProbeSGD,), {"__module__": module})
             for module in ("first_module", "second_module")]
    with pytest.raises(ValueError) as caught:
        cstorch.optim.configure_optimizer_params("probetwin", {})
    message = str(caught.value)
    assert "ambiguous" in message
    assert "first_module.ProbeTwin" in message and "second_module.ProbeTwin" in message
    assert len(twins) == 2


def test_a_library_class_wins_over_a_user_class_of_its_name_with_a_warning(monkeypatch):
    library_class = type("ProbeLibraryOptimizer", (ProbeSGD,), {})
    user_class = type("ProbeLibraryOptimizer", (ProbeSGD,), {"__module__": "user_module"})
    monkeypatch.setattr(cstorch.optim, "ProbeLibraryOptimizer", library_class, raising=False)
    (cls, _), messages = recorded_warnings(
        lambda: cstorch.optim.configure_optimizer_params("probelibraryoptimizer", {})
    )
    assert cls is library_class and cls is not user_class
    assert len(messages) == 1 and "user_module.ProbeLibraryOptimizer" in messages[0]


# -- configure_lr_scheduler ------------------------------------------------------------


def test_a_number_as_learning_rate_is_a_constant_lr(probe_wrappers):
    optimizer = ProbeSGD(make_params())
    scheduler = cstorch.optim.configure_lr_scheduler(optimizer, 0.02)
    assert type(scheduler) is ProbeConstantLR
    assert scheduler.learning_rate == 0.02
    assert lr_values(optimizer, scheduler, 3) == pytest.approx([0.02] * 3)


@pytest.mark.parametrize("value, expected", [("2e-3", 0.002), (0, 0.0), (1, 1.0)])
def test_a_numeric_string_or_an_int_or_zero_is_a_constant_lr_too(probe_wrappers, value, expected):
    optimizer = ProbeSGD(make_params())
    scheduler = cstorch.optim.configure_lr_scheduler(optimizer, value)
    assert type(scheduler) is ProbeConstantLR
    assert scheduler.learning_rate == expected
    assert lrs(optimizer) == pytest.approx([expected])


def test_no_learning_rate_is_no_scheduler():
    assert cstorch.optim.configure_lr_scheduler(ProbeSGD(make_params()), None) is None


@pytest.mark.parametrize("name", ["ProbeLinearLR", "probelinearlr", "ProbeLinear", "PROBELINEAR"])
def test_a_schedule_dict_names_its_scheduler_in_any_case_with_or_without_lr(name):
    optimizer = ProbeSGD(make_params())
    config = {
        "scheduler": name,
        "initial_learning_rate": 0.1,
        "end_learning_rate": 0.0,
        "total_iters": 4,
    }
    scheduler = cstorch.optim.configure_lr_scheduler(optimizer, config)
    assert type(scheduler) is ProbeLinearLR
    assert lr_values(optimizer, scheduler, 6) == pytest.approx([0.1, 0.075, 0.05, 0.025, 0, 0])
    assert config["scheduler"] == name  # the caller's config is left as it was


def test_a_list_of_schedules_is_a_sequence_with_milestones_from_total_iters(probe_wrappers):
    optimizer = ProbeSGD(make_params())
    config = [
        {"scheduler": "ProbeLinear", "initial_learning_rate": 0.0,
         "end_learning_rate": 0.1, "total_iters": 2},
        {"scheduler": "ProbeConstant", "learning_rate": 0.05, "total_iters": 3},
        {"scheduler": "ProbeLinear", "initial_learning_rate": 0.05,
         "end_learning_rate": 0.01, "total_iters": 2},
    ]
    scheduler = cstorch.optim.configure_lr_scheduler(optimizer, config)
    assert type(scheduler) is ProbeSequentialLR
    assert scheduler.milestones == [2, 5]
    assert [type(s) for s in scheduler.schedulers] == [
        ProbeLinearLR, ProbeConstantLR, ProbeLinearLR
    ]
    assert lr_values(optimizer, scheduler, 9) == pytest.approx(
        [0.0, 0.05, 0.05, 0.05, 0.05, 0.05, 0.03, 0.01, 0.01]
    )


def test_the_last_schedule_of_a_sequence_needs_no_total_iters(probe_wrappers):
    optimizer = ProbeSGD(make_params())
    config = [
        {"scheduler": "ProbeConstant", "learning_rate": 0.1, "total_iters": 2},
        {"scheduler": "ProbeConstant", "learning_rate": 0.2},
    ]
    scheduler = cstorch.optim.configure_lr_scheduler(optimizer, config)
    assert scheduler.milestones == [2]
    assert lr_values(optimizer, scheduler, 4) == pytest.approx([0.1, 0.1, 0.2, 0.2])


def test_a_sequence_entry_without_total_iters_is_named(probe_wrappers):
    config = [
        {"scheduler": "ProbeConstant", "learning_rate": 0.1},
        {"scheduler": "ProbeConstant", "learning_rate": 0.2},
    ]
    with pytest.raises(ValueError) as caught:
        cstorch.optim.configure_lr_scheduler(ProbeSGD(make_params()), config)
    message = str(caught.value)
    assert "learning_rate[0] (ProbeConstantLR) has no total_iters" in message


def test_an_explicit_sequential_main_scheduler_is_the_default(probe_wrappers):
    config = [
        {"scheduler": "ProbeConstant", "learning_rate": 0.1, "total_iters": 1,
         "main_scheduler": "SequentialLR"},
        {"scheduler": "ProbeConstant", "learning_rate": 0.2},
    ]
    scheduler = cstorch.optim.configure_lr_scheduler(ProbeSGD(make_params()), config)
    assert type(scheduler) is ProbeSequentialLR


@pytest.mark.parametrize("main", ["ChainedLR", "chained", "CHAINEDLR", "ChainedScheduler"])
def test_a_main_scheduler_chained_entry_chains_the_schedules(probe_wrappers, main):
    optimizer = ProbeSGD(make_params())
    config = [
        {"scheduler": "ProbeConstant", "learning_rate": 0.5, "main_scheduler": main},
        {"scheduler": "ProbeLinear", "initial_learning_rate": 0.2,
         "end_learning_rate": 0.0, "total_iters": 2},
    ]
    scheduler = cstorch.optim.configure_lr_scheduler(optimizer, config)
    assert type(scheduler) is ProbeChainedLR
    assert [type(s) for s in scheduler.schedulers] == [ProbeConstantLR, ProbeLinearLR]
    assert lr_values(optimizer, scheduler, 3) == pytest.approx([0.1, 0.05, 0.0])
    assert "main_scheduler" in config[0]  # popped from a copy only


def test_conflicting_main_schedulers_are_a_value_error(probe_wrappers):
    config = [
        {"scheduler": "ProbeConstant", "learning_rate": 0.5, "main_scheduler": "chained"},
        {"scheduler": "ProbeConstant", "learning_rate": 0.5, "main_scheduler": "sequential"},
    ]
    expected = r"conflicting main_scheduler values \['chained', 'sequential'\]"
    with pytest.raises(ValueError, match=expected):
        cstorch.optim.configure_lr_scheduler(ProbeSGD(make_params()), config)


def test_an_unknown_main_scheduler_lists_the_accepted_ones():
    config = [{"scheduler": "ProbeConstant", "learning_rate": 0.5, "main_scheduler": "parallel"}]
    expected = r"main_scheduler 'parallel' is not one of \['chained', 'chainedlr'"
    with pytest.raises(ValueError, match=expected):
        cstorch.optim.configure_lr_scheduler(ProbeSGD(make_params()), config)


def test_adjust_learning_rate_scales_each_group_by_its_factor(probe_wrappers):
    p1, p2 = make_params(shapes=((3,), (2,)))
    optimizer = ProbeSGD([{"params": [p1], "adjust_learning_rate": 0.5}, {"params": [p2]}])
    config = [
        {"scheduler": "ProbeConstant", "learning_rate": 0.2, "total_iters": 1},
        {"scheduler": "ProbeConstant", "learning_rate": 0.1},
    ]
    scheduler = cstorch.optim.configure_lr_scheduler(
        optimizer, config, adjust_learning_rate={"embedding": 0.5}
    )
    assert type(scheduler) is ProbeScalePerParamLR
    assert type(scheduler.scheduler) is ProbeSequentialLR
    assert lrs(optimizer) == pytest.approx([0.1, 0.2])
    optimizer.step()
    scheduler.step()
    assert lrs(optimizer) == pytest.approx([0.05, 0.1])


def test_adjust_learning_rate_wraps_a_single_schedule(probe_wrappers):
    optimizer = ProbeSGD([{"params": make_params(), "adjust_learning_rate": 2.0}])
    scheduler = cstorch.optim.configure_lr_scheduler(optimizer, 0.1, {"attention": 2.0})
    assert type(scheduler) is ProbeScalePerParamLR
    assert type(scheduler.scheduler) is ProbeConstantLR
    assert lrs(optimizer) == pytest.approx([0.2])


def test_an_empty_adjust_learning_rate_wraps_nothing(probe_wrappers):
    scheduler = cstorch.optim.configure_lr_scheduler(ProbeSGD(make_params()), 0.1, {})
    assert type(scheduler) is ProbeConstantLR


def test_adjust_learning_rate_without_factors_in_the_groups_warns(probe_wrappers):
    optimizer = ProbeSGD(make_params())
    scheduler, messages = recorded_warnings(
        lambda: cstorch.optim.configure_lr_scheduler(optimizer, 0.1, {"embedding": 0.5})
    )
    assert type(scheduler) is ProbeScalePerParamLR
    assert len(messages) == 1
    assert "['embedding']" in messages[0] and "'adjust_learning_rate' factor" in messages[0]


@pytest.mark.parametrize(
    "adjust, expected",
    [
        ([0.5], r"adjust_learning_rate must be a dict of layer type -> lr scaling factor"),
        ({"embedding": "half"}, r"adjust_learning_rate\['embedding'\] must be a number"),
    ],
)
def test_a_bad_adjust_learning_rate_is_a_value_error(probe_wrappers, adjust, expected):
    with pytest.raises(ValueError, match=expected):
        cstorch.optim.configure_lr_scheduler(ProbeSGD(make_params()), 0.1, adjust)


def test_a_chained_schedule_cannot_be_scaled(probe_wrappers):
    optimizer = ProbeSGD([{"params": make_params(), "adjust_learning_rate": 2.0}])
    config = [{"scheduler": "ProbeConstant", "learning_rate": 0.5, "main_scheduler": "ChainedLR"}]
    expected = r"ChainedLR cannot be combined with adjust_learning_rate"
    with pytest.raises(ValueError, match=expected):
        cstorch.optim.configure_lr_scheduler(optimizer, config, {"embedding": 2.0})


@pytest.mark.parametrize(
    "learning_rate, expected",
    [
        (True, r"learning_rate must be a number, a schedule dict or a list.*True"),
        ({1, 2}, r"learning_rate must be a number"),
        ([], r"learning_rate is an empty list"),
        ([0.1, 0.2], r"learning_rate\[0\] must be a schedule dict"),
        ({"learning_rate": 0.1}, r"needs the key 'scheduler'.*\['learning_rate'\]"),
        ({"scheduler": 3}, r"the scheduler name must be a non-empty string, got 3"),
        ({"scheduler": "ProbeLinear", "initial_learning_rate": 0.1, "end_learning_rate": 0.0,
          "total_iters": 4, "warmup": 2},
         r"ProbeLinearLR does not take \['warmup'\]; it takes \['initial_learning_rate', "
         r"'end_learning_rate', 'total_iters', 'param_group_tags'\]"),
        ({"scheduler": "ProbeLinear", "initial_learning_rate": 0.1},
         r"ProbeLinearLR requires \['end_learning_rate', 'total_iters'\]"),
        ({"scheduler": "ProbeConstantWD", "val": 0.1},
         r"ProbeConstantWD is not a learning-rate scheduler"),
        ({"scheduler": "ProbeSequential", "schedulers": []},
         r"ProbeSequentialLR is built from other schedulers; configure it with "
         r"configure_scheduler"),
    ],
)
def test_a_bad_learning_rate_config_is_a_value_error(learning_rate, expected):
    with pytest.raises(ValueError, match=expected):
        cstorch.optim.configure_lr_scheduler(ProbeSGD(make_params()), learning_rate)


def test_an_unknown_lr_scheduler_lists_the_known_ones():
    with pytest.raises(ValueError) as caught:
        cstorch.optim.configure_lr_scheduler(
            ProbeSGD(make_params()), {"scheduler": "Warmup", "learning_rate": 0.1}
        )
    message = str(caught.value)
    assert "unknown scheduler 'Warmup'" in message
    assert "'ProbeLinearLR'" in message and "'ProbeConstantWD'" in message
    assert "with or without the 'LR' suffix" in message
    assert "'LRScheduler'" not in message and "'Scheduler'" not in message


def test_scheduler_params_are_the_class_and_its_keywords():
    config = {"scheduler": "probeconstant", "learning_rate": 0.1, "total_iters": 5}
    cls, kwargs = cstorch.optim.configure_scheduler_params(config)
    assert cls is ProbeConstantLR
    assert kwargs == {"learning_rate": 0.1, "total_iters": 5}
    assert config["scheduler"] == "probeconstant"


# -- configure_scheduler -------------------------------------------------------------


@pytest.mark.parametrize("name", ["ProbeLinearLR", "probelinearlr"])
def test_a_generic_scheduler_is_named_by_its_single_key(name):
    optimizer = ProbeSGD(make_params())
    scheduler = cstorch.optim.configure_scheduler(
        optimizer,
        {name: {"initial_learning_rate": 0.4, "end_learning_rate": 0.0, "total_iters": 4}},
    )
    assert type(scheduler) is ProbeLinearLR
    assert lr_values(optimizer, scheduler, 3) == pytest.approx([0.4, 0.3, 0.2])


def test_a_nested_sequence_gets_milestones_from_total_iters():
    optimizer = ProbeSGD(make_params())
    config = {
        "ProbeSequentialLR": {
            "schedulers": [
                {"ProbeConstantLR": {"learning_rate": 0.3, "total_iters": 2}},
                {"ProbeLinearLR": {"initial_learning_rate": 0.2, "end_learning_rate": 0.0,
                                   "total_iters": 2}},
            ]
        }
    }
    scheduler = cstorch.optim.configure_scheduler(optimizer, config)
    assert type(scheduler) is ProbeSequentialLR and scheduler.milestones == [2]
    assert lr_values(optimizer, scheduler, 5) == pytest.approx([0.3, 0.3, 0.2, 0.1, 0.0])
    assert "milestones" not in config["ProbeSequentialLR"]


def test_given_milestones_are_used_as_given():
    config = {
        "ProbeSequentialLR": {
            "milestones": [1],
            "schedulers": [
                {"ProbeConstantLR": {"learning_rate": 0.3}},
                {"ProbeConstantLR": {"learning_rate": 0.1}},
            ],
        }
    }
    optimizer = ProbeSGD(make_params())
    scheduler = cstorch.optim.configure_scheduler(optimizer, config)
    assert scheduler.milestones == [1]
    assert lr_values(optimizer, scheduler, 3) == pytest.approx([0.3, 0.1, 0.1])


def test_sequences_nest_inside_sequences():
    config = {
        "ProbeSequentialLR": {
            "schedulers": [
                {"ProbeSequentialLR": {
                    "schedulers": [
                        {"ProbeConstantLR": {"learning_rate": 0.4, "total_iters": 1}},
                        {"ProbeConstantLR": {"learning_rate": 0.3, "total_iters": 1}},
                    ],
                }},
                {"ProbeConstantLR": {"learning_rate": 0.1}},
            ],
            "milestones": [2],
        }
    }
    optimizer = ProbeSGD(make_params())
    scheduler = cstorch.optim.configure_scheduler(optimizer, config)
    assert lr_values(optimizer, scheduler, 4) == pytest.approx([0.4, 0.3, 0.1, 0.1])


def test_a_weight_decay_sequence_is_configured_the_same_way():
    optimizer = ProbeSGD(make_params(), weight_decay=0.5)
    scheduler = cstorch.optim.configure_scheduler(
        optimizer,
        {"probesequentialwd": {"schedulers": [
            {"ProbeLinearWD": {"initial_val": 0.0, "end_val": 0.1, "total_iters": 2}},
            {"ProbeConstantWD": {"val": 0.1}},
        ]}},
    )
    assert type(scheduler) is ProbeSequentialWD and scheduler.milestones == [2]
    decays = []
    for _ in range(4):
        decays.append(float(optimizer.param_groups[0]["weight_decay"]))
        optimizer.step()
        scheduler.step()
    assert decays == pytest.approx([0.0, 0.05, 0.1, 0.1])


def test_a_chained_scheduler_gets_its_schedulers_and_not_the_optimizer():
    optimizer = ProbeSGD(make_params())
    scheduler = cstorch.optim.configure_scheduler(
        optimizer,
        {"ProbeChainedLR": {"schedulers": [
            {"ProbeConstantLR": {"learning_rate": 0.5}},
            {"ProbeConstantLR": {"learning_rate": 0.4}},
        ]}},
    )
    assert type(scheduler) is ProbeChainedLR and scheduler.optimizer is optimizer
    assert lrs(optimizer) == pytest.approx([0.2])


def test_a_scale_per_param_scheduler_wraps_its_nested_scheduler():
    optimizer = ProbeSGD([{"params": make_params(), "adjust_learning_rate": 0.5}])
    scheduler = cstorch.optim.configure_scheduler(
        optimizer,
        {"ProbeScalePerParamLR": {"scheduler": {"ProbeConstantLR": {"learning_rate": 0.4}}}},
    )
    assert type(scheduler.scheduler) is ProbeConstantLR
    assert lrs(optimizer) == pytest.approx([0.2])


def test_nested_schedulers_take_the_param_group_tags_of_the_one_around_them():
    p1, p2 = make_params(shapes=((3,), (2,)))
    optimizer = ProbeSGD([{"params": [p1], "tags": "decay"}, {"params": [p2], "lr": 0.9}])
    scheduler = cstorch.optim.configure_scheduler(
        optimizer,
        {"ProbeSequentialLR": {
            "param_group_tags": "decay",
            "schedulers": [
                {"ProbeConstantLR": {"learning_rate": 0.3, "total_iters": 1}},
                {"ProbeConstantLR": {"learning_rate": 0.1}},
            ],
        }},
    )
    assert [s.param_group_tags for s in scheduler.schedulers] == [{"decay"}, {"decay"}]
    assert lrs(optimizer) == pytest.approx([0.3, 0.9])


def test_a_nested_scheduler_with_its_own_tags_is_a_value_error():
    optimizer = ProbeSGD([{"params": make_params(), "tags": "decay"}])
    config = {"ProbeSequentialLR": {"schedulers": [
        {"ProbeConstantLR": {"learning_rate": 0.3, "total_iters": 1}},
        {"ProbeConstantLR": {"learning_rate": 0.1, "param_group_tags": "decay"}},
    ]}}
    with pytest.raises(ValueError) as caught:
        cstorch.optim.configure_scheduler(optimizer, config)
    assert (
        "['ProbeSequentialLR']['schedulers'][1]['ProbeConstantLR']: a nested scheduler takes "
        "the param_group_tags of the scheduler around it"
    ) in str(caught.value)


@pytest.mark.parametrize(
    "config, expected",
    [
        ({"ProbeConstantLR": {"learning_rate": 0.1}, "ProbeLinearLR": {}},
         r"a dict with a single key.*\['ProbeConstantLR', 'ProbeLinearLR'\]"),
        ([{"ProbeConstantLR": {}}], r"a dict with a single key"),
        ({"ProbeConstantLR": 0.1}, r"the arguments of 'ProbeConstantLR' must be a dict"),
        ({"Warmup": {}}, r"unknown scheduler 'Warmup'; expected one of \[.*'ProbeConstantLR'"),
        ({"ProbeConstantLR": {"learning_rate": 0.1, "warmup": 1}},
         r"\['ProbeConstantLR'\]: ProbeConstantLR does not take \['warmup'\]; it takes "
         r"\['learning_rate', 'total_iters', 'param_group_tags'\]"),
        ({"ProbeConstantLR": {}}, r"ProbeConstantLR requires \['learning_rate'\]"),
        ({"ProbeSequentialLR": {"schedulers": []}},
         r"ProbeSequentialLR takes `schedulers`, a non-empty list"),
        ({"ProbeSequentialLR": {"schedulers": [
            {"ProbeConstantLR": {"learning_rate": 0.3}},
            {"ProbeConstantLR": {"learning_rate": 0.1}},
        ]}},
         r"\['ProbeSequentialLR'\]\['schedulers'\]\[0\] \(ProbeConstantLR\) has no total_iters"),
        ({"ProbeSequentialLR": {"schedulers": [
            {"ProbeConstantLR": {"learning_rate": 0.3, "total_iters": 2.5}},
            {"ProbeConstantLR": {"learning_rate": 0.1}},
        ]}},
         r"has total_iters=2.5; a sequence needs a non-negative integer"),
        ({"ProbeScalePerParamLR": {"scheduler": "ProbeConstantLR"}},
         r"\['ProbeScalePerParamLR'\]\['scheduler'\]: a scheduler is configured as a dict"),
    ],
)
def test_a_bad_scheduler_config_is_a_value_error(config, expected):
    with pytest.raises(ValueError, match=expected):
        cstorch.optim.configure_scheduler(ProbeSGD(make_params()), config)


# -- Cerebras model zoo params files -------------------------------------------------


MODEL_ZOO_PARAMS = """\
trainer:
  max_steps: 8
optimizer:
  optimizer_type: probesgd
  momentum: 0.9
  weight_decay: 0.01
  max_gradient_norm: 1.0
  loss_scaling_factor: dynamic
  learning_rate:
    - scheduler: ProbeLinear
      initial_learning_rate: 0.0
      end_learning_rate: 1.0e-2
      total_iters: 3
    - scheduler: ProbeConstant
      learning_rate: 5.0e-3
"""

GENERIC_PARAMS = """\
optimizer:
  ProbeSGD:
    momentum: 0.9
    weight_decay: 0.01
schedulers:
  - ProbeSequentialLR:
      schedulers:
        - ProbeLinearLR:
            initial_learning_rate: 0.0
            end_learning_rate: 1.0e-2
            total_iters: 3
        - ProbeConstantLR:
            learning_rate: 5.0e-3
"""


def expected_sgd_run(params, lr_at, steps, momentum=0.9, weight_decay=0.01):
    """Plain PyTorch SGD with momentum and L2 decay at the scheduled learning rates."""
    weights = [p.detach().clone() for p in params]
    buffers = [torch.zeros_like(w) for w in weights]
    for step in range(steps):
        set_new_grads(weights, seed=step)  # the same grads as the configured run
        for weight, buffer in zip(weights, buffers):
            buffer.mul_(momentum).add_(weight.grad + weight_decay * weight)
            weight.sub_(torch.tensor(lr_at(step), dtype=torch.float32) * buffer)
    return weights


def warmup_then_constant(step: int) -> float:
    return 1e-2 * step / 3 if step < 3 else 5e-3


def run_configured(optimizer, scheduler, params, steps):
    seen = []
    for step in range(steps):
        set_new_grads(params, seed=step)
        seen.append(lrs(optimizer)[0])
        optimizer.step()
        scheduler.step()
    return seen


def test_a_model_zoo_params_file_configures_an_optimizer_and_its_schedule(
    tmp_path, probe_wrappers
):
    path = tmp_path / "params.yaml"
    path.write_text(MODEL_ZOO_PARAMS, encoding="utf-8")
    params_file = yaml.safe_load(path.read_text(encoding="utf-8"))
    optimizer_params = dict(params_file["optimizer"])
    optimizer_type = optimizer_params.pop("optimizer_type")
    steps = params_file["trainer"]["max_steps"]
    params = make_params()

    optimizer, messages = recorded_warnings(
        lambda: cstorch.optim.configure_optimizer(optimizer_type, params, **optimizer_params)
    )
    assert len(messages) == 1
    assert "['loss_scaling_factor', 'max_gradient_norm']" in messages[0]
    assert type(optimizer) is ProbeSGD
    group = optimizer.param_groups[0]
    assert (group["momentum"], group["weight_decay"]) == (0.9, 0.01)

    scheduler = cstorch.optim.configure_lr_scheduler(optimizer, optimizer_params["learning_rate"])
    assert type(scheduler) is ProbeSequentialLR and scheduler.milestones == [3]

    seen = run_configured(optimizer, scheduler, params, steps)
    assert seen == pytest.approx([warmup_then_constant(step) for step in range(steps)])
    expected = expected_sgd_run(make_params(), warmup_then_constant, steps)
    for param, reference in zip(params, expected):
        torch.testing.assert_close(param.detach(), reference, rtol=1e-6, atol=1e-7)


def test_a_params_file_in_the_generic_scheduler_form_configures_the_same_run(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(GENERIC_PARAMS, encoding="utf-8")
    params_file = yaml.safe_load(path.read_text(encoding="utf-8"))
    ((optimizer_type, optimizer_params),) = params_file["optimizer"].items()
    params = make_params()
    optimizer = cstorch.optim.configure_optimizer(optimizer_type, params, **optimizer_params)
    (scheduler_config,) = params_file["schedulers"]
    scheduler = cstorch.optim.configure_scheduler(optimizer, scheduler_config)

    seen = run_configured(optimizer, scheduler, params, 8)
    assert seen == pytest.approx([warmup_then_constant(step) for step in range(8)])
    expected = expected_sgd_run(make_params(), warmup_then_constant, 8)
    for param, reference in zip(params, expected):
        torch.testing.assert_close(param.detach(), reference, rtol=1e-6, atol=1e-7)


# -- with the library's own classes -----------------------------------------------------

LIBRARY_PARAMS = """\
trainer:
  max_steps: 8
optimizer:
  optimizer_type: sgd
  momentum: 0.9
  weight_decay: 0.01
  learning_rate:
    - scheduler: Linear
      initial_learning_rate: 0.0
      end_learning_rate: 1.0e-2
      total_iters: 3
    - scheduler: ConstantLR
      learning_rate: 5.0e-3
"""


def test_a_model_zoo_params_file_configures_the_library_sgd_and_its_schedule(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(LIBRARY_PARAMS, encoding="utf-8")
    optimizer_params = dict(yaml.safe_load(path.read_text(encoding="utf-8"))["optimizer"])
    optimizer_type = optimizer_params.pop("optimizer_type")
    params = make_params()
    optimizer = cstorch.optim.configure_optimizer(optimizer_type, params, **optimizer_params)
    assert type(optimizer) is cstorch.optim.SGD
    scheduler = cstorch.optim.configure_lr_scheduler(optimizer, optimizer_params["learning_rate"])
    assert type(scheduler) is cstorch.optim.lr_scheduler.SequentialLR
    assert scheduler.milestones == [3]

    seen = run_configured(optimizer, scheduler, params, 8)
    assert seen == pytest.approx([warmup_then_constant(step) for step in range(8)])
    expected = expected_sgd_run(make_params(), warmup_then_constant, 8)
    for param, reference in zip(params, expected):
        torch.testing.assert_close(param.detach(), reference, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name, cls", [("adamw", "AdamW"), ("ADAM", "Adam"), ("rmsProp", "RMSprop"),
                                       ("Adagrad", "Adagrad")])
def test_configure_optimizer_builds_the_library_class_in_any_case(name, cls):
    optimizer = cstorch.optim.configure_optimizer(name, make_params(), learning_rate=0.01)
    assert type(optimizer) is getattr(cstorch.optim, cls)
    assert [float(group["lr"]) for group in optimizer.param_groups] == [pytest.approx(0.01)]


def test_a_number_as_learning_rate_is_the_library_constant_lr():
    optimizer = cstorch.optim.configure_optimizer("SGD", make_params(), learning_rate=0.1)
    scheduler = cstorch.optim.configure_lr_scheduler(optimizer, 0.02)
    assert type(scheduler) is cstorch.optim.lr_scheduler.ConstantLR
    assert lr_values(optimizer, scheduler, 3) == pytest.approx([0.02] * 3)


def test_a_chained_list_is_the_library_chained_lr():
    optimizer = cstorch.optim.configure_optimizer("SGD", make_params(), learning_rate=0.1)
    scheduler = cstorch.optim.configure_lr_scheduler(optimizer, [
        {"scheduler": "ConstantLR", "learning_rate": 0.1, "main_scheduler": "chained"},
        {"scheduler": "ExponentialLR", "initial_learning_rate": 1.0, "total_iters": 1,
         "decay_rate": 0.5},
    ])
    assert type(scheduler) is cstorch.optim.lr_scheduler.ChainedLR
    assert lr_values(optimizer, scheduler, 4) == pytest.approx([0.1, 0.05, 0.025, 0.0125])


def test_a_generic_weight_decay_sequence_configures_the_library_classes():
    optimizer = cstorch.optim.configure_optimizer("SGD", make_params(), learning_rate=0.1,
                                                  weight_decay=0.0)
    scheduler = cstorch.optim.configure_scheduler(optimizer, {"SequentialWD": {"schedulers": [
        {"LinearWD": {"initial_val": 0.0, "end_val": 0.3, "total_iters": 3}},
        {"ConstantWD": {"val": 0.1}},
    ]}})
    assert type(scheduler) is cstorch.optim.weight_decay_scheduler.SequentialWD
    values = []
    for _ in range(5):
        values.append(float(optimizer.param_groups[0]["weight_decay"]))
        optimizer.step()
        scheduler.step()
    assert values == pytest.approx([0.0, 0.1, 0.2, 0.1, 0.1])
