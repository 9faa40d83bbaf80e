"""The strict-mode guard: device-value tracking and host-conversion checks.

Two torch modes run together while a guarded region (an optimizer step, a
scheduler closed form, a `trace`d function) is active:

* a `TorchFunctionMode` sees the Python-level conversions (`__bool__`, `item`,
  `__float__`, `__index__`, `tolist`, `numpy`, `__repr__`, `__format__`,
  `torch.equal`, ...) and property reads such as `.grad` and `.data`;
* a `TorchDispatchMode` sees the implicit scalar reads that the function mode
  cannot (`p.add_(g, alpha=t)`, `torch.full((2,), t)`, `p[:t]` all reach
  `aten._local_scalar_dense`) and the data-dependent-shape aten ops.

Both propagate provenance: an op with a device-value input produces device
values (see `provenance`). The function mode marks the results of every op;
the dispatch mode marks only what the function mode cannot see (the inner ops
of torch functions written in Python, the autograd engine). Measured on torch
2.13 the two modes together leave results bitwise identical, work under
`no_grad`, and are thread-local.

Host-side code (`step_closure`, the loss closure passed to `step`) runs inside
`host_side()`: provenance is still tracked, conversions are allowed.
"""

from __future__ import annotations

import contextlib
import threading
import types
from collections.abc import Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from cslint import advice
from cslint.cstorch import strict_mode
from cslint.cstorch.errors import compliance_error
from cslint.cstorch.provenance import (
    Origin,
    mark_computed,
    mark_computed_among,
    origin_among,
    origin_of,
)
from cslint.cstorch.source_position import (
    is_range_call,
    truth_test_context,
    user_site,
)

__all__ = ["guarded_region", "host_side", "current_owner", "checks_active"]

_Tensor = torch.Tensor
_aten = torch.ops.aten


class _GuardState(threading.local):
    def __init__(self) -> None:
        self.depth = 0
        self.owners: list[str] = []
        # >0 inside host-side code (step closures, the loss closure).
        self.host_side = 0
        # The Python-level op being run, to name it when the dispatch mode
        # (which only sees aten ops) reports a problem.
        self.current_op = None
        # Whether the dispatch mode must propagate provenance: only while a
        # Python-implemented torch function runs (its inner ops are hidden
        # from the function mode) or outside any function-level op (the
        # autograd engine). For C-implemented ops the function mode already
        # marks the outputs; skipping the second scan halves the overhead.
        self.dispatch_propagates = True
        self.modes: contextlib.ExitStack | None = None


_state = _GuardState()


def current_owner() -> str | None:
    """'Class.method' of the innermost guarded region, for messages."""
    return _state.owners[-1] if _state.owners else None


def checks_active() -> bool:
    """Whether a host conversion is an error right now (strict, not host-side)."""
    return _state.host_side == 0 and strict_mode.is_strict()


# ---------------------------------------------------------------------------
# Provenance of op inputs and outputs (the hot path: kept flat on purpose)


def _origin_of_inputs(args: tuple, kwargs: dict) -> Origin | None:
    """The origin to give an op's outputs: scheduled beats plain device values."""
    found = None
    for group in (args, kwargs.values()) if kwargs else (args,):
        for arg in group:
            if isinstance(arg, _Tensor):
                origin = origin_of(arg)
            elif type(arg) is list or type(arg) is tuple:
                origin = origin_among(arg)
            else:
                continue
            if origin is not None:
                if origin.scheduled:
                    return origin
                if found is None:
                    found = origin
    return found


