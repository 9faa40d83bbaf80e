"""The runtime under stress: threads, failures mid-step, copies, bad checkpoints.

Strict mode and the guard are per thread and re-entrant; a step that raises
leaves nothing behind; deepcopy and pickle give optimizers and schedulers that
step bitwise like the originals and are still checked; load_state_dict refuses
a checkpoint that does not fit, naming what, and changes nothing.
"""

from __future__ import annotations

import copy
import pickle
import sys
import threading
from collections import defaultdict

import pytest
import torch

import cslint.cstorch as cstorch
from cstorch_helpers import (
    BodyOptimizer,
    CompliantAdam,
    CompliantSGD,
    StraightLineLR,
    assert_compliance_error,
    make_params,
    set_new_grads,
)

HERE = __file__
# Long enough never to fire on a loaded machine; a hang fails instead of blocking.
WAIT_S = 30


def params_of(optimizer) -> list:
    return [p for group in optimizer.param_groups for p in group["params"]]


def torch_modes_on_stack() -> int:
    return torch._C._len_torch_function_stack() + torch._C._len_torch_dispatch_stack()


def momentum_update(opt, group, p, state):
    state["exp_avg"].mul_(group["momentum"]).add_(p.grad)
    p.sub_(group["lr"] * state["exp_avg"])


def read_grad_norm(opt, group, p, state):
    p.grad.norm().item()  # cs204-copy


def add_late_state(opt, group, p, state):
    state["late"] = torch.zeros_like(p)  # cs101-copy


# -- 1. Threads and re-entrance ------------------------------------------------------


def run_in_thread(target) -> None:
    thread = threading.Thread(target=target)
    thread.start()
    thread.join(WAIT_S)
    assert not thread.is_alive(), "the thread hung"


