"""Host-side closures: `step_closure` and `checkpoint_closure`.

On the system these run on the host after the step, once the device values
they receive have been computed, so reading values there is allowed. Off the
system they run at once, outside the strict-mode checks (provenance is still
tracked, so their device-value arguments stay device values).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from cslint.cstorch.guard import host_side

__all__ = ["step_closure", "checkpoint_closure"]


def step_closure(closure: Callable) -> Callable:
    """Run `closure` host-side: `.item()`, printing and logging are allowed.

    Like the production decorator the wrapper returns None: on the system the
    closure runs after the step, so callers cannot use a return value.
    """

    @functools.wraps(closure)
    def run_on_host(*args, **kwargs) -> None:
        with host_side():
            closure(*args, **kwargs)

    run_on_host.is_step_closure = True
    return run_on_host


def checkpoint_closure(closure: Callable) -> Callable:
    """Run `closure` host-side, like `step_closure`.

    The production release runs it only on checkpoint steps of a DataExecutor;
    there is no executor off the system, so every call runs.
    """

    @functools.wraps(closure)
    def run_on_host(*args, **kwargs) -> None:
        with host_side():
            closure(*args, **kwargs)

    run_on_host.is_checkpoint_closure = True
    return run_on_host
