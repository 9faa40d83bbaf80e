"""The optimizers of the seed article (seeds/004_47d7a9d2f38107a7.txt).

SimpleAdam, as written in the article but subclassing cstorch.optim.Optimizer
(with the empty preinitialize the base class requires), creates its state
lazily in step and fails with CS101. Its compliant port creates the state in
preinitialize and multiplies by the lr tensor; it runs clean and gives the
torch original's numbers.
"""

from __future__ import annotations

import torch
from torch.optim import Optimizer as TorchOptimizer

import cslint.cstorch as cstorch
from cstorch_helpers import assert_compliance_error, make_params, set_new_grads

HERE = __file__


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


class SimpleAdam(cstorch.optim.Optimizer):
    """The article's SimpleAdam on the cstorch base: state still made in step."""

    def __init__(self, params, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8):
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if not 0.0 <= eps:
            raise ValueError("Invalid epsilon value: {}".format(eps))
        if not 0.0 <= beta1 < 1.0:
            raise ValueError("Invalid beta1 value: {}".format(beta1))
        if not 0.0 <= beta2 < 1.0:
            raise ValueError("Invalid beta2 value: {}".format(beta2))

        defaults = dict(lr=lr, beta1=beta1, beta2=beta2, eps=eps)
        super(SimpleAdam, self).__init__(params, defaults)

    def preinitialize(self):
        pass  # the article creates its state lazily in step

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
                    state['step'] = 0  # cs101-simple-adam
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


class CompliantSimpleAdam(cstorch.optim.Optimizer):
    """The port: state made in preinitialize, the lr tensor multiplied in.

    The article's `state['step']` counter feeds nothing, so the port drops it
    (kept, it would have to be a 0-dim tensor updated in place).
    """

    def __init__(self, params, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8):
        super().__init__(params, dict(lr=lr, beta1=beta1, beta2=beta2, eps=eps))

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["m"] = cstorch.zeros_like(p)
                self.state[p]["v"] = cstorch.zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2, eps, lr = group["beta1"], group["beta2"], group["eps"], group["lr"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                m, v = self.state[p]["m"], self.state[p]["v"]
                m.mul_(beta1).add_(grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                p.addcdiv_(-lr * m, v.sqrt().add_(eps))
        return loss

    def state_names_to_sparsify(self):
        return ["m", "v"]


class RegularizedSGD(cstorch.optim.Optimizer):
    """The article's RegularizedSGD on the cstorch base (lazy momentum buffer)."""

    def __init__(self, params, lr=0.01, momentum=0, dampening=0, weight_decay=0, nesterov=False):
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, defaults)

    def preinitialize(self):
        pass

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()

        for group in self.param_groups:
            momentum = group['momentum']
            dampening = group['dampening']
            weight_decay = group['weight_decay']
            nesterov = group['nesterov']
            for p in group['params']:
                if p.grad is None:
                    continue
                d_p = p.grad
                if weight_decay != 0:
                    d_p = d_p.add(p, alpha=weight_decay)
                if momentum != 0:
                    param_state = self.state[p]
                    if 'momentum_buffer' not in param_state:
                        buf = param_state['momentum_buffer'] = torch.clone(d_p).detach()  # cs101-regularized-sgd
                    else:
                        buf = param_state['momentum_buffer']
                        buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
                    if nesterov:
                        d_p = d_p.add(buf, alpha=momentum)
                    else:
                        d_p = buf

                p.data.add_(d_p, alpha=-group['lr'])
        return loss


def test_article_simple_adam_fails_with_cs101():
    optimizer = SimpleAdam(make_params(), lr=0.01)
    error = assert_compliance_error(
        "CS101", HERE, "cs101-simple-adam", optimizer.step, owner="SimpleAdam.step"
    )
    assert "adds state entry 'step'" in str(error)


def test_article_regularized_sgd_fails_with_cs101():
    optimizer = RegularizedSGD(make_params(), lr=0.01, momentum=0.9)
    assert_compliance_error(
        "CS101", HERE, "cs101-regularized-sgd", optimizer.step, owner="RegularizedSGD.step"
    )


def test_article_simple_adam_runs_when_strict_is_off():
    with cstorch.strict(False):
        optimizer = SimpleAdam(make_params(), lr=0.01)
        optimizer.step()
    assert all(state["step"] == 1 for state in optimizer.state.values())


def test_compliant_port_runs_clean_and_matches_the_torch_original():
    params = make_params(shapes=((6, 4), (4,), (2, 3, 3)), seed=7)
    reference = [torch.nn.Parameter(p.detach().clone()) for p in params]
    initial = [p.detach().clone() for p in params]
    port = CompliantSimpleAdam(params, lr=0.01, beta1=0.8, beta2=0.99, eps=1e-8)
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
    assert cstorch.check_static_graph(CompliantSimpleAdam(make_params()), steps=3) is None
