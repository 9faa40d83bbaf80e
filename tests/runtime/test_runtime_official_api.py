"""The linter's table of the official API (`data/official_api.json`) and this library
agree: each class the table lists under `cerebras.pytorch.optim` exists here under its
name, with the same bases, the same abstract methods and, for an optimizer, the same
state keys created by `preinitialize` (with the options that create each one)."""

from __future__ import annotations

import inspect
import json
from importlib import resources

import pytest
import torch

import cslint.cstorch as cstorch

PREFIX = "cerebras.pytorch.optim."
SCHEDULER_MODULES = ("lr_scheduler", "weight_decay_scheduler", "scheduler")
# torch.optim.lr_scheduler's old name for its base, which the table records.
TORCH_RENAMED = {"_LRScheduler": "LRScheduler"}
# The options under which an optimizer creates every state key it can.
EVERY_STATE_KEY = {
    "SGD": {"lr": 0.1, "momentum": 0.9},
    "Adam": {"amsgrad": True},
    "AdamW": {"amsgrad": True},
    "AdamBase": {"amsgrad": True},
    "RMSprop": {"centered": True, "momentum": 0.9},
}
# Keys the table lists (production's preinitialize names them) that production never
# creates: its Adafactor makes `exp_avg` only for a `beta1`, which it rejects.
NEVER_CREATED = {"Adafactor": {"exp_avg"}}

TABLE = json.loads(resources.files("cslint").joinpath("data/official_api.json").read_text())
OFFICIAL = {name: entry for name, entry in TABLE["classes"].items()
            if name.startswith(PREFIX) and ".torch" not in name[len(PREFIX):]}


def ours(qualname: str) -> type:
    module, name = qualname.rsplit(".", 1)
    package = module[len(PREFIX):]
    if package in SCHEDULER_MODULES:
        return getattr(getattr(cstorch.optim, package), name)
    return getattr(cstorch.optim, name)  # SGD.SGD, AdamBase.Adam, optimizer.Optimizer


def short(qualname: str) -> str:
    name = qualname.rsplit(".", 1)[-1]
    return TORCH_RENAMED.get(name, name)


def public_bases(cls: type) -> set[str]:
    """The names of `cls`'s bases, a private helper base standing for its own bases
    (`_SchedulerOfSchedulers` for `Scheduler`); `object` and `ABC` say nothing."""
    names = set()
    for base in cls.__bases__:
        if base.__name__.startswith("_"):
            names |= public_bases(base)
        elif base.__name__ not in ("object", "ABC"):
            names.add(base.__name__)
    return names


def test_the_table_lists_the_library():
    assert len(OFFICIAL) >= 60
    assert {"cerebras.pytorch.optim.SGD.SGD", "cerebras.pytorch.optim.Muon.Muon",
            "cerebras.pytorch.optim.lr_scheduler.OneCycleLR",
            "cerebras.pytorch.optim.weight_decay_scheduler.ChainedWD"} <= set(OFFICIAL)


@pytest.mark.parametrize("qualname", sorted(OFFICIAL))
def test_each_official_class_has_its_twin_with_the_same_bases(qualname):
    cls = ours(qualname)
    official_bases = OFFICIAL[qualname]["bases"]
    if len(official_bases) == 1 and official_bases[0].startswith(PREFIX) \
            and cls is ours(official_bases[0]):
        return  # an alias (ChainedScheduler for ChainedLR): the very class it names
    assert cls.__name__ == qualname.rsplit(".", 1)[-1]
    assert public_bases(cls) == {short(base) for base in official_bases}


@pytest.mark.parametrize("qualname", sorted(OFFICIAL))
def test_each_official_class_declares_the_same_abstract_methods(qualname):
    cls = ours(qualname)
    declared = {name for name, value in vars(cls).items()
                if getattr(value, "__isabstractmethod__", False)}
    assert declared == set(OFFICIAL[qualname]["abstract"])


OPTIMIZERS = sorted(name for name, entry in OFFICIAL.items()
                    if entry.get("state_keys") is not None and not entry["abstract"])


@pytest.mark.parametrize("qualname", OPTIMIZERS)
def test_each_optimizer_creates_the_official_state_keys(qualname):
    cls = ours(qualname)
    name = cls.__name__
    options = dict(EVERY_STATE_KEY.get(name, {}))
    if "lr" in inspect.signature(cls).parameters and \
            inspect.signature(cls).parameters["lr"].default is inspect.Parameter.empty:
        options.setdefault("lr", 0.1)
    torch.manual_seed(0)
    shapes = [(4, 3), (2, 3, 2, 2)] if name == "Muon" else [(4, 3), (5,)]
    params = [torch.nn.Parameter(torch.randn(shape)) for shape in shapes]
    optimizer = cls(params, **options)
    keys = {key for state in optimizer.state.values() for key in state}
    entry = OFFICIAL[qualname]
    assert keys - {"step"} == set(entry["state_keys"]) - NEVER_CREATED.get(name, set())
    assert ("step" in keys) == entry["global_step"]
