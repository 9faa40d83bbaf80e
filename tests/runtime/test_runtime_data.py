"""cstorch.utils.data: DataLoader, DataExecutor, current_executor and checkpoint closures."""

from __future__ import annotations

import pytest
import torch

import cslint.cstorch as cstorch
from cslint.cstorch.utils.data import DataExecutor, DataLoader


def numbered_batches(count: int):
    return [torch.full((2,), float(number)) for number in range(count)]


def torch_loader(count: int, batch_size: int):
    dataset = torch.utils.data.TensorDataset(torch.arange(count, dtype=torch.float32))
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size)


def test_a_dataloader_calls_input_fn_with_its_arguments_when_first_used():
    calls = []

    def input_fn(count, batch_size=1):
        calls.append((count, batch_size))
        return torch_loader(count, batch_size)

    loader = DataLoader(input_fn, 6, batch_size=2)
    assert calls == []
    assert len(loader) == 3
    assert [first.tolist() for (first,) in loader] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    assert calls == [(6, 2)]


def test_a_dataloader_needs_a_callable_that_returns_an_iterable():
    with pytest.raises(TypeError, match="expects a callable that builds and returns a torch.utils.data.DataLoader"):
        DataLoader(torch_loader(4, 2))

    def input_fn():
        return 42

    with pytest.raises(TypeError, match="input_fn .*input_fn returned a value of type int: it must return"):
        iter(DataLoader(input_fn))


def test_the_executor_rejects_a_loader_that_is_not_a_cstorch_dataloader(cpu_backend):
    with pytest.raises(TypeError, match="Detected that dataloader was not wrapped using a cstorch.utils.data.DataLoader"):
        DataExecutor(torch_loader(4, 2))


def test_the_executor_needs_a_backend():
    with pytest.raises(RuntimeError, match="no cstorch backend"):
        DataExecutor(DataLoader(numbered_batches, 2))


def test_the_executor_runs_num_steps_restarting_the_loader_and_counting_steps(cpu_backend):
    executor = DataExecutor(DataLoader(numbered_batches, 3), num_steps=7)
    seen = []
    for inputs in executor:
        current = cstorch.current_executor()
        assert current is executor
        seen.append((current.user_iteration, inputs[0].item(), current.on_final_iteration))
    assert [number for _, number, _ in seen] == [0, 1, 2, 0, 1, 2, 0]
    assert [step for step, _, _ in seen] == list(range(1, 8))
    assert [final for _, _, final in seen] == [False] * 6 + [True]
    assert len(executor) == 7
    with pytest.raises(RuntimeError, match="no DataExecutor is running"):
        cstorch.current_executor()


def test_the_executor_defaults_to_the_loaders_length(cpu_backend):
    assert len(DataExecutor(DataLoader(numbered_batches, 4))) == 4
    with pytest.raises(RuntimeError, match="the dataloader has no length; pass num_steps"):
        DataExecutor(DataLoader(lambda: iter(numbered_batches(2))))


def test_the_executor_validates_its_counts(cpu_backend):
    loader = DataLoader(numbered_batches, 2)
    with pytest.raises(RuntimeError, match="num_steps must be >= 1, got 0"):
        DataExecutor(loader, num_steps=0)
    with pytest.raises(TypeError, match="checkpoint_steps must be an int or None, got float"):
        DataExecutor(loader, checkpoint_steps=2.0)
    with pytest.raises(RuntimeError, match="activation_steps must be >= 1, got 0"):
        DataExecutor(loader, activation_steps=0)


def test_an_empty_loader_is_reported(cpu_backend):
    with pytest.raises(RuntimeError, match="the dataloader produced no batch"):
        for _ in DataExecutor(DataLoader(list), num_steps=2):
            pass


def test_checkpoint_steps_are_every_kth_step_and_the_last(cpu_backend):
    executor = DataExecutor(DataLoader(numbered_batches, 10), num_steps=7, checkpoint_steps=3)
    marked = [executor.run_context.is_checkpoint_step for _ in executor]
    assert [step for step, is_checkpoint in enumerate(marked, 1) if is_checkpoint] == [3, 6, 7]
    never = DataExecutor(DataLoader(numbered_batches, 3), checkpoint_steps=0)
    assert not any(never.run_context.is_checkpoint_step for _ in never)


def test_checkpoint_closures_run_only_on_checkpoint_steps_after_the_traced_step(cpu_backend):
    saved = []

    @cstorch.checkpoint_closure
    def save_checkpoint(total):
        saved.append((cstorch.current_executor().user_iteration, total.item()))

    @cstorch.trace
    def training_step(inputs):
        total = inputs.sum()
        save_checkpoint(total)
        saved.append("step body ends")
        return total

    for inputs in DataExecutor(DataLoader(numbered_batches, 5), checkpoint_steps=2):
        training_step(inputs)
    assert [entry for entry in saved if entry != "step body ends"] == [(2, 2.0), (4, 6.0), (5, 8.0)]
    assert saved[:2] == ["step body ends", "step body ends"]


def test_a_checkpoint_closure_outside_an_executor_raises_like_production(cpu_backend):
    save_checkpoint = cstorch.checkpoint_closure(lambda: None)
    with pytest.raises(RuntimeError, match="checkpoint closure <lambda> called outside a running DataExecutor"):
        save_checkpoint()


def test_batches_come_on_the_backends_device(cpu_backend):
    loader = DataLoader(lambda: [{"x": torch.ones(2), "y": [torch.zeros(1)]}])
    (batch,) = list(DataExecutor(loader))
    assert batch["x"].device == cpu_backend.torch_device and batch["y"][0].device == cpu_backend.torch_device
