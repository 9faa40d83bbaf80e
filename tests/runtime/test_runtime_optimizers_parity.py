"""The cstorch.optim optimizers with a torch.optim counterpart: 200-step parity
with torch.optim (where production and torch agree), with independent
per-formula implementations of production's numbers (where they differ),
state-dict round trips, and strict mode with a scheduled tensor lr."""

from __future__ import annotations

import io

import pytest
import torch

import cslint.cstorch as cstorch
from cslint.cstorch import optim

STEPS = 200
SHAPES = ((5, 3), (7,), ())


def initial_values(seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator) for shape in SHAPES]


def gradient(step: int, index: int, param: torch.Tensor) -> torch.Tensor:
    """A noisy quadratic pull towards 0.5: depends on the parameter, so
    diverging runs drift apart, and on the step, so signs change (Rprop)."""
    generator = torch.Generator().manual_seed(1000 * step + index)
    return (param.detach() - 0.5) + 0.3 * torch.randn(param.shape, generator=generator)


def run(make_optimizer, steps: int = STEPS, values=None) -> list[torch.Tensor]:
    """The parameters after `steps` steps of `make_optimizer(params)`."""
    params = [torch.nn.Parameter(value.clone()) for value in (values or initial_values())]
    optimizer = make_optimizer(params)
    for step in range(steps):
        for index, param in enumerate(params):
            param.grad = gradient(step, index, param)
        optimizer.step()
    return [param.detach() for param in params]


def assert_close(ours, reference) -> None:
    """|ours - reference| <= 1e-5 + 1e-4 |reference| elementwise (float32)."""
    for mine, theirs in zip(ours, reference):
        assert mine.dtype == theirs.dtype == torch.float32
        error = (mine - theirs).abs()
        bound = 1e-5 + 1e-4 * theirs.abs()
        assert bool((error <= bound).all()), f"max error {error.max().item():.3g}"


def assert_identical(ours, reference) -> None:
    for mine, theirs in zip(ours, reference):
        assert torch.equal(mine, theirs), f"max difference {(mine - theirs).abs().max().item():.3g}"


# ---------------------------------------------------------------------------
# Parity with torch.optim (hyperparameters under which production and torch agree)

TORCH_PARITY = [
    # (our class, torch class, keyword arguments for both)
    *[
        ("SGD", dict(lr=0.05, momentum=momentum, nesterov=nesterov, weight_decay=wd, maximize=maximize))
        for momentum, nesterov in ((0.0, False), (0.9, False), (0.9, True))
        for wd in (0.0, 0.1)
        for maximize in (False, True)
    ],
    *[
        ("Adagrad", dict(lr=0.1, lr_decay=decay, weight_decay=wd, initial_accumulator_value=0.1,
                         eps=1e-10, maximize=maximize))
        for decay in (0.0, 0.01)
        for wd in (0.0, 0.1)
        for maximize in (False, True)
    ],
    *[
        ("Adadelta", dict(lr=1.0, rho=0.9, weight_decay=wd, maximize=maximize))
        for wd in (0.0, 0.1)
        for maximize in (False, True)
    ],
    *[
        ("RMSprop", dict(lr=0.01, centered=centered, momentum=momentum, weight_decay=wd))
        for centered in (False, True)
        for momentum in (0.0, 0.9)
        for wd in (0.0, 0.1)
    ],
    ("Rprop", dict(lr=0.01)),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-4, 0.2))),
    *[
        ("ASGD", dict(lr=0.05, lambd=1e-3, alpha=0.75, t0=50, weight_decay=wd, maximize=maximize))
        for wd in (0.0, 0.1)
        for maximize in (False, True)
    ],
    *[
        ("Adamax", dict(lr=0.01, eps=1e-8, weight_decay=wd, maximize=maximize))
        for wd in (0.0, 0.1)
        for maximize in (False, True)
    ],
    # rho_t is computed in float32 from the float32 step, as production does;
    # with beta2 = 0.999 its cancellation (rho_inf = 1999) alone moves the
    # result by ~1e-4 from torch's float64 Python arithmetic.
    *[("RAdam", dict(lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=wd)) for wd in (0.0, 0.1)],
    # Without momentum production's product of momentum factors is torch's.
    *[("NAdam", dict(lr=0.01, betas=(0.0, 0.999), weight_decay=wd)) for wd in (0.0, 0.1)],
    # eps small enough that its placement does not matter.
    *[
        ("Adam", dict(lr=0.01, eps=1e-12, weight_decay=wd, amsgrad=amsgrad))
        for wd in (0.0, 0.1)
        for amsgrad in (False, True)
    ],
    *[
        ("AdamW", dict(lr=0.01, eps=1e-12, weight_decay=wd, amsgrad=amsgrad))
        for wd in (0.0, 0.1)
        for amsgrad in (False, True)
    ],
]


