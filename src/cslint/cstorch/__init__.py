"""cstorch: a runtime reference of `cerebras.pytorch` for laptops and GPU boxes.

`import cslint.cstorch as cstorch` in place of `import cerebras.pytorch as
cstorch`: the same optimizer and scheduler bases, creation ops, `trace` and
closures, plus strict mode, which fails unit tests where the system would,
with the linter's rule codes (CS101, CS102, CS201-CS206, CS305; CS501 through
`check_static_graph`).
"""

try:
    import torch  # noqa: F401
except ImportError:
    raise ImportError(
        "cslint.cstorch needs PyTorch, which is not installed: pip install 'cslint[runtime]'"
    ) from None

from cslint.cstorch import optim
from cslint.cstorch.closures import checkpoint_closure, step_closure
from cslint.cstorch.creation_ops import full, full_like, ones, ones_like, zeros, zeros_like
from cslint.cstorch.errors import (
    ComplianceError,
    GraphChangedError,
    SchedulerError,
    StateError,
    TracedValueError,
)
from cslint.cstorch.graph_check import check_static_graph
from cslint.cstorch.strict_mode import is_strict, strict
from cslint.cstorch.tracing import trace

__all__ = [
    "ComplianceError",
    "GraphChangedError",
    "SchedulerError",
    "StateError",
    "TracedValueError",
    "check_static_graph",
    "checkpoint_closure",
    "full",
    "full_like",
    "is_strict",
    "ones",
    "ones_like",
    "optim",
    "step_closure",
    "strict",
    "trace",
    "zeros",
    "zeros_like",
]
