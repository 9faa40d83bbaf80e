"""A plain-PyTorch optimizer ported to Cerebras by changing only its base class.

It still creates its state lazily in step() and passes the learning rate as a
Python number: `cslint check examples/simple_adam.py` says what to change.
"""

import torch

import cerebras.pytorch as cstorch


class SimpleAdam(cstorch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8):
        defaults = dict(lr=lr, beta1=beta1, beta2=beta2, eps=eps)
        super().__init__(params, defaults)

    def preinitialize(self):
        pass

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                state = self.state[p]
                if len(state) == 0:
                    state["m"] = torch.zeros_like(p)
                    state["v"] = torch.zeros_like(p)
                m, v = state["m"], state["v"]
                beta1, beta2, eps, lr = group["beta1"], group["beta2"], group["eps"], group["lr"]
                m.mul_(beta1).add_(grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                p.addcdiv_(m, v.sqrt().add_(eps), value=-lr)
        return loss
