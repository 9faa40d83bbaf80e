"""Step time of cstorch.optim's Adam, AdamW and SGD (momentum) against torch.optim.

For each optimizer and parameter layout (50 x 1e5 and 2000 x 100 float32
elements by default) prints the median milliseconds per `step()` of:
torch.optim with foreach=True and foreach=False, ours with strict mode off
(`cstorch.strict(False)`) and on (the default); then the ratios ours(strict
off) / torch foreach and strict on / strict off.

Targets (issue 14): ours within 1.5x of torch's foreach path with strict mode
off; strict mode within 2x of strict off.

    python benchmarks/optimizer_step.py [--repeats 30] [--layouts 50x100000,2000x100]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import cslint.cstorch as cstorch

OPTIMIZERS = {
    # name: (our class, torch class, keyword arguments for both)
    "Adam": (cstorch.optim.Adam, torch.optim.Adam, dict(lr=1e-3, weight_decay=0.01)),
    "AdamW": (cstorch.optim.AdamW, torch.optim.AdamW, dict(lr=1e-3, weight_decay=0.01)),
    "SGD": (cstorch.optim.SGD, torch.optim.SGD, dict(lr=1e-2, momentum=0.9)),
}


def make_params(count: int, numel: int) -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(0)
    params = []
    for _ in range(count):
        param = torch.nn.Parameter(torch.randn(numel, generator=generator))
        param.grad = torch.randn(numel, generator=generator) * 1e-3
        params.append(param)
    return params


def strict_step(optimizer, enabled: bool):
    def step():
        with cstorch.strict(enabled):
            optimizer.step()

    return step


def measure(name: str, count: int, numel: int, repeats: int, warmup: int = 3) -> dict[str, float]:
    """Median ms per step of each variant, stepped in turn so that load from
    other processes falls on all of them alike."""
    ours_class, torch_class, arguments = OPTIMIZERS[name]
    steps = {}
    for foreach in (True, False):
        optimizer = torch_class(make_params(count, numel), **arguments, foreach=foreach)
        steps[f"torch foreach={foreach}"] = optimizer.step
    # One instance per setting: strict mode decides at construction whether
    # the lr is a tensor, as it does for users.
    for enabled in (False, True):
        with cstorch.strict(enabled):
            optimizer = ours_class(make_params(count, numel), **arguments)
        steps[f"ours strict={enabled}"] = strict_step(optimizer, enabled)
    timings = {variant: [] for variant in steps}
    for repeat in range(warmup + repeats):
        for variant, step in steps.items():
            start = time.perf_counter()
            step()
            elapsed = time.perf_counter() - start
            if repeat >= warmup:
                timings[variant].append(elapsed)
    return {variant: statistics.median(values) * 1e3 for variant, values in timings.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--layouts", default="50x100000,2000x100",
                        help="comma-separated COUNTxNUMEL parameter layouts")
    parser.add_argument("--optimizers", default=",".join(OPTIMIZERS))
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (1: steadier on a shared machine)")
    options = parser.parse_args()
    torch.set_num_threads(options.threads)
    layouts = [tuple(int(part) for part in layout.split("x")) for layout in options.layouts.split(",")]

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"median of {options.repeats} steps, ms per step")
    header = (f"{'optimizer':9s} {'params':>11s} {'torch fe':>9s} {'torch loop':>10s} "
              f"{'ours':>8s} {'ours strict':>11s}   {'ours/fe':>7s} {'strict/off':>10s}")
    print(header)
    for name in options.optimizers.split(","):
        for count, numel in layouts:
            figures = measure(name, count, numel, options.repeats)
            foreach_ms = figures["torch foreach=True"]
            relaxed_ms = figures["ours strict=False"]
            strict_ms = figures["ours strict=True"]
            print(f"{name:9s} {f'{count}x{numel}':>11s} {foreach_ms:9.2f} "
                  f"{figures['torch foreach=False']:10.2f} {relaxed_ms:8.2f} {strict_ms:11.2f}   "
                  f"{relaxed_ms / foreach_ms:6.2f}x {strict_ms / relaxed_ms:9.2f}x")


if __name__ == "__main__":
    main()