@pytest.mark.parametrize(
    "name, arguments",
    TORCH_PARITY,
    ids=[f"{name}-{'-'.join(f'{k}={v}' for k, v in arguments.items())}" for name, arguments in TORCH_PARITY],
)
def test_each_optimizer_matches_torch_optim_over_200_steps(name, arguments):
    ours = run(lambda params: getattr(optim, name)(params, **arguments))
    reference = run(lambda params: getattr(torch.optim, name)(params, **arguments, foreach=False))
    assert_close(ours, reference)


# ---------------------------------------------------------------------------
# Independent per-formula implementations of production's numbers


class PerFormula(torch.optim.Optimizer):
    """A per-parameter loop over `update(p, grad, state, group)`; state is
    created by `initial_state(p, group)`."""

    def __init__(self, params, update, initial_state, **defaults):
        self.update, self.initial_state = update, initial_state
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if not self.state[p]:
                    self.state[p].update(self.initial_state(p, group))
                self.update(p, p.grad.clone(), self.state[p], group)


def sgd_state(p, group):
    return {"buffer": torch.zeros_like(p)}


def sgd_update(p, grad, state, group):
    if group["maximize"]:
        grad = -grad
    grad = grad + group["weight_decay"] * p
    buffer = state["buffer"]
    buffer.copy_(group["momentum"] * buffer + (1 - group["dampening"]) * grad)
    direction = grad + group["momentum"] * buffer if group["nesterov"] else buffer
    p.copy_(p - group["lr"] * direction)


@pytest.mark.parametrize("nesterov", [False, True])
@pytest.mark.parametrize("dampening", [0.0, 0.5])
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_sgd_dampens_from_the_first_step_on_a_zero_buffer(dampening, nesterov, weight_decay):
    if nesterov and dampening:
        with pytest.raises(ValueError, match="zero dampening"):
            optim.SGD(initial_values(), lr=0.1, momentum=0.9, dampening=dampening, nesterov=True)
        return
    arguments = dict(lr=0.05, momentum=0.9, dampening=dampening, weight_decay=weight_decay,
                     nesterov=nesterov, maximize=False)
    ours = run(lambda params: optim.SGD(params, **arguments))
    reference = run(lambda params: PerFormula(params, sgd_update, sgd_state, **arguments))
    assert_close(ours, reference)
    if dampening:
        # torch copies the first gradient undamped: a different run.
        torch_run = run(lambda params: torch.optim.SGD(params, **arguments), steps=1)
        ours_once = run(lambda params: optim.SGD(params, **arguments), steps=1)
        assert not torch.allclose(ours_once[0], torch_run[0])


def nadam_state(p, group):
    return {"t": 0, "mu_product": 1.0, "m": torch.zeros_like(p), "v": torch.zeros_like(p)}


def nadam_update(p, grad, state, group):
    beta1, beta2 = group["betas"]
    state["t"] += 1
    t = state["t"]
    grad = grad + group["weight_decay"] * p
    mu = beta1 * (1 - 0.5 * 0.96 ** (t * group["momentum_decay"]))
    mu_next = beta1 * (1 - 0.5 * 0.96 ** ((t + 1) * group["momentum_decay"]))
    state["mu_product"] *= mu
    product = state["mu_product"]
    state["m"] = beta1 * state["m"] + (1 - beta1) * grad
    state["v"] = beta2 * state["v"] + (1 - beta2) * grad * grad
    denominator = (state["v"] / (1 - beta2**t)).sqrt() + group["eps"]
    # Production's momentum term: the product times mu_t times mu_{t+1}.
    step = (1 - mu) / (1 - product) * grad + mu_next / (1 - product * mu * mu_next) * state["m"]
    p.copy_(p - group["lr"] * step / denominator)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_nadam_follows_productions_product_of_momentum_factors(weight_decay):
    arguments = dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=weight_decay,
                     momentum_decay=4e-3)
    ours = run(lambda params: optim.NAdam(params, **arguments))
    reference = run(lambda params: PerFormula(params, nadam_update, nadam_state, **arguments))
    assert_close(ours, reference)
    torch_run = run(lambda params: torch.optim.NAdam(params, **arguments))
    assert not torch.allclose(ours[0], torch_run[0], atol=1e-5, rtol=1e-4)


