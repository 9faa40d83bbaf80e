"""Muon: momentum orthogonalized by Newton-Schulz (`cstorch.optim.Muon`)."""

from __future__ import annotations

import math

import torch

from cslint.cstorch.creation_ops import zeros_like
from cslint.cstorch.optim._checks import non_negative
from cslint.cstorch.optim.optimizer import Optimizer

__all__ = ["Muon"]

# Coefficients of the quintic Newton-Schulz iteration (Keller Jordan's Muon),
# tuned to push singular values into about [0.7, 1.2] in few steps.
_NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def _orthogonalize(update: torch.Tensor, steps: int) -> torch.Tensor:
    """Approximately U V^T for update = U S V^T (over the last two dims), in bfloat16."""
    a, b, c = _NS_COEFFICIENTS
    x = update.bfloat16()
    # Iterate on the wide orientation: X X^T is then the smaller Gram matrix.
    transposed = x.size(-2) > x.size(-1)
    if transposed:
        x = x.mT
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for _ in range(steps):
        gram = x @ x.mT
        polynomial = b * gram + (c * gram) @ gram
        x = a * x + polynomial @ x
    if transposed:
        x = x.mT
    return x


def _describe_position(group_index: int, param_index: int, name: str | None) -> str:
    named = f" {name!r}" if name is not None else ""
    return f"parameter{named} (index {param_index} of param group {group_index})"


class Muon(Optimizer):
    """Muon (Keller Jordan, https://kellerjordan.github.io/posts/muon/), with
    the lr scaling of Moonshot AI's "Muon is Scalable for LLM Training".

    For each parameter p (2 or more dimensions) with gradient g::

        buf <- momentum * buf + (1 - momentum) * g        (in place, kept)
        u    = g + momentum * buf   if nesterov   else buf
        u    = u viewed as (p.shape[0], -1)    if p has 4 dimensions
        O    = NewtonSchulz(u, ns_steps)                  (in bfloat16)
        lr'  = lr * 0.2 * sqrt(max(p.shape[0], p.shape[1]))
        p   <- p * (1 - lr' * weight_decay)
        p   <- p - lr' * O

    NewtonSchulz divides u by (its Frobenius norm + 1e-7), transposes it when
    it has more rows than columns, and runs ns_steps quintic iterations
    X <- a X + (b A + c A A) X with A = X X^T and (a, b, c) = (3.4445, -4.7750,
    2.0315), all in bfloat16. Parameters of 3 or of 5+ dimensions are
    orthogonalized over their last two dimensions, batched over the others.
    With momentum 0 there is no buffer and u = g.

    Muon is for matrix-shaped weights: a parameter with fewer than 2
    dimensions (bias, norm scale, scalar) raises ValueError naming its shape;
    give those to another optimizer (AdamW, say) in a separate instance.

    Args:
        params: parameters or param-group dicts to optimize.
        lr: learning rate before the shape scaling (default 0.02).
        weight_decay: decoupled weight decay, scaled by lr' (default 0.01;
            must be in [0, 1)).
        momentum: momentum factor (default 0.95; must be in [0, 1)).
        nesterov: use the Nesterov form of the momentum (default True).
        ns_steps: Newton-Schulz iterations (default 5).

    Follows the production release's algorithm (its lr scaling uses the
    first two dimensions of the parameter, for 4-D ones too), except where
    production is broken or lossy:

    * production computes the new momentum buffer but never stores it, so its
      momentum never accumulates past one step; here the buffer is updated
      in place and kept in the optimizer state;
    * production defines its Newton-Schulz helper without `self` but calls it
      as a method, so its step fails with a TypeError; here the helper is a
      module function;
    * production rejects low-dimensional updates only inside that helper, at
      the first step; here the parameter is refused when it is added, naming
      its shape;
    * production multiplies the bfloat16 orthogonalized update by the lr in
      bfloat16; here the update is cast back to the parameter's dtype first
      (as in the reference Muon), so only the Newton-Schulz iteration runs in
      bfloat16.
    """

    def __init__(
        self,
        params,
        lr: float = 0.02,
        weight_decay: float = 0.01,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_steps: int = 5,
    ) -> None:
        non_negative(lr=lr)
        if not 0.0 <= weight_decay < 1.0:
            raise ValueError(f"Invalid weight decay: {weight_decay} (must be in [0, 1))")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"Invalid momentum: {momentum} (must be in [0, 1))")
        non_negative(ns_steps=ns_steps)
        defaults = dict(
            lr=lr,
            weight_decay=weight_decay,
            momentum=momentum,
            nesterov=nesterov,
            ns_steps=ns_steps,
        )
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict) -> None:
        """torch's add_param_group, refusing parameters of fewer than 2 dims."""
        params = param_group["params"]
        params = [params] if isinstance(params, torch.Tensor) else list(params)
        for param_index, param in enumerate(params):
            name = None
            if isinstance(param, tuple) and len(param) == 2:  # named_parameters()
                name, param = param
            if isinstance(param, torch.Tensor) and param.dim() < 2:
                position = _describe_position(len(self.param_groups), param_index, name)
                raise ValueError(
                    f"Muon orthogonalizes matrix updates, but {position} has shape "
                    f"{tuple(param.shape)} (fewer than 2 dimensions): optimize "
                    "biases, norm scales and scalars with another optimizer such as AdamW"
                )
        super().add_param_group({**param_group, "params": params})

    def preinitialize(self) -> None:
        """Create the momentum buffer of every parameter (none with momentum 0)."""
        for group in self.param_groups:
            if group["momentum"] != 0:
                for p in group["params"]:
                    self.state[p]["momentum_buffer"] = zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        """One Muon step; `closure` re-evaluates the model and returns the loss."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        for group in self.param_groups:
            momentum = group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if grad.is_sparse:
                    raise RuntimeError("Muon does not support sparse gradients")

                update = grad
                if momentum != 0:
                    buffer = self.state[p]["momentum_buffer"]
                    buffer.mul_(momentum).add_(grad, alpha=1 - momentum)
                    update = grad.add(buffer, alpha=momentum) if group["nesterov"] else buffer
                if update.dim() == 4:
                    update = update.reshape(update.shape[0], -1)
                orthogonal = _orthogonalize(update, group["ns_steps"])
                orthogonal = orthogonal.to(p.dtype).reshape(p.shape)

                rows, cols = p.shape[:2]
                lr = group["lr"] * (0.2 * math.sqrt(max(rows, cols)))
                p.mul_(1 - lr * group["weight_decay"])
                p.add_(-lr * orthogonal)

        return loss
