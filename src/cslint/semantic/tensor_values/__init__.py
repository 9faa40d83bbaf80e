"""Which expressions of traced code hold device-tensor values, and where traced code
takes a device tensor's truth value, reads it on the host, passes it where a Python
number is needed, or makes a shape depend on it.

Traced code is what runs once to record the graph: optimizer `step`, scheduler closed
forms, `nn.Module.forward`, `@cstorch.trace` functions, and whatever they call. A small
abstract interpretation per function, statements in order, gives each name a value:
a device tensor (with the chain that made it one, for the message), a host constant
tensor, or a structural value (param groups, optimizer state, modules, containers,
functions). Only what is a device tensor by a source we can name is ever flagged.
Calls are followed with the abstract values of their arguments; a helper's return
value is its summary under those arguments.

The modules, by job: `values` (the abstract values), `facts` (what the rules report),
`entries` (where traced code starts), `class_attributes` (what classes set up on
`self`), `walker` (one function's statements and expressions), `calls` (one call),
`analysis` (summaries and facts of a project).
"""

from cslint.semantic.tensor_values.analysis import TensorValueAnalysis
from cslint.semantic.tensor_values.facts import (
    Condition, HostRead, LoopBound, MaskSelection, ScalarArgument, TracedFact, TruthTest,
    ValueDependentShape,
)

__all__ = [
    "Condition", "HostRead", "LoopBound", "MaskSelection", "ScalarArgument",
    "TensorValueAnalysis", "TracedFact", "TruthTest", "ValueDependentShape",
]
