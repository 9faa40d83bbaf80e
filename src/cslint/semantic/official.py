"""Built-in knowledge of the official API (cerebras.pytorch and torch), like typeshed.

The facts live in `data/official_api.json`, generated from the released sources by
`scripts/generate_official_api.py`: data, not code, so tests can check it against
`cslint.cstorch`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from cslint.config import Version, parse_version

# The roots that give a class its kind.
CSTORCH_OPTIMIZER = "cerebras.pytorch.optim.optimizer.Optimizer"
CSTORCH_SCHEDULERS = (
    "cerebras.pytorch.optim.scheduler.Scheduler",
    "cerebras.pytorch.optim.lr_scheduler.LRScheduler",
    "cerebras.pytorch.optim.weight_decay_scheduler.WeightDecayScheduler",
)
TORCH_OPTIMIZER = "torch.optim.optimizer.Optimizer"
TORCH_SCHEDULERS = ("torch.optim.lr_scheduler.LRScheduler", "torch.optim.lr_scheduler._LRScheduler")
NN_MODULE = "torch.nn.modules.module.Module"

# Classes that are machinery rather than user code, recognised in source by class
# name plus the end of their file's absolute path (`cerebras` is a namespace package,
# so the `__init__.py` chain alone does not name it). The cstorch entries name the
# whole package path, `cerebras/pytorch/optim/` or our runtime's `cslint/cstorch/optim/`:
# a project's own `mylib/pytorch/optim/lr_scheduler.py` is user code.
MACHINERY_FILES = {
    ("Optimizer", "cerebras/pytorch/optim/optimizer.py"): CSTORCH_OPTIMIZER,
    ("Scheduler", "cerebras/pytorch/optim/scheduler.py"): CSTORCH_SCHEDULERS[0],
    ("LRScheduler", "cerebras/pytorch/optim/lr_scheduler.py"): CSTORCH_SCHEDULERS[1],
    ("WeightDecayScheduler", "cerebras/pytorch/optim/weight_decay_scheduler.py"):
        CSTORCH_SCHEDULERS[2],
    ("Optimizer", "cslint/cstorch/optim/optimizer.py"): CSTORCH_OPTIMIZER,
    ("Scheduler", "cslint/cstorch/optim/scheduler.py"): CSTORCH_SCHEDULERS[0],
    ("LRScheduler", "cslint/cstorch/optim/lr_scheduler.py"): CSTORCH_SCHEDULERS[1],
    ("WeightDecayScheduler", "cslint/cstorch/optim/weight_decay_scheduler.py"):
        CSTORCH_SCHEDULERS[2],
    ("Optimizer", "torch/optim/optimizer.py"): TORCH_OPTIMIZER,
    ("LRScheduler", "torch/optim/lr_scheduler.py"): TORCH_SCHEDULERS[0],
    ("_LRScheduler", "torch/optim/lr_scheduler.py"): TORCH_SCHEDULERS[1],
    ("Module", "torch/nn/modules/module.py"): NN_MODULE,
}

# Bases that add no methods of interest and are known not to hide any.
NEUTRAL_BASES = frozenset({
    "builtins.object", "object", "abc.ABC", "typing.Generic", "typing.Protocol",
    "typing_extensions.Protocol",
})


@dataclass(frozen=True)
class OfficialClass:
    qualname: str
    bases: tuple[str, ...]
    methods: frozenset[str]
    abstract: frozenset[str]
    state_keys: frozenset[str] = frozenset()
    global_step: bool = False
    returns_tensor: frozenset[str] = frozenset()
    # Release-specific differences: (first release without them, methods, abstract methods).
    before: tuple[tuple[Version, frozenset[str], frozenset[str]], ...] = ()
    # methods_for's answers by release (method lookups ask for every name of every class).
    _by_release: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def methods_for(self, version: Version | None) -> tuple[frozenset[str], frozenset[str]]:
        """(defined methods, abstract methods) for a release; None means the newest."""
        found = self._by_release.get(version)
        if found is None:
            methods, abstract = set(self.methods), set(self.abstract)
            for until, extra_methods, extra_abstract in self.before:
                if version is not None and version < until:
                    methods |= extra_methods
                    abstract |= extra_abstract
            found = self._by_release[version] = (frozenset(methods), frozenset(abstract))
        return found


@dataclass
class OfficialApi:
    classes: dict[str, OfficialClass]
    aliases: dict[str, str] = field(default_factory=dict)
    releases: dict[str, str] = field(default_factory=dict)

    def lookup(self, qualname: str) -> OfficialClass | None:
        qualname = self.aliases.get(qualname, qualname)
        return self.classes.get(qualname)


@lru_cache(maxsize=1)
def load_official_api() -> OfficialApi:
    text = resources.files("cslint").joinpath("data/official_api.json").read_text("utf-8")
    return official_api_from_data(json.loads(text))


def official_api_from_data(data: dict) -> OfficialApi:
    api = OfficialApi(classes={}, releases=dict(data.get("releases", {})))
    for qualname, entry in data["classes"].items():
        before = tuple(
            (parse_version(until), frozenset(diff.get("methods", ())),
             frozenset(diff.get("abstract", ())))
            for until, diff in sorted(entry.get("before", {}).items())
        )
        api.classes[qualname] = OfficialClass(
            qualname=qualname,
            bases=tuple(entry.get("bases", ())),
            methods=frozenset(entry.get("methods", ())),
            abstract=frozenset(entry.get("abstract", ())),
            state_keys=frozenset(entry.get("state_keys", ())),
            global_step=bool(entry.get("global_step", False)),
            returns_tensor=frozenset(entry.get("returns_tensor", ())),
            before=before,
        )
        for alias in entry.get("aliases", ()):
            api.aliases[alias] = qualname
    return api
