"""Lamb, Lion, Adafactor and Muon: signatures, checkpoints, strict mode with a
scheduled tensor lr, and what each refuses (their numerics are in
test_runtime_optimizers_independent.py)."""

from __future__ import annotations

import inspect
import io
import math
import re

import pytest
import torch

import cslint.cstorch as cstorch

SHAPES = [(), (7,), (5, 3), (2, 3, 4)]
MUON_SHAPES = [(5, 3), (3, 5), (4, 2, 3, 3)]

# Each optimizer with every state tensor in use (weight decay on), and the
# shapes it accepts.
OPTIMIZERS = {
    "Lamb": (lambda params, **kw: cstorch.optim.Lamb(params, weight_decay=0.01, **kw), SHAPES),
    "Lion": (lambda params, **kw: cstorch.optim.Lion(params, weight_decay=0.1, **kw), SHAPES),
    "Adafactor": (
        lambda params, **kw: cstorch.optim.Adafactor(params, **{"lr": 0.01, **kw}, weight_decay=0.01),
        SHAPES,
    ),
    "Muon": (lambda params, **kw: cstorch.optim.Muon(params, **kw), MUON_SHAPES),
}


def make_params(shapes, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(shape, generator=generator)) for shape in shapes]


def set_grads(params, seed):
    generator = torch.Generator().manual_seed(1000 + seed)
    for param in params:
        param.grad = torch.randn(param.shape, generator=generator)


class InverseTimeLR(cstorch.optim.lr_scheduler.LRScheduler):
    """lr_k = initial / (1 + k): a closed form of the step tensor."""

    def __init__(self, optimizer, initial):
        self.initial = initial
        super().__init__(optimizer, total_iters=None)

    def _get_closed_form_lr(self):
        return self.initial / (1.0 + self.last_epoch)


# -- the production signatures --------------------------------------------------------

PRODUCTION_DEFAULTS = {
    "Lamb": dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0, adam=False),
    "Lion": dict(lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0),
    "Adafactor": dict(
        lr=inspect.Parameter.empty, eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8,
        beta1=None, weight_decay=0.0, scale_parameter=True, relative_step=False,
        warmup_init=False,
    ),
    "Muon": dict(lr=0.02, weight_decay=0.01, momentum=0.95, nesterov=True, ns_steps=5),
}


@pytest.mark.parametrize("name", sorted(PRODUCTION_DEFAULTS))
def test_signature_and_defaults_are_the_production_releases(name):
    cls = getattr(cstorch.optim, name)
    assert name in cstorch.optim.__all__
    assert issubclass(cls, cstorch.optim.Optimizer)
    parameters = inspect.signature(cls.__init__).parameters
    assert list(parameters) == ["self", "params", *PRODUCTION_DEFAULTS[name]]
    for argument, default in PRODUCTION_DEFAULTS[name].items():
        assert parameters[argument].default == default, argument


# -- checkpoints -----------------------------------------------------------------------


def assert_bitwise_equal(left, right, what):
    assert left.dtype == right.dtype and torch.equal(left, right), what


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_checkpoint_resumes_bitwise_identically_for_10_steps(name):
    make_optimizer, shapes = OPTIMIZERS[name]
    params = make_params(shapes)
    optimizer = make_optimizer(params)
    for step in range(5):
        set_grads(params, step)
        optimizer.step()

    saved = io.BytesIO()
    torch.save(optimizer.state_dict(), saved)
    saved.seek(0)
    resumed_params = [torch.nn.Parameter(param.detach().clone()) for param in params]
    resumed = make_optimizer(resumed_params)
    resumed.load_state_dict(torch.load(saved, weights_only=True))

    for step in range(5, 15):
        for group in (params, resumed_params):
            set_grads(group, step)
        optimizer.step()
        resumed.step()
    for index, (param, resumed_param) in enumerate(zip(params, resumed_params)):
        assert_bitwise_equal(param, resumed_param, f"parameter {index}")
        state, resumed_state = optimizer.state[param], resumed.state[resumed_param]
        assert set(state) == set(resumed_state)
        for key in state:
            assert_bitwise_equal(state[key], resumed_state[key], f"state[{index}][{key!r}]")


# -- strict mode with a scheduled lr -------------------------------------------------------


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_runs_in_strict_mode_with_a_scheduler_writing_a_tensor_lr(name):
    make_optimizer, shapes = OPTIMIZERS[name]
    params = make_params(shapes)
    optimizer = make_optimizer(params, lr=0.01)
    scheduler = InverseTimeLR(optimizer, initial=0.01)
    before = [param.detach().clone() for param in params]
    for step in range(20):
        lr = optimizer.param_groups[0]["lr"]
        assert isinstance(lr, torch.Tensor) and lr.dim() == 0
        torch.testing.assert_close(lr, torch.tensor(0.01 / (1 + step)))
        set_grads(params, step)
        optimizer.step()
        scheduler.step()
    for param, start in zip(params, before):
        assert not torch.equal(param, start)
    # The optimizer alone, on the scheduled tensor lr: check_static_graph names
    # a callable's tensors by first appearance, so the fresh lr tensor each
    # scheduler.step() writes would read as a changed graph.
    cstorch.check_static_graph(optimizer, steps=3)


