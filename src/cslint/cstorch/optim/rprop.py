"""Rprop."""

from __future__ import annotations

import torch

from cslint.cstorch.creation_ops import ones_like, zeros_like
from cslint.cstorch.optim._checks import non_negative
from cslint.cstorch.optim._foreach import device_groups
from cslint.cstorch.optim.optimizer import Optimizer

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """Rprop, resilient backpropagation (Riedmiller and Braun, 1993).

    Per element, with `s = sign(g * g_prev)`:

        step_size <- clamp(step_size * (etaplus if s > 0, etaminus if s < 0, else 1),
                           step_size_min, step_size_max)      (state "step_size")
        g         <- 0 where the factor was etaminus          (a sign change)
        p         <- p - sign(g) * step_size
        g_prev    <- g                                        (state "prev")

    "step_size" starts at lr; a scheduled lr does not change it afterwards
    (as in torch).

    Args:
        params: parameters or param-group dicts.
        lr: initial step size.
        etas: (etaminus, etaplus), the factors on a sign change and on none.
        step_sizes: (minimum, maximum) step size.

    Same defaults and numbers as torch.optim.Rprop; as production, no
    `maximize`, `foreach`, `capturable`, `differentiable` arguments. Unlike
    production, `p.grad` is left as it is (production zeroes its entries at
    sign changes in place).
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        etas: tuple[float, float] = (0.5, 1.2),
        step_sizes: tuple[float, float] = (1e-6, 50.0),
    ) -> None:
        non_negative(lr=lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes)
        super().__init__(params, defaults)

    def preinitialize(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["prev"] = zeros_like(p)
                # lr * 1 rather than a fill value: the lr may already be a tensor.
                self.state[p]["step_size"] = ones_like(p).mul_(group["lr"])

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            etaminus, etaplus = group["etas"]
            step_size_min, step_size_max = group["step_sizes"]
            for params, grads in device_groups(group):
                for p, gradient in zip(params, grads):
                    state = self.state[p]
                    previous, step_size = state["prev"], state["step_size"]
                    sign = (gradient * previous).sign()
                    factor = torch.where(
                        sign > 0, etaplus, torch.where(sign < 0, etaminus, torch.ones_like(sign))
                    )
                    step_size.mul_(factor).clamp_(step_size_min, step_size_max)
                    kept = torch.where(factor == etaminus, 0.0, gradient)
                    p.addcmul_(kept.sign(), step_size, value=-1.0)
                    previous.copy_(kept)
        return loss
