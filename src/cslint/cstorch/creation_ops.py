"""Creation ops for constant-filled state (`cstorch.zeros_like` etc.).

The production ops fill tensors lazily on the system; off the system they are
the eager torch ops with the same signatures, which is what these are.
"""

from __future__ import annotations

import torch

__all__ = ["full", "full_like", "ones", "ones_like", "zeros", "zeros_like"]


def full(shape, value: float, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A tensor of `shape` filled with `value`."""
    return torch.full(shape, value, dtype=dtype)


def full_like(other: torch.Tensor, value: float, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A tensor like `other` (shape, device; dtype unless given) filled with `value`."""
    return torch.full_like(other, value, dtype=dtype or other.dtype)


def ones(shape, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A tensor of `shape` filled with ones."""
    return torch.ones(shape, dtype=dtype)


def ones_like(other: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A tensor like `other` (shape, device; dtype unless given) filled with ones."""
    return torch.ones_like(other, dtype=dtype or other.dtype)


def zeros(shape, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A tensor of `shape` filled with zeros."""
    return torch.zeros(shape, dtype=dtype)


def zeros_like(other: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A tensor like `other` (shape, device; dtype unless given) filled with zeros."""
    return torch.zeros_like(other, dtype=dtype or other.dtype)
