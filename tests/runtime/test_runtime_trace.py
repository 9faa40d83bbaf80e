"""`cstorch.trace`: traced step functions run under strict mode."""

from __future__ import annotations

import pytest
import torch

import cslint.cstorch as cstorch
from cstorch_helpers import CompliantAdam, assert_compliance_error

HERE = __file__


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 1))


@cstorch.trace
def branch_on_loss(model, batch):
    loss = model(batch).pow(2).mean()
    if loss > 1.0:  # cs201-trace-loss
        loss = loss * 0.5
    return loss


@cstorch.trace
def read_argument(batch):
    return batch.sum().item()  # cs204-trace-argument


@cstorch.trace
def branch_on_buffer(model, batch):
    if model[1].running_var.min() > 0:  # cs201-trace-buffer
        pass
    return model(batch).sum()


def test_trace_flags_host_reads_of_computed_values():
    assert_compliance_error(
        "CS201",
        HERE,
        "cs201-trace-loss",
        lambda: branch_on_loss(make_model(), torch.randn(5, 3)),
        owner="branch_on_loss",
    )


def test_traced_tensor_arguments_are_device_values():
    error = assert_compliance_error(
        "CS204", HERE, "cs204-trace-argument", lambda: read_argument(torch.randn(5, 3))
    )
    assert "an argument of the traced read_argument" in str(error)


def test_module_buffers_are_device_values():
    error = assert_compliance_error(
        "CS201",
        HERE,
        "cs201-trace-buffer",
        lambda: branch_on_buffer(make_model(), torch.randn(5, 3)),
    )
    assert "the module buffer 'running_var'" in str(error)


def test_buffers_of_a_module_that_is_not_an_argument_are_device_values():
    model = make_model()  # registered after cslint.cstorch was imported

    @cstorch.trace
    def uses_global_model(batch):
        return model[1].running_mean.sum().item()

    with pytest.raises(cstorch.TracedValueError, match="running_mean"):
        uses_global_model(torch.randn(5, 3))


@cstorch.step_closure
def record(history, loss):
    history.append(round(loss.item(), 6))


@cstorch.trace
def training_step(model, optimizer, batch, history):
    optimizer.zero_grad()
    loss = model(batch).pow(2).mean()
    loss.backward()
    optimizer.step()
    record(history, loss)
    return loss


def test_compliant_training_step_runs_five_steps():
    model = make_model()
    optimizer = CompliantAdam(model.parameters(), lr=0.01)
    history = []
    for step in range(5):
        loss = training_step(model, optimizer, torch.randn(8, 3, generator=torch.Generator().manual_seed(step)), history)
    assert len(history) == 5
    assert loss.item() == pytest.approx(history[-1], abs=1e-6)  # outside trace: host code


def alpha_lr_step(opt):
    for group in opt.param_groups:
        for p in group["params"]:
            p.add_(p.grad, alpha=-group["lr"])  # cs205-inside-trace


class AlphaLR(CompliantAdam):
    def step(self, closure=None):
        alpha_lr_step(self)


def test_errors_in_an_optimizer_step_inside_a_trace_name_the_optimizer():
    model = make_model()
    optimizer = AlphaLR(model.parameters())

    @cstorch.trace
    def step(batch):
        model(batch).sum().backward()
        optimizer.step()

    assert_compliance_error(
        "CS205", HERE, "cs205-inside-trace", lambda: step(torch.randn(4, 3)), owner="AlphaLR.step"
    )


def test_trace_is_transparent_with_strict_off():
    with cstorch.strict(False):
        assert branch_on_loss(make_model(), torch.randn(5, 3)).dim() == 0
        assert isinstance(read_argument(torch.ones(2, 2)), float)
