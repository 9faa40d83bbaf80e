"""Strict-mode overhead of cslint.cstorch: step time with and without the guard.

Prints, for an Adam written with torch._foreach_* ops and for a
per-parameter-loop Adam (50 parameters of 1e5 float32 elements each), the
median step time in strict mode and with `cstorch.strict(False)`, and their
ratio; then the cost of `cstorch.check_static_graph` for each.

Target (issue 5): strict mode costs at most 2x on the foreach Adam.

    python benchmarks/runtime_overhead.py [--params 50] [--numel 100000] [--repeats 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import cslint.cstorch as cstorch


class ForeachAdam(cstorch.optim.Optimizer):
    """Adam (bias-corrected) with one _foreach_* op per stage for all parameters."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    def preinitialize(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                state = self.state[p]
                state["exp_avg"] = cstorch.zeros_like(p)
                state["exp_avg_sq"] = cstorch.zeros_like(p)
                # beta^step, kept as tensors so the step never changes the graph.
                state["beta1_power"] = torch.tensor(beta1, device=p.device)
                state["beta2_power"] = torch.tensor(beta2, device=p.device)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            states = [self.state[p] for p in params]
            exp_avgs = [s["exp_avg"] for s in states]
            exp_avg_sqs = [s["exp_avg_sq"] for s in states]
            beta1_powers = [s["beta1_power"] for s in states]
            beta2_powers = [s["beta2_power"] for s in states]

            torch._foreach_mul_(exp_avgs, beta1)
            torch._foreach_add_(exp_avgs, grads, alpha=1.0 - beta1)
            torch._foreach_mul_(exp_avg_sqs, beta2)
            torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1.0 - beta2)

            bias_correction1 = torch._foreach_add(torch._foreach_neg(beta1_powers), 1.0)
            bias_correction2 = torch._foreach_add(torch._foreach_neg(beta2_powers), 1.0)
            denom = torch._foreach_sqrt(exp_avg_sqs)
            torch._foreach_div_(denom, torch._foreach_sqrt(bias_correction2))
            torch._foreach_add_(denom, group["eps"])
            step_sizes = torch._foreach_mul(torch._foreach_reciprocal(bias_correction1), group["lr"])
            updates = torch._foreach_mul(exp_avgs, step_sizes)
            torch._foreach_div_(updates, denom)
            torch._foreach_sub_(params, updates)

            torch._foreach_mul_(beta1_powers, beta1)
            torch._foreach_mul_(beta2_powers, beta2)


class LoopAdam(ForeachAdam):
    """The same Adam as a Python loop over parameters (more, smaller ops)."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(p.grad, alpha=1.0 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1.0 - beta2)
                bias_correction1 = 1.0 - state["beta1_power"]
                bias_correction2 = 1.0 - state["beta2_power"]
                denom = (exp_avg_sq.sqrt() / bias_correction2.sqrt()).add_(group["eps"])
                p.addcdiv_(-group["lr"] / bias_correction1 * exp_avg, denom)
                state["beta1_power"].mul_(beta1)
                state["beta2_power"].mul_(beta2)


def make_optimizer(optimizer_class, num_params: int, numel: int):
    generator = torch.Generator().manual_seed(0)
    params = []
    for _ in range(num_params):
        p = torch.nn.Parameter(torch.randn(numel, generator=generator))
        p.grad = torch.randn(numel, generator=generator)
        params.append(p)
    return optimizer_class(params, lr=1e-3)


def timed_step(optimizer, strict: bool) -> float:
    with cstorch.strict(strict):
        start = time.perf_counter()
        optimizer.step()
        return time.perf_counter() - start


def median_step_seconds(optimizer, repeats: int, warmup: int = 3) -> tuple[float, float]:
    """(strict, strict(False)) median step times, measured alternately so that
    load from other processes affects both alike."""
    for _ in range(warmup):
        timed_step(optimizer, True)
        timed_step(optimizer, False)
    strict_timings, relaxed_timings = [], []
    for _ in range(repeats):
        strict_timings.append(timed_step(optimizer, True))
        relaxed_timings.append(timed_step(optimizer, False))
    return statistics.median(strict_timings), statistics.median(relaxed_timings)


def graph_check_seconds(optimizer, steps: int = 3) -> float:
    start = time.perf_counter()
    cstorch.check_static_graph(optimizer, steps=steps)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, default=50)
    parser.add_argument("--numel", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=50)
    options = parser.parse_args()

    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{options.params} params x {options.numel} elements, "
        f"median of {options.repeats} steps"
    )
    for optimizer_class in (ForeachAdam, LoopAdam):
        optimizer = make_optimizer(optimizer_class, options.params, options.numel)
        strict_seconds, relaxed_seconds = median_step_seconds(optimizer, options.repeats)
        with cstorch.strict(True):
            check_seconds = graph_check_seconds(optimizer, steps=3)
        print(
            f"{optimizer_class.__name__:12s} strict {strict_seconds * 1e3:8.2f} ms   "
            f"strict(False) {relaxed_seconds * 1e3:8.2f} ms   "
            f"ratio {strict_seconds / relaxed_seconds:5.2f}x   "
            f"check_static_graph(steps=3) {check_seconds * 1e3:8.2f} ms "
            f"({check_seconds / 3 / relaxed_seconds:5.2f}x a step)"
        )


if __name__ == "__main__":
    main()
