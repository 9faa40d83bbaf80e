"""The strict-mode guard: device-value tracking and host-conversion checks.

While a guarded region (an optimizer step, a scheduler closed form, a
`trace`d function) is active:

* a `TorchFunctionMode` sees every torch call: the Python-level conversions
  (`__bool__`, `item`, `__float__`, `__index__`, `tolist`, `numpy`,
  `__repr__`, `__format__`, `torch.equal`, ...), property reads such as
  `.grad` and `.data`, the float64 tensors an op makes (CS403) and
  `F.one_hot` without `num_classes` (CS206);
* a `TorchDispatchMode` is entered only around the calls that can hide a host
  read from the function mode (see `_may_hide_host_read`): a torch function
  written in Python (its inner ops are invisible to the function mode) other
  than the functionals of one C op (`F.relu`, `F.mse_loss`, ...); a device
  value of one element passed where one of the op's aten overloads may read a
  number (`p.add_(g, alpha=t)`, `torch.full((2,), t)`, `p[:t]` all reach
  `aten._local_scalar_dense`; the schemas say where); the ops whose output
  shape depends on tensor values (`nonzero`, `x[mask]`, `repeat_interleave`,
  ...), which it checks at the aten level; and a backward pass whose graph runs
  Python (a custom `autograd.Function`, hooks). Every other op costs the
  function mode only: entering the dispatch mode for every op made strict mode
  4-5x slower on a per-parameter loop of small tensors.

Both propagate provenance: an op with a device-value input produces device
values (see `provenance`). The function mode marks the results of every op;
the dispatch mode marks the inner ops of the Python-written torch functions
it runs under (the autograd engine's too, in a backward pass it watches).
Measured on torch 2.13 the two modes leave results bitwise identical, work
under `no_grad`, and are thread-local.

Host-side code (`step_closure`, the loss closure passed to `step`) runs inside
`host_side()`: provenance is still tracked, conversions are allowed.

float64 (CS403): an op that makes a float64 tensor while none of its tensor
inputs is float64 raises (`.double()`, `dtype=torch.float64`, `torch.tensor`
or `torch.as_tensor` of a float64 NumPy array; `torch.from_numpy` is not a
torch function a mode sees). float64 data that come from outside the step are
the user's, chosen where they were made (the linter flags `model.double()`
there): ops on float64 inputs (a float64 batch, a module converted before
the step) are not checked, nor is an optimizer step whose parameters are
float64 when it follows their dtype (`x.to(p.dtype)`).
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
    PARAMETER,
    TensorRef,
    inserted,
    registry,
    Origin,
    mark_computed,
    mark_computed_among,
    origin_among,
    origin_of,
    origin_of_slice,
    registry_get,
)
from cslint.cstorch.source_position import (
    is_range_call,
    truth_test_context,
    user_site,
)

__all__ = ["guarded_region", "host_side", "current_owner", "checks_active"]

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
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
        # from the function mode). For C-implemented ops the function mode
        # already marks the outputs.
        self.dispatch_propagates = True
        self.function_mode: _HostConversionMode | None = None
        # Per region: a callable saying whether the data the region was given
        # (its parameters) are float64, or None (see `guarded_region`).
        self.float64_data: list = []
        # Whether guarded code ever registered a tensor hook: hooks run Python
        # during backward that no graph node shows (see `_backward_runs_python`).
        self.hooks_registered = False


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
                # origin_of, inlined: this runs for every argument of every op.
                ref = registry_get(id(arg))
                if ref is not None and ref() is arg:
                    origin = ref.origin
                elif type(arg) is not _Tensor and isinstance(arg, _Parameter):
                    origin = PARAMETER
                else:
                    continue
            elif type(arg) is list or type(arg) is tuple:
                origin = origin_among(arg)
            elif type(arg) is slice:
                origin = origin_of_slice(arg)
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

# Tensor operators written in Python that run one C op on the same operands
# (`1.0 - t` is `Tensor.__rsub__`): their inner op hides nothing the operand
# check below does not see.
_PYTHON_OPERATORS_OF_ONE_OP = frozenset(
    {
        _Tensor.__rsub__,
        _Tensor.__rdiv__,
        _Tensor.__rtruediv__,
        _Tensor.__rpow__,
        _Tensor.__pow__,
        _Tensor.__ipow__,
        _Tensor.__floordiv__,
        _Tensor.__rfloordiv__,
        _Tensor.__rmatmul__,
    }
)

# C functions whose aten op makes an output shaped by tensor values: run
# under the dispatch mode, which checks the aten op's shape-deciding inputs.
_SHAPE_DECIDING_FUNCTIONS = frozenset(
    {
        torch.nonzero,
        _Tensor.nonzero,
        torch.argwhere,
        _Tensor.argwhere,
        torch.masked_select,
        _Tensor.masked_select,
        torch.bincount,
        _Tensor.bincount,
        torch.repeat_interleave,
        _Tensor.repeat_interleave,
        torch.unique_consecutive,
        torch._unique,
        torch._unique2,
    }
)

_BOOLEAN_DTYPES = (torch.bool, torch.uint8)


def _read_as_number(value) -> bool:
    """Whether `value` is a one-element device value: what C code may read
    as a Python number (a Scalar argument, a size, a slice bound)."""
    if isinstance(value, _Tensor):
        return value.numel() == 1 and origin_of(value) is not None
    if type(value) is slice:
        return any(
            isinstance(bound, _Tensor) and origin_of(bound) is not None
            for bound in (value.start, value.stop, value.step)
        )
    return False


def _holds_number_read(values) -> bool:
    for value in values:
        if _read_as_number(value):
            return True
        if type(value) is list or type(value) is tuple:
            for item in value:
                if _read_as_number(item):
                    return True
                # A list of larger tensors is a tensor list (a `_foreach_*`
                # operand), not a size: one look is enough.
                if isinstance(item, _Tensor):
                    break
    return False


def _boolean_index(index) -> bool:
    if isinstance(index, _Tensor):
        return index.dtype in _BOOLEAN_DTYPES
    if type(index) is tuple or type(index) is list:
        return any(
            isinstance(item, _Tensor) and item.dtype in _BOOLEAN_DTYPES for item in index
        )
    return False


# Arithmetic whose two-operand form (`a / b`, `x.mul_(t)`, `torch.add(a, b)`)
# takes a tensor operand as a tensor, never as a number. (Three positional
# arguments may pick a deprecated overload that reads one as a Scalar:
# `p.add_(t, g)` is `add_(alpha, other)`.)
_TENSOR_OPERAND_FUNCTIONS = frozenset(
    getattr(owner, name)
    for owner, names in (
        (
            _Tensor,
            (
                "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__",
                "__mul__", "__rmul__", "__imul__", "__truediv__", "__rtruediv__",
                "__itruediv__", "__div__", "__rdiv__", "__idiv__", "__pow__", "__rpow__",
                "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__",
                "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_",
                "true_divide", "true_divide_", "maximum", "minimum", "pow", "pow_",
            ),
        ),
        (torch, ("add", "sub", "mul", "div", "true_divide", "maximum", "minimum", "pow")),
    )
    for name in names
)


# Schema argument types (as `torch._C` spells them) that never take a number: a
# tensor there is used as a tensor. Every other type (`number`, `int`, `float`,
# `bool`, their optionals) may read a one-element tensor as a Python number.
_TENSOR_OR_NON_NUMBER_TYPES = frozenset({
    "Tensor", "Optional[Tensor]", "List[Tensor]", "List[Optional[Tensor]]",
    "Optional[List[Optional[Tensor]]]", "str", "Optional[str]", "List[str]", "Device",
    "Optional[Device]", "Generator", "Optional[Generator]", "Storage",
})
# List types that read tensors as numbers (sizes, `int[]`, via `__index__`); a list of
# tensors is never parsed as a list of Scalars (`number[]`): those take Python numbers.
_NUMBER_LIST_TYPES = frozenset({
    "List[int]", "Optional[List[int]]", "List[float]", "Optional[List[float]]", "List[bool]",
})


class _NumberArguments:
    """Where a C function's arguments may be read as Python numbers, from the schemas of
    its aten op's overloads: by position (a method's `self` is position 0, as in the
    schema) and by keyword."""

    __slots__ = ("positions", "list_positions", "names", "list_names", "varargs_from")

    def __init__(self, schemas) -> None:
        positions, list_positions, names, list_names = set(), set(), set(), set()
        for schema in schemas:
            if not any("Tensor" in str(item.type)
                       for item in (*schema.arguments, *schema.returns)):
                continue  # TorchScript's own number overloads (`aten::neg.int(int a)`)
            index = 0
            for argument in schema.arguments:
                kind = str(argument.type)
                if kind not in _TENSOR_OR_NON_NUMBER_TYPES:
                    if kind in _NUMBER_LIST_TYPES:
                        list_names.add(argument.name)
                        if not argument.kwarg_only:
                            list_positions.add(index)
                    elif not kind.startswith("List["):
                        names.add(argument.name)
                        if not argument.kwarg_only:
                            positions.add(index)
                if not argument.kwarg_only:
                    index += 1
        self.positions = frozenset(positions)
        self.list_positions = frozenset(list_positions)
        # A size list may also be passed spread out (`x.view(2, n)`, `torch.zeros(n, 3)`).
        self.varargs_from = min(list_positions, default=1 << 30)
        self.names = frozenset(names)
        self.list_names = frozenset(list_names)

    def read(self, args: tuple, kwargs: dict) -> bool:
        """Whether a device value sits where an overload may read a number."""
        for index, value in enumerate(args):
            if type(value) is list or type(value) is tuple:
                if index in self.list_positions and _holds_number_read(value):
                    return True
            elif (index in self.positions or index >= self.varargs_from) and \
                    _read_as_number(value):
                return True
        for name, value in kwargs.items():
            if type(value) is list or type(value) is tuple:
                if name in self.list_names and _holds_number_read(value):
                    return True
            elif name in self.names and _read_as_number(value):
                return True
        return False


# Ops whose Python bindings keep deprecated scalar-first signatures that no aten schema
# has (PyTorch's tools/autograd/deprecated.yaml: `p.add_(-lr, g)`, `p.addcdiv_(value, a,
# b)`, `torch.addmm(beta, m, alpha, a, b)`): every argument is suspect.
_SCALAR_FIRST_SIGNATURES = frozenset(
    name + suffix
    for name in ("add", "sub", "addcdiv", "addcmul", "addmm", "addmv", "addr", "addbmm",
                 "baddbmm")
    for suffix in ("", "_")
)


def _number_arguments(func) -> _NumberArguments | None:
    """The number arguments of the aten op named like `func`, or None when there is no
    such op or its bindings take numbers where no schema does (then every argument is
    suspect)."""
    name = getattr(func, "__name__", None)
    if not name or name.startswith("__") or name in _SCALAR_FIRST_SIGNATURES:
        return None
    try:
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}")
    except RuntimeError:
        return None
    return _NumberArguments(schemas) if schemas else None


# torch.nn.functional functions written in Python whose bodies only check shapes and
# Python options before calling one C op on the same arguments: like a C op, they can
# read a device value only where it is passed (checked as for any C op).
_PYTHON_FUNCTIONS_OF_ONE_OP = frozenset(
    getattr(torch.nn.functional, name)
    for name in (
        "relu", "relu6", "elu", "selu", "celu", "leaky_relu", "silu", "mish", "hardtanh",
        "hardswish", "hardsigmoid", "sigmoid", "tanh", "softsign", "tanhshrink", "glu",
        "softmax", "log_softmax", "softmin", "layer_norm", "group_norm", "batch_norm",
        "rms_norm", "dropout", "embedding", "mse_loss", "l1_loss", "smooth_l1_loss",
        "huber_loss", "cross_entropy", "nll_loss", "binary_cross_entropy_with_logits",
        "kl_div",
    )
    if hasattr(torch.nn.functional, name)
)
# Backward passes: the autograd engine runs the derivatives of ops the guard already
# checked forward; only Python in the graph (a custom autograd.Function, a hook) can
# read a device value there, so only then does the dispatch mode watch them.
_BACKWARD = "backward"
_BACKWARD_FUNCTIONS = frozenset({_Tensor.backward, torch.autograd.backward,
                                 torch.autograd.grad})
_PYTHON_NODE = torch.autograd.function.BackwardCFunction
_HOOK_REGISTRATIONS = frozenset({_Tensor.register_hook,
                                 _Tensor.register_post_accumulate_grad_hook})


def _accumulate_grad_type() -> type:
    leaf = torch.zeros(1, requires_grad=True)
    return type((leaf * 1).grad_fn.next_functions[0][0])


_ACCUMULATE_GRAD = _accumulate_grad_type()


def _backward_runs_python(args: tuple, kwargs: dict) -> bool:
    """Whether a backward pass from these roots runs Python: a custom Function's
    node, a leaf with hooks, or any hook registered by guarded code."""
    if _state.hooks_registered:
        return True
    roots = args[0] if args else kwargs.get("tensors", kwargs.get("outputs"))
    if isinstance(roots, _Tensor):
        roots = (roots,)
    elif not isinstance(roots, (list, tuple)):
        return True  # not a form we know: watch it
    stack = [root.grad_fn for root in roots
             if isinstance(root, _Tensor) and root.grad_fn is not None]
    seen = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if type(node) is _ACCUMULATE_GRAD:
            leaf = node.variable
            if leaf._backward_hooks or leaf._post_accumulate_grad_hooks:
                return True
            continue
        if isinstance(node, _PYTHON_NODE):
            return True
        for next_node, _ in node.next_functions:
            if next_node is not None:
                stack.append(next_node)
    return False


def _call_kind(func) -> tuple[bool, bool, int, object, _NumberArguments | None]:
    """(always watch, two-operand arithmetic, operands start, special check, number
    arguments) for `_may_hide_host_read`; computed once per function."""
    if func in _BACKWARD_FUNCTIONS:
        return False, False, 0, _BACKWARD, None
    if func in _PYTHON_FUNCTIONS_OF_ONE_OP:
        return False, False, 0, None, None
    kind = type(func)
    if kind not in _C_FUNCTION_TYPES and func not in _PYTHON_OPERATORS_OF_ONE_OP:
        return True, False, 0, None, None
    if func in _SHAPE_DECIDING_FUNCTIONS:
        return True, False, 0, None, None
    special = func if func is _Tensor.__getitem__ or func is torch.where else None
    # A method's first argument is the tensor it is called on, never a number.
    start = 0 if kind is types.BuiltinFunctionType else 1
    numbers = None if special is not None else _number_arguments(func)
    return False, func in _TENSOR_OPERAND_FUNCTIONS, start, special, numbers


_call_kinds: dict[object, tuple] = {}


def _may_hide_host_read(func, args: tuple, kwargs: dict) -> bool:
    """Whether `func`, given a device value, may read it on the host or shape
    its output by it where the function mode cannot see (so the dispatch
    mode must watch the call)."""
    try:
        kind = _call_kinds.get(func)
        if kind is None:
            kind = _call_kinds[func] = _call_kind(func)
    except TypeError:  # an unhashable callable: nothing known about it
        return True
    always, two_operand, start, special, numbers = kind
    if always:
        return True
    if two_operand and len(args) == 2 and not kwargs:
        return False
    if numbers is not None:
        return numbers.read(args, kwargs)
    if special is not None:
        if special is _BACKWARD:
            return _backward_runs_python(args, kwargs)
        if special is torch.where:
            if len(args) == 1 and not kwargs:
                return True
        elif len(args) > 1 and _boolean_index(args[1]):
            return True
    if _holds_number_read(args[start:] if start else args):
        return True
    return bool(kwargs) and _holds_number_read(kwargs.values())


def _one_hot_error(origin: Origin):
    return compliance_error(
        "CS206",
        "`F.one_hot` without num_classes makes an output whose width is the "
        f"largest value of {origin.description}, known only when the step runs",
        advice.ONE_HOT_CLASSES,
        owner=current_owner(),
        site=user_site(),
    )


def _check_one_hot(args: tuple, kwargs: dict) -> None:
    num_classes = kwargs.get("num_classes", args[1] if len(args) > 1 else -1)
    if isinstance(num_classes, int) and num_classes < 0 and args:
        origin = origin_of(args[0])
        if origin is not None:
            raise _one_hot_error(origin)


_FLOAT64 = torch.float64


def _makes_float64(result) -> bool:
    if isinstance(result, _Tensor):
        return result.dtype is _FLOAT64
    if type(result) is tuple or type(result) is list:
        # The outputs of one op share a dtype (a `_foreach_*` op's thousands
        # included): the first tensor speaks for them.
        for item in result:
            if isinstance(item, _Tensor):
                return item.dtype is _FLOAT64
    return False


def _has_float64_input(args: tuple, kwargs: dict) -> bool:
    for group in (args, kwargs.values()):
        for arg in group:
            if isinstance(arg, _Tensor):
                if arg.dtype is _FLOAT64:
                    return True
            elif type(arg) is list or type(arg) is tuple:
                if any(isinstance(item, _Tensor) and item.dtype is _FLOAT64 for item in arg):
                    return True
    return False


def _float64_chosen_here(args: tuple, kwargs: dict) -> bool:
    """Whether a float64 result is the step's own choice: none of the op's
    inputs is float64, and the region's data (its parameters) are not."""
    if _has_float64_input(args, kwargs):
        return False
    for data_is_float64 in _state.float64_data:
        if data_is_float64 is not None and data_is_float64():
            return False
    return True


