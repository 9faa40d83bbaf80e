"""CS501: cstorch.check_static_graph compares the aten ops of successive steps."""

from __future__ import annotations

import pytest
import torch

import cslint.cstorch as cstorch
from cstorch_helpers import (
    BodyOptimizer,
    CompliantAdam,
    CompliantSGD,
    assert_compliance_error,
    make_params,
)

HERE = __file__


def python_counter(opt, group, p, state):
    opt.t = getattr(opt, "t", 0) + 1
    bias_correction = 1.0 - 0.9**opt.t
    p.sub_(group["lr"] * p.grad * bias_correction)  # cs501-counter


def branch_on_step_count(opt, group, p, state):
    opt.t = getattr(opt, "t", 0) + 1
    if opt.t % 2 == 0:
        p.mul_(0.999)  # cs501-branch
    p.sub_(group["lr"] * p.grad)


def constant_from_counter(opt, group, p, state):
    opt.t = getattr(opt, "t", 0) + 1
    scale = torch.tensor(1.0 / opt.t)  # cs501-constant
    p.sub_(group["lr"] * scale * p.grad)


def decaying_python_lr(opt, group, p, state):
    group["lr"] = group["lr"] * 0.5
    p.add_(p.grad, alpha=-group["lr"])  # cs501-python-lr


def test_python_counter_changes_the_graph():
    error = assert_compliance_error(
        "CS501",
        HERE,
        "cs501-counter",
        lambda: cstorch.check_static_graph(BodyOptimizer(make_params(shapes=((4, 3),)), python_counter)),
        owner="BodyOptimizer.step",
    )
    assert isinstance(error, cstorch.GraphChangedError)
    message = str(error)
    assert "step 2 traced a different graph than step 1" in message
    assert "step 1: aten.mul.Tensor(" in message and "0.09999999999999998" in message
    assert "step 2: aten.mul.Tensor(" in message and "0.18999999999999995" in message
    assert f"{HERE}:{error.lineno}" in message


def test_branch_on_step_count_changes_the_graph():
    error = assert_compliance_error(
        "CS501",
        HERE,
        "cs501-branch",
        lambda: cstorch.check_static_graph(BodyOptimizer(make_params(shapes=((4, 3),)), branch_on_step_count)),
    )
    assert "step 2: aten.mul_.Tensor(param[0]: float32[4, 3], 0.999)" in str(error)


def test_constant_built_from_a_counter_changes_the_graph():
    error = assert_compliance_error(
        "CS501",
        HERE,
        "cs501-constant",
        lambda: cstorch.check_static_graph(BodyOptimizer(make_params(shapes=((4, 3),)), constant_from_counter)),
    )
    assert "constant: float32[] = [1.0]" in str(error)
    assert "constant: float32[] = [0.5]" in str(error)


def test_decaying_python_float_lr_changes_the_graph():
    with cstorch.strict(False):  # lr stays a Python float, as in plain torch code
        optimizer = BodyOptimizer(make_params(shapes=((4, 3),)), decaying_python_lr, lr=0.1)
        error = assert_compliance_error(
            "CS501", HERE, "cs501-python-lr", lambda: cstorch.check_static_graph(optimizer)
        )
    assert "alpha=-0.05" in str(error) and "alpha=-0.025" in str(error)


def test_compliant_optimizers_keep_a_static_graph():
    assert cstorch.check_static_graph(CompliantAdam(make_params()), steps=3) is None
    assert cstorch.check_static_graph(CompliantSGD(make_params(), momentum=0.9), steps=4) is None


def test_check_steps_the_real_optimizer_on_the_grads_already_set():
    params = make_params()
    before = [p.detach().clone() for p in params]
    optimizer = CompliantSGD(params, lr=0.1, enable_global_step=True)
    cstorch.check_static_graph(optimizer, steps=3)
    for p, original in zip(params, before):
        assert optimizer.state[p]["step"].item() == 3.0
        torch.testing.assert_close(p.detach(), original - 3 * 0.1 * p.grad)


def test_training_step_functions_are_checked_too():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    optimizer = CompliantAdam(model.parameters(), lr=0.01)
    batch = torch.randn(4, 3)

    @cstorch.trace
    def training_step():
        optimizer.zero_grad()
        model(batch).pow(2).mean().backward()
        optimizer.step()

    assert cstorch.check_static_graph(training_step, steps=3) is None

    calls = []

    def growing_step():
        calls.append(None)
        x = torch.ones(3)
        for _ in calls:  # one more op every step
            x = x * 2  # cs501-growing
        return x

    error = assert_compliance_error(
        "CS501", HERE, "cs501-growing", lambda: cstorch.check_static_graph(growing_step)
    )
    assert "step 2: aten.mul.Tensor(" in str(error)
    assert "step 1: (no more ops)" in str(error)


