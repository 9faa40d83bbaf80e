"""Backward passes in a traced step: Python that runs during backward (a custom
autograd.Function, a tensor hook, a module's backward hook) is checked like the
forward; a graph of torch's own ops is not watched op by op (its derivatives come
from ops the guard already checked forward)."""

from __future__ import annotations

import pytest
import torch

import cslint.cstorch as cstorch


class ScaledByWeight(torch.autograd.Function):
    """Its backward reads a device value as a Python number."""

    @staticmethod
    def forward(ctx, inputs, weight):
        ctx.save_for_backward(weight)
        return inputs * 2

    @staticmethod
    def backward(ctx, grad):
        (weight,) = ctx.saved_tensors
        scale = float(weight.abs().max())  # host read in backward
        return grad * scale, None


class Doubled(torch.autograd.Function):
    """A compliant custom Function: tensor ops only."""

    @staticmethod
    def forward(ctx, inputs, weight):
        ctx.save_for_backward(weight)
        return inputs * 2

    @staticmethod
    def backward(ctx, grad):
        (weight,) = ctx.saved_tensors
        return grad * weight.abs().max(), None


def model_and_batch():
    torch.manual_seed(0)
    return torch.nn.Linear(3, 1), torch.randn(4, 3)


def run_step(step, model, batch, steps=2):
    for _ in range(steps):
        step(model, batch)
        model.zero_grad()


def test_a_custom_function_reading_a_device_value_in_backward_is_a_host_read():
    model, batch = model_and_batch()

    @cstorch.trace
    def step(model, batch):
        ScaledByWeight.apply(model(batch), model.weight).sum().backward()

    with pytest.raises(cstorch.ComplianceError, match="^CS204"):
        run_step(step, model, batch)


def test_a_hook_registered_in_the_step_is_checked_in_backward():
    model, batch = model_and_batch()

    @cstorch.trace
    def step(model, batch):
        outputs = model(batch)
        outputs.register_hook(lambda grad: grad * float(model.bias.sum()))
        outputs.sum().backward()

    with pytest.raises(cstorch.ComplianceError, match="^CS204"):
        run_step(step, model, batch)


def test_a_parameter_hook_registered_before_training_is_checked_in_backward():
    model, batch = model_and_batch()
    model.weight.register_hook(lambda grad: grad * float(model.bias.sum()))

    @cstorch.trace
    def step(model, batch):
        model(batch).sum().backward()

    with pytest.raises(cstorch.ComplianceError, match="^CS204"):
        run_step(step, model, batch)


def test_a_module_backward_hook_is_checked_in_backward():
    model, batch = model_and_batch()
    model.register_full_backward_hook(
        lambda module, grad_inputs, grad_outputs: print(module.weight.sum().item()))

    @cstorch.trace
    def step(model, batch):
        model(batch).sum().backward()

    with pytest.raises(cstorch.ComplianceError, match="^CS204"):
        run_step(step, model, batch)


@pytest.mark.parametrize("custom", [False, True])
def test_a_compliant_backward_runs_and_gives_torch_gradients(custom):
    model, batch = model_and_batch()
    reference, _ = model_and_batch()

    def loss_of(model):
        outputs = model(batch)
        if custom:
            outputs = Doubled.apply(outputs, model.weight)
        return outputs.pow(2).mean()

    @cstorch.trace
    def step(model, batch):
        loss_of(model).backward()

    step(model, batch)
    with cstorch.strict(False):
        loss_of(reference).backward()
    for ours, theirs in zip(model.parameters(), reference.parameters()):
        assert torch.equal(ours.grad, theirs.grad)
