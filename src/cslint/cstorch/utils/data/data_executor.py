"""`cstorch.utils.data.DataExecutor`: the steps of one run, and `current_executor()`.

On the system an executor is one compiled run of `num_steps` steps: the
loader is restarted when it runs out, and checkpoints can be taken only on
the checkpoint steps it was given.
"""

from __future__ import annotations

from collections.abc import Iterator

from cslint.cstorch.local_backend import require_backend
from cslint.cstorch.utils.data.dataloader import DataLoader

__all__ = ["DataExecutor", "RunContext", "current_executor"]


class RunContext:
    """Where a run stands: `step` counts from 0, -1 before the run starts."""

    def __init__(self, num_steps: int, checkpoint_every: int) -> None:
        self.num_steps = num_steps
        self.checkpoint_every = checkpoint_every
        self.step = -1

    @property
    def iteration(self) -> int:
        return self.step

    @property
    def user_iteration(self) -> int:
        """The step counted from 1, as users count them."""
        return self.step + 1

    @property
    def is_initial_step(self) -> bool:
        return self.step == 0

    @property
    def is_final_step(self) -> bool:
        return self.user_iteration >= self.num_steps

    @property
    def is_checkpoint_step(self) -> bool:
        """Every `checkpoint_steps`-th step, and the last one (none when 0 or None)."""
        if not self.checkpoint_every or not 0 <= self.step < self.num_steps:
            return False
        return self.user_iteration % self.checkpoint_every == 0 or self.is_final_step

    def __len__(self) -> int:
        return self.num_steps


class DataExecutor:
    """Iterate `dataloader` for `num_steps` steps (default: its length),
    restarting it when it runs out; batches come on the backend's device.

    `checkpoint_steps=k` makes every k-th step and the last one checkpoint
    steps, on which `cstorch.checkpoint_closure` functions run.
    `activation_steps` and `profiler_activities` are accepted for
    compatibility and change nothing off the system.
    """

    def __init__(
        self,
        dataloader: DataLoader,
        num_steps: int | None = None,
        checkpoint_steps: int | None = None,
        activation_steps: int | None = None,
        profiler_activities=None,
    ) -> None:
        self.backend = require_backend()
        if not isinstance(dataloader, DataLoader):
            raise TypeError(
                "Detected that dataloader was not wrapped using a "
                "cstorch.utils.data.DataLoader: wrap it as "
                "cstorch.utils.data.DataLoader(input_fn, ...), where input_fn is a "
                f"callable that returns a PyTorch dataloader (got {type(dataloader).__name__})"
            )
        if num_steps is None:
            try:
                num_steps = len(dataloader)
            except TypeError:
                raise RuntimeError(
                    "could not infer the number of steps: the dataloader has no length; "
                    "pass num_steps to the DataExecutor"
                ) from None
        _check_count("num_steps", num_steps, lowest=1)
        if checkpoint_steps is not None:
            _check_count("checkpoint_steps", checkpoint_steps, lowest=0)
        if activation_steps is not None:
            _check_count("activation_steps", activation_steps, lowest=1)
        self.dataloader = dataloader
        self.run_context = RunContext(num_steps, checkpoint_steps or 0)

    def __len__(self) -> int:
        return self.run_context.num_steps

    @property
    def iteration(self) -> int:
        """The current step, counted from 0."""
        return self.run_context.iteration

    @property
    def user_iteration(self) -> int:
        """The current step, counted from 1."""
        return self.run_context.user_iteration

    @property
    def is_initial_step(self) -> bool:
        return self.run_context.is_initial_step

    @property
    def on_final_iteration(self) -> bool:
        """Whether the current step is the run's last."""
        return self.run_context.is_final_step

    def __iter__(self) -> Iterator:
        context = self.run_context
        stack = self.backend.data_executor_stack
        stack.append(self)
        try:
            context.step = 0
            batches = self._restarting_batches()
            while context.step < context.num_steps:
                yield self.backend.move_to_device(next(batches))
                context.step += 1
        finally:
            stack.remove(self)

    def _restarting_batches(self) -> Iterator:
        while True:
            produced_one = False
            for batch in self.dataloader:
                produced_one = True
                yield batch
            if not produced_one:
                raise RuntimeError(
                    "the dataloader produced no batch: the dataset may be smaller than "
                    "the batch size (check batch_size and drop_last)"
                )


def _check_count(name: str, value, lowest: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int or None, got {type(value).__name__}")
    if value < lowest:
        raise RuntimeError(f"{name} must be >= {lowest}, got {value}")


def current_executor() -> DataExecutor:
    """The DataExecutor being iterated (the innermost one)."""
    stack = require_backend().data_executor_stack
    if not stack:
        raise RuntimeError(
            "no DataExecutor is running: wrap the dataloader as "
            "executor = cstorch.utils.data.DataExecutor(dataloader, ...) and iterate it "
            "with `for batch in executor: ...`"
        )
    return stack[-1]
