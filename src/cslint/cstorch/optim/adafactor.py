"""Adafactor with factored second moments (`cstorch.optim.Adafactor`)."""

from __future__ import annotations

import torch

from cslint.cstorch.creation_ops import zeros_like
from cslint.cstorch.optim.optimizer import Optimizer

__all__ = ["Adafactor"]


def _rms(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.square().mean().sqrt()


class Adafactor(Optimizer):
    """Adafactor (Shazeer & Stern, "Adafactor: Adaptive Learning Rates with
    Sublinear Memory Cost", arXiv:1804.04235), in the subset the production
    release supports: an explicit lr, update clipping at 1, no first moment.

    For each parameter p with gradient g, at global step t (1, 2, ...)::

        alpha = lr * max(rms(p), eps[1])  if scale_parameter  else lr
        beta2 = 1 - t ** decay_rate
        s     = g * g + eps[0]
        p of 2 or more dims (factored over its last two):
            R <- beta2 * R + (1 - beta2) * mean(s, last dim)
            C <- beta2 * C + (1 - beta2) * mean(s, next-to-last dim)
            u  = g * rsqrt(R / mean(R, last dim)) [outer] rsqrt(C)
        p of 0 or 1 dims:
            V <- beta2 * V + (1 - beta2) * s
            u  = g * rsqrt(V)
        u  = alpha * u / max(rms(u) / clip_threshold, 1)
        p <- p - weight_decay * alpha * p - u

    where rms(x) = sqrt(mean(x * x)). The step count t is the global step
    (`enable_global_step=True`: `state[p]["step"]`, float32, as on the system).

    Args:
        params: parameters or param-group dicts to optimize.
        lr: the (relative) learning rate; required. None is accepted if a
            learning-rate scheduler writes the lr before the first step.
        eps: (eps added to g * g, lower bound of the parameter scale); a
            tuple or list of two floats (default (1e-30, 1e-3)).
        clip_threshold: update clipping threshold; only 1.0 is supported.
        decay_rate: exponent of the second-moment decay schedule (default -0.8).
        beta1: first-moment decay rate; only None (no first moment) is supported.
        weight_decay: decoupled weight decay, scaled by alpha (default 0).
        scale_parameter: scale lr by the parameter's RMS (default True).
        relative_step: not supported (True raises ValueError).
        warmup_init: not supported (True raises ValueError).

    Follows the production release, including what it rejects:
    `relative_step=True`, `warmup_init=True`, `clip_threshold != 1.0`,
    `beta1 is not None` and an `eps` that is not two floats all raise
    ValueError at construction. Departs from it only in where the factored
    statistics live: production creates R and C as float32 tensors on the
    default device; here they take the parameter's dtype and device, like
    every other state tensor (identical for float32 parameters).
    """

    def __init__(
        self,
        params,
        lr: float | None,
        eps: tuple[float, float] = (1e-30, 1e-3),
        clip_threshold: float = 1.0,
        decay_rate: float = -0.8,
        beta1: float | None = None,
        weight_decay: float = 0.0,
        scale_parameter: bool = True,
        relative_step: bool = False,
        warmup_init: bool = False,
    ) -> None:
        if relative_step and lr is not None:
            raise ValueError(
                "Adafactor: a manual lr cannot be combined with relative_step=True "
                "(and relative_step=True is not supported): pass lr with relative_step=False"
            )
        if relative_step:
            raise ValueError(
                "Adafactor: relative_step=True is not supported: pass an lr "
                "(or drive it with a learning-rate scheduler) and relative_step=False"
            )
        if warmup_init:
            raise ValueError(
                "Adafactor: warmup_init=True is not supported (it needs "
                "relative_step=True, which is not supported either)"
            )
        if clip_threshold != 1.0:
            raise ValueError(
                f"Adafactor: only clip_threshold=1.0 is supported, got {clip_threshold}"
            )
        if beta1 is not None:
            raise ValueError(
                f"Adafactor: only beta1=None (no first moment) is supported, got {beta1}"
            )
        if (
            not isinstance(eps, (tuple, list))
            or len(eps) != 2
            or not all(isinstance(value, float) for value in eps)
        ):
            raise ValueError(
                f"Adafactor: eps must be a tuple or list of two floats, got {eps!r}"
            )
        defaults = dict(
            lr=lr,
            eps=eps,
            clip_threshold=clip_threshold,
            decay_rate=decay_rate,
            beta1=beta1,
            weight_decay=weight_decay,
            scale_parameter=scale_parameter,
            relative_step=relative_step,
            warmup_init=warmup_init,
        )
        super().__init__(params, defaults, enable_global_step=True)

    def preinitialize(self) -> None:
        """Create the second-moment statistics: row and column averages for
        parameters of 2 or more dimensions, a full tensor for the others."""
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if p.dim() >= 2:
                    # Shapes p.shape[:-1] and p.shape[:-2] + p.shape[-1:].
                    state["exp_avg_sq_row"] = zeros_like(p[..., 0])
                    state["exp_avg_sq_col"] = zeros_like(p[..., 0, :])
                else:
                    state["exp_avg_sq"] = zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        """One Adafactor step; `closure` re-evaluates the model and returns the loss."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        for index, group in enumerate(self.param_groups):
            if group["lr"] is None:
                raise ValueError(
                    f"Adafactor: param group {index} has no lr: pass lr to the "
                    "constructor or attach a learning-rate scheduler"
                )
            small_eps, scale_eps = group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if grad.is_sparse:
                    raise RuntimeError("Adafactor does not support sparse gradients")
                state = self.state[p]

                step = self.increment_global_step(p)
                lr = group["lr"]
                if group["scale_parameter"]:
                    lr = _rms(p).clamp(min=scale_eps) * lr
                beta2 = 1.0 - step.pow(group["decay_rate"])

                squared = grad.square().add_(small_eps)
                if p.dim() >= 2:
                    row, col = state["exp_avg_sq_row"], state["exp_avg_sq_col"]
                    row.mul_(beta2).add_((1.0 - beta2) * squared.mean(dim=-1))
                    col.mul_(beta2).add_((1.0 - beta2) * squared.mean(dim=-2))
                    row_factor = (row / row.mean(dim=-1, keepdim=True)).rsqrt_().unsqueeze(-1)
                    col_factor = col.rsqrt().unsqueeze(-2)
                    update = grad * row_factor * col_factor
                else:
                    exp_avg_sq = state["exp_avg_sq"]
                    exp_avg_sq.mul_(beta2).add_((1.0 - beta2) * squared)
                    update = grad * exp_avg_sq.rsqrt()

                update.div_((_rms(update) / group["clip_threshold"]).clamp(min=1.0))
                update.mul_(lr)

                p.sub_(p * (group["weight_decay"] * lr))
                p.sub_(update)

        return loss
