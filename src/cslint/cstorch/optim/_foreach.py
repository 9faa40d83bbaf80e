"""Pieces shared by the cstorch optimizers' steps.

The optimizers update all parameters of a group with one `torch._foreach_*`
op per stage, as torch.optim's foreach path does: few, large ops keep both
the step and strict mode's per-op checks cheap. Per-parameter scalars (bias
corrections from a power or step tensor) are computed on one stacked tensor
and handed to the foreach ops as a list of 0-dim tensors.
"""

from __future__ import annotations

import torch

__all__ = ["device_groups", "gradients", "is_zero", "per_parameter"]


def device_groups(group: dict) -> list[list[torch.Tensor]]:
    """The group's parameters that have a gradient, one list per device.

    Stacking per-parameter scalars needs them on one device; a group almost
    always is.
    """
    by_device: dict = {}
    for param in group["params"]:
        if param.grad is not None:
            by_device.setdefault(param.device, []).append(param)
    return list(by_device.values())


def is_zero(value) -> bool:
    """Whether a hyperparameter is a Python zero, so its stage can be skipped.

    A tensor (a scheduled value) is never: its value is not known while the
    step is traced, so the stage always runs.
    """
    return not isinstance(value, torch.Tensor) and value == 0


def gradients(params: list, maximize: bool = False, weight_decay=0.0) -> list:
    """The gradients, negated for `maximize`, plus `weight_decay * p` (L2).

    Never writes into `p.grad`. A tensor weight decay (from a weight-decay
    scheduler) is multiplied in as a tensor.
    """
    grads = [param.grad for param in params]
    if maximize:
        grads = torch._foreach_neg(grads)
    if is_zero(weight_decay):
        return grads
    if isinstance(weight_decay, torch.Tensor):
        return torch._foreach_add(grads, torch._foreach_mul(params, weight_decay))
    return torch._foreach_add(grads, params, alpha=weight_decay)


def per_parameter(values: torch.Tensor) -> list[torch.Tensor]:
    """A stacked vector of per-parameter scalars as 0-dim tensors for foreach ops."""
    return list(values.unbind())
