"""Averaged stochastic gradient descent."""

from __future__ import annotations

import torch

from cslint.cstorch.creation_ops import zeros_like
from cslint.cstorch.optim._checks import non_negative
from cslint.cstorch.optim._foreach import device_groups, gradients, per_parameter
from cslint.cstorch.optim.optimizer import Optimizer

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """ASGD (Polyak and Juditsky, 1992), as torch.optim.ASGD computes it.

    With `g` the gradient (plus `weight_decay * p`, negated for `maximize`)
    and `t` the global step (`state[p]["step"]`, counted from 1):

        p   <- p * (1 - lambd * eta) - eta * g
        ax  <- ax + mu * (p - ax)                    (ax = p while mu is 1)
        eta <- lr / (1 + lambd * lr * t)^alpha
        mu  <- 1 / max(1, t - t0)

    `eta` and `mu` are float32 0-dim state tensors, `ax` the average.

    Args:
        params: parameters or param-group dicts.
        lr: learning rate (eta starts at it).
        lambd: decay term.
        alpha: power of the eta decay.
        t0: step at which averaging starts.
        weight_decay: L2 penalty added to the gradient.
        maximize: maximize the objective instead of minimizing it.

    Same defaults and numbers as torch.optim.ASGD (the average is computed as
    `p + (1 - mu) * (ax - p)`, which is `p` exactly while mu is 1); no
    `foreach`, `capturable`, `differentiable` arguments.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        lambd: float = 1e-4,
        alpha: float = 0.75,
        t0: float = 1e6,
        weight_decay: float = 0,
        maximize: bool = False,
    ) -> None:
        non_negative(lr=lr, weight_decay=weight_decay)
        defaults = dict(
            lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, maximize=maximize
        )
        super().__init__(params, defaults, enable_global_step=True)

    def preinitialize(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                # A copy: the lr may already be a tensor (strict mode).
                state["eta"] = torch.as_tensor(group["lr"], dtype=torch.float32).to(p.device).clone()
                state["mu"] = torch.tensor(1.0, dtype=torch.float32, device=p.device)
                state["ax"] = zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, lambd = group["lr"], group["lambd"]
            for params, grads in device_groups(group):
                states = [self.state[p] for p in params]
                steps = [state["step"] for state in states]
                etas = [state["eta"] for state in states]
                mus = [state["mu"] for state in states]
                averages = [state["ax"] for state in states]
                torch._foreach_add_(steps, 1.0)
                grads = gradients(params, grads, group["maximize"], group["weight_decay"])

                eta = torch.stack(etas)
                mu = torch.stack(mus)
                torch._foreach_mul_(params, per_parameter(1.0 - lambd * eta))
                torch._foreach_add_(params, torch._foreach_mul(grads, per_parameter(-eta)))

                torch._foreach_sub_(averages, params)
                torch._foreach_mul_(averages, per_parameter(1.0 - mu))
                torch._foreach_add_(averages, params)

                step = torch.stack(steps)
                new_eta = lr / torch.pow(1.0 + lambd * lr * step, group["alpha"])
                new_mu = 1.0 / torch.clamp(step - group["t0"], min=1.0)
                torch._foreach_copy_(etas, per_parameter(new_eta))
                torch._foreach_copy_(mus, per_parameter(new_mu))
        return loss