def _mark_outputs(result: object, args: tuple, kwargs: dict, origin: Origin) -> None:
    derived = origin.derived()
    if isinstance(result, _Tensor):
        mark_computed(result, derived)
    elif isinstance(result, (list, tuple)):
        mark_computed_among(result, derived)
    elif result is None and args:
        # In-place ops that return nothing (`_foreach_add_`, `__setitem__`)
        # write their first argument.
        first = args[0]
        if isinstance(first, _Tensor):
            mark_computed(first, derived)
        elif isinstance(first, (list, tuple)):
            mark_computed_among(first, derived)
    if kwargs:
        out = kwargs.get("out")
        if isinstance(out, _Tensor):
            mark_computed(out, derived)
        elif isinstance(out, (list, tuple)):
            mark_computed_among(out, derived)


# Ops that read only their tensor inputs' metadata (shape, dtype, device):
# their outputs are host constants, like `torch.tensor(0.9, device=p.device)`.
_METADATA_ONLY_FUNCTIONS = {
    torch.zeros_like,
    torch.ones_like,
    torch.full_like,
    torch.empty_like,
    _Tensor.new_zeros,
    _Tensor.new_ones,
    _Tensor.new_full,
    _Tensor.new_empty,
    _Tensor.new_tensor,
}
_METADATA_ONLY_ATEN_PACKETS = (
    _aten.zeros_like,
    _aten.ones_like,
    _aten.full_like,
    _aten.empty_like,
    _aten.new_zeros,
    _aten.new_ones,
    _aten.new_full,
    _aten.new_empty,
    _aten.new_empty_strided,
)
_METADATA_ONLY_ATEN_OPS = {
    getattr(packet, overload)
    for packet in _METADATA_ONLY_ATEN_PACKETS
    for overload in packet.overloads()
}

# ---------------------------------------------------------------------------
# What counts as a host conversion

_TRUTH = "truth"
_INDEX = "index"
_MATERIALIZE = "materialize"
_PRINT = "print"

_HOST_CONVERSIONS: dict[object, str] = {
    _Tensor.__bool__: _TRUTH,
    _Tensor.__contains__: _TRUTH,
    _Tensor.__index__: _INDEX,
    _Tensor.item: _MATERIALIZE,
    _Tensor.__float__: _MATERIALIZE,
    _Tensor.__int__: _MATERIALIZE,
    _Tensor.__complex__: _MATERIALIZE,
    _Tensor.tolist: _MATERIALIZE,
    _Tensor.numpy: _MATERIALIZE,
    _Tensor.__array__: _MATERIALIZE,
    _Tensor.__dlpack__: _MATERIALIZE,
    _Tensor.is_nonzero: _MATERIALIZE,
    _Tensor.equal: _MATERIALIZE,
    _Tensor.allclose: _MATERIALIZE,
    torch.equal: _MATERIALIZE,
    torch.allclose: _MATERIALIZE,
    torch.is_nonzero: _MATERIALIZE,
    _Tensor.__repr__: _PRINT,
    _Tensor.__format__: _PRINT,
}


def _op_name(func: object) -> str:
    if func is None:
        return "an op"
    if isinstance(func, torch._ops.OpOverload):  # an aten op seen by the dispatch mode
        return str(func)
    name = getattr(func, "__name__", None) or repr(func)
    objclass = getattr(func, "__objclass__", None)
    qualname = getattr(func, "__qualname__", "") or ""
    if (objclass is not None and issubclass(objclass, torch._C.TensorBase)) or (
        qualname.startswith("Tensor.")
    ):
        return f"Tensor.{name}"
    return f"torch.{name}"


def _truth_error(origin: Origin, func: object):
    site = user_site()
    context = truth_test_context(site)
    if context == "while":
        code, where = "CS202", "a `while` test"
    elif context == "other":
        code, where = "CS203", "an expression"
    else:
        # 'if', or unknown (Python 3.10, no source): the linter's default.
        code, where = "CS201", "an `if` test"
    what = "membership test (`in`) on" if func is _Tensor.__contains__ else "truth value of"
    return compliance_error(
        code,
        f"{where} takes the {what} {origin.description}, which lives on the "
        "device while the step is traced",
        advice.TRUTH_TEST,
        owner=current_owner(),
        site=site,
    )


