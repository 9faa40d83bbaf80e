"""Adam and AdamW (and their common base), as the production release computes them."""

from __future__ import annotations

import torch

from cslint.cstorch.creation_ops import zeros_like
from cslint.cstorch.optim._checks import betas_below_one, non_negative
from cslint.cstorch.optim._foreach import device_groups, gradients, is_zero, per_parameter
from cslint.cstorch.optim.optimizer import Optimizer

__all__ = ["AdamBase", "Adam", "AdamW"]


def _check_adam_arguments(lr, betas, eps) -> None:
    non_negative(lr=lr)
    betas_below_one(betas)
    non_negative(eps=eps)


class AdamBase(Optimizer):
    """The Adam update shared by `Adam` and `AdamW`.

    Per parameter, with `g` the gradient plus `l2_regularization_rate * p`:

        m <- beta1 * m + (1 - beta1) * g          (state "exp_avg")
        v <- beta2 * v + (1 - beta2) * g * g      (state "exp_avg_sq")
        u <- m / (sqrt(v) + eps)                  (sqrt(max(v)) with amsgrad)
        u <- u * sqrt(1 - beta2^t) / (1 - beta1^t)   if correct_bias
        p <- p - lr * (u + weight_decay * p)

    (computed as `p * (1 - lr * weight_decay) - lr * u`, in one pass).

    `beta1^t` and `beta2^t` are the float32 state tensors "beta1_power" and
    "beta2_power", multiplied by beta after each step (no step counter).

    Args:
        params: parameters or param-group dicts.
        lr: learning rate.
        betas: decay rates of the first and second moments.
        eps: added to `sqrt(v)` before bias correction (production's
            placement; torch.optim adds it after, to `sqrt(v / (1 - beta2^t))`).
        weight_decay: decoupled weight decay, scaled by lr.
        l2_regularization_rate: L2 penalty added to the gradient.
        correct_bias: apply the bias correction (False: BERT's variant).
        amsgrad: use the running maximum of `v` (state "max_exp_avg_sq").

    `load_state_dict` also accepts a torch.optim.Adam / AdamW state dict: its
    per-parameter `step` k becomes `beta^(k+1)`, the powers the next step
    uses. (Production sets `beta^k`, which repeats step k's bias correction
    once; and it needs a `correct_bias` key that torch's AdamW groups lack,
    where this assumes True, as torch always corrects.) The given dict is not
    modified.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        l2_regularization_rate: float = 0.0,
        correct_bias: bool = True,
        amsgrad: bool = False,
    ) -> None:
        _check_adam_arguments(lr, betas, eps)
        defaults = dict(
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            l2_regularization_rate=l2_regularization_rate,
            correct_bias=correct_bias,
            amsgrad=amsgrad,
        )
        super().__init__(params, defaults)

    def preinitialize(self) -> None:
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                state = self.state[p]
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)
                if group["amsgrad"]:
                    state["max_exp_avg_sq"] = zeros_like(p)
                if group["correct_bias"]:
                    # The powers the first step uses: beta^1.
                    state["beta1_power"] = torch.tensor(beta1, dtype=torch.float32, device=p.device)
                    state["beta2_power"] = torch.tensor(beta2, dtype=torch.float32, device=p.device)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for params, grads in device_groups(group):
                self._update(group, params, grads)
        return loss

    def _update(self, group: dict, params: list, grads: list) -> None:
        beta1, beta2 = group["betas"]
        states = [self.state[p] for p in params]
        grads = gradients(params, grads, weight_decay=group["l2_regularization_rate"])
        exp_avgs = [state["exp_avg"] for state in states]
        exp_avg_sqs = [state["exp_avg_sq"] for state in states]

        torch._foreach_lerp_(exp_avgs, grads, 1.0 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1.0 - beta2)
        second_moments = exp_avg_sqs
        if group["amsgrad"]:
            second_moments = [state["max_exp_avg_sq"] for state in states]
            torch._foreach_maximum_(second_moments, exp_avg_sqs)

        denominators = torch._foreach_sqrt(second_moments)
        torch._foreach_add_(denominators, group["eps"])

        # p <- p * (1 - lr * weight_decay) + m / (denominator / scale), with
        # scale = -lr * sqrt(1 - beta2^t) / (1 - beta1^t): one pass over the
        # parameters and no temporaries beyond the denominators (the shape of
        # torch's capturable foreach Adam).
        lr = group["lr"]
        if group["correct_bias"]:
            beta1_powers = [state["beta1_power"] for state in states]
            beta2_powers = [state["beta2_power"] for state in states]
            step_sizes = torch.sqrt(1.0 - torch.stack(beta2_powers)) / (
                1.0 - torch.stack(beta1_powers)
            )
            torch._foreach_div_(denominators, per_parameter(step_sizes * -lr))
            torch._foreach_mul_(beta1_powers, beta1)
            torch._foreach_mul_(beta2_powers, beta2)
        else:
            torch._foreach_div_(denominators, -lr)

        weight_decay = group["weight_decay"]
        if not is_zero(weight_decay):
            torch._foreach_mul_(params, 1.0 - lr * weight_decay)
        torch._foreach_addcdiv_(params, exp_avgs, denominators)

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(_powers_from_torch_steps(state_dict))


def _powers_from_torch_steps(state_dict: dict) -> dict:
    """A copy of `state_dict` whose torch `step` entries are beta powers."""
    if not isinstance(state_dict, dict) or not isinstance(state_dict.get("state"), dict):
        return state_dict  # the base reports what is wrong with it
    groups_of = {}
    for group in state_dict.get("param_groups") or ():
        if isinstance(group, dict):
            for param_id in group.get("params", ()):
                groups_of[param_id] = group
    # torch's groups have no `correct_bias`: it always corrects.
    groups = [
        {"correct_bias": True, **group} if isinstance(group, dict) else group
        for group in state_dict.get("param_groups") or ()
    ]
    converted = {}
    for param_id, entries in state_dict["state"].items():
        group = groups_of.get(param_id)
        if not isinstance(entries, dict) or "step" not in entries or "beta1_power" in entries or group is None:
            converted[param_id] = entries
            continue
        entries = dict(entries)
        steps_taken = float(entries.pop("step"))
        if group.get("correct_bias", True):
            beta1, beta2 = group["betas"]
            entries["beta1_power"] = torch.tensor(beta1 ** (steps_taken + 1), dtype=torch.float32)
            entries["beta2_power"] = torch.tensor(beta2 ** (steps_taken + 1), dtype=torch.float32)
        converted[param_id] = entries
    return {**state_dict, "state": converted, "param_groups": groups}


class AdamW(AdamBase):
    """AdamW: `AdamBase` with decoupled weight decay and no L2 term.

    `p <- p - lr * (u + weight_decay * p)`, `u` the (bias-corrected) Adam
    direction of `AdamBase`.

    Args:
        params, lr, betas, amsgrad: as torch.optim.AdamW.
        eps: 1e-6 by default (torch: 1e-8), added to `sqrt(v)` before the
            bias correction (torch adds it after).
        weight_decay: 0.0 by default (torch: 1e-2), as production.
        correct_bias: False skips the bias correction.

    Loads torch.optim.AdamW state dicts (see `AdamBase`).
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        correct_bias: bool = True,
        amsgrad: bool = False,
    ) -> None:
        super().__init__(
            params,
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            l2_regularization_rate=0.0,
            correct_bias=correct_bias,
            amsgrad=amsgrad,
        )
        for group in self.param_groups:
            group["l2_regularization_rate"] = 0.0

    def load_state_dict(self, state_dict: dict) -> None:
        if isinstance(state_dict, dict) and isinstance(state_dict.get("param_groups"), list):
            state_dict = {
                **state_dict,
                "param_groups": [
                    {**group, "l2_regularization_rate": 0.0} if isinstance(group, dict) else group
                    for group in state_dict["param_groups"]
                ],
            }
        super().load_state_dict(state_dict)


