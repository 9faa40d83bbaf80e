"""CS501: check that successive steps trace the same graph.

The system compiles the step once; a step whose graph differs from the
previous one (a Python counter, a Python-float lr that decays, a branch on a
step count) would need a recompile, which the system does not do. This
records each step's aten ops with a `TorchDispatchMode`: the op, the shapes
and dtypes of its tensors, its constant (non-tensor) arguments, and the role
of each tensor it touches (see `_TensorNames`). The values held in tensors
are not recorded: they may change, the graph may not; nor are the ops a data
loader runs inside the step, which the system runs on the host.

Recording costs a few microseconds per op; it runs only when asked.
"""

from __future__ import annotations

import linecache
import sys
import types
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
class _DtypeArg:
    name: str

    def __str__(self) -> str:
        return self.name


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


# Batches are made on the host (the system's input workers), not in the
# step's graph: ops run by a data loader inside the step are not recorded.
_DATA_PIPELINE_MODULES = ("torch.utils.data.", "cslint.cstorch.utils.data.")


def _user_line() -> tuple[str | None, int | None] | None:
    """The user's line that ran the op, or None for an op of the data pipeline."""
    frame = sys._getframe(2)
    while frame is not None and is_internal_frame(frame):
        if frame.f_globals.get("__name__", "").startswith(_DATA_PIPELINE_MODULES):
            return None
        frame = frame.f_back
    if frame is None:
        return None, None
    return frame.f_code.co_filename, frame.f_lineno


class _TensorNames:
    """The names of the tensors one step touches, by their role in the step.

    Names stay the same from step to step where the roles do, whatever tensor
    objects fill them: a parameter of a module or optimizer the step can reach
    (`model.0.weight`, `param[0]`), its grad, a state key of it, a param-group
    value (a scheduler writes a new lr tensor every step), an input of the
    step by position, the output of the step's op n, and any other tensor from
    before the step by its order of first use in the step (a batch the step
    takes from an iterator): values that arrive as tensors are data, not graph.
    """

    def __init__(self) -> None:
        self._roles: dict[tuple, str] = {}
        self._created: dict[tuple, str] = {}
        self._arrived: dict[tuple, str] = {}
        # Keep named tensors alive so their memory is not reused meanwhile.
        self._alive: list[torch.Tensor] = []

    def name(self, tensor: torch.Tensor, name: str) -> None:
        """Give `tensor` the role `name`, unless an earlier role named it."""
        key = _memory_key(tensor)
        if key not in self._roles:
            self._roles[key] = name
            self._alive.append(tensor)

    def role(self, tensor: torch.Tensor) -> str | None:
        return self._roles.get(_memory_key(tensor))

    def created(self, tensor: torch.Tensor, op_number: int) -> None:
        self._created[_memory_key(tensor)] = f"op{op_number}"
        self._alive.append(tensor)

    def lookup(self, tensor: torch.Tensor) -> str:
        key = _memory_key(tensor)
        # Made in this step first: its memory may be a freed role tensor's.
        name = self._created.get(key) or self._roles.get(key) or self._arrived.get(key)
        if name is None:
            name = self._arrived[key] = f"tensor#{len(self._arrived) + 1}"
            self._alive.append(tensor)
        return name


# Objects reached from a step are followed this deep (a list of models in a
# dict held by a function the step calls).
_MAX_REACH_DEPTH = 4
_MAX_CONTAINER_ITEMS = 64


_LIBRARY_MODULES = {"torch", "builtins"}
_NOT_REACHED_INTO = (str, bytes, int, float, type)


def _is_scheduler(value) -> bool:
    optimizer = getattr(value, "optimizer", None)
    return isinstance(optimizer, torch.optim.Optimizer) and hasattr(value, "last_epoch")


def _function_roots(function) -> list[tuple[str, object]]:
    """The objects a function reads by name: its closure cells and the globals its code names."""
    roots: list[tuple[str, object]] = []
    bound_self = getattr(function, "__self__", None)
    function = getattr(function, "__func__", function)
    if bound_self is not None:
        roots.append(("self", bound_self))
    code = getattr(function, "__code__", None)
    if code is None:
        return roots
    for name, cell in zip(code.co_freevars, function.__closure__ or ()):
        try:
            roots.append((name, cell.cell_contents))
        except ValueError:  # an empty cell: a name assigned later
            continue
    global_names = getattr(function, "__globals__", {})
    pending = [code]
    while pending:  # names used by nested lambdas and comprehensions too
        current = pending.pop()
        for name in current.co_names:
            if name in global_names:
                roots.append((name, global_names[name]))
        pending.extend(const for const in current.co_consts if hasattr(const, "co_names"))
    return roots