def _index_error(origin: Origin):
    site = user_site()
    if is_range_call(site):
        return compliance_error(
            "CS202",
            f"range() needs a Python int but gets {origin.description}",
            advice.TENSOR_LOOP_BOUND,
            owner=current_owner(),
            site=site,
        )
    return compliance_error(
        "CS204",
        f"`__index__` forces {origin.description} to the host (used as a list "
        "index or a Python int)",
        advice.TENSOR_AS_INDEX,
        owner=current_owner(),
        site=site,
    )


def _conversion_error(kind: str, func: object, origin: Origin):
    if kind == _TRUTH:
        return _truth_error(origin, func)
    if kind == _INDEX:
        return _index_error(origin)
    site = user_site()
    if kind == _PRINT:
        problem = (
            f"printing or formatting (`{_op_name(func)}`) reads {origin.description} "
            "on the host"
        )
    else:
        problem = f"`{_op_name(func)}` forces {origin.description} to the host"
    return compliance_error(
        "CS204", problem, advice.HOST_READ, owner=current_owner(), site=site
    )


def _scalar_read_error(origin: Origin):
    site = user_site()
    op = _op_name(_state.current_op)
    if origin.scheduled:
        return compliance_error(
            "CS205",
            f"`{op}` reads {origin.description} as a Python number (a scalar "
            "argument such as alpha= or value=)",
            advice.SCHEDULED_AS_SCALAR_ARGUMENT,
            owner=current_owner(),
            site=site,
        )
    return compliance_error(
        "CS204",
        f"`{op}` reads {origin.description} as a Python number (a scalar "
        "argument, a size or a slice bound)",
        advice.TENSOR_AS_NUMBER,
        owner=current_owner(),
        site=site,
    )


# aten ops whose output shape depends on tensor values, with the arguments
# that decide the shape.
def _first_arg(args, kwargs):
    return args[:1]


def _second_arg(args, kwargs):
    return args[1:2]


def _boolean_indices(args, kwargs):
    indices = args[1] if len(args) > 1 else ()
    return [
        index
        for index in indices
        if isinstance(index, _Tensor) and index.dtype in (torch.bool, torch.uint8)
    ]


def _repeats_unless_sized(position):
    def shape_deciders(args, kwargs):
        if kwargs.get("output_size") is not None:
            return ()
        return args[position : position + 1]

    return shape_deciders


def _overloads(packet, deciders, names=None):
    return {
        getattr(packet, name): deciders
        for name in (names if names is not None else packet.overloads())
    }


_DATA_DEPENDENT_OPS = {
    **_overloads(_aten.nonzero, _first_arg),
    **_overloads(_aten.masked_select, _second_arg),
    **_overloads(_aten._unique, _first_arg),
    **_overloads(_aten._unique2, _first_arg),
    **_overloads(_aten.unique_dim, _first_arg),
    **_overloads(_aten.unique_consecutive, _first_arg),
    **_overloads(_aten.unique_dim_consecutive, _first_arg),
    **_overloads(_aten.bincount, _first_arg),
    **_overloads(_aten.index, _boolean_indices, ["Tensor", "Tensor_out"]),
    **_overloads(_aten.repeat_interleave, _repeats_unless_sized(0), ["Tensor"]),
    **_overloads(_aten.repeat_interleave, _repeats_unless_sized(1), ["self_Tensor"]),
}

_LOCAL_SCALAR_DENSE = _aten._local_scalar_dense.default


def _data_dependent_error(func, origin: Origin):
    site = user_site()
    aten_name = str(func)
    if _state.current_op is not None and _op_name(_state.current_op) != aten_name:
        op = f"`{_op_name(_state.current_op)}` (`{aten_name}`)"
    else:
        op = f"`{aten_name}`"
    # aten.index with boolean indices is `x[mask]`; the rest are shape ops.
    if func.overloadpacket is _aten.index:
        fix = advice.BOOLEAN_MASK
    else:
        fix = advice.DATA_DEPENDENT_SHAPE
    return compliance_error(
        "CS206",
        f"{op} makes an output whose shape depends on the contents of "
        f"{origin.description}",
        fix,
        owner=current_owner(),
        site=site,
    )


