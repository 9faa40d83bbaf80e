"""Strict mode's cost on a whole training step: a 2-layer MLP's forward, backward and
cstorch.optim.Adam step, in a `@cstorch.trace` function as a training script writes it.

For each model size prints the median milliseconds per step with strict mode off
(`cstorch.strict(False)`: the traced function just runs, the lr a Python float), off
with the optimizer built in strict mode (the lr a tensor, as on the system: the same
numerics as strict on, without the checks) and on (the default: the step runs under
the guard), and the ratios; the first calls, whose graphs strict mode records and
compares (CS501), are timed apart. `--profile` prints where a
strict step's time goes (cProfile, cumulative).

Target (issue 15): strict on within 1.5x of strict off.

    python benchmarks/strict_training_step.py [--repeats 50] [--sizes 784x256x10,16x32x1]
        [--batch 64] [--threads 1] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

import torch

import cslint.cstorch as cstorch

GRAPH_CHECK_STEPS = 3  # the calls of a traced step recorded by default


def make_training_step(sizes: tuple[int, int, int], batch: int, strict: bool,
                       built_strict: bool | None = None):
    """A traced training step over a fresh MLP and Adam, run with strict mode on or off.

    Strict mode decides at the optimizer's construction whether the lr is a tensor
    (as on the system) or a Python float; `built_strict` (default: `strict`) sets it."""
    inputs_size, hidden_size, outputs_size = sizes
    torch.manual_seed(0)
    with cstorch.strict(strict if built_strict is None else built_strict):
        model = torch.nn.Sequential(
            torch.nn.Linear(inputs_size, hidden_size),
            torch.nn.ReLU(),
            torch.nn.Linear(hidden_size, outputs_size),
        )
        optimizer = cstorch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.MSELoss()
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(batch, inputs_size, generator=generator)
    targets = torch.randn(batch, outputs_size, generator=generator)

    @cstorch.trace
    def training_step(inputs, targets):
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    def step():
        with cstorch.strict(strict):
            training_step(inputs, targets)

    return step


def measure(sizes, batch: int, repeats: int, warmup: int = 3) -> dict[str, float]:
    """Median ms per step of strict off and on, stepped in turn so that load from
    other processes falls on both alike; and the mean of the recorded first calls."""
    steps = {
        "off": make_training_step(sizes, batch, strict=False),
        # The same numerics as strict on (a tensor lr), without the checks.
        "off, tensor lr": make_training_step(sizes, batch, strict=False, built_strict=True),
        "on": make_training_step(sizes, batch, strict=True),
    }
    recorded = []
    for _ in range(GRAPH_CHECK_STEPS):
        for variant, step in steps.items():
            start = time.perf_counter()
            step()
            if variant == "on":
                recorded.append(time.perf_counter() - start)
    timings = {variant: [] for variant in steps}
    for repeat in range(warmup + repeats):
        for variant, step in steps.items():
            start = time.perf_counter()
            step()
            elapsed = time.perf_counter() - start
            if repeat >= warmup:
                timings[variant].append(elapsed)
    figures = {variant: statistics.median(values) * 1e3 for variant, values in timings.items()}
    figures["recorded"] = statistics.mean(recorded) * 1e3
    return figures


def profile(sizes, batch: int, repeats: int) -> None:
    step = make_training_step(sizes, batch, strict=True)
    for _ in range(GRAPH_CHECK_STEPS + 3):
        step()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeats):
        step()
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--sizes", default="784x256x10,16x32x1",
                        help="comma-separated INxHIDDENxOUT MLP sizes")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (1: steadier on a shared machine)")
    parser.add_argument("--profile", action="store_true",
                        help="profile strict steps of the first size instead")
    options = parser.parse_args()
    torch.set_num_threads(options.threads)
    all_sizes = [tuple(int(part) for part in size.split("x")) for size in options.sizes.split(",")]
    if options.profile:
        profile(all_sizes[0], options.batch, options.repeats)
        return

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {options.batch}, "
          f"median of {options.repeats} steps, ms per step")
    print(f"{'MLP':>12s} {'off':>7s} {'off, tensor lr':>14s} {'on':>7s} {'on/off':>7s} "
          f"{'on/off, tensor lr':>17s} {'first ' + str(GRAPH_CHECK_STEPS) + ' on (recorded)':>23s}")
    for sizes in all_sizes:
        figures = measure(sizes, options.batch, options.repeats)
        off, tensor_lr, on = figures["off"], figures["off, tensor lr"], figures["on"]
        print(f"{'x'.join(map(str, sizes)):>12s} {off:7.3f} {tensor_lr:14.3f} {on:7.3f} "
              f"{on / off:6.2f}x {on / tensor_lr:16.2f}x {figures['recorded']:23.3f}")


if __name__ == "__main__":
    main()
