"""cstorch: a runtime reference of `cerebras.pytorch` for laptops and GPU boxes.

`import cslint.cstorch as cstorch` in place of `import cerebras.pytorch as
cstorch`: the same optimizer and scheduler bases, creation ops, backends
(CPU and GPU), `compile`, `trace` and closures, the data pipeline
(`utils.data.DataLoader`, `DataExecutor`), `amp`, `save` and `load`, plus
strict mode, which fails unit tests where the system would, with the linter's
rule codes (CS101, CS102, CS201-CS206, CS305; CS501 for traced steps and
through `check_static_graph`).
"""

try:
    import torch  # noqa: F401
except ImportError:
    raise ImportError(
        "cslint.cstorch needs PyTorch, which is not installed: pip install 'cslint[runtime]'"
    ) from None

from cslint.cstorch import amp, optim, utils
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
from cslint.cstorch.local_backend import (
    backend,
    compile,
    current_backend,
    current_torch_device,
    use_cs,
)
from cslint.cstorch.storage import load, save
from cslint.cstorch.strict_mode import is_strict, strict
from cslint.cstorch.tensor_utils import from_numpy, make_constant, name_scope, to_numpy
from cslint.cstorch.tracing import graph_check_steps, trace
from cslint.cstorch.utils.data import current_executor

__all__ = [
    "ComplianceError",
    "GraphChangedError",
    "SchedulerError",
    "StateError",
    "TracedValueError",
    "amp",
    "backend",
    "check_static_graph",
    "checkpoint_closure",
    "compile",
    "current_backend",
    "current_executor",
    "current_torch_device",
    "from_numpy",
    "full",
    "full_like",
    "graph_check_steps",
    "is_strict",
    "load",
    "make_constant",
    "name_scope",
    "ones",
    "ones_like",
    "optim",
    "save",
    "step_closure",
    "strict",
    "to_numpy",
    "trace",
    "use_cs",
    "utils",
    "zeros",
    "zeros_like",
]
