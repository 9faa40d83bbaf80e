"""Marking the roots of device values: what lives on the device by definition.

Parameters and buffers of modules, gradients, optimizer state, scheduled
hyperparameters and a scheduler's `last_epoch`; `tracing` marks these among a
traced function's arguments. Everything computed from them is marked by the
guard as it runs (see `guard`). Origins are cached per name: steps mark the
same roots every time and should not allocate.
"""

from __future__ import annotations

import functools

import torch

from cslint.cstorch.provenance import PARAMETER, Origin, mark, registry_get

_Parameter = torch.nn.Parameter

__all__ = [
    "GRADIENT",
    "LAST_EPOCH",
    "state_origin",
    "scheduled_origin",
    "mark_optimizer_values",
    "mark_module_values",
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
def group_tensor_origin(key) -> Origin:
    return Origin(f"the param-group tensor {key!r}")


@functools.lru_cache(maxsize=None)
def _buffer_origin(name) -> Origin:
    return Origin(f"the module buffer {name!r}")


def mark_optimizer_values(optimizer: torch.optim.Optimizer, scheduled_keys=("lr",)) -> None:
    """Mark params, grads, state tensors and the tensors of the param groups, those
    under `scheduled_keys` (a cstorch optimizer's `scheduled_keys()`) as scheduled.

    Runs before every step: values already marked are skipped without a call
    (`mark` would keep their first origin anyway), and `nn.Parameter`s are
    device values by type (see `origin_of`).
    """
    registered = registry_get
    for group in optimizer.param_groups:
        for param in group["params"]:
            if type(param) is not _Parameter:
                mark(param, PARAMETER)
            grad = param.grad
            if grad is not None:
                ref = registered(id(grad))
                if ref is None or ref() is not grad:
                    mark(grad, GRADIENT)
        for key, value in group.items():
            # A tensor kept in the group (the lr a scheduler writes, a step count made
            # in preinitialize) lives on the device like the state.
            if isinstance(value, torch.Tensor):
                mark(value, scheduled_origin(key) if key in scheduled_keys
                     else group_tensor_origin(key))
    origins: dict = {}
    for owner, entries in optimizer.state.items():
        if isinstance(entries, torch.Tensor):
            # State of the whole optimizer under a key of its own (`self.state["k"]`).
            ref = registered(id(entries))
            if (ref is None or ref() is not entries) and isinstance(owner, str):
                mark(entries, state_origin(owner))
        elif isinstance(entries, dict):
            for key, value in entries.items():
                if isinstance(value, torch.Tensor):
                    ref = registered(id(value))
                    if ref is not None and ref() is value:
                        continue
                    origin = origins.get(key)
                    if origin is None:
                        origin = origins[key] = state_origin(key)
                    mark(value, origin)


def mark_module_values(module: torch.nn.Module) -> None:
    for param in module.parameters():
        mark(param, PARAMETER)
    for name, buffer in module.named_buffers():
        mark(buffer, _buffer_origin(name.rsplit(".", 1)[-1]))


def _mark_registered_buffer(module, name, buffer):
    # Buffers of modules built after import are device values wherever the
    # module is used, even when the module is not a traced argument.
    if isinstance(buffer, torch.Tensor):
        mark(buffer, _buffer_origin(name))
    return None


torch.nn.modules.module.register_module_buffer_registration_hook(_mark_registered_buffer)
