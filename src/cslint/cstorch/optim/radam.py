"""RAdam."""

from __future__ import annotations

import torch

from cslint.cstorch.creation_ops import zeros_like
from cslint.cstorch.optim._checks import betas_below_one, non_negative
from cslint.cstorch.optim._foreach import device_groups, gradients, per_parameter
from cslint.cstorch.optim.optimizer import Optimizer

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """RAdam, Adam with a rectified adaptive learning rate (Liu et al., 2019).

    With `g` the gradient plus `weight_decay * p` and `t` the global step
    (`state[p]["step"]`, counted from 1): m and v as in Adam, then

        rho_inf = 2 / (1 - beta2) - 1
        rho_t   = rho_inf - 2 t beta2^t / (1 - beta2^t)
        r       = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
        p <- p - lr * m / (1 - beta1^t) * r * sqrt(1 - beta2^t) / (sqrt(v) + eps)   if rho_t > 5
        p <- p - lr * m / (1 - beta1^t)                                           otherwise

    The choice is made per parameter on the device (no Python branch).

    Args:
        params: parameters or param-group dicts.
        lr: learning rate.
        betas: decay rates of the first and second moments.
        eps: 1e-6 by default as production (torch: 1e-8).
        weight_decay: L2 penalty added to the gradient.

    Otherwise the numbers of torch.optim.RAdam; no `maximize`,
    `decoupled_weight_decay`, `foreach`, `capturable`, `differentiable`
    arguments.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
    ) -> None:
        non_negative(lr=lr)
        betas_below_one(betas)
        non_negative(weight_decay=weight_decay, eps=eps)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults, enable_global_step=True)

    def preinitialize(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["exp_avg"] = zeros_like(p)
                self.state[p]["exp_avg_sq"] = zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            rho_inf = 2.0 / (1.0 - beta2) - 1.0
            for params, grads in device_groups(group):
                states = [self.state[p] for p in params]
                steps = [state["step"] for state in states]
                exp_avgs = [state["exp_avg"] for state in states]
                exp_avg_sqs = [state["exp_avg_sq"] for state in states]
                torch._foreach_add_(steps, 1.0)
                grads = gradients(params, grads, weight_decay=group["weight_decay"])
                torch._foreach_lerp_(exp_avgs, grads, 1.0 - beta1)
                torch._foreach_mul_(exp_avg_sqs, beta2)
                torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1.0 - beta2)

                step = torch.stack(steps)
                beta2_power = torch.pow(beta2, step)
                bias_correction1 = 1.0 - torch.pow(beta1, step)
                bias_correction2 = 1.0 - beta2_power
                rho_t = rho_inf - 2.0 * step * beta2_power / bias_correction2
                # 1.0 where rectified, 0.0 where not; the clamp keeps the
                # unused square root finite.
                rectified = (rho_t > 5.0).to(step.dtype)
                rho_safe = torch.clamp(rho_t, min=5.0)
                rectification = torch.sqrt(
                    (rho_safe - 4.0) * (rho_safe - 2.0) * rho_inf
                    / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_safe)
                )
                # r * sqrt(bc2) where rectified, 1 elsewhere; x * 1 + 0 and
                # x * 0 + 1 are exact, so each case keeps its own rounding.
                adaptive_scale = rectification * torch.sqrt(bias_correction2) * rectified + (1.0 - rectified)
                step_sizes = -group["lr"] * adaptive_scale / bias_correction1

                denominators = torch._foreach_sqrt(exp_avg_sqs)
                torch._foreach_add_(denominators, group["eps"])
                torch._foreach_mul_(denominators, per_parameter(rectified))
                torch._foreach_add_(denominators, per_parameter(1.0 - rectified))
                numerators = torch._foreach_mul(exp_avgs, per_parameter(step_sizes))
                torch._foreach_addcdiv_(params, numerators, denominators)
        return loss
