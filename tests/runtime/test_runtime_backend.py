"""cstorch.backend, current_backend, current_torch_device, use_cs and compile."""

from __future__ import annotations

import pytest
import torch

import cslint.cstorch as cstorch

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


def test_a_cpu_backend_runs_on_the_cpu(cpu_backend):
    assert cpu_backend.is_cpu and not cpu_backend.is_gpu and not cpu_backend.is_csx
    assert cpu_backend.torch_device == torch.device("cpu")
    assert cstorch.backend() is cpu_backend
    assert cstorch.current_torch_device() == torch.device("cpu")
    assert cstorch.use_cs() is False


def test_backend_types_are_read_in_any_case():
    assert cstorch.backend("cpu").backend_type.name == "CPU"


def test_without_a_backend_the_device_is_the_cpu_and_backend_returns_none():
    assert cstorch.backend() is None
    assert cstorch.current_torch_device() == torch.device("cpu")
    assert cstorch.use_cs() is False


def test_current_backend_is_deprecated_and_raises_without_a_backend(cpu_backend):
    with pytest.warns(DeprecationWarning, match=r"use cstorch.backend\(\)"):
        assert cstorch.current_backend() is cpu_backend
    cstorch.local_backend.discard_backend()
    with pytest.raises(RuntimeError, match=r"no cstorch backend: create one with cstorch.backend"):
        cstorch.current_backend(raise_warning=False)
    assert cstorch.current_backend(raise_exception=False, raise_warning=False) is None


def test_a_process_has_one_backend(cpu_backend):
    with pytest.raises(RuntimeError, match="cannot create a second backend: a CPU backend already exists"):
        cstorch.backend("CPU")


def test_csx_says_this_is_the_local_reference():
    with pytest.raises(RuntimeError, match=r"local reference of cerebras.pytorch and runs on CPU and GPU only"):
        cstorch.backend("CSX")
    assert cstorch.backend() is None


def test_unknown_backend_types_and_stray_arguments_are_refused():
    with pytest.raises(ValueError, match=r"unknown cstorch backend type 'TPU'"):
        cstorch.backend("TPU")
    with pytest.raises(TypeError, match="backend type such as"):
        cstorch.backend(3)
    with pytest.raises(TypeError, match="takes no other arguments"):
        cstorch.backend(artifact_dir="x")
    with pytest.raises(ValueError, match=r"use cstorch.amp.autocast\(\)"):
        cstorch.backend("CPU", mixed_precision=True)
    assert cstorch.backend() is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_a_gpu_backend_without_cuda_says_to_use_the_cpu():
    with pytest.raises(RuntimeError, match=r"needs a CUDA device.*use cstorch.backend\('CPU'\)"):
        cstorch.backend("GPU")
    assert cstorch.backend() is None


@needs_cuda
def test_a_gpu_backend_compiles_the_model_onto_cuda():
    gpu = cstorch.backend("GPU")
    assert gpu.is_gpu and gpu.torch_device.type == "cuda"
    compiled = cstorch.compile(torch.nn.Linear(3, 2))
    assert next(compiled.parameters()).device.type == "cuda"
    assert compiled(torch.randn(4, 3, device=gpu.torch_device)).shape == (4, 2)


def test_compile_without_a_backend_creates_a_cpu_backend_and_returns_the_forward():
    model = torch.nn.Linear(3, 2)
    compiled = cstorch.compile(model)
    assert cstorch.backend().is_cpu
    assert not isinstance(compiled, torch.nn.Module)  # production returns the forward, too
    batch = torch.randn(4, 3)
    assert torch.equal(compiled(batch), model(batch))
    assert list(compiled.parameters()) == list(model.parameters())
    assert compiled.device == model.device == torch.device("cpu")
    compiled.eval()
    assert not model.training


def test_compiling_twice_on_the_current_backend_works_but_a_second_backend_type_does_not():
    model = torch.nn.Linear(3, 2)
    first = cstorch.compile(model, backend="CPU")
    second = cstorch.compile(model)
    assert first is not second and torch.equal(first(torch.ones(1, 3)), second(torch.ones(1, 3)))
    assert cstorch.compile(model, backend=cstorch.backend()) is not None
    with pytest.raises(RuntimeError, match="cannot create a second backend"):
        cstorch.compile(model, backend="CPU")


def test_compile_refuses_a_backend_that_is_not_the_current_one(cpu_backend):
    stale = cpu_backend
    cstorch.local_backend.discard_backend()
    cstorch.backend("CPU")
    with pytest.raises(RuntimeError, match="a backend other than the current one"):
        cstorch.compile(torch.nn.Linear(3, 2), backend=stale)
    with pytest.raises(TypeError, match="expects a torch.nn.Module, got function"):
        cstorch.compile(lambda x: x)
    with pytest.raises(TypeError, match="a backend type, a backend or None, got int"):
        cstorch.compile(torch.nn.Linear(3, 2), backend=1)
