"""CS101/CS102: optimizer state frozen after preinitialize, while step runs."""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch

import cslint.cstorch as cstorch
from cslint import advice
from cstorch_helpers import (
    BodyOptimizer,
    CompliantSGD,
    assert_compliance_error,
    make_params,
    run_steps,
)

HERE = __file__


# -- CS101: new state while step runs ------------------------------------------------


def lazy_state_creation(opt, group, p, state):
    if "momentum_buffer" not in state:
        state["momentum_buffer"] = torch.clone(p.grad).detach()  # cs101-subscript


def setdefault_new_key(opt, group, p, state):
    buffer = state.setdefault("max_exp_avg_sq", torch.zeros_like(p))  # cs101-setdefault
    del buffer


def update_new_key(opt, group, p, state):
    state.update(max_exp_avg_sq=torch.zeros_like(p))  # cs101-update


def or_assign_new_key(opt, group, p, state):
    state |= {"max_exp_avg_sq": torch.zeros_like(p)}  # cs101-ior


def rebind_param_state(opt, group, p, state):
    opt.state[p] = {"exp_avg": state["exp_avg"]}  # cs101-rebind-dict


def write_into_state_of_unknown_tensor(opt, group, p, state):
    stranger = opt.stranger
    opt.state[stranger]["buffer"] = torch.zeros(2)  # cs101-stranger


# -- CS102: rebinding or removing state -----------------------------------------------


def rebind_state_tensor(opt, group, p, state):
    state["exp_avg"] = state["exp_avg"] * 0.9 + p.grad  # cs102-subscript


def python_counter_in_state(opt, group, p, state):
    state["count"] += 1  # cs102-counter


def update_rebinds(opt, group, p, state):
    state.update(exp_avg=torch.zeros_like(p))  # cs102-update


def delete_entry(opt, group, p, state):
    del state["count"]  # cs102-del


def pop_entry(opt, group, p, state):
    state.pop("count")  # cs102-pop


VIOLATIONS = [
    ("CS101", lazy_state_creation, "cs101-subscript"),
    ("CS101", setdefault_new_key, "cs101-setdefault"),
    ("CS101", update_new_key, "cs101-update"),
    ("CS101", or_assign_new_key, "cs101-ior"),
    ("CS101", rebind_param_state, "cs101-rebind-dict"),
    ("CS101", write_into_state_of_unknown_tensor, "cs101-stranger"),
    ("CS102", rebind_state_tensor, "cs102-subscript"),
    ("CS102", python_counter_in_state, "cs102-counter"),
    ("CS102", update_rebinds, "cs102-update"),
    ("CS102", delete_entry, "cs102-del"),
    ("CS102", pop_entry, "cs102-pop"),
]


def make_optimizer(body):
    optimizer = BodyOptimizer(make_params(), body)
    optimizer.stranger = torch.nn.Parameter(torch.zeros(2))
    return optimizer


@pytest.mark.parametrize(
    "code, body, marker", VIOLATIONS, ids=[marker for _, _, marker in VIOLATIONS]
)
def test_state_violation_raises_at_the_write(code, body, marker):
    optimizer = make_optimizer(body)
    before = {p: dict(entries) for p, entries in optimizer.state.items()}
    error = assert_compliance_error(
        code, HERE, marker, optimizer.step, owner="BodyOptimizer.step"
    )
    assert isinstance(error, cstorch.StateError)
    # The failed step left the state as preinitialize made it, as plain dicts.
    assert type(optimizer.state) is defaultdict
    for p, entries in optimizer.state.items():
        assert type(entries) is dict
        if p in before:
            assert entries.keys() == before[p].keys()
            assert all(entries[key] is before[p][key] for key in entries)


