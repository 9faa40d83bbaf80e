"""Loss scaling: `GradScaler` and `optimizer_step`.

This runs the loss scaling the Cerebras system runs (the production package
skips it on CPU and GPU): static scaling multiplies the loss by a fixed
factor and divides the gradients by it; dynamic scaling also skips the
update of a step whose gradients overflow, halves the scale when overflows
exceed the tolerance and doubles it after `steps_per_increase` clean steps.
Everything that depends on the gradients stays a tensor, so a scaler used
inside a traced step passes strict mode and keeps the graph static.
"""

from __future__ import annotations

import warnings

import torch

from cslint.cstorch.amp.half_dtype import get_half_dtype_str
from cslint.cstorch.local_backend import require_backend

__all__ = ["GradScaler", "optimizer_step"]

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


class GradScaler:
    """Static (`loss_scale=<number>`) or dynamic (`loss_scale="dynamic"`) loss scaling.

    Dynamic scaling starts at `init_scale` (default: `max_loss_scale`, which
    defaults to 2**15, or 2**31 with "cbfloat16"), stays within
    [`min_loss_scale`, `max_loss_scale`], halves when the fraction of
    overflowing steps since the last change exceeds `overflow_tolerance`, and
    doubles after more than `steps_per_increase` steps (default 2000).
    """

    def __init__(
        self,
        loss_scale=None,
        init_scale: float | None = None,
        steps_per_increase: int | None = None,
        min_loss_scale: float | None = None,
        max_loss_scale: float | None = None,
        overflow_tolerance: float = 0.0,
        max_gradient_norm: float | None = None,
    ) -> None:
        device = require_backend().torch_device
        default_max = 2.0**31 if get_half_dtype_str() == "cbfloat16" else 2.0**15
        self._max_loss_scale = max_loss_scale or default_max
        self._min_loss_scale = min_loss_scale or 2.0**-14
        self._steps_per_increase = steps_per_increase or 2000
        self._overflow_tolerance = overflow_tolerance
        self._max_gradient_norm = None
        self._stage: dict[int, str] = {}
        self._squared_norms: list[torch.Tensor] = []
        self.isfinite = None
        if loss_scale == "dynamic":
            if self._min_loss_scale < 2.0**-14:
                raise ValueError(f"min_loss_scale {self._min_loss_scale} is below 2**-14")
            if overflow_tolerance < 0:
                raise ValueError(f"overflow_tolerance must be >= 0, got {overflow_tolerance}")
            if max_gradient_norm:
                warnings.warn(
                    "GradScaler(max_gradient_norm=...) is deprecated: clip with "
                    "torch.nn.utils.clip_grad_norm_ or optimizer_step(max_gradient_norm=...)",
                    DeprecationWarning,
                    stacklevel=2,
                )
                self._max_gradient_norm = max_gradient_norm
            self.dynamic = True
            start = min(self._max_loss_scale, init_scale or self._max_loss_scale)
            self._loss_scale = torch.tensor(start, dtype=torch.float32, device=device)
            self._steps_since_rescale = torch.tensor(0, dtype=torch.int64, device=device)
            self._overflows_since_rescale = torch.tensor(0, dtype=torch.int64, device=device)
            self._num_skipped_steps = torch.tensor(0, dtype=torch.int64, device=device)
        elif loss_scale is None or (isinstance(loss_scale, (int, float)) and loss_scale > 0):
            self.dynamic = False
            self._loss_scale = float(loss_scale or 1.0)
        else:
            raise ValueError(
                f"loss_scale must be \"dynamic\" or a positive number, got {loss_scale!r}"
            )

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        """The loss times the loss scale, in float32: call `.backward()` on it."""
        if not self.dynamic and self._loss_scale == 1.0:
            return loss.float()
        return loss.float() * self._loss_scale

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        """Divide the optimizer's gradients by the loss scale, in place (once per step)."""
        stage = self._stage.get(id(optimizer), _READY)
        if stage == _UNSCALED:
            return
        if stage == _STEPPED:
            raise RuntimeError("GradScaler.unscale_() called after step() for this optimizer")
        self._stage[id(optimizer)] = _UNSCALED
        if not self.dynamic and self._loss_scale == 1.0:
            return
        inverse = 1.0 / self._loss_scale
        for grad in _grads(optimizer):
            grad.mul_(inverse)
            if self.dynamic:
                self._squared_norms.append(torch.sum(grad.float() * grad.float()))

    def step(self, optimizer: torch.optim.Optimizer, *args, **kwargs):
        """Unscale (unless done), then step the optimizer; with dynamic
        scaling the step's updates are undone when the gradients overflowed."""
        if self._stage.get(id(optimizer), _READY) == _STEPPED:
            raise RuntimeError("GradScaler.step() called twice for this optimizer since update()")
        self.unscale_(optimizer)
        self._stage[id(optimizer)] = _STEPPED
        if not self.dynamic:
            return optimizer.step(*args, **kwargs)
        if self.isfinite is None:
            self.isfinite = self._gradients_are_finite([optimizer])
        return self._step_if_finite(optimizer, args, kwargs)

    def _gradients_are_finite(self, optimizers) -> torch.Tensor:
        if not self._squared_norms:
            return torch.tensor(True, device=self._loss_scale.device)
        global_norm = torch.sqrt(torch.sum(torch.stack(self._squared_norms)))
        if self._max_gradient_norm:
            clip = torch.clamp(self._max_gradient_norm / (global_norm + 1e-6), max=1.0)
            for optimizer in optimizers:
                for grad in _grads(optimizer):
                    grad.mul_(clip)
        return global_norm < float("inf")

    def _step_if_finite(self, optimizer, args, kwargs):
        # The system keeps the old values when the gradients overflowed;
        # select between old and new with the device-side flag, no host read.
        tensors = []
        for group in optimizer.param_groups:
            for param in group["params"]:
                tensors.append(param)
                tensors.extend(
                    value for value in optimizer.state.get(param, {}).values()
                    if isinstance(value, torch.Tensor)
                )
        with torch.no_grad():
            saved = [tensor.detach().clone() for tensor in tensors]
        result = optimizer.step(*args, **kwargs)
        with torch.no_grad():
            for tensor, old in zip(tensors, saved):
                tensor.copy_(torch.where(self.isfinite, tensor, old))
            self._num_skipped_steps.add_(1 - self.isfinite.long())
        return result

    def update(self, new_scale=None) -> None:
        """Adjust a dynamic loss scale after the step; ready the scaler for the next one."""
        if new_scale is not None:
            raise ValueError("cstorch.amp.GradScaler.update() takes no new_scale")
        if self.dynamic and self.isfinite is not None:
            self._update_dynamic_scale()
        self._squared_norms = []
        self.isfinite = None
        self._stage.clear()

    def _update_dynamic_scale(self) -> None:
        overflowed = 1 - self.isfinite.long()
        self._steps_since_rescale.add_(1)
        self._overflows_since_rescale.add_(overflowed)
        ratio = self._overflows_since_rescale.float() / self._steps_since_rescale.float()
        decrease = (ratio > self._overflow_tolerance).long()
        self._loss_scale.div_((1 + decrease).float())
        self._overflows_since_rescale.mul_(1 - decrease)
        self._steps_since_rescale.mul_(1 - decrease)
        increase = (self._steps_since_rescale > self._steps_per_increase).long()
        self._loss_scale.mul_((1 + increase).float())
        self._overflows_since_rescale.mul_(1 - increase)
        self._steps_since_rescale.mul_(1 - increase)
        self._loss_scale.clamp_(min=self._min_loss_scale, max=self._max_loss_scale)

    def get_scale(self):
        """The loss scale: a float (static) or a 0-dim tensor (dynamic)."""
        return self._loss_scale

    def get_num_skipped_steps(self) -> torch.Tensor:
        """How many steps dynamic scaling skipped because the gradients overflowed."""
        if self.dynamic:
            return self._num_skipped_steps
        return torch.tensor(0, dtype=torch.int64)

    def state_dict(self) -> dict:
        if not self.dynamic:
            return {"loss_scale": self._loss_scale}
        return {
            "loss_scale": self._loss_scale,
            "steps_since_rescale": self._steps_since_rescale,
            "overflows_since_rescale": self._overflows_since_rescale,
            "num_skipped_steps": self._num_skipped_steps,
        }

    def load_state_dict(self, state_dict: dict) -> None:
        if not self.dynamic:
            self._loss_scale = float(state_dict.get("loss_scale", self._loss_scale))
            return
        for key, tensor in self.state_dict().items():
            if key in state_dict:
                with torch.no_grad():
                    tensor.copy_(torch.as_tensor(state_dict[key]))


