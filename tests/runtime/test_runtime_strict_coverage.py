"""Strict mode reaches every way of writing a step or a closed form.

A `step` inherited from a mixin or wrapped by a class-based decorator is
guarded like one written in the class body (the guard hooks the step where
torch.optim hooks it); a scheduler that overrides `get` runs it guarded.
"""

from __future__ import annotations

import functools

import pytest
import torch

import cslint.cstorch as cstorch
from cstorch_helpers import BodyOptimizer, assert_compliance_error, make_params, run_steps

HERE = __file__


class ReadsLrAsNumberMixin:
    """A step shared by several optimizers, written once in a mixin."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.add_(p.grad, alpha=-group["lr"])  # mixin-alpha


class CompliantStepMixin:
    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.sub_(group["lr"] * p.grad)


class NoState(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def preinitialize(self):
        pass


class MixinStep(ReadsLrAsNumberMixin, NoState):
    pass


class CompliantMixinStep(CompliantStepMixin, NoState):
    pass


DECORATED_CALLS: list[str] = []


class counted_step:  # noqa: N801 - a decorator, named like one
    """A class-based decorator: records each call, then runs the step."""

    def __init__(self, function):
        functools.update_wrapper(self, function)
        self.function = function

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        return functools.partial(self, instance)

    def __call__(self, optimizer, *args, **kwargs):
        DECORATED_CALLS.append(type(optimizer).__name__)
        return self.function(optimizer, *args, **kwargs)


class DecoratedStep(NoState):
    @counted_step
    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad.sum() > 0:  # decorated-if
                    p.sub_(group["lr"] * p.grad)


class CompliantDecoratedStep(NoState):
    @counted_step
    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.sub_(group["lr"] * p.grad)


def test_a_step_inherited_from_a_mixin_is_guarded_and_named_by_the_mixin():
    optimizer = MixinStep(make_params())
    assert_compliance_error(
        "CS205", HERE, "mixin-alpha", optimizer.step, owner="ReadsLrAsNumberMixin.step"
    )


def test_a_step_wrapped_by_a_class_based_decorator_is_guarded():
    optimizer = DecoratedStep(make_params())
    assert_compliance_error(
        "CS201", HERE, "decorated-if", optimizer.step, owner="DecoratedStep.step"
    )
    assert "DecoratedStep" in DECORATED_CALLS


def test_a_guarded_step_keeps_the_state_frozen_whatever_defines_it():
    class LazyMixin:
        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    self.state[p]["momentum"] = p.grad.clone()

    class LazyMixinStep(LazyMixin, NoState):
        pass

    with pytest.raises(cstorch.ComplianceError, match=r"^CS101 .* in LazyMixin\.step"):
        LazyMixinStep(make_params()).step()


@pytest.mark.parametrize("optimizer_class", [CompliantMixinStep, CompliantDecoratedStep])
def test_compliant_mixin_and_decorated_steps_run_and_update(optimizer_class):
    params = make_params()
    before = [p.detach().clone() for p in params]
    optimizer = optimizer_class(params)
    run_steps(optimizer, steps=3)
    assert all(not torch.equal(p, b) for p, b in zip(params, before))


def test_torch_step_hooks_still_run_around_the_guarded_step():
    optimizer = CompliantMixinStep(make_params())
    calls = []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: calls.append("pre"))
    optimizer.register_step_post_hook(lambda opt, args, kwargs: calls.append("post"))
    optimizer.step()
    assert calls == ["pre", "post"]


def test_the_mixin_step_runs_unguarded_with_strict_off():
    optimizer = MixinStep(make_params())
    with cstorch.strict(False):
        run_steps(optimizer, steps=2)


# -- schedulers that override the method evaluating the closed form ---------------


class BranchingGetLR(cstorch.optim.lr_scheduler.LRScheduler):
    """Overrides `get` (which evaluates the closed form) with a Python branch."""

    def __init__(self, optimizer):
        super().__init__(optimizer, total_iters=10)

    def _get_closed_form_lr(self):
        return torch.tensor(0.1) * (self.last_epoch + 1)

    def get(self):
        value = self._get_closed_form_lr()
        if self.last_epoch > 3:  # get-if
            value = value / 2
        return [value for _ in self.optimizer.param_groups]


class WarmupGetLR(BranchingGetLR):
    def get(self):
        value = torch.where(self.last_epoch > 3, torch.tensor(0.05), torch.tensor(0.1))
        return [value for _ in self.optimizer.param_groups]


def test_a_scheduler_overriding_get_runs_it_guarded():
    optimizer = CompliantMixinStep(make_params())
    assert_compliance_error(
        "CS201", HERE, "get-if", lambda: BranchingGetLR(optimizer), owner="BranchingGetLR.get"
    )


def test_a_compliant_get_override_schedules_the_lr():
    optimizer = CompliantMixinStep(make_params())
    scheduler = WarmupGetLR(optimizer)
    lrs = []
    for _ in range(6):
        lrs.append(float(optimizer.param_groups[0]["lr"]))
        scheduler.step()
    assert lrs == pytest.approx([0.1, 0.1, 0.1, 0.1, 0.05, 0.05])


def test_an_overridden_get_runs_with_strict_off():
    optimizer = CompliantMixinStep(make_params())
    with cstorch.strict(False):
        scheduler = BranchingGetLR(optimizer)
        for _ in range(5):
            scheduler.step()


# -- data-dependent shapes inside C ops (CS206) ----------------------------------------


def labels_of(batch):
    return (batch * 3).long().clamp(0, 3).flatten()


def one_hot_without_classes(batch):
    return torch.nn.functional.one_hot(labels_of(batch))  # one-hot


def one_hot_with_minus_one(batch):
    return torch.nn.functional.one_hot(labels_of(batch), -1)  # one-hot-minus-one


def unique_of_labels(batch):
    return torch.unique(labels_of(batch))  # unique-labels


def repeat_by_labels(batch):
    return batch.flatten().repeat_interleave(labels_of(batch))  # repeat-by-labels


SHAPE_VIOLATIONS = [
    (one_hot_without_classes, "one-hot"),
    (one_hot_with_minus_one, "one-hot-minus-one"),
    (unique_of_labels, "unique-labels"),
    (repeat_by_labels, "repeat-by-labels"),
]


@pytest.mark.parametrize(
    "function, marker", SHAPE_VIOLATIONS, ids=[m for _, m in SHAPE_VIOLATIONS]
)
def test_data_dependent_shapes_in_a_traced_step_raise_cs206(function, marker):
    step = cstorch.trace(function)
    error = assert_compliance_error(
        "CS206", HERE, marker, lambda: step(torch.rand(2, 3)), owner=function.__name__
    )
    assert isinstance(error, cstorch.TracedValueError)


def test_one_hot_names_the_fix():
    step = cstorch.trace(one_hot_without_classes)
    with pytest.raises(cstorch.ComplianceError, match="num_classes="):
        step(torch.rand(2, 3))


def test_sized_look_alikes_run_clean():
    @cstorch.trace
    def sized(batch):
        labels = labels_of(batch)
        encoded = torch.nn.functional.one_hot(labels, num_classes=4)
        repeated = batch.flatten().repeat_interleave(2)
        return encoded.sum() + repeated.sum()

    for _ in range(3):
        sized(torch.rand(2, 3))


def test_data_dependent_shapes_run_with_strict_off():
    with cstorch.strict(False):
        for function, _ in SHAPE_VIOLATIONS:
            cstorch.trace(function)(torch.rand(2, 3))


def unique_in_a_step(opt, group, p, state):
    buckets = torch.unique((p.grad * 4).round())  # step-unique
    del buckets


def test_unique_of_a_computed_gradient_in_a_step_raises_cs206():
    optimizer = BodyOptimizer(make_params(), unique_in_a_step)
    assert_compliance_error(
        "CS206", HERE, "step-unique", optimizer.step, owner="BodyOptimizer.step"
    )


# -- state kept in optimizer attributes (CS101) -------------------------------------------


class AttributeStateSGD(cstorch.optim.Optimizer):
    """Runs `body(self, group, p)` per parameter; __init__ leaves a few attributes."""

    def __init__(self, params, body, lr=0.1):
        self.body = body
        self.history = []
        self.scale = None
        self.seen = {}
        super().__init__(params, dict(lr=lr))

    def preinitialize(self):
        pass

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                self.body(self, group, p)
                p.sub_(group["lr"] * p.grad)


def tensor_attribute(opt, group, p):
    opt.previous_grad = p.grad.clone()  # attr-tensor


def tensor_replaces_none(opt, group, p):
    opt.scale = p.grad.abs().max()  # attr-none-to-tensor


def list_of_tensors(opt, group, p):
    opt.buffers = [p.grad * 2]  # attr-list


def appended(opt, group, p):
    opt.history.append(p.grad * 2)


def dict_grows(opt, group, p):
    opt.seen[id(p)] = p.grad.sum()


ATTRIBUTE_VIOLATIONS = [
    (tensor_attribute, "attr-tensor"),
    (tensor_replaces_none, "attr-none-to-tensor"),
    (list_of_tensors, "attr-list"),
]


@pytest.mark.parametrize(
    "body, marker", ATTRIBUTE_VIOLATIONS, ids=[m for _, m in ATTRIBUTE_VIOLATIONS]
)
def test_an_attribute_that_gains_a_tensor_in_step_is_cs101_at_its_line(body, marker):
    optimizer = AttributeStateSGD(make_params(), body)
    error = assert_compliance_error(
        "CS101", HERE, marker, optimizer.step, owner="AttributeStateSGD.step"
    )
    assert "self.state[p]" in error.fix


@pytest.mark.parametrize("body, growing", [(appended, "history"), (dict_grows, "seen")])
def test_a_container_attribute_that_grows_in_step_is_cs101(body, growing):
    optimizer = AttributeStateSGD(make_params(), body)
    with pytest.raises(cstorch.StateError) as caught:
        optimizer.step()
    error = caught.value
    assert error.code == "CS101"
    assert f"self.{growing} grows from 0 to 2 entries" in str(error)
    assert error.owner == "AttributeStateSGD.step"
    assert error.filename == HERE
    # The write is in a helper that names the optimizer `opt`: the step's def line.
    assert error.site.code_line == "def step(self, closure=None):"
    assert "fix:" in str(error)


class CreatesHistory(NoState):
    @torch.no_grad()
    def step(self, closure=None):
        self.log = []  # attr-created
        for group in self.param_groups:
            for p in group["params"]:
                self.log.append(p.grad.norm())
                p.sub_(group["lr"] * p.grad)


def test_a_container_attribute_created_and_filled_in_step_is_cs101_where_it_is_created():
    optimizer = CreatesHistory(make_params())
    assert_compliance_error(
        "CS101", HERE, "attr-created", optimizer.step, owner="CreatesHistory.step"
    )


def keeps_python_values(opt, group, p):
    opt.last_group_size = len(group["params"])
    opt.scale = None
    opt.history.append(tuple(p.shape))


def test_attributes_that_keep_python_values_are_fine():
    optimizer = AttributeStateSGD(make_params(), keeps_python_values)
    run_steps(optimizer, steps=3)


def test_attribute_state_runs_with_strict_off():
    for body, _ in ATTRIBUTE_VIOLATIONS:
        optimizer = AttributeStateSGD(make_params(), body)
        with cstorch.strict(False):
            run_steps(optimizer, steps=2)
    optimizer = AttributeStateSGD(make_params(), appended)
    with cstorch.strict(False):
        run_steps(optimizer, steps=2)
    assert len(optimizer.history) == 4


class GrowsTrail(NoState):
    def __init__(self, params):
        self.trail = []
        super().__init__(params)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                self.trail.append(p.grad.clone())  # attr-grows
                p.sub_(group["lr"] * p.grad)


def test_a_container_grown_in_the_class_body_is_cs101_at_the_growing_line():
    optimizer = GrowsTrail(make_params())
    assert_compliance_error("CS101", HERE, "attr-grows", optimizer.step, owner="GrowsTrail.step")


# -- host reads the function mode cannot see, on host tensors (CS204) ---------------------


def host_table_sliced_by_state(opt, group, p, state):
    table = torch.arange(10.0)
    head = table[: state["step"].long() + 1]  # slice-bound
    del head


def host_tensor_sized_by_state(opt, group, p, state):
    zeros = torch.zeros((state["step"].long() + 1, 2))  # size-from-state
    del zeros


@pytest.mark.parametrize(
    "body, marker",
    [(host_table_sliced_by_state, "slice-bound"), (host_tensor_sized_by_state, "size-from-state")],
)
def test_a_device_value_read_as_a_bound_or_size_of_a_host_tensor_is_cs204(body, marker):
    optimizer = BodyOptimizer(make_params(), body)
    assert_compliance_error("CS204", HERE, marker, optimizer.step, owner="BodyOptimizer.step")
