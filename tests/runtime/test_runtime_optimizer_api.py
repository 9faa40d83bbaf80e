"""The cstorch.optim.Optimizer API: construction, global step, hooks, tags,
state dicts and checkpoint checks."""

from __future__ import annotations

import copy
import io

import pytest
import torch

import cslint.cstorch as cstorch
from cstorch_helpers import CompliantAdam, CompliantSGD, make_params, run_steps

HERE = __file__


def test_module_layout_mirrors_cerebras_pytorch():
    from cslint.cstorch.optim.lr_scheduler import LRScheduler
    from cslint.cstorch.optim.optimizer import Optimizer
    from cslint.cstorch.optim.scheduler import Scheduler
    from cslint.cstorch.optim.weight_decay_scheduler import WeightDecayScheduler

    assert cstorch.optim.Optimizer is Optimizer
    assert cstorch.optim.scheduler.Scheduler is Scheduler
    assert cstorch.optim.lr_scheduler.LRScheduler is LRScheduler
    assert cstorch.optim.weight_decay_scheduler.WeightDecayScheduler is WeightDecayScheduler
    assert issubclass(Optimizer, torch.optim.Optimizer)
    for name in ("zeros_like", "ones_like", "full_like", "zeros", "ones", "full",
                 "trace", "step_closure", "checkpoint_closure", "strict",
                 "check_static_graph", "ComplianceError"):
        assert callable(getattr(cstorch, name)), name


def test_error_families_are_compliance_errors():
    for family in (cstorch.StateError, cstorch.TracedValueError,
                   cstorch.SchedulerError, cstorch.GraphChangedError):
        assert issubclass(family, cstorch.ComplianceError)
        assert issubclass(family, RuntimeError)


def test_abstract_methods_must_be_implemented():
    class NoStep(cstorch.optim.Optimizer):
        def preinitialize(self):
            pass

    class NoPreinitialize(cstorch.optim.Optimizer):
        def step(self, closure=None):
            pass

    for incomplete in (NoStep, NoPreinitialize):
        with pytest.raises(TypeError, match="abstract"):
            incomplete(make_params(), {"lr": 0.1})


def test_preinitialize_runs_during_construction():
    params = make_params()
    optimizer = CompliantAdam(params)
    for p in params:
        assert set(optimizer.state[p]) == {"exp_avg", "exp_avg_sq", "beta1_power", "beta2_power"}
        assert torch.equal(optimizer.state[p]["exp_avg"], torch.zeros_like(p))


def test_creation_ops_match_torch():
    like = torch.ones(2, 3, dtype=torch.float64)
    assert torch.equal(cstorch.zeros_like(like), torch.zeros_like(like))
    assert cstorch.zeros_like(like).dtype == torch.float64
    assert cstorch.ones_like(like, dtype=torch.float32).dtype == torch.float32
    assert torch.equal(cstorch.full_like(like, 7.0), torch.full_like(like, 7.0))
    assert torch.equal(cstorch.zeros((2, 2)), torch.zeros(2, 2))
    assert torch.equal(cstorch.ones((3,), dtype=torch.int64), torch.ones(3, dtype=torch.int64))
    assert torch.equal(cstorch.full((2,), 0.5), torch.full((2,), 0.5))


def test_global_step_is_float32_zero_dim_on_the_param_device():
    params = make_params()
    optimizer = CompliantSGD(params, enable_global_step=True)
    for p in params:
        step = optimizer.state[p]["step"]
        assert step.dtype == torch.float32 and step.dim() == 0
        assert step.device == p.device and step.item() == 0.0
        returned = optimizer.increment_global_step(p)
        assert returned is step and step.item() == 1.0  # in place


def test_increment_global_step_without_global_step_is_a_clear_error():
    params = make_params()
    optimizer = CompliantSGD(params, enable_global_step=False)
    with pytest.raises(RuntimeError, match="enable_global_step=True"):
        optimizer.increment_global_step(params[0])


def test_lr_is_a_zero_dim_device_tensor_in_strict_mode_from_the_first_step():
    optimizer = CompliantSGD(make_params(), lr=0.25)
    # Construction keeps the number given, as the system's backend does until the run
    # starts; the step sees a tensor, as on the system.
    assert optimizer.param_groups[0]["lr"] == 0.25
    run_steps(optimizer, steps=1)
    lr = optimizer.param_groups[0]["lr"]
    assert isinstance(lr, torch.Tensor) and lr.dim() == 0 and lr.dtype == torch.float32
    assert lr.item() == 0.25
    assert optimizer.defaults["lr"] == 0.25  # defaults stay as given
    with cstorch.strict(False):
        relaxed = CompliantSGD(make_params(), lr=0.25)
        run_steps(relaxed, steps=1)
    assert relaxed.param_groups[0]["lr"] == 0.25


