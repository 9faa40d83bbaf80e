"""CS501: check that successive steps trace the same graph.

The system compiles the step once; a step whose graph differs from the
previous one (a Python counter, a Python-float lr that decays, a branch on a
step count) would need a recompile, which the system does not do. This
records each step's aten ops with a `TorchDispatchMode`: the op, the shapes
and dtypes of its tensors, its constant (non-tensor) arguments, and the names
of the parameters and state tensors it touches. The values held in tensors
are not recorded: they may change, the graph may not.

Recording costs a few microseconds per op; it runs only when asked.
"""

from __future__ import annotations

import linecache
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from cslint import advice
from cslint.cstorch.errors import compliance_error
from cslint.cstorch.source_position import SourceSite, is_internal_frame

__all__ = ["check_static_graph"]

# Tensors built from Python values up to this size have their values recorded:
# on the system they are constants baked into the graph.
_MAX_RECORDED_CONSTANT_ELEMENTS = 64

_LIFT_FRESH_OPS = {torch.ops.aten.lift_fresh.default, torch.ops.aten.lift_fresh_copy.default}

@dataclass(frozen=True)
class _OpRecord:
    op: str
    arguments: tuple
    filename: str | None
    lineno: int | None

    def signature(self) -> tuple:
        return (self.op, self.arguments)

    def render(self) -> str:
        where = f"  at {self.filename}:{self.lineno}" if self.filename else ""
        return f"{self.op}({', '.join(_render(a) for a in self.arguments)}){where}"


@dataclass(frozen=True)
class _TensorArg:
    name: str
    dtype: str
    shape: tuple
    values: tuple | None = None

    def __str__(self) -> str:
        text = f"{self.name}: {self.dtype}{list(self.shape)}"
        if self.values is not None:
            text += f" = {list(self.values)}"
        return text


@dataclass(frozen=True)
class _Keyword:
    name: str
    value: object

    def __str__(self) -> str:
        return f"{self.name}={_render(self.value)}"


def _render(argument) -> str:
    if isinstance(argument, tuple):
        return "[" + ", ".join(_render(a) for a in argument) + "]"
    return str(argument)


def _memory_key(tensor: torch.Tensor) -> tuple:
    # By memory, not by object: `p.data`, `.detach()` and views hand out new
    # tensor objects for the same storage every step.
    try:
        return (tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype)
    except RuntimeError:  # no storage (sparse and similar layouts)
        return ("object", id(tensor))


def _user_line() -> tuple[str | None, int | None]:
    frame = sys._getframe(2)
    while frame is not None and is_internal_frame(frame):
        frame = frame.f_back
    if frame is None:
        return None, None
    return frame.f_code.co_filename, frame.f_lineno


class _TensorNames:
    """Stable names for the tensors a step reads, shared by all recorded steps."""

    def __init__(self) -> None:
        self._known: dict[tuple, str] = {}
        self._unnamed_count = 0
        # Keep named tensors alive so their memory is not reused meanwhile.
        self._alive: list[torch.Tensor] = []

    def name(self, tensor: torch.Tensor, name: str) -> None:
        self._known[_memory_key(tensor)] = name
        self._alive.append(tensor)

    def lookup(self, tensor: torch.Tensor, created_this_step: set) -> str:
        key = _memory_key(tensor)
        name = self._known.get(key)
        if name is not None:
            return name
        if key in created_this_step:
            return "temp"
        # A tensor from before the step that nobody named: number it by first
        # appearance, which is stable from step to step.
        self._unnamed_count += 1
        name = f"tensor#{self._unnamed_count}"
        self.name(tensor, name)
        return name


def _name_optimizer_tensors(names: _TensorNames, optimizer: torch.optim.Optimizer) -> None:
    index = 0
    for group_index, group in enumerate(optimizer.param_groups):
        param_names = group.get("param_names")
        for position, param in enumerate(group["params"]):
            base = param_names[position] if param_names else f"param[{index}]"
            names.name(param, base)
            if param.grad is not None:
                names.name(param.grad, f"{base}.grad")
            for key, value in optimizer.state.get(param, {}).items():
                if isinstance(value, torch.Tensor):
                    names.name(value, f"state[{base}][{key!r}]")
            index += 1
        for key, value in group.items():
            if key != "params" and isinstance(value, torch.Tensor):
                names.name(value, f"param_groups[{group_index}][{key!r}]")