def _float64_error(func):
    return compliance_error(
        "CS403",
        f"`{_op_name(func)}` makes a float64 tensor inside the traced step; the "
        "system supports mixed precision only (float32 weights, float16 compute, "
        "the casts inserted automatically), so float64 cannot be compiled",
        advice.FLOAT64,
        owner=current_owner(),
        site=user_site(),
    )


# What the function mode does beyond marking, for the few functions that need
# it (looked up once per op with a device-value input).
_CONVERSION = "conversion"
_METADATA = "metadata"
_ONE_HOT = "one_hot"
_HOOK = "hook"
_FROM_DATA = "from_data"
_BOUNDS = "bounds"
_SPECIAL_FUNCTIONS: dict[object, str] = {
    **{func: _HOOK for func in _HOOK_REGISTRATIONS},
    **{func: _CONVERSION for func in _HOST_CONVERSIONS},
    **{func: _METADATA for func in _METADATA_ONLY_FUNCTIONS},
    torch.nn.functional.one_hot: _ONE_HOT,
    torch.tensor: _FROM_DATA,
    torch.as_tensor: _FROM_DATA,
    torch.asarray: _FROM_DATA,
    torch.linspace: _BOUNDS,
    torch.logspace: _BOUNDS,
}


def _check_bounds_of(func, args, kwargs) -> None:
    """`torch.linspace(t, 1.0, 5)`: a tensor start or end is read as a number (its
    overloads call `.item()` in C, where no mode sees it)."""
    bounds = [*args[:2], kwargs.get("start"), kwargs.get("end")]
    for bound in bounds:
        origin = origin_of(bound) if isinstance(bound, _Tensor) else None
        if origin is not None:
            raise compliance_error(
                "CS204",
                f"`{_op_name(func)}` reads {origin.description} as a Python number "
                "(its start or end)",
                advice.TENSOR_AS_NUMBER,
                owner=current_owner(),
                site=user_site(),
            )


