"""`from_numpy`, `to_numpy`, `make_constant` and `name_scope`.

On the system `make_constant` bakes a tensor into the graph and
`name_scope` names the ops compiled in its block; off the system a tensor is
already what it holds and ops have no compiled names, so both change nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["from_numpy", "make_constant", "name_scope", "to_numpy"]


def to_numpy(tensor):
    """A numpy array of the tensor's values (an array is returned as it is)."""
    import numpy

    if isinstance(tensor, numpy.ndarray):
        return tensor
    if tensor.dtype == torch.bfloat16:
        raise TypeError(
            "to_numpy: numpy has no bfloat16 type; convert first, e.g. "
            "cstorch.to_numpy(tensor.float())"
        )
    return tensor.detach().cpu().numpy()


def from_numpy(array) -> torch.Tensor:
    """A tensor sharing the array's memory (a copy when the array is read-only);
    a tensor is returned as it is."""
    if isinstance(array, torch.Tensor):
        return array
    if not array.flags.writeable:
        array = array.copy()
    return torch.from_numpy(array)


def make_constant(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor itself: off the system there is no graph to bake it into."""
    return tensor


@contextlib.contextmanager
def name_scope(name: str, raw: bool = False) -> Iterator[None]:
    """Name the ops of the block on the system; nothing off the system."""
    yield
