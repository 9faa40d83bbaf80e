"""Adadelta."""

from __future__ import annotations

import torch

from cslint.cstorch.creation_ops import zeros_like
from cslint.cstorch.optim._checks import non_negative
from cslint.cstorch.optim._foreach import add_scaled_, device_groups, gradients
from cslint.cstorch.optim.optimizer import Optimizer

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """Adadelta (Zeiler, 2012), as torch.optim.Adadelta computes it.

    With `g` the gradient (plus `weight_decay * p`, negated for `maximize`):

        s <- rho * s + (1 - rho) * g^2                       (state "square_avg")
        d <- sqrt(a + eps) / sqrt(s + eps) * g
        a <- rho * a + (1 - rho) * d^2                       (state "acc_delta")
        p <- p - lr * d

    Args:
        params: parameters or param-group dicts.
        lr: scale of the delta.
        rho: decay rate of both running averages.
        eps: added inside both square roots.
        weight_decay: L2 penalty added to the gradient.
        maximize: maximize the objective instead of minimizing it.

    Same defaults and numbers as torch.optim.Adadelta; no `foreach`,
    `capturable`, `differentiable` arguments.
    """

    def __init__(
        self,
        params,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0,
        maximize: bool = False,
    ) -> None:
        non_negative(lr=lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        non_negative(eps=eps, weight_decay=weight_decay)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def preinitialize(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["square_avg"] = zeros_like(p)
                self.state[p]["acc_delta"] = zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            rho, eps = group["rho"], group["eps"]
            for params, grads in device_groups(group):
                grads = gradients(params, grads, group["maximize"], group["weight_decay"])
                square_avgs = [self.state[p]["square_avg"] for p in params]
                acc_deltas = [self.state[p]["acc_delta"] for p in params]
                torch._foreach_mul_(square_avgs, rho)
                torch._foreach_addcmul_(square_avgs, grads, grads, value=1.0 - rho)
                stds = torch._foreach_add(square_avgs, eps)
                torch._foreach_sqrt_(stds)
                deltas = torch._foreach_add(acc_deltas, eps)
                torch._foreach_sqrt_(deltas)
                torch._foreach_div_(deltas, stds)
                torch._foreach_mul_(deltas, grads)
                torch._foreach_mul_(acc_deltas, rho)
                torch._foreach_addcmul_(acc_deltas, deltas, deltas, value=1.0 - rho)
                add_scaled_(params, deltas, -group["lr"])
        return loss
