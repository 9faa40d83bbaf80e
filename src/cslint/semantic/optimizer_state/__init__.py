"""How optimizers create and update their state: facts about state created outside
`preinitialize`, rebound in `step`, filled eagerly, or updated and then lost.

For each concrete optimizer class of the project, the methods are walked from their
entry points along the class's MRO: `preinitialize` (state may be created there),
`step` (state may only be updated in place) and every other method (state may not be
created). Restoration (`load_state_dict`, `__setstate__`) is neither. A small abstract
interpretation per function follows the optimizer's `self.state`, its per-parameter
dicts and the tensors read from them through aliases, calls (with the abstract values
of the arguments) and guards such as `if len(state) == 0:`.

The modules, by job: `values` (the abstract values and roles), `facts` (what the rules
report), `analysis` (the classes and their entry points), `walker` (one function),
`guards` (lazy-initialisation checks).
"""

from cslint.semantic.optimizer_state.analysis import OptimizerStateAnalysis
from cslint.semantic.optimizer_state.facts import (
    EagerStateFill, GroupTensorCreated, StateCreated, StateDictRebound, StateFact,
    StateRebound, StateUpdateLost,
)

__all__ = [
    "EagerStateFill", "GroupTensorCreated", "OptimizerStateAnalysis", "StateCreated",
    "StateDictRebound", "StateFact", "StateRebound", "StateUpdateLost",
]