class _RemembersBaseLrs(cstorch.optim.Optimizer):
    """AdaBound's way: the lrs given, kept at construction and tested in the step."""

    def __init__(self, params, lr=0.1):
        super().__init__(params, {"lr": lr})
        self.base_lrs = [group["lr"] for group in self.param_groups]
        self.test_the_step_lr = False

    def preinitialize(self):
        pass

    @torch.no_grad()
    def step(self, closure=None):
        for group, base_lr in zip(self.param_groups, self.base_lrs):
            if self.test_the_step_lr and group["lr"] > 0.0:
                pass
            scale = 1.0 / base_lr if base_lr > 0.0 else 0.0
            for p in group["params"]:
                p.sub_(group["lr"] * scale * p.grad)


def test_construction_sees_the_number_given_so_a_host_test_of_it_passes():
    params = make_params()
    optimizer = _RemembersBaseLrs(params, lr=0.1)
    assert optimizer.base_lrs == [0.1]
    before = [p.detach().clone() for p in params]
    run_steps(optimizer, steps=2)
    assert all(not torch.equal(p, b) for p, b in zip(params, before))
    # The lr the step reads is still a device value: a test of it is CS201.
    optimizer.test_the_step_lr = True
    with pytest.raises(cstorch.TracedValueError, match="CS201"):
        optimizer.step()


def test_tags_are_normalised_to_sets():
    p1, p2, p3, p4 = make_params(shapes=((2,), (2,), (2,), (2,)))
    optimizer = CompliantSGD(
        [
            {"params": [p1], "tags": ["decay", "dense"]},
            {"params": [p2], "tags": "no_decay"},
            {"params": [p3], "tags": ("a",)},
            {"params": [p4]},
        ]
    )
    tags = [group.get("tags") for group in optimizer.param_groups]
    assert tags == [{"decay", "dense"}, {"no_decay"}, {"a"}, None]
    extra = torch.nn.Parameter(torch.zeros(2))
    optimizer.add_param_group({"params": [extra], "tags": ["late"]})
    assert optimizer.param_groups[-1]["tags"] == {"late"}


def test_zero_grad_hooks_run_in_order_and_post_hooks_after_zero_grad():
    params = make_params()
    optimizer = CompliantSGD(params)
    events = []

    def pre_hook(opt, args, kwargs):
        events.append(("pre", all(p.grad is not None for p in params)))

    def post_hook(opt, args, kwargs):
        events.append(("post", all(p.grad is None for p in params)))

    pre = optimizer.register_zero_grad_pre_hook(pre_hook)
    post = optimizer.register_zero_grad_post_hook(post_hook)
    optimizer.zero_grad()
    assert events == [("pre", True), ("post", True)]

    pre.remove()
    post.remove()
    for p in params:
        p.grad = torch.ones_like(p)
    optimizer.zero_grad()
    assert len(events) == 2


def test_zero_grad_pre_hook_may_replace_the_arguments():
    params = make_params()
    optimizer = CompliantSGD(params)
    seen = []
    optimizer.register_zero_grad_pre_hook(lambda opt, args, kwargs: ((), {"set_to_none": False}))
    optimizer.register_zero_grad_post_hook(lambda opt, args, kwargs: seen.append(kwargs))
    optimizer.zero_grad()
    assert all(p.grad is not None and not p.grad.any() for p in params)
    assert seen == [{"set_to_none": False}]

    optimizer.register_zero_grad_pre_hook(lambda opt, args, kwargs: "wrong")
    with pytest.raises(RuntimeError, match="must return None or a tuple"):
        optimizer.zero_grad()


def test_apply_and_visit_state():
    params = make_params()
    optimizer = CompliantSGD(params, momentum=0.9)
    assert optimizer.apply(lambda opt: opt is optimizer)

    class Visitor:
        def apply(self, opt):
            return "applied"

    assert optimizer.apply(Visitor()) == "applied"
    with pytest.raises(TypeError, match="callable"):
        optimizer.apply(42)

    optimizer.visit_state(lambda value: value + 1.0)
    for p in params:
        assert torch.equal(optimizer.state[p]["momentum_buffer"], torch.ones_like(p))
    seen = []
    optimizer.visit_state(lambda value: seen.append(value))  # None keeps the value
    assert len(seen) == len(params)
    assert torch.equal(optimizer.state[params[0]]["momentum_buffer"], torch.ones_like(params[0]))


def test_state_names_to_sparsify_default_lists_parameter_shaped_state():
    class WithScalars(CompliantAdam):
        state_names_to_sparsify = cstorch.optim.Optimizer.state_names_to_sparsify

    optimizer = WithScalars(make_params())
    assert optimizer.state_names_to_sparsify() == ["exp_avg", "exp_avg_sq"]
    sgd = CompliantSGD(make_params(), momentum=0.9, enable_global_step=True)
    assert sgd.state_names_to_sparsify() == ["momentum_buffer"]