def _shape_origin(tensors) -> Origin | None:
    for tensor in tensors:
        if isinstance(tensor, _Tensor):
            origin = origin_of(tensor)
            if origin is not None:
                return origin
    return None


# ---------------------------------------------------------------------------
# The modes


# Callables implemented in C: the aten ops they dispatch return straight to
# the function mode, which marks the results.
_C_FUNCTION_TYPES = frozenset(
    {
        types.BuiltinFunctionType,
        types.MethodDescriptorType,
        types.WrapperDescriptorType,
        types.MethodWrapperType,
    }
)


class _HostConversionMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        origin = _origin_of_inputs(args, kwargs)
        if origin is not None:
            try:
                kind = _HOST_CONVERSIONS.get(func)
                metadata_only = func in _METADATA_ONLY_FUNCTIONS
            except TypeError:  # an unhashable callable: not one of ours
                kind, metadata_only = None, False
            if kind is not None and checks_active():
                raise _conversion_error(kind, func, origin)
            if metadata_only:
                # The template tensor gives only shape/dtype/device; a device
                # fill value (`new_tensor(t)`, `full_like(p, t)`) still counts.
                origin = _origin_of_inputs(args[1:], kwargs)
        state = _state
        outer_op = state.current_op
        outer_propagates = state.dispatch_propagates
        state.current_op = func
        state.dispatch_propagates = type(func) not in _C_FUNCTION_TYPES
        try:
            result = func(*args, **kwargs)
        finally:
            state.current_op = outer_op
            state.dispatch_propagates = outer_propagates
        if origin is not None:
            _mark_outputs(result, args, kwargs, origin)
        return result


class _ScalarReadMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        if func is _LOCAL_SCALAR_DENSE:
            origin = origin_of(args[0])
            if origin is not None and checks_active():
                raise _scalar_read_error(origin)
        else:
            deciders = _DATA_DEPENDENT_OPS.get(func)
            if deciders is not None and checks_active():
                shape_origin = _shape_origin(deciders(args, kwargs))
                if shape_origin is not None:
                    raise _data_dependent_error(func, shape_origin)
        result = func(*args, **kwargs)
        if _state.dispatch_propagates:
            if func in _METADATA_ONLY_ATEN_OPS:
                origin = _origin_of_inputs(args[1:], kwargs)
            else:
                origin = _origin_of_inputs(args, kwargs)
            if origin is not None:
                _mark_outputs(result, args, kwargs, origin)
        return result


@contextlib.contextmanager
def guarded_region(owner: str) -> Iterator[None]:
    """Check host conversions of device values while the block runs.

    `owner` ("MyAdam.step") names the code in error messages. Nested regions
    share the outer region's modes and only push their name; a region entered
    from host-side code checks again until it exits.
    """
    state = _state
    if state.depth == 0:
        # Both modes or neither: a failure entering the second pops the first.
        with contextlib.ExitStack() as modes:
            modes.enter_context(_HostConversionMode())
            modes.enter_context(_ScalarReadMode())
            state.modes = modes.pop_all()
    state.depth += 1
    state.owners.append(owner)
    outer_host_side = state.host_side
    state.host_side = 0
    try:
        yield
    finally:
        state.host_side = outer_host_side
        state.owners.pop()
        state.depth -= 1
        if state.depth == 0:
            modes, state.modes = state.modes, None
            modes.close()


@contextlib.contextmanager
def host_side() -> Iterator[None]:
    """Run host code (step closures, the loss closure): conversions allowed."""
    _state.host_side += 1
    try:
        yield
    finally:
        _state.host_side -= 1
