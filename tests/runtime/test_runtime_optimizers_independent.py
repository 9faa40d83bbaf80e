"""Lamb, Lion, Adafactor and Muon (no torch.optim counterpart) against
independent implementations of their update rules written out here, one
parameter at a time, from the papers and the production release's math.

Parity runs 200 steps on random gradients in float64 with
|ours - reference| <= 1e-10 + 1e-10 * |reference|, and (but for Muon) in
float32 with |ours - reference| <= 1e-5 + 1e-4 * |reference|. The optimizers
run in strict mode, so the lr is a float32 0-dim tensor; the references take
it as such (and Adafactor's step count is the float32 global step), so
float64 runs see the same float32 scalars.

Muon's Newton-Schulz iteration runs in bfloat16 by design; its reference runs
the same bfloat16 operations, so the tolerance holds only while both feed it
the same bfloat16 input. In float64 they do: the two float64 paths to that
input differ by about 1e-16, and would have to straddle a bfloat16 rounding
boundary (steps of 2**-8) to differ after the cast. In float32 the momentum
update `buf.mul_(m).add_(g, alpha=1 - m)` and the formula `m * buf + (1 - m) * g`
differ by one float32 ulp in a few percent of elements, which now and then
flips one bfloat16 rounding: a difference of one bfloat16 step (about 6e-6
after 200 steps here), not of the algorithm, and where it lands depends on the
CPU's vector code. So Muon's parity runs in float64 only.
"""

from __future__ import annotations

import io
import math

import pytest
import torch

import cslint.cstorch as cstorch

STEPS = 200
TOLERANCES = {
    torch.float64: dict(atol=1e-10, rtol=1e-10),
    torch.float32: dict(atol=1e-5, rtol=1e-4),
}
SHAPES = [(), (7,), (5, 3), (2, 3, 4)]
# Lamb also needs a parameter whose norm exceeds the clamp at 10 and one that
# starts at zero (trust ratio 1 on the first step).
LAMB_SHAPES = SHAPES + [(16, 16), (3,)]
# Adafactor: one that starts at zero, so its RMS is below the eps[1] floor.
ADAFACTOR_SHAPES = SHAPES + [(4, 3)]
MUON_SHAPES = [(5, 3), (3, 5), (4, 4), (2, 3, 4), (4, 2, 3, 3)]


