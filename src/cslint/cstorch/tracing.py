"""`cstorch.trace`: run a step function under strict mode.

On the system `trace` captures the function's graph once and replays it, so
its tensor arguments and everything computed from them are device values.
Off the system the function runs every call, under the guard.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from cslint.cstorch import strict_mode
from cslint.cstorch.device_values import LAST_EPOCH, mark_module_values, mark_optimizer_values
from cslint.cstorch.guard import guarded_region
from cslint.cstorch.optim.optimizer import Optimizer
from cslint.cstorch.optim.scheduler import Scheduler
from cslint.cstorch.provenance import Origin, mark

__all__ = ["trace"]


@functools.lru_cache(maxsize=None)
def _argument_origin(function_name) -> Origin:
    return Origin(f"an argument of the traced {function_name}")


def mark_trace_inputs(function_name: str, values, _depth: int = 0) -> None:
    """Mark the device values among a traced function's arguments."""
    if _depth > 8:
        return
    for value in values:
        if isinstance(value, torch.Tensor):
            mark(value, _argument_origin(function_name))
        elif isinstance(value, torch.nn.Module):
            mark_module_values(value)
        elif isinstance(value, torch.optim.Optimizer):
            # Only a cstorch optimizer has schedulers attached.
            if isinstance(value, Optimizer):
                mark_optimizer_values(value, value.scheduled_keys())
            else:
                mark_optimizer_values(value)
        elif isinstance(value, Scheduler):
            if isinstance(value.last_epoch, torch.Tensor):
                mark(value.last_epoch, LAST_EPOCH)
        elif isinstance(value, (list, tuple, set, frozenset)):
            mark_trace_inputs(function_name, value, _depth + 1)
        elif isinstance(value, dict):
            mark_trace_inputs(function_name, value.values(), _depth + 1)


def _display_name(function: Callable) -> str:
    # "test_x.<locals>.train_step" -> "train_step": messages name what users wrote.
    return getattr(function, "__qualname__", repr(function)).rsplit("<locals>.", 1)[-1]


def trace(step_fn: Callable) -> Callable:
    """Decorate a training/eval step: it runs under strict-mode checks."""
    owner = _display_name(step_fn)

    @functools.wraps(step_fn)
    def traced(*args, **kwargs):
        if not strict_mode.is_strict():
            return step_fn(*args, **kwargs)
        mark_trace_inputs(owner, (*args, *kwargs.values()))
        with guarded_region(owner):
            return step_fn(*args, **kwargs)

    return traced