def adam_state(p, group):
    beta1, beta2 = group["betas"]
    state = {"m": torch.zeros_like(p), "v": torch.zeros_like(p), "v_max": torch.zeros_like(p)}
    state["beta1_power"] = torch.tensor(beta1, dtype=torch.float32)
    state["beta2_power"] = torch.tensor(beta2, dtype=torch.float32)
    return state


def adam_update(p, grad, state, group):
    """Production's Adam, op by op in the order cstorch's runs them, so the
    results are bitwise equal; the lr is a float32 tensor as in strict mode."""
    beta1, beta2 = group["betas"]
    lr = torch.tensor(group["lr"], dtype=torch.float32)
    grad = grad.add(p, alpha=group["l2"]) if group["l2"] else grad
    state["m"].lerp_(grad, 1 - beta1)
    state["v"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    second = state["v"]
    if group["amsgrad"]:
        torch.maximum(state["v_max"], second, out=state["v_max"])
        second = state["v_max"]
    # p - lr * (u * s + weight_decay * p) with u = m / (sqrt(v) + eps),
    # written as p * (1 - lr * weight_decay) + m / (denominator / (-lr * s)).
    denominator = second.sqrt() + group["eps"]
    scale = -lr
    if group["correct_bias"]:
        scale = (torch.sqrt(1 - state["beta2_power"]) / (1 - state["beta1_power"])) * -lr
        state["beta1_power"].mul_(beta1)
        state["beta2_power"].mul_(beta2)
    if group["weight_decay"]:
        p.mul_(1 - lr * group["weight_decay"])
    p.addcdiv_(state["m"], denominator / scale)


ADAM_CASES = [
    ("Adam", dict(weight_decay=wd, amsgrad=amsgrad), dict(l2=wd, weight_decay=0.0, correct_bias=True))
    for wd in (0.0, 0.1)
    for amsgrad in (False, True)
] + [
    ("AdamW", dict(weight_decay=wd, amsgrad=amsgrad, correct_bias=correct_bias),
     dict(l2=0.0, weight_decay=wd, correct_bias=correct_bias))
    for wd in (0.0, 0.1)
    for amsgrad in (False, True)
    for correct_bias in (True, False)
]


@pytest.mark.parametrize("name, arguments, formula", ADAM_CASES)
def test_adam_and_adamw_equal_productions_formula_bitwise(name, arguments, formula):
    common = dict(lr=0.01, betas=(0.9, 0.999), eps=1e-6)
    ours = run(lambda params: getattr(optim, name)(params, **common, **arguments))
    reference = run(
        lambda params: PerFormula(params, adam_update, adam_state, **common, **formula,
                                  amsgrad=arguments["amsgrad"])
    )
    assert_identical(ours, reference)


def test_production_eps_defaults():
    params = initial_values()
    for name, eps in (("Adam", 1e-6), ("AdamW", 1e-6), ("Adagrad", 1e-6), ("Adamax", 1e-6),
                      ("RAdam", 1e-6), ("NAdam", 1e-8), ("RMSprop", 1e-8), ("Adadelta", 1e-6)):
        assert getattr(optim, name)(params).defaults["eps"] == eps, name
    with pytest.raises(TypeError):
        optim.SGD(params)  # no default lr, as production
    assert optim.AdamW(params).defaults["weight_decay"] == 0.0


def test_adam_keeps_its_weight_decay_as_l2_and_a_groups_own_rate():
    params = initial_values()
    adam = optim.Adam([{"params": params[:1], "weight_decay": 0.3}, {"params": params[1:]}],
                      weight_decay=0.1)
    first, second = adam.param_groups
    assert (first["l2_regularization_rate"], first["weight_decay"]) == (0.3, 0.0)
    assert (second["l2_regularization_rate"], second["weight_decay"]) == (0.1, 0.0)


def test_a_tensor_weight_decay_gives_the_numbers_of_the_float_one():
    def with_tensor_decay(name, **arguments):
        def make(params):
            optimizer = getattr(optim, name)(params, **arguments)
            for group in optimizer.param_groups:
                group["weight_decay"] = torch.tensor(group["weight_decay"])
            return optimizer
        return make

    for name, arguments in (("SGD", dict(lr=0.05, momentum=0.9, weight_decay=0.1)),
                            ("AdamW", dict(lr=0.01, weight_decay=0.1))):
        ours = run(with_tensor_decay(name, **arguments), steps=50)
        floats = run(lambda params: getattr(optim, name)(params, **arguments), steps=50)
        assert_close(ours, floats)


# ---------------------------------------------------------------------------
# Loading torch.optim checkpoints (Adam, AdamW)


@pytest.mark.parametrize("name, weight_decay", [("Adam", 0.1), ("AdamW", 0.1), ("AdamW", 0.0)])
def test_adam_and_adamw_continue_a_torch_optim_checkpoint(name, weight_decay):
    arguments = dict(lr=0.01, betas=(0.9, 0.999), eps=1e-12, weight_decay=weight_decay)
    torch_params = [torch.nn.Parameter(value) for value in initial_values()]
    torch_optimizer = getattr(torch.optim, name)(torch_params, **arguments)

    def torch_steps(first, last):
        for step in range(first, last):
            for index, param in enumerate(torch_params):
                param.grad = gradient(step, index, param)
            torch_optimizer.step()

    torch_steps(0, 7)
    buffer = io.BytesIO()
    torch.save(torch_optimizer.state_dict(), buffer)
    buffer.seek(0)
    checkpoint = torch.load(buffer, weights_only=True)

    our_params = [torch.nn.Parameter(param.detach().clone()) for param in torch_params]
    ours = getattr(optim, name)(our_params, **arguments)
    ours.load_state_dict(checkpoint)
    assert "step" in checkpoint["state"][0]  # the caller's dict is left as it was
    state = ours.state[our_params[0]]
    # After 7 steps the next one uses beta^8.
    assert torch.allclose(state["beta1_power"], torch.tensor(0.9**8))
    assert torch.allclose(state["beta2_power"], torch.tensor(0.999**8))
    group = ours.param_groups[0]
    expected_l2 = weight_decay if name == "Adam" else 0.0
    assert group["l2_regularization_rate"] == expected_l2 and group["correct_bias"] is True

    torch_steps(7, 40)
    for step in range(7, 40):
        for index, param in enumerate(our_params):
            param.grad = gradient(step, index, param)
        ours.step()
    assert_close([p.detach() for p in our_params], [p.detach() for p in torch_params])


# ---------------------------------------------------------------------------
# Every class: state-dict round trip, strict mode with a scheduled lr

EVERY_CLASS = [
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    ("Adadelta", dict(weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01)),
    ("Adamax", dict(lr=0.01)),
    ("ASGD", dict(lr=0.05, t0=3)),
    ("NAdam", dict(lr=0.01)),
    ("RAdam", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True)),
    ("Rprop", dict(lr=0.01)),
]