class _RoleNamer:
    """Names the tensors reachable from a step's function and arguments."""

    def __init__(self, names: _TensorNames) -> None:
        self.names = names
        self._seen: set[int] = set()

    def visit(self, label: str, value, depth: int = 0) -> None:
        if depth > _MAX_REACH_DEPTH or value is None or isinstance(value, _NOT_REACHED_INTO):
            return
        if isinstance(value, torch.Tensor):
            self.names.name(value, label)
            return
        if id(value) in self._seen:
            return
        self._seen.add(id(value))
        if isinstance(value, torch.nn.Module):
            self._name_module(label, value)
        elif isinstance(value, torch.optim.Optimizer):
            self._name_optimizer(label, value)
        elif _is_scheduler(value):
            self.visit(f"{label}.optimizer", value.optimizer, depth + 1)
            self.visit(f"{label}.last_epoch", value.last_epoch, depth + 1)
        elif isinstance(value, dict):
            for key, item in list(value.items())[:_MAX_CONTAINER_ITEMS]:
                self.visit(f"{label}[{key!r}]", item, depth + 1)
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value[:_MAX_CONTAINER_ITEMS]):
                self.visit(f"{label}[{index}]", item, depth + 1)
        elif isinstance(value, (types.FunctionType, types.MethodType)):
            self.visit_function(value, depth + 1)
        elif label == "self" and hasattr(value, "__dict__"):  # a step that is a method
            for attribute, item in vars(value).items():
                self.visit(f"self.{attribute}", item, depth + 1)

    def visit_function(self, function, depth: int = 0) -> None:
        # A traced or otherwise wrapped step: what the user wrote is inside.
        while hasattr(function, "__wrapped__"):
            function = function.__wrapped__
        if getattr(function, "__module__", None) in _LIBRARY_MODULES or str(
            getattr(function, "__module__", None)
        ).startswith("torch."):
            return  # library code: what it reads is not the user's model
        for label, value in _function_roots(function):
            self.visit(label, value, depth)

    def _name_module(self, label: str, module: torch.nn.Module) -> None:
        for name, tensor in (*module.named_parameters(), *module.named_buffers()):
            self.names.name(tensor, f"{label}.{name}")
            if tensor.grad is not None:
                self.names.name(tensor.grad, f"{label}.{name}.grad")

    def _name_optimizer(self, label: str, optimizer: torch.optim.Optimizer) -> None:
        # A cstorch optimizer's lr becomes a tensor before its first step: named with
        # the group's other tensors, it is the same tensor in every step's record.
        if hasattr(optimizer, "_lrs_as_device_tensors"):
            optimizer._lrs_as_device_tensors()
        prefix = f"{label}." if label else ""
        index = 0
        for group_index, group in enumerate(optimizer.param_groups):
            param_names = group.get("param_names")
            for position, param in enumerate(group["params"]):
                # A module's parameter keeps the module's name for it.
                base = self.names.role(param) or (
                    param_names[position] if param_names else f"{prefix}param[{index}]"
                )
                self.names.name(param, base)
                if param.grad is not None:
                    self.names.name(param.grad, f"{base}.grad")
                for key, value in optimizer.state.get(param, {}).items():
                    if isinstance(value, torch.Tensor):
                        self.names.name(value, f"{prefix}state[{base}][{key!r}]")
                index += 1
            for key, value in group.items():
                if key != "params" and isinstance(value, torch.Tensor):
                    self.names.name(value, f"{prefix}param_groups[{group_index}][{key!r}]")


def _step_names(step_fn: Callable | None, args: tuple = (), kwargs: dict | None = None,
                optimizer: torch.optim.Optimizer | None = None) -> _TensorNames:
    """Fresh role names for one step of `step_fn(*args, **kwargs)` (or of `optimizer.step()`)."""
    names = _TensorNames()
    namer = _RoleNamer(names)
    if optimizer is not None:
        namer.visit("", optimizer)
    leaves = torch.utils._pytree.tree_leaves((args, kwargs or {}))
    for position, leaf in enumerate(leaves):
        namer.visit(f"input[{position}]", leaf)
    if step_fn is not None:
        namer.visit_function(step_fn)
    return names