@pytest.fixture(autouse=True)
def one_intra_op_thread():
    """The tensors are tiny: extra threads only contend (a loaded 2-core box
    ran the bfloat16 matmuls of one Muon case 10x slower with 2 threads)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# -- random problems -------------------------------------------------------------


def random_problem(shapes, dtype, seed=0, steps=STEPS, zero_last=False):
    """Initial parameter values and, for each, one gradient per step; with
    `zero_last` the last parameter starts at zero."""
    generator = torch.Generator().manual_seed(seed)
    initial = [torch.randn(shape, generator=generator, dtype=dtype) for shape in shapes]
    if zero_last:
        initial[-1].zero_()
    gradients = [
        [torch.randn(shape, generator=generator, dtype=dtype) for _ in range(steps)]
        for shape in shapes
    ]
    return initial, gradients


def run_ours(make_optimizer, initial, gradients):
    params = [torch.nn.Parameter(value.clone()) for value in initial]
    optimizer = make_optimizer(params)
    for step in range(len(gradients[0])):
        for param, per_step in zip(params, gradients):
            param.grad = per_step[step].clone()
        optimizer.step()
    return [param.detach() for param in params], optimizer


def assert_matches(ours, references, dtype):
    for index, (actual, expected) in enumerate(zip(ours, references)):
        torch.testing.assert_close(
            actual, expected, **TOLERANCES[dtype],
            msg=lambda detail, index=index: f"parameter {index} "
            f"(shape {tuple(expected.shape)}): {detail}",
        )


def device_lr(lr):
    """The lr as strict mode holds it: a float32 0-dim tensor."""
    return torch.tensor(lr, dtype=torch.float32)


def rms(tensor):
    return tensor.pow(2).mean().sqrt()


# -- independent references --------------------------------------------------------


def lamb_reference(p, gradients, lr, betas, eps, weight_decay, adam):
    """Lamb, paper v3 (no bias correction), norms in float32 as production."""
    beta1, beta2 = betas
    lr = device_lr(lr)
    m = torch.zeros_like(p)
    v = torch.zeros_like(p)
    for g in gradients:
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        u = m / (v.sqrt() + eps) + weight_decay * p
        w = min(p.pow(2).sum().sqrt(), torch.tensor(10.0, dtype=p.dtype)).float()
        r = u.pow(2).sum().sqrt().float()
        trust = 1.0 if adam or w == 0 or r == 0 else w / r
        p = p - lr * (trust * u)
    return p


def lion_reference(p, gradients, lr, betas, weight_decay):
    """Lion, Algorithm 2 of the paper (decoupled weight decay)."""
    beta1, beta2 = betas
    lr = device_lr(lr)
    m = torch.zeros_like(p)
    for g in gradients:
        c = beta1 * m + (1 - beta1) * g
        p = p * (1 - lr * weight_decay)
        p = p - lr * torch.sign(c)
        m = beta2 * m + (1 - beta2) * g
    return p


def adafactor_reference(p, gradients, lr, eps, decay_rate, weight_decay, scale_parameter):
    """Adafactor, Algorithms 4-5 of the paper with beta1 = 0 and clipping d = 1,
    with the factored statistics as row and column SUMS (the paper's form;
    the implementation keeps means, which gives the same estimate)."""
    eps1, eps2 = eps
    lr = device_lr(lr)
    factored = p.dim() >= 2
    if factored:
        row_sums = torch.zeros(p.shape[:-1], dtype=p.dtype)
        col_sums = torch.zeros(p.shape[:-2] + p.shape[-1:], dtype=p.dtype)
    else:
        v = torch.zeros_like(p)
    for t, g in enumerate(gradients, start=1):
        alpha = lr * max(rms(p), torch.tensor(eps2, dtype=p.dtype)) if scale_parameter else lr
        beta2 = 1 - torch.tensor(float(t), dtype=torch.float32) ** decay_rate  # float32 step
        s = g * g + eps1
        if factored:
            row_sums = beta2 * row_sums + (1 - beta2) * s.sum(dim=-1)
            col_sums = beta2 * col_sums + (1 - beta2) * s.sum(dim=-2)
            total = row_sums.sum(dim=-1, keepdim=True).unsqueeze(-1)
            v_hat = row_sums.unsqueeze(-1) * col_sums.unsqueeze(-2) / total
        else:
            v = beta2 * v + (1 - beta2) * s
            v_hat = v
        u = g / v_hat.sqrt()
        u = u / max(rms(u), torch.tensor(1.0, dtype=p.dtype))
        p = p - weight_decay * alpha * p - alpha * u
    return p


def newton_schulz_bf16(matrix, steps):
    """The quintic Newton-Schulz iteration, in bfloat16, step for step as production."""
    a, b, c = 3.4445, -4.7750, 2.0315
    x = matrix.to(torch.bfloat16)
    tall = x.shape[-2] > x.shape[-1]
    if tall:
        x = x.transpose(-2, -1)
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for _ in range(steps):
        gram = x @ x.transpose(-2, -1)
        x = a * x + (b * gram + (c * gram) @ gram) @ x
    if tall:
        x = x.transpose(-2, -1)
    return x


def muon_reference(p, gradients, lr, weight_decay, momentum, nesterov, ns_steps):
    """Muon as the issue writes it out: production's algorithm with the
    momentum buffer kept, the update cast back before the lr scaling."""
    buffer = torch.zeros_like(p)
    scaled_lr = device_lr(lr) * (0.2 * math.sqrt(max(p.shape[0], p.shape[1])))
    for g in gradients:
        buffer = momentum * buffer + (1 - momentum) * g
        u = g + momentum * buffer if nesterov else buffer
        if p.dim() == 4:
            u = u.reshape(p.shape[0], -1)
        orthogonal = newton_schulz_bf16(u, ns_steps).to(p.dtype).reshape(p.shape)
        p = p * (1 - scaled_lr * weight_decay) - scaled_lr * orthogonal
    return p


# -- parity --------------------------------------------------------------------------

DTYPES = [torch.float64, torch.float32]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("weight_decay", [0.0, 0.0625])
@pytest.mark.parametrize("adam", [False, True])
def test_lamb_matches_an_independent_implementation_over_200_steps(dtype, weight_decay, adam):
    hyper = dict(lr=2**-7, betas=(0.9, 0.999), eps=1e-6, weight_decay=weight_decay, adam=adam)
    initial, gradients = random_problem(LAMB_SHAPES, dtype, seed=1, zero_last=True)
    ours, _ = run_ours(lambda params: cstorch.optim.Lamb(params, **hyper), initial, gradients)
    references = [lamb_reference(p, g, **hyper) for p, g in zip(initial, gradients)]
    assert_matches(ours, references, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("weight_decay", [0.0, 0.125])
def test_lion_matches_an_independent_implementation_over_200_steps(dtype, weight_decay):
    hyper = dict(lr=2**-7, betas=(0.9, 0.99), weight_decay=weight_decay)
    initial, gradients = random_problem(SHAPES, dtype, seed=2)
    ours, _ = run_ours(lambda params: cstorch.optim.Lion(params, **hyper), initial, gradients)
    references = [lion_reference(p, g, **hyper) for p, g in zip(initial, gradients)]
    assert_matches(ours, references, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("weight_decay", [0.0, 0.0625])
@pytest.mark.parametrize("scale_parameter", [True, False])
def test_adafactor_matches_an_independent_implementation_over_200_steps(
    dtype, weight_decay, scale_parameter
):
    # eps large enough for both to matter (the default eps[0], 1e-30, never does).
    hyper = dict(
        lr=2**-6, eps=(1e-3, 1e-2), decay_rate=-0.8,
        weight_decay=weight_decay, scale_parameter=scale_parameter,
    )
    initial, gradients = random_problem(ADAFACTOR_SHAPES, dtype, seed=3, zero_last=True)
    ours, _ = run_ours(lambda params: cstorch.optim.Adafactor(params, **hyper), initial, gradients)
    references = [adafactor_reference(p, g, **hyper) for p, g in zip(initial, gradients)]
    assert_matches(ours, references, dtype)


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
@pytest.mark.parametrize(
    "momentum, nesterov", [(0.95, True), (0.95, False), (0.0, False)]
)
def test_muon_matches_an_independent_implementation_over_200_steps(
    weight_decay, momentum, nesterov
):
    # float64 only: see the module docstring.
    dtype = torch.float64
    hyper = dict(lr=0.02, weight_decay=weight_decay, momentum=momentum,
                 nesterov=nesterov, ns_steps=5)
    initial, gradients = random_problem(MUON_SHAPES, dtype, seed=4)
    ours, _ = run_ours(lambda params: cstorch.optim.Muon(params, **hyper), initial, gradients)
    references = [muon_reference(p, g, **hyper) for p, g in zip(initial, gradients)]
    assert_matches(ours, references, dtype)