def drive(optimizer, params, first: int, last: int, scheduler=None) -> None:
    for step in range(first, last):
        for index, param in enumerate(params):
            param.grad = gradient(step, index, param)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()


@pytest.mark.parametrize("name, arguments", EVERY_CLASS, ids=[name for name, _ in EVERY_CLASS])
def test_state_dict_round_trip_continues_bitwise(name, arguments):
    params = [torch.nn.Parameter(value) for value in initial_values()]
    optimizer = getattr(optim, name)(params, **arguments)
    drive(optimizer, params, 0, 5)

    buffer = io.BytesIO()
    torch.save(optimizer.state_dict(), buffer)
    buffer.seek(0)
    restored_params = [torch.nn.Parameter(param.detach().clone()) for param in params]
    restored = getattr(optim, name)(restored_params, **arguments)
    restored.load_state_dict(torch.load(buffer, weights_only=True))

    drive(optimizer, params, 5, 15)
    drive(restored, restored_params, 5, 15)
    assert_identical([p.detach() for p in restored_params], [p.detach() for p in params])
    for original, copy in zip(params, restored_params):
        for key, value in optimizer.state[original].items():
            assert torch.equal(restored.state[copy][key], value), key


class DecayingLR(cstorch.optim.lr_scheduler.LRScheduler):
    """lr = initial * 0.97^t, a tensor of the step."""

    def __init__(self, optimizer, initial):
        self.initial = initial
        super().__init__(optimizer, total_iters=None)

    def _get_closed_form_lr(self):
        return self.initial * torch.pow(0.97, self.last_epoch.to(torch.float32))