@pytest.mark.parametrize(
    ("body", "fix"),
    [
        (lazy_state_creation, advice.STATE_OUTSIDE_PREINITIALIZE),
        (rebind_param_state, advice.PARAMETER_STATE_REBOUND),
        (rebind_state_tensor, advice.STATE_REBOUND.format(name="state['exp_avg']")),
        (delete_entry, advice.STATE_REMOVED),
    ],
)
def test_fix_comes_from_advice(body, fix):
    with pytest.raises(cstorch.StateError) as caught:
        make_optimizer(body).step()
    assert caught.value.fix == fix


def test_messages_name_the_entry_and_the_parameter():
    with pytest.raises(cstorch.StateError) as caught:
        make_optimizer(lazy_state_creation).step()
    message = str(caught.value)
    assert "'momentum_buffer'" in message
    assert "the parameter at index 0 (shape (4, 3))" in message
    assert "preinitialize()" in message
    with pytest.raises(cstorch.StateError) as caught:
        make_optimizer(python_counter_in_state).step()
    assert "'count'" in str(caught.value) and "an int replacing an int" in str(caught.value)


def test_named_parameters_are_named_in_messages():
    p1, p2 = make_params()
    optimizer = BodyOptimizer([("encoder.weight", p1), ("encoder.bias", p2)], lazy_state_creation)
    with pytest.raises(cstorch.StateError, match="'encoder.weight' at index 0"):
        optimizer.step()


def allowed_state_updates(opt, group, p, state):
    state["exp_avg"] += p.grad  # in place on a tensor: the same object
    state["step"] += 1
    state["exp_avg"] = state["exp_avg"]  # writing back the same object
    exp_avg = state.setdefault("exp_avg", None)  # existing key: a read
    state.update(exp_avg=exp_avg)
    state |= {"step": state["step"]}
    assert opt.state[opt.stranger] == {}  # a defaultdict read, no state made
    opt.state[p] = state  # the same dict back
    assert state.pop("absent", None) is None


def test_permitted_state_writes_run_five_steps():
    optimizer = make_optimizer(allowed_state_updates)
    params = optimizer.param_groups[0]["params"]
    tensors_before = {p: dict(optimizer.state[p]) for p in params}
    run_steps(optimizer, steps=5)
    for p in params:
        assert optimizer.state[p]["step"].item() == 5.0
        assert set(optimizer.state[p]) == {"exp_avg", "step", "count"}
        # Updated in place: still the tensors preinitialize made.
        assert optimizer.state[p]["exp_avg"] is tensors_before[p]["exp_avg"]
        assert optimizer.state[p]["step"] is tensors_before[p]["step"]
    assert optimizer.stranger not in optimizer.state or optimizer.state[optimizer.stranger] == {}


def test_global_step_increments_inside_step():
    params = make_params()
    optimizer = CompliantSGD(params, lr=0.1, momentum=0.9, enable_global_step=True)
    run_steps(optimizer, steps=5)
    for p in params:
        assert optimizer.state[p]["step"].item() == 5.0


def test_state_written_outside_step_is_not_checked():
    optimizer = make_optimizer(allowed_state_updates)
    p = optimizer.param_groups[0]["params"][0]
    optimizer.state[p]["exp_avg"] = torch.ones_like(p)  # host code, not the step
    optimizer.state[p].update(extra=torch.zeros(1))
    assert "extra" in optimizer.state[p]


def test_with_strict_off_lazy_state_is_kept():
    optimizer = make_optimizer(lazy_state_creation)
    with cstorch.strict(False):
        optimizer.step()
    for p in optimizer.param_groups[0]["params"]:
        assert "momentum_buffer" in optimizer.state[p]


def test_strict_off_inside_the_step_writes_through():
    def body(opt, group, p, state):
        with cstorch.strict(False):
            state["late"] = torch.zeros(1)

    optimizer = make_optimizer(body)
    optimizer.step()
    for p in optimizer.param_groups[0]["params"]:
        assert "late" in optimizer.state[p]
        assert type(optimizer.state[p]) is dict


# -- A wrapper whose state is the wrapped optimizer's ----------------------------------