class _GraphRecorder(TorchDispatchMode):
    def __init__(self, names: _TensorNames) -> None:
        super().__init__()
        self.names = names
        self.records: list[_OpRecord] = []
        self.created: set = set()

    def _describe(self, value, constant_values: bool = False):
        if isinstance(value, torch.Tensor):
            values = None
            if constant_values and value.numel() <= _MAX_RECORDED_CONSTANT_ELEMENTS:
                with torch._C.DisableTorchFunction():
                    values = tuple(value.detach().reshape(-1).tolist())
            return _TensorArg(
                "constant" if constant_values else self.names.lookup(value, self.created),
                str(value.dtype).replace("torch.", ""),
                tuple(value.shape),
                values,
            )
        if isinstance(value, (list, tuple)):
            return tuple(self._describe(item) for item in value)
        if value is None or isinstance(value, (bool, int, float, complex, str)):
            return value
        if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
            return str(value)
        return type(value).__name__

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        result = func(*args, **kwargs)
        if getattr(func, "namespace", None) == "profiler":  # torch's record_function markers
            return result
        constant = func in _LIFT_FRESH_OPS
        arguments = tuple(self._describe(arg, constant) for arg in args) + tuple(
            _Keyword(key, self._describe(value)) for key, value in sorted(kwargs.items())
        )
        filename, lineno = _user_line()
        self.records.append(_OpRecord(str(func), arguments, filename, lineno))
        input_keys = {
            _memory_key(arg) for arg in args if isinstance(arg, torch.Tensor)
        }
        outputs = result if isinstance(result, (list, tuple)) else (result,)
        for output in outputs:
            if isinstance(output, torch.Tensor):
                key = _memory_key(output)
                # lift_fresh returns its input: a constant made in this step.
                if constant or key not in input_keys:
                    self.created.add(key)
        return result


def _first_difference(previous: list[_OpRecord], current: list[_OpRecord]) -> int | None:
    for index, (before, now) in enumerate(zip(previous, current)):
        if before.signature() != now.signature():
            return index
    if len(previous) != len(current):
        return min(len(previous), len(current))
    return None


def _site(record: _OpRecord | None) -> SourceSite | None:
    if record is None or record.filename is None:
        return None
    code_line = linecache.getline(record.filename, record.lineno).strip()
    return SourceSite(record.filename, record.lineno, code_line)


def _display_name(function: Callable) -> str:
    return getattr(function, "__qualname__", repr(function)).rsplit("<locals>.", 1)[-1]


def check_static_graph(optimizer_or_fn, steps: int = 3) -> None:
    """Run `steps` steps and raise CS501 if one traces a different graph than the step before.

    `optimizer_or_fn` is an optimizer, which is stepped on the gradients
    already set, or a callable taking no arguments (a training step).

    The steps are real: like the `steps` iterations it stands for on the
    system, the check advances the optimizer (parameters, state, Python
    attributes) `steps` times. Call it on a throwaway copy to keep the
    original untouched. Returns None when every step traced the same graph.
    """
    if steps < 2:
        raise ValueError(f"check_static_graph needs at least 2 steps to compare, got {steps}")
    if isinstance(optimizer_or_fn, torch.optim.Optimizer):
        optimizer = optimizer_or_fn
        run_step = optimizer.step
        owner = f"{type(optimizer).__name__}.step"
    elif callable(optimizer_or_fn):
        optimizer = None
        run_step = optimizer_or_fn
        owner = _display_name(optimizer_or_fn)
    else:
        raise TypeError(
            "check_static_graph expects an optimizer or a callable taking no "
            f"arguments, got {type(optimizer_or_fn).__name__}"
        )

    names = _TensorNames()
    previous: list[_OpRecord] | None = None
    for step_number in range(1, steps + 1):
        if optimizer is not None:
            # Grads and state may be new tensors each step; name them afresh.
            _name_optimizer_tensors(names, optimizer)
        recorder = _GraphRecorder(names)
        with recorder:
            run_step()
        current = recorder.records
        if previous is not None:
            index = _first_difference(previous, current)
            if index is not None:
                raise _graph_changed(owner, step_number, index, previous, current)
        previous = current
    return None


def _graph_changed(owner, step_number, index, previous, current):
    before = previous[index] if index < len(previous) else None
    now = current[index] if index < len(current) else None
    lines = [
        f"step {step_number} traced a different graph than step {step_number - 1} "
        f"(first difference at op {index + 1}; the steps ran {len(previous)} and "
        f"{len(current)} ops):",
        f"    step {step_number - 1}: {before.render() if before else '(no more ops)'}",
        f"    step {step_number}: {now.render() if now else '(no more ops)'}",
    ]
    return compliance_error(
        "CS501",
        "\n".join(lines),
        advice.GRAPH_CHANGED,
        owner=owner,
        site=_site(now or before),
    )
