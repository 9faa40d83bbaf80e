"""Adamax."""

from __future__ import annotations

import torch

from cslint.cstorch.creation_ops import zeros_like
from cslint.cstorch.optim._checks import betas_below_one, non_negative
from cslint.cstorch.optim._foreach import device_groups, gradients, per_parameter
from cslint.cstorch.optim.optimizer import Optimizer

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """Adamax, the infinity-norm variant of Adam (Kingma and Ba, 2015).

    With `g` the gradient (plus `weight_decay * p`, negated for `maximize`):

        m <- beta1 * m + (1 - beta1) * g                (state "exp_avg")
        u <- max(beta2 * u, |g| + eps)                  (state "exp_inf")
        p <- p - lr / (1 - beta1^t) * m / u

    `beta1^t` is the float32 state tensor "beta1_power", multiplied by beta1
    after each step.

    Args:
        params: parameters or param-group dicts.
        lr: learning rate.
        betas: decay rates of the first moment and of the norm.
        eps: 1e-6 by default as production (torch: 1e-8).
        weight_decay: L2 penalty added to the gradient.
        maximize: maximize the objective instead of minimizing it.

    Otherwise the numbers of torch.optim.Adamax; no `foreach`, `capturable`,
    `differentiable` arguments.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        maximize: bool = False,
    ) -> None:
        non_negative(lr=lr)
        betas_below_one(betas)
        non_negative(eps=eps)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def preinitialize(self) -> None:
        for group in self.param_groups:
            beta1, _ = group["betas"]
            for p in group["params"]:
                state = self.state[p]
                state["exp_avg"] = zeros_like(p)
                state["exp_inf"] = zeros_like(p)
                # The power the first step uses: beta1^1.
                state["beta1_power"] = torch.tensor(beta1, dtype=torch.float32, device=p.device)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for params, grads in device_groups(group):
                states = [self.state[p] for p in params]
                grads = gradients(params, grads, group["maximize"], group["weight_decay"])
                exp_avgs = [state["exp_avg"] for state in states]
                exp_infs = [state["exp_inf"] for state in states]
                beta1_powers = [state["beta1_power"] for state in states]
                torch._foreach_lerp_(exp_avgs, grads, 1.0 - beta1)
                torch._foreach_mul_(exp_infs, beta2)
                norms = torch._foreach_abs(grads)
                torch._foreach_add_(norms, group["eps"])
                torch._foreach_maximum_(exp_infs, norms)
                step_sizes = group["lr"] / (1.0 - torch.stack(beta1_powers))
                updates = torch._foreach_mul(exp_avgs, per_parameter(step_sizes))
                torch._foreach_div_(updates, exp_infs)
                torch._foreach_sub_(params, updates)
                torch._foreach_mul_(beta1_powers, beta1)
        return loss