def _check_data_of(func, args, kwargs) -> None:
    """`torch.tensor([t1, t2])`, `torch.as_tensor((t, 1.0))`: PyTorch reads each
    tensor of a (nested) list or tuple as a number, in C, where no mode sees the
    read. A single tensor is copied (`torch.tensor(t)`), reading no value."""
    data = args[0] if args else kwargs.get("data")
    if type(data) is not list and type(data) is not tuple:
        return
    pending = [data]
    while pending:
        values = pending.pop()
        origin = origin_among(values)
        if origin is not None:
            raise compliance_error(
                "CS204",
                f"`{_op_name(func)}` of a list reads {origin.description} on the host "
                "(each tensor of the list is read as a number)",
                advice.TENSORS_TO_TENSOR,
                owner=current_owner(),
                site=user_site(),
            )
        pending.extend(v for v in values if type(v) is list or type(v) is tuple)

_strict_setting = strict_mode._setting
_NO_KEYWORDS: dict = {}  # shared by calls without keywords; never written
_MethodWrapperType = types.MethodWrapperType
_GRAD_GETTER = _Tensor.grad.__get__


class _HostConversionMode(TorchFunctionMode):
    # The hot path of strict mode: every torch call in a guarded region comes
    # here, so the common case (a C op, no conversion) is kept flat.

    def __init__(self) -> None:
        super().__init__()
        # One dispatch mode, entered around the calls that need it.
        self.scalar_reads = _ScalarReadMode()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if type(func) is _MethodWrapperType and func == _GRAD_GETTER:
            # `p.grad`, read once or twice per parameter by every step: it
            # converts nothing, makes nothing, only passes provenance on.
            result = func(*args)
            if result is not None:
                ref = registry_get(id(result))
                if ref is None or ref() is not result:
                    origin = origin_of(args[0])
                    if origin is not None:
                        mark_computed(result, origin.derived())
            return result
        if kwargs:
            origin = _origin_of_inputs(args, kwargs)
        else:
            kwargs = _NO_KEYWORDS
            # `_origin_of_inputs` for positional arguments, inlined (keep the two
            # alike): the common call of an optimizer loop (`buf.mul_(m)`,
            # `p.sub_(lr * buf)`); the call costs 5% of a per-parameter SGD step.
            origin = None
            for arg in args:
                if isinstance(arg, _Tensor):
                    ref = registry_get(id(arg))
                    if ref is not None and ref() is arg:
                        found = ref.origin
                    elif type(arg) is not _Tensor and isinstance(arg, _Parameter):
                        found = PARAMETER
                    else:
                        continue
                elif type(arg) is list or type(arg) is tuple:
                    found = origin_among(arg)
                elif type(arg) is slice:
                    found = origin_of_slice(arg)
                else:
                    continue
                if found is not None:
                    if found.scheduled:
                        origin = found
                        break
                    if origin is None:
                        origin = found
        state = _state
        watch_dispatch = False
        if origin is not None:
            try:
                special = _SPECIAL_FUNCTIONS.get(func)
            except TypeError:  # an unhashable callable: not one of ours
                special = None
            if special is not None:
                if special is _CONVERSION:
                    if state.host_side == 0 and _strict_setting.enabled:
                        raise _conversion_error(_HOST_CONVERSIONS[func], func, origin)
                elif special is _METADATA:
                    # The template tensor gives only shape/dtype/device; a
                    # device fill value (`new_tensor(t)`, `full_like(p, t)`)
                    # still counts.
                    origin = _origin_of_inputs(args[1:], kwargs)
                elif special is _HOOK:
                    state.hooks_registered = True  # backward passes run Python now
                elif special is _FROM_DATA:
                    if state.host_side == 0 and _strict_setting.enabled:
                        _check_data_of(func, args, kwargs)
                elif special is _BOUNDS:
                    if state.host_side == 0 and _strict_setting.enabled:
                        _check_bounds_of(func, args, kwargs)
                elif state.host_side == 0 and _strict_setting.enabled:
                    _check_one_hot(args, kwargs)
            # `_may_hide_host_read`'s commonest answer, inlined: two-operand
            # arithmetic (`buf.mul_(m)`, `lr * g`) reads no number.
            try:
                kind = _call_kinds.get(func)
            except TypeError:
                kind = None
            if kind is not None and kind[1] and len(args) == 2 and kwargs is _NO_KEYWORDS:
                watch_dispatch = False
            else:
                watch_dispatch = _may_hide_host_read(func, args, kwargs)
        if watch_dispatch:
            # The dispatch mode names the Python-level op in its messages.
            outer_op = state.current_op
            outer_propagates = state.dispatch_propagates
            state.current_op = func
            state.dispatch_propagates = type(func) not in _C_FUNCTION_TYPES
            try:
                with self.scalar_reads:
                    result = func(*args, **kwargs)
            finally:
                state.current_op = outer_op
                state.dispatch_propagates = outer_propagates
        else:
            result = func(*args, **kwargs)
        if args and result is args[0]:
            # An in-place op returns its operand, and its dtype is the operand's own;
            # an operand made on the host (`total = torch.zeros(())`) that takes a device
            # value in place (`total.add_(p.grad.norm())`) holds one from then on.
            if origin is not None:
                if kwargs:
                    _mark_outputs(result, args, kwargs, origin)  # `out=` is written too
                elif isinstance(result, _Tensor):
                    ref = registry_get(id(result))
                    if ref is None or ref() is not result:
                        mark_computed(result, origin.derived())
            return result
        if isinstance(result, _Tensor):
            if origin is not None:
                if kwargs:  # `out=` is written too
                    _mark_outputs(result, args, kwargs, origin)
                else:
                    key = id(result)
                    ref = registry_get(key)
                    if ref is None or ref() is not result:  # in-place ops return marked tensors
                        if type(result) is _Tensor:
                            # `mark_computed`, inlined for the commonest result.
                            ref = TensorRef(result)
                            ref.origin = origin._derived or origin.derived()
                            registry[key] = ref
                            inserted()
                        else:
                            mark_computed(result, origin.derived())
            if (
                result.dtype is _FLOAT64
                and state.host_side == 0
                and _strict_setting.enabled
                and _float64_chosen_here(args, kwargs)
            ):
                raise _float64_error(func)
        else:
            if origin is not None:
                _mark_outputs(result, args, kwargs, origin)
            if (
                _makes_float64(result)
                and state.host_side == 0
                and _strict_setting.enabled
                and _float64_chosen_here(args, kwargs)
            ):
                raise _float64_error(func)
        return result


