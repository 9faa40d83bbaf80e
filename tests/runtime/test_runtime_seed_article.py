"""The optimizers of the seed article (seeds/004_47d7a9d2f38107a7.txt), as the lint fixture
fixtures/optimizer_state/seed_simple_adam.py ports them, run on cslint.cstorch.

The naive port (`SimpleAdam`: the article's code on the cstorch base) creates its state
lazily in step; strict mode raises CS101 at the fixture's marked lines (checked with every
other fixture by test_fixture_twins.py), and with strict mode off it runs as on a GPU. The
compliant port (`SimpleAdamCS`) creates its state in preinitialize and multiplies by the lr
tensor: it runs clean, keeps a static graph and gives the torch original's numbers. The
compliant port of the article's RegularizedSGD (seed_sgd_adaptive_ports.py) follows
torch.optim.SGD.
"""

from __future__ import annotations

import pytest
import torch
from torch.optim import Optimizer as TorchOptimizer

import cslint.cstorch as cstorch
from cstorch_helpers import load_fixture, make_params, set_new_grads

SEED_ADAM = load_fixture("optimizer_state/seed_simple_adam.py")
SEED_SGD = load_fixture("optimizer_state/seed_sgd_adaptive_ports.py")


class TorchSimpleAdam(TorchOptimizer):
    """The article's SimpleAdam, verbatim: the numbers to match."""

    def __init__(self, params, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8):
        defaults = dict(lr=lr, beta1=beta1, beta2=beta2, eps=eps)
        super(TorchSimpleAdam, self).__init__(params, defaults)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()

        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue
                grad = p.grad.data
                state = self.state[p]

                # State initialization
                if len(state) == 0:
                    state['step'] = 0
                    state['m'] = torch.zeros_like(p.data)
                    state['v'] = torch.zeros_like(p.data)

                m, v = state['m'], state['v']
                beta1, beta2, eps, lr = group['beta1'], group['beta2'], group['eps'], group['lr']

                state['step'] += 1

                # Update moments
                m.mul_(beta1).add_(grad, alpha=1-beta1)
                v.mul_(beta2).addcmul_(grad, grad, value=1-beta2)

                # Apply update
                p.data.addcdiv_(m, (v.sqrt()).add_(eps), value=-lr)

        return loss


def test_article_simple_adam_runs_when_strict_is_off():
    with cstorch.strict(False):
        optimizer = SEED_ADAM.SimpleAdam(make_params(), lr=0.01)
        optimizer.step()
    assert all(state["step"] == 1 for state in optimizer.state.values())


def test_compliant_port_runs_clean_and_matches_the_torch_original():
    params = make_params(shapes=((6, 4), (4,), (2, 3, 3)), seed=7)
    reference = [torch.nn.Parameter(p.detach().clone()) for p in params]
    initial = [p.detach().clone() for p in params]
    port = SEED_ADAM.SimpleAdamCS(params, lr=0.01, beta1=0.8, beta2=0.99, eps=1e-8)
    original = TorchSimpleAdam(reference, lr=0.01, beta1=0.8, beta2=0.99, eps=1e-8)
    for step in range(5):
        set_new_grads(params, seed=step)
        set_new_grads(reference, seed=step)
        port.step()
        original.step()
    for p, r, start in zip(params, reference, initial):
        assert not torch.equal(p.detach(), start)
        torch.testing.assert_close(p.detach(), r.detach(), rtol=1e-5, atol=1e-7)


def test_compliant_port_keeps_a_static_graph():
    assert cstorch.check_static_graph(SEED_ADAM.SimpleAdamCS(make_params()), steps=3) is None


@pytest.mark.parametrize("nesterov", [False, True])
def test_regularized_sgd_port_matches_torch_sgd(nesterov):
    # Without dampening a zero-initialised buffer equals torch's first-step copy of the
    # gradient, so the port follows torch.optim.SGD step for step.
    params = make_params(seed=3)
    reference = [torch.nn.Parameter(p.detach().clone()) for p in params]
    settings = dict(lr=0.05, momentum=0.9, dampening=0.0, weight_decay=0.01, nesterov=nesterov)
    port = SEED_SGD.RegularizedSGDCS(params, **settings)
    original = torch.optim.SGD(reference, **settings)
    for step in range(5):
        set_new_grads(params, seed=step)
        set_new_grads(reference, seed=step)
        port.step()
        original.step()
    for p, r in zip(params, reference):
        torch.testing.assert_close(p.detach(), r.detach(), rtol=1e-5, atol=1e-7)
