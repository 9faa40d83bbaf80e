"""Cerebras-compliant optimizer and scheduler bases (`cstorch.optim`)."""

from cslint.cstorch.optim import lr_scheduler, scheduler, weight_decay_scheduler
from cslint.cstorch.optim.adafactor import Adafactor
from cslint.cstorch.optim.lamb import Lamb
from cslint.cstorch.optim.lion import Lion
from cslint.cstorch.optim.muon import Muon
from cslint.cstorch.optim.optimizer import Optimizer

__all__ = [
    "Adafactor",
    "Lamb",
    "Lion",
    "Muon",
    "Optimizer",
    "lr_scheduler",
    "scheduler",
    "weight_decay_scheduler",
]
