"""Shared helpers for the cslint.cstorch runtime tests.

Test optimizers here are test helpers, not the optimizer library (which comes
with its own issue): a compliant Adam and SGD, an optimizer whose step runs a
body function written in the test file (so violations have a line there), and
a linear LR scheduler.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import sys
import types
from pathlib import Path

import pytest
import torch

import cslint.cstorch as cstorch

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
_MISSING = object()


def cerebras_modules() -> dict[str, types.ModuleType]:
    """`cerebras.pytorch` and its optim submodules mapped to cslint.cstorch: what a
    fixture written for the cluster imports."""
    cerebras = types.ModuleType("cerebras")
    cerebras.__path__ = []
    cerebras.pytorch = cstorch
    return {
        "cerebras": cerebras,
        "cerebras.pytorch": cstorch,
        "cerebras.pytorch.optim": cstorch.optim,
        "cerebras.pytorch.optim.optimizer": cstorch.optim.optimizer,
        "cerebras.pytorch.optim.lr_scheduler": cstorch.optim.lr_scheduler,
        "cerebras.pytorch.optim.scheduler": cstorch.optim.scheduler,
        "cerebras.pytorch.optim.weight_decay_scheduler": cstorch.optim.weight_decay_scheduler,
    }


@contextlib.contextmanager
def swapped_modules(replacements: dict):
    """`sys.modules` with `replacements` in place for the duration."""
    saved = {name: sys.modules.get(name, _MISSING) for name in replacements}
    sys.modules.update(replacements)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is _MISSING:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def load_fixture(relative: str) -> types.ModuleType:
    """A single-file fixture (path under fixtures/) run as a module on cslint.cstorch."""
    path = FIXTURES / relative
    spec = importlib.util.spec_from_file_location(f"fixture_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    with swapped_modules(cerebras_modules()):
        spec.loader.exec_module(module)
    return module


@functools.lru_cache(maxsize=None)
def _lines(path: str) -> tuple[str, ...]:
    with open(path, encoding="utf-8") as source:
        return tuple(source.read().splitlines())


def marked_line(path: str, marker: str) -> int:
    """The line number of the one line in `path` ending with `# <marker>`."""
    matches = [
        number
        for number, line in enumerate(_lines(path), start=1)
        if line.rstrip().endswith(f"# {marker}")
    ]
    if len(matches) != 1:
        raise LookupError(f"marker {marker!r} found {len(matches)} times in {path}")
    return matches[0]


def assert_compliance_error(code: str, path: str, marker: str, run, owner: str | None = None):
    """Run `run()`; it must raise `code` pointing at the marked line of `path`."""
    with pytest.raises(cstorch.ComplianceError) as caught:
        run()
    error = caught.value
    message = str(error)
    assert message.startswith(code + " "), message
    assert error.code == code, message
    assert error.filename == path, message
    assert error.lineno == marked_line(path, marker), message
    assert f"{path}:{error.lineno}" in message
    assert "fix:" in message
    if owner is not None:
        assert error.owner == owner, message
        assert f" in {owner} " in message
    return error


def make_params(shapes=((4, 3), (5,)), seed: int = 0) -> list[torch.nn.Parameter]:
    """Parameters of the given shapes with gradients set (deterministic)."""
    generator = torch.Generator().manual_seed(seed)
    params = []
    for shape in shapes:
        param = torch.nn.Parameter(torch.randn(shape, generator=generator))
        param.grad = torch.randn(shape, generator=generator)
        params.append(param)
    return params


def set_new_grads(params, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    for param in params:
        param.grad = torch.randn(param.shape, generator=generator)


class CompliantAdam(cstorch.optim.Optimizer):
    """Adam with bias correction, written by the Cerebras rules."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(
            params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        )

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["exp_avg"] = cstorch.zeros_like(p)
                state["exp_avg_sq"] = cstorch.zeros_like(p)
                # beta^step, multiplied in at the start of each step.
                state["beta1_power"] = torch.tensor(1.0, device=p.device)
                state["beta2_power"] = torch.tensor(1.0, device=p.device)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if group["weight_decay"] != 0:
                    grad = grad.add(p, alpha=group["weight_decay"])
                state = self.state[p]
                state["beta1_power"].mul_(beta1)
                state["beta2_power"].mul_(beta2)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(grad, alpha=1.0 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
                bias_correction1 = 1.0 - state["beta1_power"]
                bias_correction2 = 1.0 - state["beta2_power"]
                denom = (exp_avg_sq.sqrt() / bias_correction2.sqrt()).add_(group["eps"])
                p.addcdiv_(-group["lr"] / bias_correction1 * exp_avg, denom)
        return loss

    def state_names_to_sparsify(self):
        return ["exp_avg", "exp_avg_sq"]


class CompliantSGD(cstorch.optim.Optimizer):
    """SGD with momentum; state only when momentum is on (a host decision)."""

    def __init__(self, params, lr=0.1, momentum=0.0, enable_global_step=False):
        super().__init__(params, dict(lr=lr, momentum=momentum), enable_global_step)

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                if group["momentum"] != 0:
                    self.state[p]["momentum_buffer"] = cstorch.zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                update = p.grad
                if group["momentum"] != 0:
                    buffer = self.state[p]["momentum_buffer"]
                    buffer.mul_(group["momentum"]).add_(p.grad)
                    update = buffer
                if self.enable_global_step:
                    self.increment_global_step(p)
                p.sub_(group["lr"] * update)


class BodyOptimizer(cstorch.optim.Optimizer):
    """Runs `body(optimizer, group, p, state)` for each parameter with a grad.

    preinitialize creates the state most bodies use: `exp_avg` (zeros like
    p), `step` (a float32 0-dim tensor) and `count` (a Python int).
    """

    def __init__(self, params, body, lr=0.01, momentum=0.9, **extra_defaults):
        self.body = body
        super().__init__(params, dict(lr=lr, momentum=momentum, **extra_defaults))

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["exp_avg"] = cstorch.zeros_like(p)
                self.state[p]["step"] = torch.tensor(0.0, device=p.device)
                self.state[p]["count"] = 0

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                self.body(self, group, p, self.state[p])
        return loss


def run_steps(optimizer, steps: int = 5) -> None:
    for step in range(steps):
        optimizer.step()
        set_new_grads(
            [p for group in optimizer.param_groups for p in group["params"]], seed=100 + step
        )


class StraightLineLR(cstorch.optim.lr_scheduler.LRScheduler):
    """lr goes linearly from `start` to `end` over `total_iters` steps, then stays."""

    def __init__(self, optimizer, start, end, total_iters, param_group_tags=None):
        self.start = start
        self.end = end
        super().__init__(optimizer, total_iters=total_iters, param_group_tags=param_group_tags)

    def _get_closed_form_lr(self):
        progress = torch.clamp(self.last_epoch / self.total_iters, max=1.0)
        return torch.tensor(self.start) + (self.end - self.start) * progress

    def expected(self, step: int) -> float:
        return self.start + (self.end - self.start) * min(step / self.total_iters, 1.0)
