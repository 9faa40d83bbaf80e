"""Host-side closures: `step_closure` and `checkpoint_closure`.

On the system these run on the host after the traced step, once the device
values they receive have been computed, so reading values there is allowed.
Here a closure called inside a `cstorch.trace` step is queued and runs when
the step returns, in call order, with its tensor arguments as they were at
the call (copied then, as production does); called anywhere else it runs at
once. Closures run outside the strict-mode checks (provenance is still
tracked, so their device-value arguments stay device values).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator

import torch

from cslint.cstorch.guard import host_side
from cslint.cstorch.utils.data.data_executor import current_executor

__all__ = ["checkpoint_closure", "deferred_closures", "step_closure"]


class _PendingClosures(threading.local):
    def __init__(self) -> None:
        self.traced_depth = 0
        self.queue: list[tuple[Callable, tuple, dict]] = []


_pending = _PendingClosures()


@contextlib.contextmanager
def deferred_closures() -> Iterator[None]:
    """Queue the closures called in the block; run them when the outermost block exits.

    A step that raises runs none of its closures: on the system the step never
    completes.
    """
    _pending.traced_depth += 1
    completed = False
    try:
        yield
        completed = True
    finally:
        _pending.traced_depth -= 1
        if _pending.traced_depth == 0:
            queue, _pending.queue = _pending.queue, []
            if completed:
                for closure, args, kwargs in queue:
                    _run_on_host(closure, args, kwargs)


def _run_on_host(closure: Callable, args: tuple, kwargs: dict) -> None:
    with host_side():
        closure(*args, **kwargs)


def _call_or_queue(closure: Callable, args: tuple, kwargs: dict) -> None:
    if _pending.traced_depth == 0:
        _run_on_host(closure, args, kwargs)
        return
    # The step may update these tensors in place after the call. Only the
    # arguments themselves are copied: a list the closure appends to must stay
    # the caller's list.
    args = tuple(_snapshot(value) for value in args)
    kwargs = {key: _snapshot(value) for key, value in kwargs.items()}
    _pending.queue.append((closure, args, kwargs))


def _snapshot(value):
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def step_closure(closure: Callable) -> Callable:
    """Run `closure` host-side after the step: `.item()`, printing and logging are allowed.

    Like the production decorator the wrapper returns None: on the system the
    closure runs after the step, so callers cannot use a return value.
    """

    @functools.wraps(closure)
    def run_on_host(*args, **kwargs) -> None:
        _call_or_queue(closure, args, kwargs)

    run_on_host.is_step_closure = True
    return run_on_host


def checkpoint_closure(closure: Callable) -> Callable:
    """Like `step_closure`, but run only on the checkpoint steps of the
    running `cstorch.utils.data.DataExecutor` (see its `checkpoint_steps`);
    calling it outside a running executor raises, as in production."""

    @functools.wraps(closure)
    def on_checkpoint_steps(*args, **kwargs) -> None:
        if current_executor().run_context.is_checkpoint_step:
            closure(*args, **kwargs)

    @functools.wraps(closure)
    def run_on_host(*args, **kwargs) -> None:
        try:
            current_executor()
        except RuntimeError:
            raise RuntimeError(
                f"checkpoint closure {closure.__name__} called outside a running "
                "DataExecutor: checkpoints exist only on the executor's checkpoint steps; "
                "call it inside `for batch in executor:`"
            ) from None
        _call_or_queue(on_checkpoint_steps, args, kwargs)

    run_on_host.is_checkpoint_closure = True
    return run_on_host
