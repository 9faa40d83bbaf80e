"""`cstorch.backend` and `cstorch.compile`: where a script's tensors live.

The production package runs a script on a CPU, a GPU or a Cerebras system
(CSX). This reference runs it on the CPU or a CUDA GPU only, and keeps the
production rules a script can break: one backend per process, a compile on a
backend other than the current one, a DataExecutor or GradScaler without a
backend.
"""

from __future__ import annotations

import enum
import functools
import inspect
import warnings
from pathlib import Path

import torch

__all__ = [
    "Backend",
    "BackendType",
    "backend",
    "compile",
    "current_backend",
    "current_torch_device",
    "discard_backend",
    "require_backend",
    "use_cs",
]


class BackendType(enum.Enum):
    CPU = "CPU"
    GPU = "GPU"
    CSX = "CSX"

    @staticmethod
    def from_str(name: str) -> BackendType:
        try:
            return BackendType[name.upper()]
        except KeyError:
            raise ValueError(
                f"unknown cstorch backend type {name!r}: expected one of "
                f"{[member.name for member in BackendType]}"
            ) from None


class Backend:
    """The backend a script runs on: its type and torch device."""

    def __init__(self, backend_type: BackendType, torch_device: torch.device, artifact_dir) -> None:
        self.backend_type = backend_type
        self.torch_device = torch_device
        self.artifact_dir = Path(artifact_dir if artifact_dir is not None else "./")
        # DataExecutors being iterated, innermost last (see utils.data).
        self.data_executor_stack: list = []

    # Production's Cerebras device wraps the torch device; locally they are one.
    @property
    def device(self) -> torch.device:
        return self.torch_device

    is_cpu = property(lambda self: self.backend_type is BackendType.CPU)
    is_gpu = property(lambda self: self.backend_type is BackendType.GPU)
    is_csx = property(lambda self: False)

    def move_to_device(self, structure):
        """`structure` with every tensor in it moved to this backend's device."""
        return torch.utils._pytree.tree_map_only(
            torch.Tensor, lambda tensor: tensor.to(self.torch_device), structure
        )

    def __repr__(self) -> str:
        return f"cstorch.backend({self.backend_type.name!r}, device={str(self.torch_device)!r})"


_current: Backend | None = None


def _cpu_device(artifact_dir=None, mixed_precision=None) -> torch.device:
    if mixed_precision is not None:
        raise ValueError(
            "cstorch.backend('CPU') takes no mixed_precision argument: use "
            "cstorch.amp.autocast() around the forward pass instead"
        )
    return torch.device("cpu")


def _gpu_device(
    artifact_dir=None,
    enable_distributed: bool = False,
    main_process_id: int = 0,
    dist_backend: str = "nccl",
    init_method=None,
    sync_batchnorm: bool = False,
) -> torch.device:
    if enable_distributed:
        raise NotImplementedError(
            "cstorch.backend('GPU', enable_distributed=True): the local reference "
            "runs on one GPU; drop enable_distributed here"
        )
    if not torch.cuda.is_available():
        raise RuntimeError(
            "cstorch.backend('GPU') needs a CUDA device, and torch.cuda.is_available() "
            "is False here: use cstorch.backend('CPU')"
        )
    return torch.device("cuda", torch.cuda.current_device())


