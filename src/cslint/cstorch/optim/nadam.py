"""NAdam."""

from __future__ import annotations

import torch

from cslint.cstorch.creation_ops import zeros_like
from cslint.cstorch.optim._checks import betas_below_one, non_negative
from cslint.cstorch.optim._foreach import device_groups, gradients, per_parameter
from cslint.cstorch.optim.optimizer import Optimizer

__all__ = ["NAdam"]


class NAdam(Optimizer):
    """NAdam, Adam with Nesterov momentum (Dozat, 2016).

    With `g` the gradient plus `weight_decay * p` and `t` the global step
    (`state[p]["step"]`, counted from 1):

        mu_t  = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay))
        P     <- P * mu_t                              (state "mu_product")
        m     <- beta1 * m + (1 - beta1) * g            (state "exp_avg")
        v     <- beta2 * v + (1 - beta2) * g^2          (state "exp_avg_sq")
        denom = sqrt(v / (1 - beta2^t)) + eps
        p     <- p - lr * ((1 - mu_t) / (1 - P) * g
                           + mu_{t+1} / (1 - P * mu_t * mu_{t+1}) * m) / denom

    Args:
        params: parameters or param-group dicts.
        lr: learning rate.
        betas: decay rates of the first and second moments.
        eps: added to the denominator.
        weight_decay: L2 penalty added to the gradient.
        momentum_decay: decay of the momentum schedule mu_t.

    Differences from torch.optim.NAdam, following production: the momentum
    term divides by `1 - P * mu_t * mu_{t+1}` where torch uses
    `1 - P * mu_{t+1}` (P already holding mu_t), so the two agree only
    without momentum (beta1 = 0); no `maximize`, `decoupled_weight_decay`,
    `foreach`, `capturable`, `differentiable` arguments.
    """

    def __init__(
        self,
        params,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum_decay: float = 4e-3,
    ) -> None:
        non_negative(lr=lr, eps=eps)
        betas_below_one(betas)
        non_negative(weight_decay=weight_decay, momentum_decay=momentum_decay)
        defaults = dict(
            lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay
        )
        super().__init__(params, defaults, enable_global_step=True)

    def preinitialize(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["mu_product"] = torch.tensor(1.0, dtype=torch.float32, device=p.device)
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            momentum_decay = group["momentum_decay"]
            for params, grads in device_groups(group):
                states = [self.state[p] for p in params]
                steps = [state["step"] for state in states]
                mu_products = [state["mu_product"] for state in states]
                exp_avgs = [state["exp_avg"] for state in states]
                exp_avg_sqs = [state["exp_avg_sq"] for state in states]
                torch._foreach_add_(steps, 1.0)
                grads = gradients(params, grads, weight_decay=group["weight_decay"])

                step = torch.stack(steps)
                bias_correction2 = 1.0 - torch.pow(beta2, step)
                mu = beta1 * (1.0 - 0.5 * torch.pow(0.96, step * momentum_decay))
                mu_next = beta1 * (1.0 - 0.5 * torch.pow(0.96, (step + 1.0) * momentum_decay))
                mu_product = torch.stack(mu_products) * mu
                torch._foreach_copy_(mu_products, per_parameter(mu_product))
                mu_product_next = mu_product * mu * mu_next

                torch._foreach_lerp_(exp_avgs, grads, 1.0 - beta1)
                torch._foreach_mul_(exp_avg_sqs, beta2)
                torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1.0 - beta2)
                denominators = torch._foreach_div(exp_avg_sqs, per_parameter(bias_correction2))
                torch._foreach_sqrt_(denominators)
                torch._foreach_add_(denominators, group["eps"])

                lr = group["lr"]
                grad_weights = -lr * (1.0 - mu) / (1.0 - mu_product)
                momentum_weights = -lr * mu_next / (1.0 - mu_product_next)
                numerators = torch._foreach_mul(grads, per_parameter(grad_weights))
                torch._foreach_add_(
                    numerators, torch._foreach_mul(exp_avgs, per_parameter(momentum_weights))
                )
                torch._foreach_addcdiv_(params, numerators, denominators)
        return loss
