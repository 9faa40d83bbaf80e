"""A traced step's first calls are checked for a static graph (CS501), and step
closures called in it run on the host after it returns, in order."""

from __future__ import annotations

import pytest
import torch

import cslint.cstorch as cstorch
from cstorch_helpers import CompliantAdam, StraightLineLR, assert_compliance_error

HERE = __file__


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))


def batch(seed: int, size: int = 8) -> torch.Tensor:
    return torch.randn(size, 3, generator=torch.Generator().manual_seed(seed))


def compliant_step_for(model, optimizer):
    @cstorch.trace
    def training_step(inputs):
        optimizer.zero_grad()
        loss = model(inputs).pow(2).mean()
        loss.backward()
        optimizer.step()
        return loss

    return training_step


def test_a_compliant_step_on_new_batches_keeps_a_static_graph():
    model = make_model()
    training_step = compliant_step_for(model, CompliantAdam(model.parameters(), lr=0.01))
    losses = [training_step(batch(seed)).item() for seed in range(5)]
    assert losses[-1] < losses[0]


def counting_step_for(model):
    calls = []

    @cstorch.trace
    def training_step(inputs):
        calls.append(None)
        scale = 0.5 if len(calls) < 3 else 0.25  # a Python value that changes at step 3
        return model(inputs).mul(scale).sum()  # cs501-counter

    return training_step


def test_a_python_counter_that_changes_the_graph_at_step_3_raises_cs501_naming_step_and_op():
    training_step = counting_step_for(make_model())
    training_step(batch(0))
    training_step(batch(1))
    error = assert_compliance_error(
        "CS501", HERE, "cs501-counter", lambda: training_step(batch(2)), owner="training_step"
    )
    message = str(error)
    assert "step 3 traced a different graph than step 2" in message
    assert "step 2: aten.mul.Tensor(" in message and ", 0.5)" in message
    assert "step 3: aten.mul.Tensor(" in message and ", 0.25)" in message


def test_only_the_first_three_calls_are_compared_unless_asked_for_more():
    def step_changing_at(call):
        calls = []

        @cstorch.trace
        def training_step(inputs):
            calls.append(None)
            return inputs.mul(2.0 if len(calls) < call else 3.0).sum()

        return training_step

    late = step_changing_at(4)
    for seed in range(5):
        late(batch(seed))  # call 4 is no longer recorded
    with cstorch.graph_check_steps(5):
        later = step_changing_at(4)
        with pytest.raises(cstorch.GraphChangedError, match="step 4 traced a different graph than step 3"):
            for seed in range(5):
                later(batch(seed))


def test_graph_check_steps_zero_turns_the_check_off_for_the_block_only():
    with cstorch.graph_check_steps(0):
        training_step = counting_step_for(make_model())
        for seed in range(4):
            training_step(batch(seed))
    training_step = counting_step_for(make_model())
    with pytest.raises(cstorch.GraphChangedError):
        for seed in range(4):
            training_step(batch(seed))


def test_graph_check_steps_is_a_setter_too():
    previous = cstorch.graph_check_steps(0)
    try:
        training_step = counting_step_for(make_model())
        for seed in range(4):
            training_step(batch(seed))
    finally:
        previous.__exit__(None, None, None)
    assert repr(cstorch.graph_check_steps(3)) == "cstorch.graph_check_steps(3)"


def test_strict_mode_off_turns_the_graph_check_off():
    training_step = counting_step_for(make_model())
    with cstorch.strict(False):
        for seed in range(4):
            training_step(batch(seed))


@pytest.mark.parametrize("steps", [1, -1, 2.5, True])
def test_graph_check_steps_takes_zero_or_at_least_two(steps):
    with pytest.raises(ValueError, match=r"0 \(off\) or a number of steps >= 2"):
        cstorch.graph_check_steps(steps)


