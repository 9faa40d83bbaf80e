"""Lion: sign of an interpolated momentum (`cstorch.optim.Lion`)."""

from __future__ import annotations

import torch

from cslint.cstorch.creation_ops import zeros_like
from cslint.cstorch.optim._checks import betas_below_one, non_negative
from cslint.cstorch.optim.optimizer import Optimizer

__all__ = ["Lion"]


class Lion(Optimizer):
    """Lion (Chen et al., "Symbolic Discovery of Optimization Algorithms",
    arXiv:2302.06675).

    For each parameter p with gradient g, at every step::

        p <- p * (1 - lr * weight_decay)
        p <- p - lr * sign(beta1 * m + (1 - beta1) * g)
        m <- beta2 * m + (1 - beta2) * g

    Every coordinate moves by exactly lr (or not at all where the
    interpolation is 0), so lr is typically 3-10x smaller than AdamW's and
    weight_decay correspondingly larger. The weight decay is decoupled.

    Args:
        params: parameters or param-group dicts to optimize.
        lr: learning rate (default 1e-4).
        betas: (beta1, beta2): the interpolation weight of the update and the
            decay rate of the momentum (default (0.9, 0.99)).
        weight_decay: decoupled weight decay coefficient (default 0).

    Follows the production release, which follows the paper.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.99),
        weight_decay: float = 0.0,
    ) -> None:
        non_negative(lr=lr)
        betas_below_one(betas)
        non_negative(weight_decay=weight_decay)
        defaults = dict(lr=lr, betas=betas, weight_decay=weight_decay)
        super().__init__(params, defaults)

    def preinitialize(self) -> None:
        """Create the momentum of every parameter, zero-filled."""
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["exp_avg"] = zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        """One Lion step; `closure` re-evaluates the model and returns the loss."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        for group in self.param_groups:
            lr = group["lr"]
            beta1, beta2 = group["betas"]
            weight_decay = group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if grad.is_sparse:
                    raise RuntimeError("Lion does not support sparse gradients")
                exp_avg = self.state[p]["exp_avg"]

                p.mul_(1 - lr * weight_decay)
                direction = exp_avg.mul(beta1).add_(grad, alpha=1 - beta1).sign_()
                p.add_(-lr * direction)
                exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)

        return loss
