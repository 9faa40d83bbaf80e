"""Cerebras-compliant optimizer and scheduler bases (`cstorch.optim`)."""

from cslint.cstorch.optim import lr_scheduler, scheduler, weight_decay_scheduler
from cslint.cstorch.optim.configure import (
    configure_lr_scheduler,
    configure_optimizer,
    configure_optimizer_params,
    configure_scheduler,
    configure_scheduler_params,
)
from cslint.cstorch.optim.optimizer import Optimizer

__all__ = [
    "Optimizer",
    "configure_lr_scheduler",
    "configure_optimizer",
    "configure_optimizer_params",
    "configure_scheduler",
    "configure_scheduler_params",
    "lr_scheduler",
    "scheduler",
    "weight_decay_scheduler",
]