def test_each_data_executor_run_is_checked_from_its_first_step(cpu_backend):
    @cstorch.trace
    def eval_step(inputs):
        return inputs.sum(dim=1).mean()

    # Two runs of 2 steps with different batch sizes: each run compiles its own graph,
    # so the third call (the second run's first) is not compared with the second.
    for size in (4, 6):
        loader = cstorch.utils.data.DataLoader(lambda n: [batch(seed, n) for seed in range(2)], size)
        for inputs in cstorch.utils.data.DataExecutor(loader):
            eval_step(inputs)
    # Outside a run the calls are compared again from the first.
    eval_step(batch(0, 5))
    with pytest.raises(cstorch.GraphChangedError, match=r"step 2: aten.sum.dim_IntList\(input\[0\]: float32\[7, 3\]"):
        eval_step(batch(0, 7))


def test_batches_from_a_data_executor_keep_a_static_graph(cpu_backend):
    model = make_model()
    training_step = compliant_step_for(model, CompliantAdam(model.parameters(), lr=0.01))
    loader = cstorch.utils.data.DataLoader(lambda: [batch(seed) for seed in range(2)])
    for inputs in cstorch.utils.data.DataExecutor(loader, num_steps=5):
        training_step(inputs)


def test_a_scheduler_passed_to_the_step_with_its_optimizer_keeps_a_static_graph():
    model = make_model()
    optimizer = CompliantAdam(model.parameters(), lr=0.01)
    scheduler = StraightLineLR(optimizer, start=0.01, end=0.001, total_iters=10)

    @cstorch.trace
    def training_step(inputs, optimizer, scheduler):
        optimizer.zero_grad()
        model(inputs).pow(2).mean().backward()
        optimizer.step()
        scheduler.step()

    for seed in range(4):
        training_step(batch(seed), optimizer, scheduler)


def test_a_step_that_uses_a_global_optimizer_with_a_scheduler_keeps_a_static_graph():
    model = make_model()
    optimizer = CompliantAdam(model.parameters(), lr=0.01)
    scheduler = StraightLineLR(optimizer, start=0.01, end=0.001, total_iters=10)

    @cstorch.trace
    def training_step(inputs):
        optimizer.zero_grad()
        model(inputs).pow(2).mean().backward()
        optimizer.step()
        scheduler.step()

    for seed in range(4):
        training_step(batch(seed))


# -- step closures --------------------------------------------------------------------


def test_step_closures_run_after_the_traced_step_in_call_order_with_real_values(capsys):
    events = []

    @cstorch.step_closure
    def log(name, value):
        events.append((name, value.item()))
        print(f"{name}={value.item():.1f}")

    @cstorch.trace
    def training_step(inputs):
        total = inputs.sum()
        log("first", total)
        events.append("step body ends")
        log("second", total * 2)
        total.add_(100.0)  # an in-place change after the call is not seen by the closure
        return total

    training_step(torch.ones(2, 3))
    assert events == ["step body ends", ("first", 6.0), ("second", 12.0)]
    assert capsys.readouterr().out == "first=6.0\nsecond=12.0\n"


def test_a_closure_called_outside_a_traced_step_runs_at_once():
    seen = []
    cstorch.step_closure(lambda value: seen.append(value.item()))(torch.tensor(2.0))
    assert seen == [2.0]


def test_a_traced_step_that_raises_runs_none_of_its_closures():
    seen = []
    log = cstorch.step_closure(lambda value: seen.append(value.item()))

    @cstorch.trace
    def failing_step(inputs):
        log(inputs.sum())
        raise KeyError("a bug in the step")

    with pytest.raises(KeyError):
        failing_step(torch.ones(2))
    assert seen == []
    cstorch.step_closure(lambda: seen.append("later"))()
    assert seen == ["later"]  # nothing stale was left in the queue


def test_closures_of_a_nested_traced_call_run_when_the_outer_step_returns():
    events = []
    log = cstorch.step_closure(events.append)

    @cstorch.trace
    def inner(inputs):
        log("inner")
        return inputs * 2

    @cstorch.trace
    def outer(inputs):
        inner(inputs)
        events.append("outer body ends")
        log("outer")

    outer(torch.ones(2))
    assert events == ["outer body ends", "inner", "outer"]
