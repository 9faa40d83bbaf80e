"""The cstorch learning-rate scheduler base (`param_group_key == "lr"`).

Like the production class it is also a `torch.optim.lr_scheduler.LRScheduler`,
so frameworks that check for one accept it; the cstorch `Scheduler` logic
comes first in the MRO and torch's is never run. Subclasses define the closed
form as `_get_closed_form_lr` (the documented name) or `_get_closed_form`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from cslint.cstorch.optim.scheduler import Scheduler

__all__ = ["LRScheduler"]


class LRScheduler(Scheduler, torch.optim.lr_scheduler.LRScheduler):
    """Base class of cstorch learning-rate schedulers."""

    @property
    def param_group_key(self) -> str:
        return "lr"

    def _get_closed_form(self) -> torch.Tensor:
        return self._get_closed_form_lr()

    def _get_closed_form_lr(self) -> torch.Tensor:
        raise NotImplementedError(
            f"{type(self).__name__} must define _get_closed_form_lr (or _get_closed_form)"
        )

    def _defines_own_closed_form(self) -> bool:
        return type(self)._get_closed_form is not LRScheduler._get_closed_form

    def _require_closed_form(self) -> None:
        cls = type(self)
        if (
            not self._defines_own_closed_form()
            and cls._get_closed_form_lr is LRScheduler._get_closed_form_lr
        ):
            raise TypeError(
                f"Can't instantiate {cls.__name__}: it defines neither "
                "_get_closed_form_lr nor _get_closed_form"
            )

    def _closed_form_method(self) -> Callable:
        if self._defines_own_closed_form():
            return self._get_closed_form
        return self._get_closed_form_lr

    def _closed_form_owner(self) -> str:
        name = "_get_closed_form" if self._defines_own_closed_form() else "_get_closed_form_lr"
        for cls in type(self).__mro__:
            if name in cls.__dict__:
                return f"{cls.__name__}.{name}"
        return f"{type(self).__name__}.{name}"

    def get_last_lr(self) -> list:
        """The learning rates last written into the groups (0-dim tensors)."""
        return self.get_last_value()

    def get_lr(self) -> list:
        """The closed form's learning rate for each group."""
        return self.get()
