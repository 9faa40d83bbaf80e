"""Strict mode's cost on a per-parameter loop: many small parameters, one op at a time.

Prints, for a compliant per-parameter SGD with momentum and a compliant
per-parameter Adam (written as users write them, the style of the runtime
tests), the median ms per `step()` with strict mode on and off, the cost per
parameter, and their ratio. 2,000 parameters of 100 float32 elements by
default: the op overhead, not the arithmetic, is what is measured.

"floor" is strict mode off with an empty `TorchFunctionMode` around the step:
what any function-mode guard costs before it does anything (torch calls the
mode's Python `__torch_function__` for every op and property read).
"prov." is strict mode off under a function mode written here that does only
the bookkeeping any guard of device values needs, in the plainest way: look up
each op's tensor inputs in a weak registry of device values and register the
new tensors it returns (no checks at all). Against it, what strict mode's
checks themselves cost shows.

Target (issue 15): strict on within 2x of strict off.

    python benchmarks/strict_mode_overhead.py [--params 2000] [--numel 100] [--repeats 30]
"""

from __future__ import annotations

import argparse
import statistics
import time
import weakref

import torch
from torch.overrides import TorchFunctionMode

import cslint.cstorch as cstorch


class LoopSGD(cstorch.optim.Optimizer):
    """SGD with momentum, one parameter at a time."""

    def __init__(self, params, lr=0.01, momentum=0.9):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["momentum_buffer"] = cstorch.zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                buffer = self.state[p]["momentum_buffer"]
                buffer.mul_(group["momentum"]).add_(p.grad)
                p.sub_(group["lr"] * buffer)


class LoopAdam(cstorch.optim.Optimizer):
    """Adam with bias correction, one parameter at a time."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["exp_avg"] = cstorch.zeros_like(p)
                state["exp_avg_sq"] = cstorch.zeros_like(p)
                state["beta1_power"] = torch.tensor(1.0, device=p.device)
                state["beta2_power"] = torch.tensor(1.0, device=p.device)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
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


OPTIMIZERS = {"SGD (momentum)": LoopSGD, "Adam": LoopAdam}


class PassThroughMode(TorchFunctionMode):
    """A function mode that only runs each op: the floor of any such guard."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class ProvenanceOnlyMode(TorchFunctionMode):
    """Device-value bookkeeping and nothing else: a weak registry keyed by tensor
    identity, looked up for each input, written for each new output."""

    def __init__(self, device_values):
        super().__init__()
        self.registry = {id(value): weakref.ref(value) for value in device_values}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        registry = self.registry
        from_device = False
        for arg in args:
            if isinstance(arg, torch.Tensor):
                ref = registry.get(id(arg))
                if ref is not None and ref() is arg:
                    from_device = True
                    break
        result = func(*args, **(kwargs or {}))
        if from_device and isinstance(result, torch.Tensor) and (not args or result is not args[0]):
            registry[id(result)] = weakref.ref(result)
        return result


def device_values(optimizer) -> list[torch.Tensor]:
    """The parameters, gradients and state tensors of `optimizer`."""
    values = []
    for group in optimizer.param_groups:
        for param in group["params"]:
            values += [param, param.grad]
            values += [v for v in optimizer.state[param].values() if isinstance(v, torch.Tensor)]
        values += [v for v in group.values() if isinstance(v, torch.Tensor)]
    return values


def make_params(count: int, numel: int) -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(0)
    params = []
    for _ in range(count):
        param = torch.nn.Parameter(torch.randn(numel, generator=generator))
        param.grad = torch.randn(numel, generator=generator) * 1e-3
        params.append(param)
    return params


def measure(optimizer_class, count: int, numel: int, repeats: int, warmup: int = 3):
    """Median ms per step: strict off, off under an empty function mode (the
    floor) and strict on, stepped in turn so that load from other processes
    falls on all alike."""
    steps = {}
    for variant in ("off", "floor", "provenance floor", "strict"):
        enabled = variant == "strict"
        # Strict mode decides at construction whether the lr is a tensor.
        with cstorch.strict(enabled):
            optimizer = optimizer_class(make_params(count, numel))
        mode = {"floor": PassThroughMode,
                "provenance floor": lambda o=optimizer: ProvenanceOnlyMode(device_values(o)),
                }.get(variant)

        def step(optimizer=optimizer, enabled=enabled, mode=mode):
            with cstorch.strict(enabled):
                if mode is not None:
                    with mode():
                        optimizer.step()
                else:
                    optimizer.step()

        steps[variant] = step
    timings = {variant: [] for variant in steps}
    for repeat in range(warmup + repeats):
        for variant, step in steps.items():
            start = time.perf_counter()
            step()
            if repeat >= warmup:
                timings[variant].append(time.perf_counter() - start)
    return {variant: statistics.median(values) * 1e3 for variant, values in timings.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, default=2000)
    parser.add_argument("--numel", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (1: steadier on a shared machine)")
    options = parser.parse_args()
    torch.set_num_threads(options.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{options.params} x {options.numel} float32, median of {options.repeats} steps")
    print(f"{'optimizer':15s} {'off ms':>8s} {'floor ms':>9s} {'prov. ms':>9s} {'strict ms':>10s} "
          f"{'us/param strict':>16s} {'floor/off':>9s} {'prov./off':>9s} {'strict/off':>10s}")
    for name, optimizer_class in OPTIMIZERS.items():
        figures = measure(optimizer_class, options.params, options.numel, options.repeats)
        off, floor, strict = figures["off"], figures["floor"], figures["strict"]
        provenance = figures["provenance floor"]
        print(f"{name:15s} {off:8.2f} {floor:9.2f} {provenance:9.2f} {strict:10.2f} "
              f"{strict * 1e3 / options.params:16.1f} "
              f"{floor / off:8.2f}x {provenance / off:8.2f}x {strict / off:9.2f}x")


if __name__ == "__main__":
    main()
