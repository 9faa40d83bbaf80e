"""cstorch.amp: half dtype, autocast, GradScaler (static and dynamic) and optimizer_step."""

from __future__ import annotations

import warnings

import pytest
import torch

import cslint.cstorch as cstorch
from cslint.cstorch.amp import half_dtype
from cstorch_helpers import CompliantAdam, CompliantSGD

amp = cstorch.amp


@pytest.fixture(autouse=True)
def mixed_precision_is_restored():
    saved = vars(half_dtype._setting).copy()
    yield
    vars(half_dtype._setting).clear()
    vars(half_dtype._setting).update(saved)


def make_model():
    torch.manual_seed(0)
    return torch.nn.Linear(3, 1)


def loss_of(model, seed: int = 0) -> torch.Tensor:
    inputs = torch.randn(4, 3, generator=torch.Generator().manual_seed(seed))
    return model(inputs).pow(2).mean()


def test_half_dtype_is_float16_until_set_and_setting_it_turns_mixed_precision_on():
    assert amp.get_half_dtype() is torch.float16 and not amp.mixed_precision()
    assert amp.set_half_dtype("bfloat16") is torch.bfloat16
    assert amp.get_half_dtype() is torch.bfloat16 and amp.mixed_precision()
    assert amp.set_half_dtype(torch.float16) is torch.float16
    assert amp.get_half_dtype_str() == "float16"


def test_cbfloat16_runs_as_bfloat16_and_says_so_once():
    with pytest.warns(UserWarning, match="cbfloat16 exists on the Cerebras system only.*torch.bfloat16"):
        assert amp.set_half_dtype("cbfloat16") is torch.bfloat16
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        amp.set_half_dtype("cbfloat16")
    assert amp.get_half_dtype() is torch.bfloat16 and amp.get_half_dtype_str() == "cbfloat16"


@pytest.mark.parametrize("value", ["float32", torch.float32, "fp16"])
def test_other_half_dtypes_are_refused(value):
    with pytest.raises(ValueError, match="invalid half dtype .*expected \"float16\", \"bfloat16\", \"cbfloat16\""):
        amp.set_half_dtype(value)


def test_autocast_on_the_cpu_runs_the_forward_in_bfloat16(cpu_backend):
    model = make_model()
    amp.set_half_dtype(torch.bfloat16)
    with amp.autocast():
        assert model(torch.randn(2, 3)).dtype is torch.bfloat16
    with amp.autocast(dtype=torch.bfloat16):
        assert model(torch.randn(2, 3)).dtype is torch.bfloat16


def test_autocast_on_the_cpu_refuses_float16_and_needs_a_backend(cpu_backend):
    with pytest.raises(ValueError, match="mixed precision on the CPU runs in bfloat16 only"):
        with amp.autocast():
            pass
    cstorch.local_backend.discard_backend()
    with pytest.raises(RuntimeError, match="no cstorch backend"):
        with amp.autocast(torch.bfloat16):
            pass


def test_a_grad_scaler_needs_a_backend_and_a_valid_loss_scale():
    with pytest.raises(RuntimeError, match="no cstorch backend"):
        amp.GradScaler()
    cstorch.backend("CPU")
    with pytest.raises(ValueError, match="loss_scale must be \"dynamic\" or a positive number, got 'auto'"):
        amp.GradScaler(loss_scale="auto")
    with pytest.raises(ValueError, match="overflow_tolerance must be >= 0"):
        amp.GradScaler(loss_scale="dynamic", overflow_tolerance=-1)


def test_static_loss_scaling_scales_the_loss_and_unscales_the_gradients(cpu_backend):
    plain, scaled = make_model(), make_model()
    loss_of(plain).backward()
    scaler = amp.GradScaler(loss_scale=128.0)
    scaled_loss = scaler.scale(loss_of(scaled))
    assert scaled_loss.item() == pytest.approx(128.0 * loss_of(plain).item())
    scaled_loss.backward()
    optimizer = CompliantSGD(scaled.parameters(), lr=0.1)
    scaler.unscale_(optimizer)
    scaler.unscale_(optimizer)  # once per step
    torch.testing.assert_close(scaled.weight.grad, plain.weight.grad)
    scaler.step(optimizer)
    with pytest.raises(RuntimeError, match=r"step\(\) called twice"):
        scaler.step(optimizer)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) called after step\(\)"):
        scaler.unscale_(optimizer)
    scaler.update()
    assert scaler.get_scale() == 128.0 and scaler.get_num_skipped_steps().item() == 0
    assert scaler.state_dict() == {"loss_scale": 128.0}


def overflowing_step(model, optimizer, scaler):
    loss = loss_of(model) * torch.tensor(float("inf"))
    amp.optimizer_step(loss, optimizer, scaler)


def test_dynamic_scaling_skips_an_overflowing_step_and_halves_the_scale(cpu_backend):
    model = make_model()
    optimizer = CompliantAdam(model.parameters(), lr=0.1)
    scaler = amp.GradScaler(loss_scale="dynamic")
    assert scaler.get_scale().item() == 2.0**15
    before = [p.detach().clone() for p in model.parameters()]
    state_before = {k: v.clone() for k, v in optimizer.state[model.weight].items()}
    overflowing_step(model, optimizer, scaler)
    for param, old in zip(model.parameters(), before):
        assert torch.equal(param, old)
    for key, value in optimizer.state[model.weight].items():
        assert torch.equal(value, state_before[key]), key
    assert scaler.get_scale().item() == 2.0**14
    assert scaler.get_num_skipped_steps().item() == 1
    amp.optimizer_step(loss_of(model), optimizer, scaler)
    assert not torch.equal(model.weight, before[0])
    assert scaler.get_num_skipped_steps().item() == 1