def test_arguments_are_validated():
    with pytest.raises(ValueError, match="at least 2 steps"):
        cstorch.check_static_graph(CompliantSGD(make_params()), steps=1)
    with pytest.raises(TypeError, match="optimizer or a callable"):
        cstorch.check_static_graph(42)


# -- role names: what arrives as a tensor is data, not graph ----------------------------------


def make_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))


def batches(count: int, size: int = 8):
    return [torch.randn(size, 3, generator=torch.Generator().manual_seed(seed)) for seed in range(count)]


def test_a_step_that_steps_a_library_lr_scheduler_keeps_a_static_graph():
    model = make_mlp()
    optimizer = cstorch.optim.Adam(model.parameters(), lr=0.01)
    scheduler = cstorch.optim.lr_scheduler.LinearLR(
        optimizer, initial_learning_rate=0.01, end_learning_rate=0.001, total_iters=10
    )
    inputs = batches(1)[0]

    def training_step():
        optimizer.zero_grad()
        model(inputs).pow(2).mean().backward()
        optimizer.step()
        scheduler.step()

    lr_tensors = set()
    for _ in range(3):
        lr_tensors.add(id(optimizer.param_groups[0]["lr"]))
        assert cstorch.check_static_graph(training_step, steps=2) is None
    assert len(lr_tensors) == 3  # a new lr tensor every step, as the scheduler writes it


def test_a_step_that_takes_its_batch_from_a_data_loader_keeps_a_static_graph():
    model = make_mlp()
    optimizer = CompliantAdam(model.parameters(), lr=0.01)
    dataset = torch.utils.data.TensorDataset(torch.cat(batches(4)))
    loader = torch.utils.data.DataLoader(dataset, batch_size=8)
    iterator = iter(loader)

    def training_step():
        (inputs,) = next(iterator)
        optimizer.zero_grad()
        model(inputs).pow(2).mean().backward()
        optimizer.step()

    assert cstorch.check_static_graph(training_step, steps=4) is None


def test_a_step_that_is_a_method_reaches_the_model_through_self():
    class Trainer:
        def __init__(self):
            self.model = make_mlp()
            self.optimizer = CompliantAdam(self.model.parameters(), lr=0.01)
            self.inputs = iter(batches(3))

        def training_step(self):
            self.optimizer.zero_grad()
            self.model(next(self.inputs)).pow(2).mean().backward()
            self.optimizer.step()

    assert cstorch.check_static_graph(Trainer().training_step, steps=3) is None


def test_a_shape_change_raises_cs501_naming_the_input_its_shapes_and_the_shape_fix():
    model = make_mlp()
    sizes = iter([8, 8, 5])

    @cstorch.trace
    def eval_step(inputs):
        return model(inputs).sum()  # cs501-shape

    error = assert_compliance_error(
        "CS501", HERE, "cs501-shape",
        lambda: [eval_step(batches(1, size)[0]) for size in sizes],
        owner="eval_step",
    )
    message = str(error)
    assert (
        "step 3 traced a different graph than step 2: "
        "the shape of input[0] changed from [8, 3] to [5, 3]"
    ) in message
    assert "step 3: aten.addmm.default(model.0.bias: float32[4], input[0]: float32[5, 3]" in message
    assert "drop_last=True" in message


def test_a_branch_taken_at_step_2_names_the_op_it_added_and_the_torch_where_fix():
    model = make_mlp()
    calls = []

    def training_step():
        calls.append(None)
        outputs = model(batches(1)[0])
        if len(calls) == 2:
            outputs = outputs.relu()  # cs501-extra-op
        return outputs.sum()

    error = assert_compliance_error(
        "CS501", HERE, "cs501-extra-op", lambda: cstorch.check_static_graph(training_step)
    )
    message = str(error)
    assert "step 2 ran aten.relu.default where step 1 ran aten.sum.default" in message
    assert "fix: the step took a different path through Python: select with torch.where" in message


def test_a_dtype_change_names_the_tensor_and_the_dtype_fix():
    dtypes = iter([torch.float32, torch.float16])

    def training_step():
        weights = torch.ones(3, dtype=next(dtypes))  # cs501-dtype
        return weights * 2

    error = assert_compliance_error(
        "CS501", HERE, "cs501-dtype", lambda: cstorch.check_static_graph(training_step, steps=2)
    )
    message = str(error)
    assert "aten.ones.default made a float16 tensor where step 1 made a float32 one" in message
    assert "fix: give each tensor the same dtype every step" in message