class _ScalarReadMode(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ in `torch._disable_dynamo`
        # unless told not to: a few us per aten op (the autograd engine's
        # included) for a guard that never runs under torch.compile.
        return False

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
def guarded_region(owner: str, float64_data=None) -> Iterator[None]:
    """Check host conversions of device values while the block runs.

    `owner` ("MyAdam.step") names the code in error messages. Nested regions
    share the outer region's mode and only push their name; a region entered
    from host-side code checks again until it exits.

    `float64_data`, a callable, says whether the data the region works on
    (an optimizer's parameters) are float64: then a step following their
    dtype (`x.to(p.dtype)`) makes float64 because the user chose it outside
    the step, and CS403 is not raised. Called only when an op makes float64.
    """
    state = _state
    if state.depth == 0:
        mode = _HostConversionMode()
        mode.__enter__()
        state.function_mode = mode
    state.depth += 1
    state.owners.append(owner)
    state.float64_data.append(float64_data)
    outer_host_side = state.host_side
    state.host_side = 0
    try:
        yield
    finally:
        state.host_side = outer_host_side
        state.float64_data.pop()
        state.owners.pop()
        state.depth -= 1
        if state.depth == 0:
            mode, state.function_mode = state.function_mode, None
            mode.__exit__(None, None, None)


@contextlib.contextmanager
def host_side() -> Iterator[None]:
    """Run host code (step closures, the loss closure): conversions allowed."""
    _state.host_side += 1
    try:
        yield
    finally:
        _state.host_side -= 1
