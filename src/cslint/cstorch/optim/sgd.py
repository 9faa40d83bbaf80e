"""Stochastic gradient descent, with momentum and Nesterov momentum."""

from __future__ import annotations

import torch

from cslint.cstorch.creation_ops import zeros_like
from cslint.cstorch.optim._checks import non_negative
from cslint.cstorch.optim._foreach import add_scaled_, device_groups, gradients
from cslint.cstorch.optim.optimizer import Optimizer

__all__ = ["SGD"]


class SGD(Optimizer):
    """SGD: `p <- p - lr * d` where `d` is the gradient `g` (plus
    `weight_decay * p`, negated for `maximize`), or with momentum the buffer
    `b <- momentum * b + (1 - dampening) * g`, and with `nesterov`
    `d = g + momentum * b`.

    Args:
        params: parameters or param-group dicts.
        lr: learning rate (required, as in the production release).
        momentum: momentum factor; nonzero creates `state[p]["momentum_buffer"]`.
        dampening: dampening of the gradient added to the buffer.
        weight_decay: L2 penalty added to the gradient.
        nesterov: Nesterov momentum (needs momentum > 0 and dampening 0).
        maximize: maximize the objective instead of minimizing it.

    Differences from torch.optim.SGD, following production: `lr` has no
    default; the momentum buffer starts at zero and the dampening applies from
    the first step on (torch copies the first gradient into the buffer
    undamped), so the two agree when dampening is 0; no `foreach`, `fused`,
    `differentiable` arguments.
    """

    def __init__(
        self,
        params,
        lr: float,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float = 0,
        nesterov: bool = False,
        maximize: bool = False,
    ) -> None:
        non_negative(lr=lr, momentum=momentum, weight_decay=weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(
                "Nesterov momentum requires a momentum and zero dampening, got "
                f"momentum={momentum} and dampening={dampening}"
            )
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    def preinitialize(self) -> None:
        for group in self.param_groups:
            if group["momentum"] != 0:
                for p in group["params"]:
                    self.state[p]["momentum_buffer"] = zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            momentum = group["momentum"]
            for params, grads in device_groups(group):
                grads = gradients(params, grads, group["maximize"], group["weight_decay"])
                if momentum != 0:
                    buffers = [self.state[p]["momentum_buffer"] for p in params]
                    torch._foreach_mul_(buffers, momentum)
                    torch._foreach_add_(buffers, grads, alpha=1.0 - group["dampening"])
                    if group["nesterov"]:
                        grads = torch._foreach_add(grads, buffers, alpha=momentum)
                    else:
                        grads = buffers
                add_scaled_(params, grads, -group["lr"])
        return loss

