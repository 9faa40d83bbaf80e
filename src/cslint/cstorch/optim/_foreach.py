"""Pieces shared by the cstorch optimizers' steps.

The optimizers update all parameters of a group with one `torch._foreach_*`
op per stage, as torch.optim's foreach path does: few, large ops keep both
the step and strict mode's per-op checks cheap. Per-parameter scalars (bias
corrections from a power or step tensor) are computed on one stacked tensor
and handed to the foreach ops as a list of 0-dim tensors.
"""

from __future__ import annotations

import torch
from torch.utils._foreach_utils import _group_tensors_by_device_and_dtype

__all__ = ["add_scaled_", "device_groups", "gradients", "is_zero", "per_parameter"]


def device_groups(group: dict) -> list[tuple[list, list]]:
    """(parameters, gradients) of the group's parameters that have a
    gradient, split by device and dtype as torch.optim's foreach path does.

    Each gradient is read once, and the split is one call into torch's C++
    grouping rather than a `.device` read per parameter: in strict mode every
    tensor attribute read goes through the guard.
    """
    params, grads = [], []
    for param in group["params"]:
        grad = param.grad
        if grad is not None:
            params.append(param)
            grads.append(grad)
    if not params:
        return []
    grouped = _group_tensors_by_device_and_dtype([params, grads])
    return [(lists[0], lists[1]) for lists, _ in grouped.values()]


def is_zero(value) -> bool:
    """Whether a hyperparameter is a Python zero, so its stage can be skipped.

    A tensor (a scheduled value) is never: its value is not known while the
    step is traced, so the stage always runs.
    """
    return not isinstance(value, torch.Tensor) and value == 0


def gradients(params: list, grads: list, maximize: bool = False, weight_decay=0.0) -> list:
    """`grads` negated for `maximize`, plus `weight_decay * p` (L2).

    Never writes into `p.grad`. A tensor weight decay (from a weight-decay
    scheduler) is multiplied in as a tensor.
    """
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


def add_scaled_(params: list, directions: list, scale) -> None:
    """`p <- p + scale * d` in place, for a Python or 0-dim tensor `scale`
    (a scheduled lr is a tensor: it must not become a Python `alpha=`).

    One fused op without temporaries: every new tensor a step makes is one
    more for strict mode to track.
    """
    if not isinstance(scale, torch.Tensor):
        scale = torch.tensor(scale, dtype=params[0].dtype, device=params[0].device)
    torch._foreach_addcmul_(params, directions, [scale] * len(params))