def save_and_load(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def test_state_dict_round_trips_through_weights_only_load():
    params = make_params()
    optimizer = CompliantAdam([{"params": params, "tags": ["decay"]}], lr=0.01)
    run_steps(optimizer, steps=3)
    state_dict = optimizer.state_dict()
    assert type(state_dict["state"][0]) is dict
    loaded = save_and_load(state_dict)

    twin_params = [torch.nn.Parameter(p.detach().clone()) for p in params]
    for twin, p in zip(twin_params, params):
        twin.grad = p.grad.clone()
    twin = CompliantAdam([{"params": twin_params, "tags": ["decay"]}], lr=0.5)
    twin.load_state_dict(loaded)
    assert twin.param_groups[0]["tags"] == {"decay"}
    assert isinstance(twin.param_groups[0]["lr"], torch.Tensor)
    assert twin.param_groups[0]["lr"].item() == pytest.approx(0.01)

    optimizer.step()
    twin.step()
    for p, twin_p in zip(params, twin_params):
        assert torch.equal(p, twin_p)
        assert torch.equal(optimizer.state[p]["exp_avg"], twin.state[twin_p]["exp_avg"])


def test_state_dict_is_plain_even_while_the_state_is_frozen():
    captured = []

    class Saving(CompliantSGD):
        def step(self, closure=None):
            captured.append(self.state_dict())
            return super().step(closure)

    Saving(make_params(), momentum=0.9).step()
    save_and_load(captured[0])  # raises if anything is not a plain type
    assert all(type(entries) is dict for entries in captured[0]["state"].values())


def test_load_state_dict_names_missing_and_unexpected_keys():
    source = CompliantSGD(make_params(), momentum=0.9)
    target = CompliantAdam(make_params())
    with pytest.raises(cstorch.StateError) as caught:
        target.load_state_dict(source.state_dict())
    message = str(caught.value)
    assert message.startswith("CS101 ")
    assert "CompliantAdam.load_state_dict" in message
    assert "state[0] lacks 'exp_avg', 'exp_avg_sq', 'beta1_power', 'beta2_power'" in message
    assert "state[0] has 'momentum_buffer' that preinitialize() does not create" in message
    assert caught.value.filename == HERE


def test_load_state_dict_names_shape_differences():
    source = CompliantSGD(make_params(shapes=((4, 3), (6,))), momentum=0.9)
    target = CompliantSGD(make_params(shapes=((4, 3), (5,))), momentum=0.9)
    with pytest.raises(cstorch.StateError) as caught:
        target.load_state_dict(source.state_dict())
    message = str(caught.value)
    assert message.startswith("CS102 ")
    assert (
        "state[1]['momentum_buffer'] is a tensor of shape (6,) in the checkpoint "
        "but a tensor of shape (5,) from preinitialize()" in message
    )


def test_load_state_dict_of_a_torch_adam_checkpoint_is_refused():
    params = make_params()
    torch_adam = torch.optim.Adam(params)
    torch_adam.step()
    with pytest.raises(cstorch.StateError, match="'step'"):
        CompliantAdam(make_params()).load_state_dict(torch_adam.state_dict())


def test_load_state_dict_is_unchecked_with_strict_off():
    source = CompliantSGD(make_params(), momentum=0.9)
    target = CompliantSGD(make_params(), momentum=0.0)
    with cstorch.strict(False):
        target.load_state_dict(source.state_dict())
    assert "momentum_buffer" in target.state[target.param_groups[0]["params"][0]]


def test_deepcopy_keeps_the_checks():
    optimizer = CompliantSGD(make_params(), momentum=0.9, enable_global_step=True)
    duplicate = copy.deepcopy(optimizer)
    assert duplicate.enable_global_step
    run_steps(duplicate, steps=2)
    with pytest.raises(cstorch.StateError):
        duplicate.load_state_dict(CompliantAdam(make_params()).state_dict())


def test_compliant_adam_matches_torch_adam_over_five_steps():
    params = make_params(shapes=((8, 4), (4,), (3, 3, 2)), seed=3)
    reference = [torch.nn.Parameter(p.detach().clone()) for p in params]
    initial = [p.detach().clone() for p in params]
    ours = CompliantAdam(params, lr=0.01, betas=(0.8, 0.99), eps=1e-8, weight_decay=0.01)
    theirs = torch.optim.Adam(
        reference, lr=0.01, betas=(0.8, 0.99), eps=1e-8, weight_decay=0.01, foreach=False
    )
    for step in range(5):
        generator = torch.Generator().manual_seed(step)
        for p, r in zip(params, reference):
            p.grad = torch.randn(p.shape, generator=generator)
            r.grad = p.grad.clone()
        ours.step()
        theirs.step()
    for p, r, start in zip(params, reference, initial):
        assert not torch.equal(p.detach(), start)
        torch.testing.assert_close(p.detach(), r.detach(), rtol=1e-5, atol=1e-6)
