"""Marking the roots of device values: what lives on the device by definition.

Parameters and buffers of modules, gradients, optimizer state, scheduled
hyperparameters, a scheduler's `last_epoch` and the tensor arguments of a
`trace`d function. Everything computed from them is marked by the guard as it
runs (see `guard`). Origins are cached per name: steps mark the same roots
every time and should not allocate.
"""

from __future__ import annotations

import functools

import torch

from cslint.cstorch.provenance import PARAMETER, Origin, mark

__all__ = [
    "GRADIENT",
    "LAST_EPOCH",
    "state_origin",
    "scheduled_origin",
    "scheduled_keys",
    "mark_optimizer_values",
    "mark_module_values",
    "mark_trace_inputs",
]

GRADIENT = Origin("a gradient")
LAST_EPOCH = Origin("the scheduler's last_epoch")


@functools.lru_cache(maxsize=None)
def state_origin(key) -> Origin:
    return Origin(f"optimizer state {key!r}")


@functools.lru_cache(maxsize=None)
def scheduled_origin(key) -> Origin:
    return Origin(f"the scheduled hyperparameter {key!r}", scheduled=True)


@functools.lru_cache(maxsize=None)
def _buffer_origin(name) -> Origin:
    return Origin(f"the module buffer {name!r}")


@functools.lru_cache(maxsize=None)
def _trace_argument_origin(function_name) -> Origin:
    return Origin(f"an argument of the traced {function_name}")


def scheduled_keys(optimizer: torch.optim.Optimizer) -> set:
    """Group keys holding scheduled hyperparameters: the lr, and every key a
    cstorch scheduler attached to this optimizer drives."""
    keys = {"lr"}
    registry = getattr(optimizer, "_schedulers_registry", None)
    if registry is not None:
        keys.update(scheduler.param_group_key for scheduler in list(registry.keys()))
    return keys


def mark_optimizer_values(optimizer: torch.optim.Optimizer, keys=None) -> None:
    """Mark params, grads, state tensors and scheduled group values."""
    if keys is None:
        keys = scheduled_keys(optimizer)
    for group in optimizer.param_groups:
        for param in group["params"]:
            mark(param, PARAMETER)
            grad = param.grad
            if grad is not None:
                mark(grad, GRADIENT)
        for key in keys:
            value = group.get(key)
            if isinstance(value, torch.Tensor):
                mark(value, scheduled_origin(key))
    for entries in optimizer.state.values():
        if isinstance(entries, dict):
            for key, value in entries.items():
                if isinstance(value, torch.Tensor):
                    mark(value, state_origin(key))


def mark_module_values(module: torch.nn.Module) -> None:
    for param in module.parameters():
        mark(param, PARAMETER)
    for name, buffer in module.named_buffers():
        mark(buffer, _buffer_origin(name.rsplit(".", 1)[-1]))


def mark_trace_inputs(function_name: str, values, _depth: int = 0) -> None:
    """Mark the device values among a traced function's arguments."""
    # Imported here: the optim package imports this module.
    from cslint.cstorch.optim.scheduler import Scheduler

    if _depth > 8:
        return
    for value in values:
        if isinstance(value, torch.Tensor):
            mark(value, _trace_argument_origin(function_name))
        elif isinstance(value, torch.nn.Module):
            mark_module_values(value)
        elif isinstance(value, torch.optim.Optimizer):
            mark_optimizer_values(value)
        elif isinstance(value, Scheduler):
            if isinstance(value.last_epoch, torch.Tensor):
                mark(value.last_epoch, LAST_EPOCH)
        elif isinstance(value, (list, tuple, set, frozenset)):
            mark_trace_inputs(function_name, value, _depth + 1)
        elif isinstance(value, dict):
            mark_trace_inputs(function_name, value.values(), _depth + 1)


def _mark_registered_buffer(module, name, buffer):
    # Buffers of modules built after import are device values wherever the
    # module is used, even when the module is not a traced argument.
    if isinstance(buffer, torch.Tensor):
        mark(buffer, _buffer_origin(name))
    return None


torch.nn.modules.module.register_module_buffer_registration_hook(_mark_registered_buffer)