class _GraphRecorder(TorchDispatchMode):
    def __init__(self, names: _TensorNames) -> None:
        super().__init__()
        self.names = names
        self.records: list[_OpRecord] = []

    def _describe(self, value, constant_values: bool = False):
        if isinstance(value, torch.Tensor):
            values = None
            if constant_values and value.numel() <= _MAX_RECORDED_CONSTANT_ELEMENTS:
                with torch._C.DisableTorchFunction():
                    values = tuple(value.detach().reshape(-1).tolist())
            return _TensorArg(
                "constant" if constant_values else self.names.lookup(value),
                str(value.dtype).replace("torch.", ""),
                tuple(value.shape),
                values,
            )
        if isinstance(value, (list, tuple)):
            return tuple(self._describe(item) for item in value)
        if value is None or isinstance(value, (bool, int, float, complex, str)):
            return value
        if isinstance(value, torch.dtype):
            return _DtypeArg(str(value).replace("torch.", ""))
        if isinstance(value, (torch.device, torch.layout, torch.memory_format)):
            return str(value)
        return type(value).__name__

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        result = func(*args, **kwargs)
        if getattr(func, "namespace", None) == "profiler":  # torch's record_function markers
            return result
        line = _user_line()
        if line is None:
            return result  # its outputs are data to the step, like its inputs
        constant = func in _LIFT_FRESH_OPS
        arguments = tuple(self._describe(arg, constant) for arg in args) + tuple(
            _Keyword(key, self._describe(value)) for key, value in sorted(kwargs.items())
        )
        self.records.append(_OpRecord(str(func), arguments, *line))
        input_keys = {
            _memory_key(arg) for arg in args if isinstance(arg, torch.Tensor)
        }
        outputs = result if isinstance(result, (list, tuple)) else (result,)
        for output in outputs:
            # An output that is an input (in place, an alias) keeps the input's name;
            # lift_fresh returns its input: a constant made in this step.
            if not isinstance(output, torch.Tensor):
                continue
            if constant or _memory_key(output) not in input_keys:
                self.names.created(output, len(self.records))
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

    previous: list[_OpRecord] | None = None
    for step_number in range(1, steps + 1):
        # Grads, state and scheduled values may be new tensors each step: name them afresh.
        if optimizer is not None:
            names = _step_names(None, optimizer=optimizer)
        else:
            names = _step_names(run_step)
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


def _flat_arguments(record: _OpRecord) -> list:
    flat = []
    pending = list(record.arguments)
    while pending:
        argument = pending.pop(0)
        if isinstance(argument, _Keyword):
            argument = argument.value
        if isinstance(argument, tuple):
            pending[:0] = argument
        else:
            flat.append(argument)
    return flat


def _what_changed(
    before: _OpRecord | None, now: _OpRecord | None, step_number: int
) -> tuple[str, str]:
    """The first difference of two ops, said as the user would, and the fix that fits it."""
    earlier = f"step {step_number - 1}"
    later = f"step {step_number}"
    if before is None:
        return f"{later} ran an op that {earlier} did not: {now.op}", advice.GRAPH_PATH_CHANGED
    if now is None:
        return f"{later} stopped before {before.op}, which {earlier} ran", advice.GRAPH_PATH_CHANGED
    if before.op != now.op:
        return f"{later} ran {now.op} where {earlier} ran {before.op}", advice.GRAPH_PATH_CHANGED
    old_arguments, new_arguments = _flat_arguments(before), _flat_arguments(now)
    for old, new in zip(old_arguments, new_arguments):
        if old == new:
            continue
        if isinstance(old, _TensorArg) and isinstance(new, _TensorArg):
            if old.name != new.name:
                what = f"{now.op} read {new.name} where {earlier} read {old.name}"
                return what, advice.GRAPH_PATH_CHANGED
            if old.shape != new.shape:
                what = f"the shape of {new.name} changed from {list(old.shape)} to {list(new.shape)}"
                return what, advice.GRAPH_SHAPE_CHANGED
            if old.dtype != new.dtype:
                what = f"the dtype of {new.name} changed from {old.dtype} to {new.dtype}"
                return what, advice.GRAPH_DTYPE_CHANGED
            what = (
                f"a tensor built from Python values changed from {list(old.values)} to "
                f"{list(new.values)}; its values are compiled into the graph"
            )
            return what, advice.GRAPH_CHANGED
        if isinstance(old, _DtypeArg) and isinstance(new, _DtypeArg):
            what = f"{now.op} made a {new} tensor where {earlier} made a {old} one"
            return what, advice.GRAPH_DTYPE_CHANGED
        what = (
            f"the Python value {_render(old)} passed to {now.op} became {_render(new)}; "
            "Python values are compiled into the graph"
        )
        return what, advice.GRAPH_CHANGED
    what = f"{now.op} took {len(new_arguments)} arguments where {earlier} gave it {len(old_arguments)}"
    return what, advice.GRAPH_PATH_CHANGED


def _graph_changed(owner, step_number, index, previous, current):
    before = previous[index] if index < len(previous) else None
    now = current[index] if index < len(current) else None
    what, fix = _what_changed(before, now, step_number)
    lines = [
        f"step {step_number} traced a different graph than step {step_number - 1}: {what} "
        f"(op {index + 1}; the steps ran {len(previous)} and {len(current)} ops):",
        f"    step {step_number - 1}: {before.render() if before else '(no more ops)'}",
        f"    step {step_number}: {now.render() if now else '(no more ops)'}",
    ]
    site = _site(now or before)
    return compliance_error("CS501", "\n".join(lines), fix, owner=owner, site=site)
