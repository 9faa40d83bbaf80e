"""RMSprop."""

from __future__ import annotations

import torch

from cslint.cstorch.creation_ops import zeros_like
from cslint.cstorch.optim._checks import non_negative
from cslint.cstorch.optim._foreach import add_scaled_, device_groups, gradients
from cslint.cstorch.optim.optimizer import Optimizer

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop (Hinton), as torch.optim.RMSprop computes it.

    With `g` the gradient plus `weight_decay * p`:

        s <- alpha * s + (1 - alpha) * g^2                  (state "square_avg")
        a <- alpha * a + (1 - alpha) * g                    (state "grad_avg", centered)
        d  = sqrt(s - a^2) + eps if centered, else sqrt(s) + eps
        b <- momentum * b + g / d;  p <- p - lr * b         (state "momentum_buffer")
        p <- p - lr * g / d                                 (without momentum)

    Args:
        params: parameters or param-group dicts.
        lr: learning rate.
        alpha: decay rate of the running averages.
        eps: added to the denominator.
        weight_decay: L2 penalty added to the gradient.
        momentum: momentum factor; > 0 creates "momentum_buffer".
        centered: normalize by the estimated variance of the gradient.

    Same defaults and numbers as torch.optim.RMSprop; as production, no
    `maximize`, `foreach`, `capturable`, `differentiable` arguments.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
    ) -> None:
        non_negative(lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay,
                     alpha=alpha)
        defaults = dict(
            lr=lr,
            momentum=momentum,
            alpha=alpha,
            eps=eps,
            centered=centered,
            weight_decay=weight_decay,
        )
        super().__init__(params, defaults)

    def preinitialize(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["square_avg"] = zeros_like(p)
                if group["momentum"] > 0:
                    self.state[p]["momentum_buffer"] = zeros_like(p)
                if group["centered"]:
                    self.state[p]["grad_avg"] = zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            alpha, momentum = group["alpha"], group["momentum"]
            for params, grads in device_groups(group):
                states = [self.state[p] for p in params]
                grads = gradients(params, grads, weight_decay=group["weight_decay"])
                square_avgs = [state["square_avg"] for state in states]
                torch._foreach_mul_(square_avgs, alpha)
                torch._foreach_addcmul_(square_avgs, grads, grads, value=1.0 - alpha)
                if group["centered"]:
                    grad_avgs = [state["grad_avg"] for state in states]
                    torch._foreach_lerp_(grad_avgs, grads, 1.0 - alpha)
                    denominators = torch._foreach_addcmul(square_avgs, grad_avgs, grad_avgs, value=-1.0)
                    torch._foreach_sqrt_(denominators)
                else:
                    denominators = torch._foreach_sqrt(square_avgs)
                torch._foreach_add_(denominators, group["eps"])
                if momentum > 0:
                    buffers = [state["momentum_buffer"] for state in states]
                    torch._foreach_mul_(buffers, momentum)
                    torch._foreach_addcdiv_(buffers, grads, denominators)
                    add_scaled_(params, buffers, -group["lr"])
                else:
                    torch._foreach_addcdiv_(params, torch._foreach_mul(grads, -group["lr"]), denominators)
        return loss
