"""Cerebras-compliant optimizers, schedulers and their configure helpers (`cstorch.optim`)."""

from cslint.cstorch.optim import lr_scheduler, scheduler, weight_decay_scheduler
from cslint.cstorch.optim.adadelta import Adadelta
from cslint.cstorch.optim.adafactor import Adafactor
from cslint.cstorch.optim.adagrad import Adagrad
from cslint.cstorch.optim.adam import Adam, AdamBase, AdamW
from cslint.cstorch.optim.adamax import Adamax
from cslint.cstorch.optim.asgd import ASGD
from cslint.cstorch.optim.configure import (
    configure_lr_scheduler,
    configure_optimizer,
    configure_optimizer_params,
    configure_scheduler,
    configure_scheduler_params,
)
from cslint.cstorch.optim.lamb import Lamb
from cslint.cstorch.optim.lion import Lion
from cslint.cstorch.optim.muon import Muon
from cslint.cstorch.optim.nadam import NAdam
from cslint.cstorch.optim.optimizer import Optimizer
from cslint.cstorch.optim.radam import RAdam
from cslint.cstorch.optim.rmsprop import RMSprop
from cslint.cstorch.optim.rprop import Rprop
from cslint.cstorch.optim.sgd import SGD

__all__ = [
    "ASGD",
    "Adadelta",
    "Adafactor",
    "Adagrad",
    "Adam",
    "AdamBase",
    "AdamW",
    "Adamax",
    "Lamb",
    "Lion",
    "Muon",
    "NAdam",
    "Optimizer",
    "RAdam",
    "RMSprop",
    "Rprop",
    "SGD",
    "configure_lr_scheduler",
    "configure_optimizer",
    "configure_optimizer_params",
    "configure_scheduler",
    "configure_scheduler_params",
    "lr_scheduler",
    "scheduler",
    "weight_decay_scheduler",
]
