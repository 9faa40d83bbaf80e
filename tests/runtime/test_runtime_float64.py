"""CS403 at run time: a float64 tensor made inside a traced step.

The system runs mixed precision only. A float64 tensor that an optimizer step,
a scheduler closed form, a `@cstorch.trace` function or a module forward it
reaches makes raises CS403 in strict mode; float64 data that arrive from
outside (a batch, float64 parameters) are the user's and are not flagged.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import cslint.cstorch as cstorch
from cstorch_helpers import (
    BodyOptimizer,
    CompliantSGD,
    assert_compliance_error,
    make_params,
    run_steps,
)

HERE = __file__


def double_of_grad(opt, group, p, state):
    scaled = p.grad.double()  # f64-double
    del scaled


def float64_factory(opt, group, p, state):
    table = torch.zeros(3, dtype=torch.float64)  # f64-factory
    del table


def to_float64(opt, group, p, state):
    scaled = p.grad.to(torch.float64)  # f64-to
    del scaled


def numpy_table(opt, group, p, state):
    table = torch.as_tensor(np.linspace(0.0, 1.0, 4))  # f64-numpy
    del table


def float32_look_alike(opt, group, p, state):
    table = torch.zeros(3, dtype=torch.float32) + torch.from_numpy(np.ones(3, np.float32))
    p.sub_(group["lr"] * p.grad.float() * table.sum())


VIOLATIONS = [
    (double_of_grad, "f64-double"),
    (float64_factory, "f64-factory"),
    (to_float64, "f64-to"),
    (numpy_table, "f64-numpy"),
]


@pytest.mark.parametrize("body, marker", VIOLATIONS, ids=[m for _, m in VIOLATIONS])
def test_a_float64_tensor_made_in_a_step_raises_cs403_at_its_line(body, marker):
    optimizer = BodyOptimizer(make_params(), body)
    error = assert_compliance_error(
        "CS403", HERE, marker, optimizer.step, owner="BodyOptimizer.step"
    )
    assert "float32" in error.fix
    assert "float64" in error.problem


@pytest.mark.parametrize("body, marker", VIOLATIONS, ids=[m for _, m in VIOLATIONS])
def test_float64_in_a_step_runs_with_strict_off(body, marker):
    optimizer = BodyOptimizer(make_params(), body)
    with cstorch.strict(False):
        run_steps(optimizer, steps=2)


def test_float32_look_alike_runs_clean():
    run_steps(BodyOptimizer(make_params(), float32_look_alike), steps=3)


class Float64Forward(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.linear(x).to(torch.float64)  # f64-forward


def test_a_float64_cast_in_a_forward_reached_from_a_traced_step_raises():
    model = Float64Forward()

    @cstorch.trace
    def train_step(batch):
        return model(batch).sum()

    assert_compliance_error(
        "CS403", HERE, "f64-forward", lambda: train_step(torch.ones(3, 4)), owner="train_step"
    )


def test_float64_outside_traced_code_and_in_step_closures_is_fine():
    host_table = torch.linspace(0, 1, 5, dtype=torch.float64)  # the host's business
    logged = []

    @cstorch.step_closure
    def log(loss):
        logged.append(loss.double().item())

    @cstorch.trace
    def train_step(batch):
        loss = (batch * 2).sum()
        log(loss)
        return loss

    train_step(torch.ones(3))
    assert logged == [6.0]
    assert host_table.dtype is torch.float64


def test_float64_data_from_outside_are_the_users_and_are_not_flagged():
    @cstorch.trace
    def eval_step(batch):
        return (batch * 2 + 1).mean()

    assert eval_step(torch.ones(3, dtype=torch.float64)).dtype is torch.float64


def test_a_step_over_float64_parameters_may_follow_their_dtype():
    params = [torch.nn.Parameter(torch.ones(3, dtype=torch.float64))]
    params[0].grad = torch.ones(3, dtype=torch.float64)

    def follow_dtype(opt, group, p, state):
        update = p.grad.float().to(p.dtype)
        p.sub_(group["lr"] * update)

    optimizer = BodyOptimizer(params, follow_dtype)
    optimizer.step()
    optimizer.step()
    assert params[0].dtype is torch.float64


class Float64ClosedFormLR(cstorch.optim.lr_scheduler.LRScheduler):
    def __init__(self, optimizer):
        super().__init__(optimizer, total_iters=10)

    def _get_closed_form_lr(self):
        return torch.tensor(0.1, dtype=torch.float64) * (self.last_epoch + 1)  # f64-closed-form


def test_a_float64_closed_form_raises():
    optimizer = CompliantSGD(make_params())
    assert_compliance_error(
        "CS403",
        HERE,
        "f64-closed-form",
        lambda: Float64ClosedFormLR(optimizer),
        owner="Float64ClosedFormLR._get_closed_form_lr",
    )
