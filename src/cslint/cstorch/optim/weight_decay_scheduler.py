"""The cstorch weight-decay scheduler base (`param_group_key == "weight_decay"`)."""

from __future__ import annotations

from cslint.cstorch.optim.scheduler import Scheduler

__all__ = ["WeightDecayScheduler"]


class WeightDecayScheduler(Scheduler):
    """Base class of cstorch weight-decay schedulers.

    In strict mode the scheduled weight decay is a 0-dim device tensor, so an
    optimizer that tests `if group["weight_decay"] != 0` fails (CS201) as it
    would on the system.
    """

    @property
    def param_group_key(self) -> str:
        return "weight_decay"
