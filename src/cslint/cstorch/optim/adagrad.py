"""Adagrad."""

from __future__ import annotations

import torch

from cslint.cstorch.creation_ops import full_like
from cslint.cstorch.optim._checks import non_negative
from cslint.cstorch.optim._foreach import device_groups, gradients, is_zero, per_parameter
from cslint.cstorch.optim.optimizer import Optimizer

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad (Duchi et al., 2011).

    With `g` the gradient (plus `weight_decay * p`, negated for `maximize`)
    and `t` the global step (`state[p]["step"]`, counted from 1):

        s <- s + g^2                                      (state "sum")
        p <- p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)

    Args:
        params: parameters or param-group dicts.
        lr: learning rate.
        lr_decay: decay of the learning rate with the step.
        weight_decay: L2 penalty added to the gradient.
        initial_accumulator_value: starting value of "sum".
        eps: added to `sqrt(s)`; 1e-6 by default as production (torch: 1e-10).
        maximize: maximize the objective instead of minimizing it.

    Otherwise the numbers of torch.optim.Adagrad; no `foreach`, `fused`,
    `differentiable` arguments.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        lr_decay: float = 0,
        weight_decay: float = 0,
        initial_accumulator_value: float = 0,
        eps: float = 1e-6,
        maximize: bool = False,
    ) -> None:
        non_negative(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                     initial_accumulator_value=initial_accumulator_value, eps=eps)
        defaults = dict(
            lr=lr,
            lr_decay=lr_decay,
            eps=eps,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            maximize=maximize,
        )
        super().__init__(params, defaults, enable_global_step=True)

    def preinitialize(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["sum"] = full_like(p, group["initial_accumulator_value"])

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr_decay = group["lr_decay"]
            for params, grads in device_groups(group):
                steps = [self.state[p]["step"] for p in params]
                torch._foreach_add_(steps, 1.0)
                grads = gradients(params, grads, group["maximize"], group["weight_decay"])
                sums = [self.state[p]["sum"] for p in params]
                torch._foreach_addcmul_(sums, grads, grads, value=1.0)
                stds = torch._foreach_sqrt(sums)
                torch._foreach_add_(stds, group["eps"])
                if is_zero(lr_decay):
                    step_sizes = -group["lr"]
                else:
                    decayed = group["lr"] / (1.0 + (torch.stack(steps) - 1.0) * lr_decay)
                    step_sizes = per_parameter(-decayed)
                torch._foreach_addcdiv_(params, torch._foreach_mul(grads, step_sizes), stds)
        return loss