class Wrapper(cstorch.optim.Optimizer):
    """Reads `state` and `param_groups` through read-only properties, as
    pytorch-optimizer's OrthoGrad and Lookahead do; `extra` runs around the wrapped
    optimizer's step."""

    def __init__(self, optimizer, extra=None):  # no super().__init__: a wrapper's way
        self.optimizer = optimizer
        self.extra = extra
        self._optimizer_step_pre_hooks = {}
        self._optimizer_step_post_hooks = {}
        self._patch_step_function()

    @property
    def state(self):
        return self.optimizer.state

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def preinitialize(self):
        pass

    @torch.no_grad()
    def step(self, closure=None):
        if self.extra is not None:
            self.extra(self)
        return self.optimizer.step()


def _slow_copy(wrapper):
    for group in wrapper.param_groups:
        for p in group["params"]:
            wrapper.state[p]["slow"] = p.clone()


def _new_param_state(wrapper):
    p = wrapper.param_groups[0]["params"][0]
    wrapper.state[p] = {"momentum_buffer": torch.zeros_like(p)}


def _rebound_buffer(wrapper):
    for group in wrapper.param_groups:
        for p in group["params"]:
            state = wrapper.state[p]
            state["momentum_buffer"] = state["momentum_buffer"] * 0.5


def test_a_wrapper_with_read_only_state_steps_through_the_wrapped_step():
    params = make_params()
    wrapper = Wrapper(CompliantSGD(params, momentum=0.9))
    before = {p: wrapper.state[p]["momentum_buffer"] for p in params}
    run_steps(wrapper, 3)
    assert all(wrapper.state[p]["momentum_buffer"] is before[p] for p in params)
    assert type(wrapper.optimizer.state) is defaultdict


@pytest.mark.parametrize(("extra", "code", "words"), [
    (_slow_copy, "CS101", "adds state entry 'slow'"),
    (_new_param_state, "CS101", "binds self.state[...]"),
    (_rebound_buffer, "CS102", "rebinds state entry 'momentum_buffer'"),
])
def test_what_a_wrapper_adds_around_the_wrapped_step_is_found_after_it(extra, code, words):
    wrapper = Wrapper(CompliantSGD(make_params(), momentum=0.9), extra)
    with pytest.raises(cstorch.StateError) as caught:
        wrapper.step()
    assert caught.value.code == code
    assert words in str(caught.value)
    assert "Wrapper.step" in str(caught.value)


def test_a_wrapper_state_write_is_not_checked_with_strict_mode_off():
    wrapper = Wrapper(CompliantSGD(make_params(), momentum=0.9), _slow_copy)
    with cstorch.strict(False):
        wrapper.step()
    assert all("slow" in wrapper.state[p] for p in wrapper.optimizer.state)


class SlowWeights(cstorch.optim.Optimizer):
    """timm's Lookahead: state and param groups are attributes of its own, and its
    slow weights go into the state of the optimizer it wraps."""

    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.param_groups = optimizer.param_groups
        self.state = defaultdict(dict)
        self._optimizer_step_pre_hooks = {}
        self._optimizer_step_post_hooks = {}
        self._patch_step_function()

    def preinitialize(self):
        pass

    @torch.no_grad()
    def step(self, closure=None):
        loss = self.optimizer.step()
        for group in self.param_groups:
            for p in group["params"]:
                inner = self.optimizer.state[p]
                if "slow" not in inner:
                    inner["slow"] = p.clone()
                inner["slow"].lerp_(p, 0.5)
        return loss


def test_state_a_wrapper_adds_to_the_wrapped_optimizer_is_found_after_its_step():
    wrapper = SlowWeights(CompliantSGD(make_params(), momentum=0.9))
    with pytest.raises(cstorch.StateError) as caught:
        wrapper.step()
    assert caught.value.code == "CS101"
    assert "adds state entry 'slow'" in str(caught.value)
    assert "SlowWeights.step" in str(caught.value)