def test_lion_moves_each_coordinate_by_the_scheduled_lr():
    params = make_params([(6, 4)])
    optimizer = cstorch.optim.Lion(params, lr=0.01)
    scheduler = InverseTimeLR(optimizer, initial=0.01)
    for step in range(5):
        start = params[0].detach().clone()
        set_grads(params, step)
        optimizer.step()
        scheduler.step()
        torch.testing.assert_close(
            (params[0] - start).abs(), torch.full((6, 4), 0.01 / (1 + step))
        )


def test_adafactor_without_lr_takes_it_from_a_scheduler():
    params = make_params(SHAPES)
    optimizer = cstorch.optim.Adafactor(params, lr=None)
    scheduler = InverseTimeLR(optimizer, initial=0.01)
    for step in range(3):
        set_grads(params, step)
        optimizer.step()
        scheduler.step()
    assert all(optimizer.state[param]["step"] == 3 for param in params)


def test_adafactor_without_lr_or_scheduler_names_the_group_at_its_first_step():
    params = make_params(SHAPES)
    optimizer = cstorch.optim.Adafactor([{"params": params[:1], "lr": 0.01}, {"params": params[1:]}], lr=None)
    set_grads(params, 0)
    with pytest.raises(ValueError, match="param group 1 has no lr"):
        optimizer.step()


# -- Adafactor: what production does not support ----------------------------------------


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(lr=0.01, relative_step=True), "cannot be combined with relative_step=True"),
        (dict(lr=None, relative_step=True), "relative_step=True is not supported"),
        (dict(lr=0.01, warmup_init=True), "warmup_init=True is not supported"),
        (dict(lr=0.01, clip_threshold=2.0), "only clip_threshold=1.0 is supported, got 2.0"),
        (dict(lr=0.01, beta1=0.9), r"only beta1=None \(no first moment\) is supported, got 0.9"),
        (dict(lr=0.01, eps=1e-3), "eps must be a tuple or list of two floats, got 0.001"),
        (dict(lr=0.01, eps=(1e-30,)), "two floats"),
        (dict(lr=0.01, eps=(1e-30, 1)), "two floats"),
    ],
)
def test_adafactor_refuses_what_production_does_not_support(arguments, message):
    with pytest.raises(ValueError, match=message):
        cstorch.optim.Adafactor(make_params(SHAPES), **arguments)


def test_adafactor_factors_the_second_moment_of_matrices_only():
    params = make_params(SHAPES)
    optimizer = cstorch.optim.Adafactor(params, lr=0.01)
    shapes = {
        tuple(param.shape): {key: tuple(value.shape) for key, value in optimizer.state[param].items()}
        for param in params
    }
    assert shapes == {
        (): {"exp_avg_sq": (), "step": ()},
        (7,): {"exp_avg_sq": (7,), "step": ()},
        (5, 3): {"exp_avg_sq_row": (5,), "exp_avg_sq_col": (3,), "step": ()},
        (2, 3, 4): {"exp_avg_sq_row": (2, 3), "exp_avg_sq_col": (2, 4), "step": ()},
    }


# -- Muon ------------------------------------------------------------------------------


def test_muon_writes_its_momentum_buffer_back_every_step():
    params = make_params([(4, 3)])
    optimizer = cstorch.optim.Muon(params, momentum=0.9, nesterov=False)
    buffer = optimizer.state[params[0]]["momentum_buffer"]
    expected = torch.zeros(4, 3)
    for step in range(3):
        set_grads(params, step)
        expected = 0.9 * expected + 0.1 * params[0].grad
        optimizer.step()
        assert optimizer.state[params[0]]["momentum_buffer"] is buffer
        torch.testing.assert_close(buffer, expected)


@pytest.mark.parametrize("shape", [(5,), ()])
def test_muon_refuses_a_parameter_of_fewer_than_2_dims_naming_its_shape(shape):
    params = make_params([(4, 3), shape])
    with pytest.raises(ValueError, match=rf"index 1 of param group 0\) has shape {re.escape(str(shape))}"):
        cstorch.optim.Muon(params)


def test_muon_refuses_a_later_param_group_with_a_vector_and_keeps_its_groups():
    matrix, bias = make_params([(4, 3), (4,)])
    optimizer = cstorch.optim.Muon([matrix])
    with pytest.raises(ValueError, match=r"index 0 of param group 1\) has shape \(4,\)"):
        optimizer.add_param_group({"params": [bias]})
    assert len(optimizer.param_groups) == 1


def test_muon_names_a_named_parameter_it_refuses():
    model = torch.nn.Linear(3, 4)
    with pytest.raises(ValueError, match=r"parameter 'bias' \(index 1 of param group 0\) has shape \(4,\)"):
        cstorch.optim.Muon(model.named_parameters())


def test_muon_orthogonalizes_a_4d_parameter_as_its_out_by_rest_matrix():
    (kernel,) = make_params([(4, 2, 3, 3)])
    optimizer = cstorch.optim.Muon([kernel], momentum=0.0, weight_decay=0.0)
    assert optimizer.state[kernel] == {}
    start = kernel.detach().clone()
    set_grads([kernel], 0)
    optimizer.step()
    # The lr scale uses the first two dims, as production: 0.2 * sqrt(max(4, 2)).
    update = (start - kernel.detach()).reshape(4, 18) / (0.02 * 0.2 * math.sqrt(4))
    singular_values = torch.linalg.svdvals(update)
    # Five bfloat16 Newton-Schulz steps leave singular values near 1 (about 0.7-1.2).
    assert singular_values.min() > 0.6 and singular_values.max() < 1.3, singular_values
