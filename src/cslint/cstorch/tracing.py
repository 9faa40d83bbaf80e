"""`cstorch.trace`: run a step function under strict mode.

On the system `trace` captures the function's graph once and replays it, so
its tensor arguments and everything computed from them are device values.
Off the system the function runs every call, under the guard.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from cslint.cstorch import strict_mode
from cslint.cstorch.device_values import mark_trace_inputs
from cslint.cstorch.guard import guarded_region

__all__ = ["trace"]


def _display_name(function: Callable) -> str:
    # "test_x.<locals>.train_step" -> "train_step": messages name what users wrote.
    return getattr(function, "__qualname__", repr(function)).rsplit("<locals>.", 1)[-1]


def trace(step_fn: Callable) -> Callable:
    """Decorate a training/eval step: it runs under strict-mode checks."""
    owner = _display_name(step_fn)

    @functools.wraps(step_fn)
    def traced(*args, **kwargs):
        if not strict_mode._enabled:
            return step_fn(*args, **kwargs)
        mark_trace_inputs(owner, (*args, *kwargs.values()))
        with guarded_region(owner):
            return step_fn(*args, **kwargs)

    return traced