def test_a_strict_and_a_lenient_thread_step_at_once_each_as_if_alone():
    both_in_step = threading.Barrier(2, timeout=WAIT_S)
    lenient_step_read = threading.Event()
    strict_step_checked = threading.Event()
    results = {}

    def strict_body(opt, group, p, state):
        both_in_step.wait()
        # The other thread is inside strict(False) and inside its own step.
        assert lenient_step_read.wait(WAIT_S)
        p.grad.norm().item()  # cs204-strict-thread

    def lenient_body(opt, group, p, state):
        both_in_step.wait()
        # What strict mode forbids, while the other thread's step is guarded.
        state["count"] += 1
        state["norm"] = p.grad.norm().item()
        p.add_(p.grad, alpha=-group["lr"])
        lenient_step_read.set()
        assert strict_step_checked.wait(WAIT_S)

    def step_strictly():
        optimizer = BodyOptimizer(make_params(shapes=((3,),)), strict_body)
        try:
            optimizer.step()
        except BaseException as error:  # noqa: BLE001 - handed to the test thread
            results["strict"] = error
        finally:
            strict_step_checked.set()

    def step_leniently():
        try:
            with cstorch.strict(False):
                optimizer = BodyOptimizer(make_params(shapes=((3,),)), lenient_body)
                optimizer.step()
            results["lenient"] = optimizer
        except BaseException as error:  # noqa: BLE001
            results["lenient"] = error
            lenient_step_read.set()

    threads = [threading.Thread(target=step_strictly), threading.Thread(target=step_leniently)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert not any(thread.is_alive() for thread in threads), "a step was blocked"

    lenient = results["lenient"]
    assert isinstance(lenient, BodyOptimizer), lenient
    (state,) = lenient.state.values()
    assert state["count"] == 1 and isinstance(state["norm"], float)
    error = results["strict"]
    assert isinstance(error, cstorch.TracedValueError), error
    assert (error.code, error.owner) == ("CS204", "BodyOptimizer.step")
    assert error.filename == HERE
    assert "p.grad.norm().item()  # cs204-strict-thread" in str(error)
    assert cstorch.is_strict()


def train_alone_or_not(strict: bool, seed: int, steps: int, start=None):
    """Train a CompliantAdam with its own schedule; return its parameters.

    `start` (a Barrier) lines the threads up so their steps overlap.
    """
    with cstorch.strict(strict):
        optimizer = CompliantAdam(make_params(seed=seed), lr=0.01)
        scheduler = StraightLineLR(optimizer, start=0.01, end=0.001, total_iters=steps)
        if start is not None:
            start.wait()
        for step in range(steps):
            assert cstorch.is_strict() == strict
            set_new_grads(params_of(optimizer), seed=seed * 1000 + step)
            optimizer.step()
            scheduler.step()
        return [p.detach().clone() for p in params_of(optimizer)]


def test_threads_stepping_at_once_compute_what_each_computes_alone():
    # Switch threads every few bytecodes, not every 5 ms, so the steps interleave.
    previous_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        runs = [(seed % 2 == 0, seed) for seed in range(4)]
        start = threading.Barrier(len(runs), timeout=WAIT_S)
        results = {}

        def run(strict, seed):
            try:
                results[seed] = train_alone_or_not(strict, seed, steps=20, start=start)
            except BaseException as error:  # noqa: BLE001 - handed to the test thread
                results[seed] = error

        threads = [threading.Thread(target=run, args=run_args) for run_args in runs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT_S)
    finally:
        sys.setswitchinterval(previous_interval)
    assert not any(thread.is_alive() for thread in threads)
    for strict, seed in runs:
        alone = train_alone_or_not(strict, seed, steps=20)
        together = results[seed]
        assert isinstance(together, list), together
        for p, q in zip(alone, together, strict=True):
            assert torch.equal(p, q)


def test_strict_settings_of_two_threads_never_leak_into_each_other():
    # Interleaved: thread 1 turns strict off, thread 2 turns it off, thread 1
    # restores, thread 2 restores. With one process-wide flag, thread 2's
    # restore left it off for everyone.
    first_off, second_off, first_restored = (threading.Event() for _ in range(3))
    seen = {}

    def first():
        with cstorch.strict(False):
            first_off.set()
            assert second_off.wait(WAIT_S)
        seen["first after"] = cstorch.is_strict()
        first_restored.set()

    def second():
        assert first_off.wait(WAIT_S)
        seen["second before"] = cstorch.is_strict()
        with cstorch.strict(False):
            second_off.set()
            assert first_restored.wait(WAIT_S)
            seen["second inside"] = cstorch.is_strict()
        seen["second after"] = cstorch.is_strict()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert seen == {
        "second before": True,
        "first after": True,
        "second inside": False,
        "second after": True,
    }
    assert cstorch.is_strict()


def test_a_plain_strict_false_call_turns_off_only_its_own_thread():
    seen = {}

    def lenient_thread():
        cstorch.strict(False)
        seen["lenient"] = cstorch.is_strict()
        BodyOptimizer(make_params(), read_grad_norm).step()

    run_in_thread(lenient_thread)
    assert seen == {"lenient": False}
    assert cstorch.is_strict()
    with pytest.raises(cstorch.TracedValueError):
        BodyOptimizer(make_params(), read_grad_norm).step()


def test_every_new_thread_starts_strict():
    seen = {}

    def check():
        seen["strict"] = cstorch.is_strict()
        try:
            BodyOptimizer(make_params(), read_grad_norm).step()
        except cstorch.ComplianceError as error:
            seen["code"] = error.code

    with cstorch.strict(False):
        run_in_thread(check)
    assert seen == {"strict": True, "code": "CS204"}


def test_another_threads_state_writes_during_a_step_are_not_that_steps_violations():
    in_step = threading.Event()
    written = threading.Event()

    def body(opt, group, p, state):
        in_step.set()
        assert written.wait(WAIT_S)

    optimizer = BodyOptimizer(make_params(shapes=((3,),)), body)
    (param,) = params_of(optimizer)

    def write_from_host():
        assert in_step.wait(WAIT_S)
        optimizer.state[param]["note"] = torch.zeros(1)  # another thread: host code
        written.set()

    writer = threading.Thread(target=write_from_host)
    writer.start()
    optimizer.step()
    writer.join(WAIT_S)
    assert "note" in optimizer.state[param]
    assert type(optimizer.state) is defaultdict


class BranchingSGD(cstorch.optim.Optimizer):
    """Plain SGD that branches on the gradient: CS201 in its own step."""

    def __init__(self, params):
        super().__init__(params, dict(lr=0.1))

    def preinitialize(self):
        pass

    @torch.no_grad()
    def step(self, closure=None):
        for p in params_of(self):
            if p.grad.sum() > 0:  # cs201-inner
                p.sub_(self.param_groups[0]["lr"] * p.grad)


def test_a_strict_step_may_step_another_optimizer_and_each_is_restored():
    inner = CompliantSGD(make_params(seed=1), momentum=0.9)
    inner_alone = CompliantSGD(make_params(seed=1), momentum=0.9)
    failing_inner = BranchingSGD(make_params(seed=2))
    caught = []

    def outer_body(opt, group, p, state):
        inner.step()
        with pytest.raises(cstorch.TracedValueError) as inner_error:
            failing_inner.step()
        caught.append(inner_error.value)
        momentum_update(opt, group, p, state)
        p.grad.sum().item()  # cs204-after-inner

    outer = BodyOptimizer(make_params(shapes=((3,),)), outer_body)
    error = assert_compliance_error(
        "CS204", HERE, "cs204-after-inner", outer.step, owner="BodyOptimizer.step"
    )
    assert isinstance(error, cstorch.TracedValueError)
    (inner_error,) = caught
    assert inner_error.code == "CS201" and inner_error.owner == "BranchingSGD.step"
    inner_alone.step()
    for p, alone in zip(params_of(inner), params_of(inner_alone)):
        assert torch.equal(p, alone)
    for optimizer in (outer, inner, failing_inner):
        assert type(optimizer.state) is defaultdict
    assert torch_modes_on_stack() == 0


def test_guarded_regions_nest_through_trace_step_and_scheduler():
    optimizer = CompliantSGD(make_params(), momentum=0.9)
    scheduler = StraightLineLR(optimizer, start=0.1, end=0.0, total_iters=4)

    @cstorch.trace
    def train_step():
        optimizer.step()
        scheduler.step()
        with cstorch.strict(False):
            optimizer.step()  # unguarded, nested inside a guarded region
        return params_of(optimizer)[0].sum()

    train_step()
    with pytest.raises(cstorch.TracedValueError):
        cstorch.trace(lambda: train_step().item())()
    assert scheduler.last_epoch.item() == 2
    assert torch_modes_on_stack() == 0
    assert isinstance(params_of(optimizer)[0].sum().item(), float)


# -- 2. A step that raises leaves nothing behind -------------------------------------


@cstorch.step_closure
def failing_log(value):
    raise OSError("the logger's disk is full")


def raise_user_error(opt, p, state):
    raise KeyError("a bug in the step")


def raise_interrupt(opt, p, state):
    raise KeyboardInterrupt


def read_on_host(opt, p, state):
    p.grad.norm().item()


def read_as_scalar(opt, p, state):
    p.add_(p.grad, alpha=p.grad.sum())


def take_data_dependent_shape(opt, p, state):
    torch.nonzero(p.grad)


def add_state(opt, p, state):
    state["late"] = torch.zeros_like(p)


def fail_in_step_closure(opt, p, state):
    failing_log(p.grad)


def fail_in_nested_step(opt, p, state):
    BranchingSGD([p]).step()


FAILURES = [
    (raise_user_error, KeyError),
    (raise_interrupt, KeyboardInterrupt),
    (read_on_host, cstorch.TracedValueError),
    (read_as_scalar, cstorch.TracedValueError),
    (take_data_dependent_shape, cstorch.TracedValueError),
    (add_state, cstorch.StateError),
    (fail_in_step_closure, OSError),
    (fail_in_nested_step, cstorch.TracedValueError),
]


def fail_on_request(opt, group, p, state):
    if opt.failure is not None:
        opt.failure(opt, p, state)
    momentum_update(opt, group, p, state)


def failing_optimizer():
    optimizer = BodyOptimizer(make_params(), fail_on_request)
    optimizer.failure = None
    return optimizer


def read_after_failure(opt, group, p, state):
    p.grad.norm().item()  # cs204-after-failure


@pytest.mark.parametrize(
    ("failure", "raised"), FAILURES, ids=[failure.__name__ for failure, _ in FAILURES]
)
def test_a_step_that_raises_leaves_no_mode_frozen_state_or_flag_behind(failure, raised):
    optimizer = failing_optimizer()
    never_failed = failing_optimizer()
    optimizer.failure = failure
    with pytest.raises(raised):
        optimizer.step()

    assert torch_modes_on_stack() == 0
    assert type(optimizer.state) is defaultdict
    assert all(type(entries) is dict for entries in optimizer.state.values())
    # Host code runs unchecked again: reads, and state written outside a step.
    param = params_of(optimizer)[0]
    assert isinstance(param.sum().item(), float)
    assert isinstance(optimizer.param_groups[0]["lr"].item(), float)
    optimizer.state[param]["written_by_host"] = torch.zeros(1)
    never_failed.state[params_of(never_failed)[0]]["written_by_host"] = torch.zeros(1)
    # The next step is a normal step: same result as one that never failed.
    optimizer.failure = None
    optimizer.step()
    never_failed.step()
    for p, reference in zip(params_of(optimizer), params_of(never_failed)):
        assert torch.equal(p, reference)
        assert torch.equal(optimizer.state[p]["exp_avg"], never_failed.state[reference]["exp_avg"])
    # Still checked, with this step named (no host-side level or owner left over).
    assert_compliance_error(
        "CS204",
        HERE,
        "cs204-after-failure",
        BodyOptimizer(make_params(), read_after_failure).step,
        owner="BodyOptimizer.step",
    )


class FailableLR(StraightLineLR):
    failing = False

    def _get_closed_form_lr(self):
        if self.failing:
            raise RuntimeError("the closed form failed")
        return super()._get_closed_form_lr()


def test_a_scheduler_step_that_raises_stays_on_its_step():
    scheduler = FailableLR(CompliantSGD(make_params()), start=0.1, end=0.0, total_iters=4)
    never_failed = StraightLineLR(CompliantSGD(make_params()), start=0.1, end=0.0, total_iters=4)
    last_epoch = scheduler.last_epoch
    lr = scheduler.optimizer.param_groups[0]["lr"]
    scheduler.failing = True
    with pytest.raises(RuntimeError, match="closed form failed"):
        scheduler.step()
    assert scheduler.last_epoch is last_epoch and last_epoch.item() == 0
    assert scheduler._step_count == 1
    assert scheduler.optimizer.param_groups[0]["lr"] is lr
    assert not scheduler._get_called_within_step
    assert torch_modes_on_stack() == 0
    scheduler.failing = False
    scheduler.step()
    never_failed.step()
    assert scheduler.last_epoch.item() == 1
    assert torch.equal(
        scheduler.optimizer.param_groups[0]["lr"], never_failed.optimizer.param_groups[0]["lr"]
    )


def test_a_traced_function_that_raises_leaves_host_code_unchecked():
    @cstorch.trace
    def train_step(param):
        raise ValueError("bad batch")

    param = make_params()[0]
    with pytest.raises(ValueError):
        train_step(param)
    assert torch_modes_on_stack() == 0
    assert isinstance(param.sum().item(), float)


# -- 3. deepcopy and pickle ------------------------------------------------------------


def pickled(obj):
    return pickle.loads(pickle.dumps(obj))


COPIES = [copy.deepcopy, pickled]


def copy_id(copier) -> str:
    return copier.__name__


def step_both(first, second, steps: int) -> None:
    """Step two optimizers on the same gradients; each step must match bitwise."""
    for step in range(steps):
        set_new_grads(params_of(first), seed=300 + step)
        set_new_grads(params_of(second), seed=300 + step)
        first.step()
        second.step()
        assert_bitwise_equal(first, second)


def assert_bitwise_equal(first, second) -> None:
    for p, q in zip(params_of(first), params_of(second), strict=True):
        assert p is not q
        assert torch.equal(p, q)
        first_state, second_state = first.state[p], second.state[q]
        assert first_state.keys() == second_state.keys()
        for key, value in first_state.items():
            if isinstance(value, torch.Tensor):
                assert value is not second_state[key]
                assert torch.equal(value, second_state[key]), key
            else:
                assert value == second_state[key], key
    for group, other in zip(first.param_groups, second.param_groups, strict=True):
        assert torch.equal(group["lr"], other["lr"])


OPTIMIZERS = {
    "adam": lambda: CompliantAdam(make_params(), lr=0.01, weight_decay=0.1),
    # Its step calls an attribute (`self.body`): torch pickles no attributes.
    "body": lambda: BodyOptimizer(make_params(), momentum_update),
    "sgd-global-step": lambda: CompliantSGD(make_params(), momentum=0.9, enable_global_step=True),
}


@pytest.mark.parametrize("copier", COPIES, ids=copy_id)
@pytest.mark.parametrize("make_optimizer", OPTIMIZERS.values(), ids=OPTIMIZERS.keys())
def test_a_copied_optimizer_steps_bitwise_like_the_original(make_optimizer, copier):
    original = make_optimizer()
    step_both(original, make_optimizer(), steps=1)  # state is no longer the initial one
    duplicate = copier(original)
    assert type(duplicate.state) is defaultdict
    step_both(original, duplicate, steps=3)


@pytest.mark.parametrize("copier", COPIES, ids=copy_id)
def test_a_copied_optimizer_is_still_checked(copier):
    reading = copier(BodyOptimizer(make_params(), read_grad_norm))
    set_new_grads(params_of(reading), seed=1)
    assert_compliance_error("CS204", HERE, "cs204-copy", reading.step, owner="BodyOptimizer.step")
    growing = copier(BodyOptimizer(make_params(), add_late_state))
    set_new_grads(params_of(growing), seed=1)
    assert_compliance_error("CS101", HERE, "cs101-copy", growing.step)
    with pytest.raises(cstorch.StateError):
        growing.load_state_dict(CompliantSGD(make_params(), momentum=0.9).state_dict())


def test_an_optimizer_copied_while_its_step_runs_is_a_plain_working_copy():
    class Snapshotting(CompliantSGD):
        def step(self, closure=None):
            self.snapshots.append(copy.deepcopy(self))
            return super().step(closure)

    optimizer = Snapshotting(make_params(), momentum=0.9)
    optimizer.snapshots = []
    optimizer.step()
    (snapshot,) = optimizer.snapshots
    assert type(snapshot.state) is defaultdict
    snapshot.snapshots = []
    reference = CompliantSGD(make_params(), momentum=0.9)
    step_both(snapshot, reference, steps=2)


class ScheduledWeightDecay(cstorch.optim.weight_decay_scheduler.WeightDecayScheduler):
    def _get_closed_form(self):
        return torch.tensor(0.01) * (self.last_epoch + 1)


def branch_on_weight_decay(opt, group, p, state):
    if group["weight_decay"] != 0:  # cs201-copied-weight-decay
        p.sub_(group["weight_decay"] * p)


@pytest.mark.parametrize("copier", COPIES, ids=copy_id)
def test_a_copied_scheduler_drives_the_copy_of_its_optimizer(copier):
    optimizer = CompliantAdam(make_params(), lr=0.01)
    scheduler = StraightLineLR(optimizer, start=0.1, end=0.01, total_iters=5)
    optimizer.step()
    scheduler.step()
    scheduler_copy = copier(scheduler)
    optimizer_copy = scheduler_copy.optimizer
    assert optimizer_copy is not optimizer
    assert optimizer_copy.registered_schedulers() == [scheduler_copy]
    assert optimizer.registered_schedulers() == [scheduler]
    assert scheduler_copy.last_epoch is not scheduler.last_epoch
    # The value last written is the one in the copied groups, as in the original.
    assert scheduler_copy.get_last_lr()[0] is optimizer_copy.param_groups[0]["lr"]
    for _ in range(4):
        step_both(optimizer, optimizer_copy, steps=1)
        scheduler.step()
        scheduler_copy.step()
        assert torch.equal(scheduler.last_epoch, scheduler_copy.last_epoch)
        assert_bitwise_equal(optimizer, optimizer_copy)


@pytest.mark.parametrize("copier", COPIES, ids=copy_id)
def test_an_optimizer_copied_with_its_scheduler_stays_linked_and_checked(copier):
    optimizer = BodyOptimizer(make_params(), branch_on_weight_decay, weight_decay=0.0)
    scheduler = ScheduledWeightDecay(optimizer, total_iters=None)
    optimizer_copy, scheduler_copy = copier((optimizer, scheduler))
    assert scheduler_copy.optimizer is optimizer_copy
    assert optimizer_copy.registered_schedulers() == [scheduler_copy]
    set_new_grads(params_of(optimizer_copy), seed=1)
    assert_compliance_error("CS201", HERE, "cs201-copied-weight-decay", optimizer_copy.step)


@pytest.mark.parametrize("copier", COPIES, ids=copy_id)
def test_an_optimizer_copied_alone_keeps_its_scheduled_values_device_values(copier):
    optimizer = BodyOptimizer(make_params(), branch_on_weight_decay, weight_decay=0.0)
    scheduler = ScheduledWeightDecay(optimizer, total_iters=None)
    optimizer_copy = copier(optimizer)
    assert optimizer_copy.registered_schedulers() == []
    assert optimizer_copy.scheduled_keys() == {"lr", "weight_decay"}
    set_new_grads(params_of(optimizer_copy), seed=1)
    assert_compliance_error("CS201", HERE, "cs201-copied-weight-decay", optimizer_copy.step)
    del scheduler


# -- 4. load_state_dict refuses what does not fit, and changes nothing --------------------


def checkpoint_of_a_trained_adam() -> dict:
    source = CompliantAdam(make_params(seed=5), lr=0.02)
    step_both(source, CompliantAdam(make_params(seed=5), lr=0.02), steps=2)
    return copy.deepcopy(source.state_dict())


def without_key(checkpoint):
    del checkpoint["state"][1]["exp_avg_sq"]


def with_extra_key(checkpoint):
    checkpoint["state"][0]["max_exp_avg_sq"] = torch.zeros(4, 3)


def with_wrong_shape(checkpoint):
    checkpoint["state"][1]["exp_avg"] = torch.zeros(6)


def without_a_parameters_state(checkpoint):
    del checkpoint["state"][0]


def with_state_of_no_parameter(checkpoint):
    checkpoint["state"][7] = {"exp_avg": torch.zeros(5)}


def with_a_tensor_for_a_parameters_state(checkpoint):
    checkpoint["state"][1] = torch.zeros(5)


BAD_STATE = [
    (without_key, "CS101", ["state[1] lacks 'exp_avg_sq'"]),
    (
        with_extra_key,
        "CS101",
        ["state[0] has 'max_exp_avg_sq' that preinitialize() does not create"],
    ),
    (
        with_wrong_shape,
        "CS102",
        [
            "state[1]['exp_avg'] is a tensor of shape (6,) in the checkpoint but a "
            "tensor of shape (5,) from preinitialize()"
        ],
    ),
    (
        without_a_parameters_state,
        "CS101",
        ["state[0] lacks 'exp_avg', 'exp_avg_sq', 'beta1_power', 'beta2_power'"],
    ),
    (with_state_of_no_parameter, "CS101", ["state[7] belongs to no parameter"]),
    (
        with_a_tensor_for_a_parameters_state,
        "CS101",
        ["state[1] is a tensor of shape (5,), not a dict of state entries"],
    ),
]


def with_an_extra_parameter(checkpoint):
    checkpoint["param_groups"][0]["params"].append(2)


def with_an_extra_group(checkpoint):
    checkpoint["param_groups"].append(dict(checkpoint["param_groups"][0], params=[]))


def without_param_groups(checkpoint):
    del checkpoint["param_groups"]


def without_state(checkpoint):
    del checkpoint["state"]


def with_a_list_for_state(checkpoint):
    checkpoint["state"] = list(checkpoint["state"].values())


BAD_GROUPS = [
    (
        with_an_extra_parameter,
        "its param_groups[0] holds 3 parameters where CompliantAdam's holds 2",
    ),
    (with_an_extra_group, "it has 2 param groups where CompliantAdam has 1"),
    (without_param_groups, "it has no 'param_groups' section"),
    (without_state, "it has no 'state' section"),
    (with_a_list_for_state, "its 'state' section is a list, not a dict"),
]


def snapshot(optimizer) -> tuple:
    """The optimizer's state_dict (deep) and the objects it holds (identity)."""
    objects = [
        (id(p), key, id(value))
        for p in params_of(optimizer)
        for key, value in optimizer.state[p].items()
    ]
    objects += [(index, id(group["lr"])) for index, group in enumerate(optimizer.param_groups)]
    return copy.deepcopy(optimizer.state_dict()), objects


def assert_same(before, after) -> None:
    if isinstance(before, torch.Tensor):
        assert isinstance(after, torch.Tensor) and before.dtype == after.dtype
        assert torch.equal(before, after)
    elif isinstance(before, dict):
        assert type(after) is type(before) and list(before) == list(after)
        for key in before:
            assert_same(before[key], after[key])
    elif isinstance(before, (list, tuple)):
        assert type(after) is type(before) and len(before) == len(after)
        for item, other in zip(before, after):
            assert_same(item, other)
    else:
        assert before == after


def assert_refused_without_change(load, expected_error, fragments) -> BaseException:
    optimizer = CompliantAdam(make_params(), lr=0.01)
    never_loaded = CompliantAdam(make_params(), lr=0.01)
    step_both(optimizer, never_loaded, steps=1)
    before = snapshot(optimizer)
    with pytest.raises(expected_error) as caught:
        load(optimizer)
    message = str(caught.value)
    assert "CompliantAdam.load_state_dict" in message
    assert "nothing was loaded" in message and "fix: " in message
    for fragment in fragments:
        assert fragment in message
    after = snapshot(optimizer)
    assert_same(before[0], after[0])
    assert before[1] == after[1]
    step_both(optimizer, never_loaded, steps=1)
    return caught.value


@pytest.mark.parametrize(
    ("damage", "code", "fragments"), BAD_STATE, ids=[damage.__name__ for damage, _, _ in BAD_STATE]
)
def test_a_checkpoint_whose_state_does_not_fit_is_refused_by_rule_and_changes_nothing(
    damage, code, fragments
):
    checkpoint = checkpoint_of_a_trained_adam()
    damage(checkpoint)
    error = assert_refused_without_change(
        lambda optimizer: optimizer.load_state_dict(checkpoint), cstorch.StateError, fragments
    )
    assert error.code == code and str(error).startswith(code + " ")
    assert error.owner == "CompliantAdam.load_state_dict"


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "lenient"])
@pytest.mark.parametrize(
    ("damage", "fragment"), BAD_GROUPS, ids=[damage.__name__ for damage, _ in BAD_GROUPS]
)
def test_a_checkpoint_whose_groups_do_not_fit_is_refused_naming_them(damage, fragment, strict):
    checkpoint = checkpoint_of_a_trained_adam()
    damage(checkpoint)

    def load(optimizer):
        with cstorch.strict(strict):
            optimizer.load_state_dict(checkpoint)

    assert_refused_without_change(load, ValueError, [fragment])


def test_a_checkpoint_that_is_not_a_dict_is_refused():
    with pytest.raises(TypeError, match=r"CompliantAdam.load_state_dict expects the dict"):
        CompliantAdam(make_params()).load_state_dict([])


def test_checkpoint_state_is_matched_to_parameters_by_the_ids_its_groups_list():
    checkpoint = checkpoint_of_a_trained_adam()
    # torch loads tensors without copying them: each optimizer gets its own.
    renumbered = copy.deepcopy(checkpoint)
    renumbered["param_groups"][0]["params"] = [10, 11]
    renumbered["state"] = {10: renumbered["state"][0], 11: renumbered["state"][1]}
    by_position = CompliantAdam(make_params())
    by_position.load_state_dict(checkpoint)
    by_id = CompliantAdam(make_params())
    by_id.load_state_dict(renumbered)
    step_both(by_position, by_id, steps=2)
