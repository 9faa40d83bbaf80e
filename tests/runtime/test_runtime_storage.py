"""cstorch.save / cstorch.load, and the tensor helpers (numpy, make_constant, name_scope)."""

from __future__ import annotations

import numpy
import pytest
import torch

import cslint.cstorch as cstorch
from cstorch_helpers import CompliantAdam, StraightLineLR


def trained_state(cpu_backend):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    optimizer = CompliantAdam(model.parameters(), lr=0.01)
    scheduler = StraightLineLR(optimizer, start=0.01, end=0.001, total_iters=10)
    scaler = cstorch.amp.GradScaler(loss_scale="dynamic")
    for seed in range(3):
        inputs = torch.randn(5, 3, generator=torch.Generator().manual_seed(seed))
        cstorch.amp.optimizer_step(model(inputs).pow(2).mean(), optimizer, scaler)
        scheduler.step()
    return model, optimizer, scheduler, scaler


def test_model_optimizer_scheduler_and_scaler_state_round_trip(tmp_path, cpu_backend):
    model, optimizer, scheduler, scaler = trained_state(cpu_backend)
    path = tmp_path / "checkpoint.mdl"
    cstorch.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "lr_scheduler": scheduler.state_dict(),
            "grad_scaler": scaler.state_dict(),
            "step": 3,
        },
        path,
    )
    # Any file cstorch.save writes loads without running code from it.
    assert torch.load(path, weights_only=True)["step"] == 3
    state = cstorch.load(path)

    cstorch.local_backend.discard_backend()
    fresh_model, fresh_optimizer, fresh_scheduler, fresh_scaler = trained_state(cstorch.backend("CPU"))
    with torch.no_grad():
        for param in fresh_model.parameters():
            param.zero_()
    fresh_model.load_state_dict(state["model"])
    fresh_optimizer.load_state_dict(state["optimizer"])
    fresh_scheduler.load_state_dict(state["lr_scheduler"])
    fresh_scaler.load_state_dict(state["grad_scaler"])
    for key, value in model.state_dict().items():
        assert torch.equal(fresh_model.state_dict()[key], value), key
    for key, value in optimizer.state[model[0].weight].items():
        assert torch.equal(fresh_optimizer.state[fresh_model[0].weight][key], value), key
    assert fresh_scheduler.last_epoch.item() == scheduler.last_epoch.item() == 3
    assert fresh_scaler.get_scale().item() == scaler.get_scale().item()


def test_load_maps_tensors_to_the_given_location(tmp_path):
    path = tmp_path / "weights.pt"
    cstorch.save({"w": torch.ones(2)}, str(path))
    loaded = cstorch.load(str(path), map_location="cpu")
    assert loaded["w"].device == torch.device("cpu") and torch.equal(loaded["w"], torch.ones(2))


def test_save_refuses_objects_a_weights_only_load_could_not_read_and_writes_nothing(tmp_path):
    path = tmp_path / "checkpoint.mdl"
    with pytest.raises(TypeError, match=r"the saved object\['model'\] is a Linear: a checkpoint holds tensors"):
        cstorch.save({"model": torch.nn.Linear(2, 2)}, path)
    with pytest.raises(TypeError, match=r"the saved object\['extra'\]\[1\] is a function"):
        cstorch.save({"extra": [1, lambda: None]}, path)
    assert list(tmp_path.iterdir()) == []


def test_saving_over_a_checkpoint_replaces_it_whole(tmp_path):
    path = tmp_path / "checkpoint.mdl"
    cstorch.save({"step": 1}, path)
    cstorch.save({"step": 2}, path)
    assert cstorch.load(path) == {"step": 2}
    assert [entry.name for entry in tmp_path.iterdir()] == ["checkpoint.mdl"]


def test_a_missing_checkpoint_is_one_error_naming_it(tmp_path):
    missing = tmp_path / "nowhere.mdl"
    with pytest.raises(FileNotFoundError, match=f"cstorch.load: no checkpoint file at {missing}$"):
        cstorch.load(missing)


@pytest.mark.parametrize("content", [b"", b"not a checkpoint", b"PK\x03\x04 truncated zip"])
def test_a_corrupt_checkpoint_is_one_error_naming_it(tmp_path, content):
    corrupt = tmp_path / "corrupt.mdl"
    corrupt.write_bytes(content)
    with pytest.raises(ValueError) as caught:
        cstorch.load(corrupt)
    message = str(caught.value)
    assert message.startswith(f"cstorch.load: {corrupt} is not a readable checkpoint (")
    assert "\n" not in message


def test_a_truncated_checkpoint_is_one_error_naming_it(tmp_path):
    path = tmp_path / "checkpoint.mdl"
    cstorch.save({"w": torch.ones(100)}, path)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ValueError, match="is not a readable checkpoint"):
        cstorch.load(path)


def test_numpy_arrays_and_tensors_convert_both_ways():
    array = numpy.arange(4, dtype=numpy.float32)
    tensor = cstorch.from_numpy(array)
    tensor[0] = 7.0
    assert array[0] == 7.0  # shares memory, like torch.from_numpy
    assert cstorch.from_numpy(tensor) is tensor
    assert cstorch.to_numpy(tensor).tolist() == [7.0, 1.0, 2.0, 3.0]
    assert cstorch.to_numpy(array) is array
    read_only = numpy.ones(2)
    read_only.flags.writeable = False
    assert cstorch.from_numpy(read_only).tolist() == [1.0, 1.0]


def test_to_numpy_of_bfloat16_says_how_to_convert():
    with pytest.raises(TypeError, match=r"numpy has no bfloat16 type; convert first, e.g. cstorch.to_numpy\(tensor.float\(\)\)"):
        cstorch.to_numpy(torch.ones(2, dtype=torch.bfloat16))


def test_make_constant_and_name_scope_change_nothing_off_the_system():
    tensor = torch.ones(2)
    assert cstorch.make_constant(tensor) is tensor
    with cstorch.name_scope("encoder") as scope:
        assert scope is None
        result = tensor * 2
    assert torch.equal(result, torch.full((2,), 2.0))
