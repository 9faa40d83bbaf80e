"""Lamb: Adam moments with a layer-wise trust ratio (`cstorch.optim.Lamb`)."""

from __future__ import annotations

import torch

from cslint.cstorch.creation_ops import zeros_like
from cslint.cstorch.optim._checks import betas_below_one, non_negative
from cslint.cstorch.optim.optimizer import Optimizer

__all__ = ["Lamb"]


class Lamb(Optimizer):
    """Lamb (You et al., "Large Batch Optimization for Deep Learning:
    Training BERT in 76 minutes", arXiv:1904.00962, v3 of the paper).

    For each parameter p with gradient g, at every step::

        m <- beta1 * m + (1 - beta1) * g
        v <- beta2 * v + (1 - beta2) * g * g
        u  = m / (sqrt(v) + eps) + weight_decay * p
        w  = clamp(||p||, 0, 10)        r = ||u||
        trust = w / r if w > 0 and r > 0 else 1      (1 when adam=True)
        p <- p - lr * trust * u

    There is no bias correction (v3 of the paper drops it), and the weight
    decay is an L2 term inside `u`, so it goes through the trust ratio.

    Args:
        params: parameters or param-group dicts to optimize.
        lr: learning rate (default 1e-3).
        betas: decay rates of the first and second moment (default (0.9, 0.999)).
        eps: added to sqrt(v) (default 1e-6).
        weight_decay: L2 coefficient added to the update (default 0).
        adam: use trust ratio 1 always, which makes this Adam without bias
            correction (for comparisons; default False).

    Follows the production release: eps defaults to 1e-6 (its docstring says
    1e-8, its signature 1e-6), the two norms are taken in float32 (so half
    precision parameters get a float32 trust ratio), and the "w > 0 and r > 0"
    choice is a `torch.where`, never a Python branch on a tensor.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0,
        adam: bool = False,
    ) -> None:
        non_negative(lr=lr, eps=eps)
        betas_below_one(betas)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, adam=adam)
        super().__init__(params, defaults)

    def preinitialize(self) -> None:
        """Create the two moments of every parameter, zero-filled."""
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        """One Lamb step; `closure` re-evaluates the model and returns the loss."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        for group in self.param_groups:
            lr = group["lr"]
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if grad.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients")
                state = self.state[p]
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]

                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)

                update = exp_avg / (exp_avg_sq.sqrt() + group["eps"])
                # A tensor product, not alpha=: a weight-decay scheduler may drive it.
                update.add_(group["weight_decay"] * p)

                if not group["adam"]:
                    weight_norm = torch.linalg.vector_norm(p).clamp(0.0, 10.0).float()
                    update_norm = torch.linalg.vector_norm(update).float()
                    both_positive = (weight_norm > 0) & (update_norm > 0)
                    trust_ratio = torch.where(both_positive, weight_norm / update_norm, 1.0)
                    update.mul_(trust_ratio)

                p.sub_(update * lr)

        return loss