@pytest.mark.parametrize("name, arguments", EVERY_CLASS, ids=[name for name, _ in EVERY_CLASS])
def test_each_optimizer_runs_strict_with_a_scheduled_tensor_lr(name, arguments):
    assert cstorch.is_strict()
    params = [torch.nn.Parameter(value) for value in initial_values()]
    optimizer = getattr(optim, name)(params, **arguments)
    scheduler = DecayingLR(optimizer, arguments.get("lr", 1.0))
    drive(optimizer, params, 0, 5, scheduler)
    assert isinstance(optimizer.param_groups[0]["lr"], torch.Tensor)
    assert all(bool(torch.isfinite(p).all()) for p in params)
    cstorch.check_static_graph(optimizer, steps=3)


def test_a_scheduled_lr_gives_torchs_numbers():
    """SGD under a decaying tensor lr against torch.optim.SGD fed the same lr
    as a Python float each step."""
    ours_params = [torch.nn.Parameter(value) for value in initial_values()]
    ours = optim.SGD(ours_params, lr=0.05, momentum=0.9)
    drive(ours, ours_params, 0, 50, DecayingLR(ours, 0.05))
    torch_params = [torch.nn.Parameter(value) for value in initial_values()]
    reference = torch.optim.SGD(torch_params, lr=0.05, momentum=0.9)
    for step in range(50):
        reference.param_groups[0]["lr"] = float(torch.tensor(0.05) * torch.pow(0.97, torch.tensor(float(step))))
        drive(reference, torch_params, step, step + 1)
    assert_close([p.detach() for p in ours_params], [p.detach() for p in torch_params])


def test_parameters_without_gradients_are_left_alone():
    params = [torch.nn.Parameter(value) for value in initial_values()]
    for name, arguments in EVERY_CLASS:
        optimizer = getattr(optim, name)(params, **arguments)
        before = [p.detach().clone() for p in params]
        for p in params:
            p.grad = None
        params[1].grad = torch.ones_like(params[1])
        optimizer.step()
        assert torch.equal(params[0], before[0]) and torch.equal(params[2], before[2]), name
        assert not torch.equal(params[1], before[1]), name


def test_a_weight_decay_scheduler_on_adam_adds_decoupled_decay_on_top_of_its_l2_term():
    """As production: Adam keeps its `weight_decay` as the L2 rate, and a weight-decay
    scheduler writes the group's `weight_decay`, which AdamBase applies decoupled."""
    common = dict(lr=0.01, betas=(0.9, 0.999), eps=1e-6)

    def scheduled_adam(params):
        optimizer = optim.Adam(params, **common, weight_decay=0.1)
        optimizer.scheduled = optim.weight_decay_scheduler.ConstantWD(optimizer, val=0.05)
        return optimizer

    params = [torch.nn.Parameter(value.clone()) for value in initial_values()]
    optimizer = scheduled_adam(params)
    for step in range(STEPS):
        for index, param in enumerate(params):
            param.grad = gradient(step, index, param)
        optimizer.step()
        optimizer.scheduled.step()
    reference = run(lambda params: PerFormula(params, adam_update, adam_state, **common,
                                              l2=0.1, weight_decay=0.05, correct_bias=True,
                                              amsgrad=False))
    assert_close([param.detach() for param in params], reference)
