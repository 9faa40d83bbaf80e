"""`cstorch.utils.data.DataLoader`: a loader built on demand from `input_fn`.

The system builds the loader on its input workers by calling `input_fn`,
which is why the script passes the function and its arguments, not a loader.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterator

__all__ = ["DataLoader"]


class DataLoader:
    """Call `input_fn(*args, **kwargs)` for a torch DataLoader (or any iterable
    of tensor structures) and iterate it; `len()` is the loader's length."""

    def __init__(self, input_fn: Callable, *args, **kwargs) -> None:
        if not callable(input_fn):
            raise TypeError(
                "cstorch.utils.data.DataLoader expects a callable that builds and returns a "
                "torch.utils.data.DataLoader or an iterable of tensor structures, got "
                f"{type(input_fn).__name__}"
            )
        self.input_fn = input_fn
        # Copied now, as the system does: later changes to them do not count.
        self.input_fn_params = copy.deepcopy((args, kwargs))

    @functools.cached_property
    def dataloader(self):
        """The loader `input_fn` built (on first use)."""
        args, kwargs = copy.deepcopy(self.input_fn_params)
        built = self.input_fn(*args, **kwargs)
        if not hasattr(built, "__iter__"):
            name = getattr(self.input_fn, "__qualname__", repr(self.input_fn))
            raise TypeError(
                f"input_fn {name} returned a value of type {type(built).__name__}: it must return a "
                "torch.utils.data.DataLoader or an iterable of tensor structures"
            )
        return built

    def __len__(self) -> int:
        return len(self.dataloader)

    def __iter__(self) -> Iterator:
        return iter(self.dataloader)