def test_dynamic_scaling_doubles_after_steps_per_increase_clean_steps_up_to_the_maximum(cpu_backend):
    model = make_model()
    optimizer = CompliantSGD(model.parameters(), lr=0.01)
    scaler = amp.GradScaler(loss_scale="dynamic", init_scale=4.0, steps_per_increase=2, max_loss_scale=8.0)
    scales = []
    for seed in range(7):
        amp.optimizer_step(loss_of(model, seed), optimizer, scaler)
        scales.append(scaler.get_scale().item())
    assert scales == [4.0, 4.0, 8.0, 8.0, 8.0, 8.0, 8.0]


def test_dynamic_scaling_tolerates_overflows_up_to_the_tolerance_and_stays_above_the_minimum(cpu_backend):
    model = make_model()
    optimizer = CompliantSGD(model.parameters(), lr=0.01)
    scaler = amp.GradScaler(loss_scale="dynamic", init_scale=2.0, min_loss_scale=1.0, overflow_tolerance=0.5)
    amp.optimizer_step(loss_of(model), optimizer, scaler)
    overflowing_step(model, optimizer, scaler)  # 1 overflow in 2 steps: within 0.5
    assert scaler.get_scale().item() == 2.0
    overflowing_step(model, optimizer, scaler)  # 2 in 3: halves
    overflowing_step(model, optimizer, scaler)  # halves again, clamped at the minimum
    assert scaler.get_scale().item() == 1.0


def test_dynamic_scaling_inside_a_traced_step_passes_strict_mode_with_a_static_graph(cpu_backend):
    model = make_model()
    optimizer = CompliantAdam(model.parameters(), lr=0.1)
    scaler = amp.GradScaler(loss_scale="dynamic")

    @cstorch.trace
    def training_step(inputs, poison):
        loss = model(inputs).pow(2).mean() * poison
        amp.optimizer_step(loss, optimizer, scaler, max_gradient_norm=1.0)
        return loss

    poisons = [1.0, float("inf"), 1.0, 1.0]
    for seed, poison in enumerate(poisons):
        training_step(torch.randn(4, 3, generator=torch.Generator().manual_seed(seed)), torch.tensor(poison))
    assert scaler.get_num_skipped_steps().item() == 1


def test_grad_scaler_state_round_trips(cpu_backend):
    model = make_model()
    optimizer = CompliantSGD(model.parameters(), lr=0.01)
    scaler = amp.GradScaler(loss_scale="dynamic")
    overflowing_step(model, optimizer, scaler)
    restored = amp.GradScaler(loss_scale="dynamic")
    restored.load_state_dict(scaler.state_dict())
    for key, value in scaler.state_dict().items():
        assert torch.equal(restored.state_dict()[key], value), key
    static = amp.GradScaler(loss_scale=4.0)
    static.load_state_dict({"loss_scale": 8.0})
    assert static.get_scale() == 8.0


def test_optimizer_step_clips_the_gradient_norm_after_unscaling(cpu_backend):
    model = make_model()
    seen = []

    class RecordingSGD(CompliantSGD):
        def step(self, closure=None):
            seen.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]).norm())
            return super().step(closure)

    amp.optimizer_step(loss_of(model) * 1000, RecordingSGD(model.parameters()), amp.GradScaler(loss_scale=64.0),
                       max_gradient_norm=0.5)
    with cstorch.strict(False):
        assert seen[0].item() == pytest.approx(0.5, rel=1e-5)
    assert all(p.grad is None for p in model.parameters())  # zeroed after the step


def test_optimizer_step_checks_its_arguments(cpu_backend):
    model = make_model()
    optimizer = CompliantSGD(model.parameters())
    scaler = amp.GradScaler()
    with pytest.raises(ValueError, match="expects the loss as a tensor, got float"):
        amp.optimizer_step(1.0, optimizer, scaler)
    torch_sgd = torch.optim.SGD(model.parameters(), lr=0.1)  # noqa: CS401 - the optimizer refused here
    with pytest.raises(TypeError, match="optimizer 0 is a SGD"):
        amp.optimizer_step(loss_of(model), torch_sgd, scaler)
    with pytest.raises(TypeError, match="expects a cstorch.amp.GradScaler, got NoneType"):
        amp.optimizer_step(loss_of(model), optimizer, None)
    with pytest.raises(ValueError, match="max_gradient_norm must be a non-negative number, got -1"):
        amp.optimizer_step(loss_of(model), optimizer, scaler, max_gradient_norm=-1)
    with pytest.raises(ValueError, match="by max_gradient_norm or by max_gradient_value, not both"):
        amp.optimizer_step(loss_of(model), optimizer, scaler, max_gradient_norm=1.0, max_gradient_value=1.0)
    with pytest.raises(ValueError, match="takes no new_scale"):
        scaler.update(new_scale=2.0)
