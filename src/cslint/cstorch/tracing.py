"""`cstorch.trace`: run a step function under strict mode.

On the system `trace` captures the function's graph once and replays it, so
its tensor arguments and everything computed from them are device values.
Off the system the function runs every call, under the guard, and:

- its first calls (3 by default, see `graph_check_steps`) record their graph
  with `check_static_graph`'s recorder; a call whose graph differs from the
  previous call's raises CS501, as the system cannot recompile mid-run. The
  count restarts with each DataExecutor run (each is its own compile).
- step closures called inside it run when it returns (see `closures`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

import torch

from cslint.cstorch import local_backend, strict_mode
from cslint.cstorch.closures import deferred_closures
from cslint.cstorch.device_values import LAST_EPOCH, mark_module_values, mark_optimizer_values
from cslint.cstorch.graph_check import (
    _first_difference,
    _graph_changed,
    _GraphRecorder,
    _OpRecord,
    _step_names,
)
from cslint.cstorch.guard import guarded_region
from cslint.cstorch.optim.optimizer import Optimizer
from cslint.cstorch.optim.scheduler import Scheduler
from cslint.cstorch.provenance import Origin, mark

__all__ = ["graph_check_steps", "trace"]


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
                value._lrs_as_device_tensors()
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


class _TraceSettings(threading.local):
    # Class attributes: each thread reads these until it sets its own.
    graph_steps = 3
    depth = 0


_settings = _TraceSettings()


class graph_check_steps:  # noqa: N801 - a setter and context manager, like cstorch.strict
    """Record and compare the graphs of the first `steps` calls of every traced step.

    The default is 3; `cstorch.graph_check_steps(0)` turns the CS501 check of
    traced steps off for the rest of the thread, `with
    cstorch.graph_check_steps(0): ...` for the block only. Strict mode off
    turns it off too.
    """

    def __init__(self, steps: int = 3) -> None:
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0 or steps == 1:
            raise ValueError(
                f"graph_check_steps takes 0 (off) or a number of steps >= 2 to compare, got {steps!r}"
            )
        self._previous = _settings.graph_steps
        self.steps = steps
        _settings.graph_steps = steps

    def __enter__(self) -> graph_check_steps:
        return self

    def __exit__(self, *exc_info: object) -> None:
        _settings.graph_steps = self._previous

    def __repr__(self) -> str:
        return f"cstorch.graph_check_steps({self.steps})"


def _current_run():
    """The DataExecutor being iterated, if any: each run is compiled anew."""
    current = local_backend.backend()
    if current is None or not current.data_executor_stack:
        return None
    return current.data_executor_stack[-1]


class _GraphWatch:
    """The graphs of one traced function's first calls in the current run."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._start(None)

    def _start(self, run) -> None:
        self.run = run
        self.calls = 0
        self.previous: list[_OpRecord] | None = None

    def call(self, step_fn: Callable, args: tuple, kwargs: dict):
        run = _current_run()
        if run is not self.run:
            self._start(run)
        self.calls += 1
        if self.calls > _settings.graph_steps:
            self.previous = None  # done: free what the recording held
            return _run_guarded(self.owner, step_fn, args, kwargs)
        # Inputs, grads and scheduled values may be new tensors every step:
        # named afresh by their roles.
        recorder = _GraphRecorder(_step_names(step_fn, args, kwargs))
        with recorder:
            result = _run_guarded(self.owner, step_fn, args, kwargs)
        current = recorder.records
        if self.previous is not None:
            index = _first_difference(self.previous, current)
            if index is not None:
                raise _graph_changed(self.owner, self.calls, index, self.previous, current)
        self.previous = current
        return result


def _run_guarded(owner: str, step_fn: Callable, args: tuple, kwargs: dict):
    with guarded_region(owner):
        return step_fn(*args, **kwargs)


def trace(step_fn: Callable) -> Callable:
    """Decorate a training/eval step: it runs under strict-mode checks, its
    first calls' graphs are compared (CS501), and step closures called in it
    run after it returns."""
    owner = _display_name(step_fn)
    watch = _GraphWatch(owner)

    @functools.wraps(step_fn)
    def traced(*args, **kwargs):
        with deferred_closures():
            if not strict_mode.is_strict():
                return step_fn(*args, **kwargs)
            mark_trace_inputs(owner, (*args, *kwargs.values()))
            if _settings.depth:  # a traced function called by another: checked as part of it
                return _run_guarded(owner, step_fn, args, kwargs)
            _settings.depth += 1
            try:
                return watch.call(step_fn, args, kwargs)
            finally:
                _settings.depth -= 1

    return traced
