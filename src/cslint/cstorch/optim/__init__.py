"""Cerebras-compliant optimizer and scheduler bases (`cstorch.optim`)."""

from cslint.cstorch.optim import lr_scheduler, scheduler, weight_decay_scheduler
from cslint.cstorch.optim.optimizer import Optimizer

__all__ = ["Optimizer", "lr_scheduler", "scheduler", "weight_decay_scheduler"]