def backend(backend_type=None, *args, **kwargs) -> Backend | None:
    """Create the process's backend ("CPU" or "GPU"), or return it when called without a type.

    Production also takes "CSX" (a Cerebras system); this local reference
    raises for it. As in production a process has one backend: a second
    `cstorch.backend(type)` raises, `cstorch.backend()` returns the one there is.
    """
    global _current
    if backend_type is None:
        if args or kwargs:
            raise TypeError(
                "cstorch.backend() without a backend type returns the current backend "
                "and takes no other arguments; pass \"CPU\" or \"GPU\" to create one"
            )
        return _current
    if isinstance(backend_type, str):
        backend_type = BackendType.from_str(backend_type)
    elif not isinstance(backend_type, BackendType):
        raise TypeError(
            f"cstorch.backend expects a backend type such as \"CPU\", got {type(backend_type).__name__}"
        )
    if backend_type is BackendType.CSX:
        raise RuntimeError(
            "cstorch.backend('CSX'): cslint.cstorch is the local reference of "
            "cerebras.pytorch and runs on CPU and GPU only; use cstorch.backend('CPU') "
            "or 'GPU' here and cerebras.pytorch on the Cerebras system"
        )
    if _current is not None:
        raise RuntimeError(
            f"cannot create a second backend: a {_current.backend_type.name} backend "
            "already exists; use cstorch.backend() to get it"
        )
    make_device = _cpu_device if backend_type is BackendType.CPU else _gpu_device
    torch_device = make_device(*args, **kwargs)
    artifact_dir = inspect.signature(make_device).bind(*args, **kwargs).arguments.get("artifact_dir")
    _current = Backend(backend_type, torch_device, artifact_dir)
    return _current


def current_backend(raise_exception: bool = True, raise_warning: bool = True) -> Backend | None:
    """The current backend (deprecated in production in favour of `cstorch.backend()`)."""
    if raise_warning:
        warnings.warn(
            "cstorch.current_backend() is deprecated: use cstorch.backend() to get the "
            "current backend",
            DeprecationWarning,
            stacklevel=2,
        )
    if _current is None and raise_exception:
        raise _no_backend_error()
    return _current


def require_backend() -> Backend:
    """The current backend, or production's error when the script made none."""
    if _current is None:
        raise _no_backend_error()
    return _current


def _no_backend_error() -> RuntimeError:
    return RuntimeError(
        "no cstorch backend: create one with cstorch.backend(\"CPU\") (or \"GPU\"), "
        "or compile the model first with cstorch.compile(model, backend=\"CPU\")"
    )


def current_torch_device() -> torch.device:
    """The current backend's torch device; the CPU when there is no backend yet."""
    return _current.torch_device if _current is not None else torch.device("cpu")


def use_cs() -> bool:
    """Whether the script runs on a Cerebras system: never, with the local reference."""
    return False


def discard_backend() -> None:
    """Forget the current backend, so that `cstorch.backend(type)` may create another.

    Production has no such call (a process keeps its backend); test suites
    that create a backend per test need it.
    """
    global _current
    _current = None


def compile(model: torch.nn.Module, backend: str | Backend | None = None):  # noqa: A001 - production's name
    """Move `model` to the backend's device and return its compiled forward.

    As in production the result is a callable that runs the model's forward
    pass and carries the model's public methods (`parameters`, `train`,
    `state_dict`, ...) and a `device` attribute, not the module itself.
    `backend` is None (the current backend, else a new CPU backend), a backend
    type (which creates the backend, so a second `compile(model, "CPU")`
    raises as in production) or the current backend.
    """
    chosen = _backend_to_compile_on(backend)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"cstorch.compile expects a torch.nn.Module, got {type(model).__name__}")
    model.to(chosen.torch_device)
    model.device = chosen.torch_device

    def forward(*args, **kwargs):
        return model(*args, **kwargs)

    compiled = functools.wraps(model.__call__)(forward)
    for name in dir(model):
        if name.startswith("_"):
            continue
        member = getattr(model, name)
        if inspect.ismethod(member):
            setattr(compiled, name, member)
    compiled.device = chosen.torch_device
    return compiled


def _backend_to_compile_on(requested) -> Backend:
    if requested is None:
        return _current if _current is not None else backend("CPU")
    if isinstance(requested, (str, BackendType)):
        return backend(requested)
    if isinstance(requested, Backend):
        if requested is not _current:
            raise RuntimeError(
                "cstorch.compile got a backend other than the current one: compile "
                "on cstorch.backend()"
            )
        return requested
    raise TypeError(
        f"cstorch.compile expects a backend type, a backend or None, got {type(requested).__name__}"
    )