def _grads(optimizer):
    for group in optimizer.param_groups:
        for param in group["params"]:
            if param.grad is not None:
                yield param.grad


def optimizer_step(
    loss: torch.Tensor,
    optimizer,
    grad_scaler: GradScaler,
    max_gradient_norm: float | None = None,
    max_gradient_value: float | None = None,
) -> None:
    """Backward on the scaled loss, unscale, clip, step, update the scale, zero the grads.

    `optimizer` is a cstorch optimizer or a list of them. Gradients are
    clipped by norm or by value (not both) after unscaling.
    """
    from cslint.cstorch.optim.optimizer import Optimizer

    if not isinstance(loss, torch.Tensor):
        raise ValueError(f"optimizer_step expects the loss as a tensor, got {type(loss).__name__}")
    optimizers = list(optimizer) if isinstance(optimizer, (list, tuple)) else [optimizer]
    for position, each in enumerate(optimizers):
        if not isinstance(each, Optimizer):
            raise TypeError(
                f"optimizer_step expects cstorch.optim.Optimizer instances, optimizer "
                f"{position} is a {type(each).__name__}"
            )
    if not isinstance(grad_scaler, GradScaler):
        raise TypeError(
            f"optimizer_step expects a cstorch.amp.GradScaler, got {type(grad_scaler).__name__}"
        )
    for name, limit in (("max_gradient_norm", max_gradient_norm), ("max_gradient_value", max_gradient_value)):
        if limit is not None and limit < 0.0:
            raise ValueError(f"{name} must be a non-negative number, got {limit}")
    if max_gradient_norm is not None and max_gradient_value is not None:
        raise ValueError("clip gradients by max_gradient_norm or by max_gradient_value, not both")

    grad_scaler.scale(loss).backward()
    for each in optimizers:
        grad_scaler.unscale_(each)
    params = [p for each in optimizers for group in each.param_groups for p in group["params"]]
    if max_gradient_norm is not None:
        torch.nn.utils.clip_grad_norm_(params, max_gradient_norm)
    elif max_gradient_value is not None:
        torch.nn.utils.clip_grad_value_(params, max_gradient_value)
    for each in optimizers:
        grad_scaler.step(each)
    grad_scaler.update()
    for each in optimizers:
        each.zero_grad()