class Adam(AdamBase):
    """Adam: `AdamBase` with `weight_decay` as an L2 penalty on the gradient.

    The groups hold it as `l2_regularization_rate` and keep `weight_decay` at
    0.0, as production's do: a weight-decay scheduler attached to Adam drives
    `weight_decay`, so it adds decoupled decay on top of the L2 term.

    Args:
        params, lr, betas, weight_decay, amsgrad: as torch.optim.Adam.
        eps: 1e-6 by default (torch: 1e-8), added to `sqrt(v)` before the
            bias correction (torch adds it after).

    A param group's own `weight_decay` becomes its L2 rate too (production
    replaces it with the constructor's). Loads torch.optim.Adam state dicts
    (see `AdamBase`); their `weight_decay` becomes the L2 rate.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
    ) -> None:
        super().__init__(
            params,
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=0.0,
            l2_regularization_rate=weight_decay,
            correct_bias=True,
            amsgrad=amsgrad,
        )
        self.handle_weight_decay(self.param_groups)

    def add_param_group(self, param_group: dict) -> None:
        # A group's own weight_decay is its L2 rate (production drops it for
        # the constructor's).
        if "weight_decay" in param_group and "l2_regularization_rate" not in param_group:
            param_group = {
                **param_group,
                "l2_regularization_rate": param_group["weight_decay"],
                "weight_decay": 0.0,
            }
        super().add_param_group(param_group)

    @staticmethod
    def handle_weight_decay(param_groups: list) -> None:
        """Move each group's `weight_decay` to `l2_regularization_rate` (unless
        the group has one) and bias-correct, in place."""
        for group in param_groups:
            group.setdefault("l2_regularization_rate", group.pop("weight_decay", 0.0))
            group["weight_decay"] = 0.0
            group["correct_bias"] = True

    def load_state_dict(self, state_dict: dict) -> None:
        if isinstance(state_dict, dict) and isinstance(state_dict.get("param_groups"), list):
            groups = [dict(group) if isinstance(group, dict) else group for group in state_dict["param_groups"]]
            self.handle_weight_decay([group for group in groups if isinstance(group, dict)])
            state_dict = {**state_dict, "param_groups": groups}
        super().load_state_dict(state_dict)
