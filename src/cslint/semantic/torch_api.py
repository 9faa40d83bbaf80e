"""The torch and cstorch vocabulary the analyses know: one copy of each table.

Plain data (names as written or qualified); no analysis code.
"""

from __future__ import annotations

from functools import lru_cache

# ---- cstorch ---------------------------------------------------------------------------

# A scheduler's closed form: `_get_closed_form()` from cstorch 2.5 on,
# `_get_closed_form_lr()` before.
CLOSED_FORMS = ("_get_closed_form", "_get_closed_form_lr")
# What cstorch traces of a scheduler: its closed forms, and a `get_lr` that uses one.
SCHEDULER_TRACED_METHODS = ("_get_closed_form_lr", "_get_closed_form", "get_lr")
TRACE_DECORATORS = frozenset({"cerebras.pytorch.trace"})
# Functions that run on the host with real values (step closures).
HOST_DECORATORS = frozenset({"cerebras.pytorch.step_closure",
                             "cerebras.pytorch.checkpoint_closure"})
COMPILE = frozenset({"cerebras.pytorch.compile"})
# Calls that give the device traced code runs on.
DEVICE_FUNCTIONS = frozenset({"cerebras.pytorch.current_torch_device"})

# ---- torch -----------------------------------------------------------------------------

# Tensor attributes and methods that give Python metadata, not tensor values.
METADATA_ATTRIBUTES = frozenset({
    "shape", "dtype", "device", "ndim", "is_sparse", "is_cuda", "is_meta", "requires_grad",
    "is_leaf", "layout", "names", "is_quantized", "is_mkldnn", "is_nested", "itemsize",
    "nbytes", "grad_fn", "is_cpu", "is_mps", "is_xpu", "is_ipu", "is_hpu", "is_mtia",
    "is_vulkan", "is_xla", "is_sparse_csr",
    # A DTensor's layout over its mesh (`p.placements`, `p.device_mesh`): Python objects.
    "placements", "device_mesh",
})
METADATA_METHODS = frozenset({
    "size", "dim", "ndimension", "numel", "nelement", "element_size", "is_contiguous",
    "is_floating_point", "is_complex", "get_device", "data_ptr", "stride", "storage_offset",
    "is_signed", "type", "has_names", "is_pinned", "is_shared", "is_set_to", "__len__",
})
# Attributes that hold a device (`p.device`, cstorch's `backend.torch_device`), and the
# device types other than the host's, as `device=` strings spell them ("cuda:0").
DEVICE_ATTRIBUTES = frozenset({"device", "torch_device"})
DEVICE_TYPES = frozenset({"cuda", "lazy", "xla", "mps", "xpu", "hpu", "mtia",
                          "privateuseone"})
# Tensor methods that read the value on the host: as a Python value, or as a truth value.
HOST_READ_METHODS = frozenset({"item", "tolist", "numpy", "__float__", "__int__",
                               "__index__"})
TRUTH_METHODS = frozenset({"__bool__"})
NON_TENSOR_TORCH = frozenset({
    "torch.is_tensor", "torch.is_complex", "torch.is_floating_point", "torch.is_grad_enabled",
    "torch.is_inference_mode_enabled", "torch.jit.is_scripting", "torch.jit.is_tracing",
    "torch.compiler.is_compiling", "torch.compiler.is_dynamo_compiling",
    "torch._utils.is_compiling", "torch.are_deterministic_algorithms_enabled",
    "torch.get_default_dtype", "torch.numel", "torch.typename", "torch.is_storage",
    "torch.device", "torch.Size", "torch.finfo", "torch.iinfo", "torch.no_grad",
    "torch.enable_grad", "torch.set_grad_enabled", "torch.inference_mode",
    "torch.cuda.is_available", "torch.manual_seed", "torch.result_type",
    "torch.promote_types", "torch.can_cast", "torch.get_default_device",
    "torch.is_nonzero",  # returns a bool: its call is a host read, checked separately
})
# Questions about how the code is being traced whose answer, while cstorch traces a step
# (lazy tensors), is False: no TorchScript, JIT trace, FX trace or ONNX export runs, and
# no Dynamo (cerebras-pytorch 2.10's backend never calls torch.compile or torch._dynamo;
# torch.optim's `_get_value(step_t)` takes `.item()` there, as under cslint.cstorch).
NOT_TRACING_UNDER_CSTORCH = frozenset({
    "torch.jit.is_scripting", "torch.jit.is_tracing", "torch.onnx.is_in_onnx_export",
    "torch.fx._symbolic_trace.is_fx_tracing", "torch.compiler.is_compiling",
    "torch.compiler.is_dynamo_compiling", "torch._dynamo.is_compiling",
    "torch._utils.is_compiling",
})
# torch.optim's helpers that its functional optimizers call on the step count and the lr
# (and that the copies users port keep), by what each does with a tensor:
# `_get_value(step_t)` is `step_t.item()` unless Dynamo compiles (cstorch traces lazy
# tensors, not Dynamo graphs); `_to_scalar(lr)` squeezes it, `_stack_if_compiling(xs)`
# gives it back, `_dispatch_sqrt(x)` (torch before 2.4) is `x.sqrt()`.
OPTIM_HELPERS_READING_VALUE = frozenset({"torch.optim.optimizer._get_value"})
OPTIM_HELPERS_GIVING_ARGUMENT = frozenset({"torch.optim.optimizer._to_scalar",
                                           "torch.optim.optimizer._stack_if_compiling"})
OPTIM_HELPERS_COMPUTING = frozenset({"torch.optim.optimizer._dispatch_sqrt"})
# The modules whose functions are tensor ops: their result is a tensor like their
# inputs. torch's other modules hold utilities whose results are flags, objects or
# handles (`torch.optim.optimizer._default_to_fused_or_foreach(params, ...)` gives two
# bools, `torch.overrides.has_torch_function(args)` one, `torch.nn.Linear(...)` a
# module): not known, so never reported.
TENSOR_OP_MODULES = frozenset({
    "torch", "torch.nn.functional", "torch.linalg", "torch.fft", "torch.special",
    "torch.nn.init", "torch.autograd", "torch.sparse", "torch.masked", "torch.nested",
    "torch.nn.utils", "torch.distributions", "torch.func", "torch.utils.checkpoint",
    "torch.signal.windows", "torch._C._nn", "torch._C._linalg", "torch._C._fft",
    "torch._C._special", "torch.ops.aten"})
TENSOR_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def is_tensor_op(qualified: str) -> bool:
    """Whether the torch function `qualified` gives a tensor like its inputs: a public
    function of a tensor-op module, a foreach op (`torch._foreach_mul`), or one of
    torch's C bindings of ops (`torch._C._nn.linear`)."""
    if qualified in TENSOR_CLASSES:
        return True
    module, _, name = qualified.rpartition(".")
    if module not in TENSOR_OP_MODULES:
        return False
    return not name.startswith("_") or name.startswith("_foreach_") or \
        module.startswith("torch._C.")


# Builtins that read a tensor's value on the host (`bool` takes its truth value).
HOST_BUILTINS = frozenset({"float", "int", "complex", "round", "str", "repr", "format",
                           "print", "bool"})
# Builtins that the analysis follows element-wise (or that give no tensor).
ITERATION_BUILTINS = frozenset({"min", "max", "sum", "abs", "len", "isinstance", "range", "zip",
                                "enumerate", "list", "tuple", "reversed", "sorted", "iter",
                                "next", "dict"})
LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical",
                         "log"})
LOGGER_NAMES = frozenset({"logger", "log", "logging", "_logger", "_log", "LOGGER", "LOG"})
DATA_DEPENDENT_SHAPE = frozenset({"nonzero", "unique", "unique_consecutive", "masked_select",
                                  "argwhere", "nonzero_static_shape"})
BOOLEAN_OPS = frozenset({"isnan", "isinf", "isfinite", "isneginf", "isposinf", "isreal",
                         "logical_and", "logical_or", "logical_not", "logical_xor", "eq",
                         "ne", "lt", "le", "gt", "ge", "greater", "less", "bool", "signbit",
                         "isclose"})
CREATION_SIZE_FUNCTIONS = frozenset({"zeros", "ones", "empty", "rand", "randn", "arange",
                                     "linspace", "logspace", "eye", "randperm"})
SIZE_METHODS = frozenset({"view", "reshape", "expand", "repeat", "new_zeros", "new_ones",
                          "new_empty", "narrow", "unflatten", "tile"})
# Where PyTorch needs a Python number: {name: (keyword, positional index in the
# deprecated scalar-first method form, number of positional args that form has)}.
SCALAR_ARGUMENTS = {
    "add": ("alpha", 2), "add_": ("alpha", 2), "sub": ("alpha", 2), "sub_": ("alpha", 2),
    "addcmul": ("value", 3), "addcmul_": ("value", 3),
    "addcdiv": ("value", 3), "addcdiv_": ("value", 3),
}
# The foreach forms that take such a number: {name: keyword}. It scales the argument after
# the list updated (`_foreach_add_(params, grads, alpha=a)`: `grads`).
FOREACH_SCALAR_ARGUMENTS = {
    f"_foreach_{op}{suffix}": keyword
    for op, keyword in (("add", "alpha"), ("sub", "alpha"), ("addcmul", "value"),
                        ("addcdiv", "value"))
    for suffix in ("", "_")}
# Foreach ops' arguments that must be Python numbers but are no scale of a list (no fold
# rewrites them): the `weight` of `torch._foreach_lerp(_)` (keyword, or third).
FOREACH_NUMBER_ARGUMENTS = {"_foreach_lerp": ("weight", 2), "_foreach_lerp_": ("weight", 2)}
NON_TENSOR_ANNOTATIONS = frozenset({"int", "float", "bool", "str", "bytes", "complex",
                                    "Optional[int]", "Optional[float]", "Optional[bool]",
                                    "Optional[str]", "List[int]", "Tuple[int, ...]", "dict",
                                    "Dict", "list", "tuple", "Callable", "torch.dtype",
                                    "torch.device", "Size", "torch.Size"})
# ---- evidence that a parameter is a tensor -------------------------------------------
# Where no caller is visible, a parameter is a tensor only by a use that only a tensor
# allows. Conservative on purpose: `.size()`/`.shape` (metadata), `.sum()`/`.any()`/
# `.item()`/`.reshape()`/`.astype()` (numpy has them) and `.to()`/`.float()` (modules
# have them) are no evidence.
TENSOR_ONLY_METHODS = frozenset({
    "view", "view_as", "transpose", "permute", "contiguous", "unsqueeze", "masked_fill",
    "masked_fill_", "masked_scatter", "softmax", "log_softmax", "matmul", "bmm", "expand",
    "expand_as", "type_as", "new_zeros", "new_ones", "new_full", "new_empty", "new_tensor",
    "narrow", "unflatten", "index_select", "masked_select", "unbind", "repeat_interleave",
    "detach", "detach_", "requires_grad_",
})
# Tensor-only methods whose argument at this position is a tensor too
# (`h.masked_fill(mask, 0.0)`: `mask`).
TENSOR_METHOD_TENSOR_ARGUMENTS = {
    "masked_fill": 0, "masked_fill_": 0, "masked_scatter": 0, "masked_select": 0,
    "matmul": 0, "bmm": 0, "view_as": 0, "expand_as": 0, "type_as": 0, "index_select": 1,
}
# Tensor annotations (the last name of a dotted annotation, inside `Optional[...]`).
TENSOR_TYPE_NAMES = frozenset({
    "Tensor", "FloatTensor", "LongTensor", "BoolTensor", "IntTensor", "HalfTensor",
    "BFloat16Tensor", "DoubleTensor", "ByteTensor", "CharTensor", "ShortTensor", "Parameter",
})
# Annotations that declare nothing: a parameter annotated so still needs evidence.
UNDECLARING_ANNOTATIONS = frozenset({"Any", "object"})
# The namespaces whose functions take a tensor `input` first (`torch.matmul(x, w)`,
# `F.softmax(x)`), and their functions that do not: creation ops and others taking
# sizes, Python values or other objects first.
TENSOR_INPUT_NAMESPACES = frozenset({"torch", "torch.nn.functional", "torch.special",
                                     "torch.linalg", "torch.fft"})
NOT_TENSOR_INPUT_FUNCTIONS = frozenset({
    "tensor", "as_tensor", "asarray", "from_numpy", "frombuffer", "scalar_tensor", "arange",
    "range", "linspace", "logspace", "zeros", "ones", "empty", "full", "eye", "rand", "randn",
    "randint", "randperm", "normal", "poisson", "empty_strided", "tril_indices",
    "triu_indices", "bartlett_window", "blackman_window", "hamming_window", "hann_window",
    "kaiser_window", "pow", "float_power", "xlogy", "remainder", "einsum", "cat", "concat",
    "concatenate", "stack", "hstack", "vstack", "dstack", "broadcast_shapes", "autocast",
    "sym_int", "sym_float", "sym_max", "sym_min", "sym_not", "load", "save", "compile",
    "set_printoptions", "use_deterministic_algorithms", "set_default_dtype", "cond",
    # overloads taking a Python number first (`torch.isin(3, t)`)
    "bucketize", "isin", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
    "bitwise_right_shift", "xlog1py", "zeta", "atleast_1d", "atleast_2d", "atleast_3d",
})
# Ops whose first argument is a sequence of tensors (`torch.cat([x, y])`).
TENSOR_SEQUENCE_FUNCTIONS = frozenset({"cat", "concat", "concatenate", "stack", "hstack",
                                       "vstack", "dstack"})
# Ops taking two tensors first (`torch.matmul(x, w)`).
TENSOR_PAIR_FUNCTIONS = frozenset({
    "matmul", "bmm", "mm", "mv", "dot", "outer", "inner", "linear", "bilinear", "baddbmm",
    "addmm", "masked_select", "cosine_similarity", "pairwise_distance",
    # losses: (input, target)
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
})

# cstorch's lazy creation ops, each the twin of the eager torch op of the same name:
# name -> (its positional parameters, torch's keyword names renamed to cstorch's).
LAZY_CREATION_SIGNATURES: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "zeros_like": (("other",), {"input": "other"}),
    "ones_like": (("other",), {"input": "other"}),
    "full_like": (("other", "value"), {"input": "other", "fill_value": "value"}),
    "zeros": (("shape",), {"size": "shape"}),
    "ones": (("shape",), {"size": "shape"}),
    "full": (("shape", "value"), {"size": "shape", "fill_value": "value"}),
}
# Eager torch ops that fill new state with a constant (cstorch has lazy twins).
EAGER_CREATION_OPS = frozenset(f"torch.{name}" for name in LAZY_CREATION_SIGNATURES)
# Calls that make a new tensor (cstorch's lazy creation ops, torch's factories).
TENSOR_FACTORIES = frozenset(
    f"{package}.{name}"
    for package in ("torch", "cerebras.pytorch")
    for name in ("zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "tensor",
                 "as_tensor", "empty", "empty_like")
)

# Tensor methods that make a new tensor like their receiver (`p.new_zeros(())`).
NEW_TENSOR_METHODS = frozenset({"new_zeros", "new_ones", "new_full", "new_empty",
                                "new_tensor"})

# ---- programs: torch.optim names, cstorch imports, float64 and dtypes ------------------

# Imports that make a module code that runs on Cerebras (our runtime twin included).
CSTORCH_PROGRAM_ROOTS = ("cerebras.pytorch", "cslint.cstorch", "cerebras.modelzoo")
# Submodules of torch.optim that define an optimizer (`torch.optim.adamw.AdamW`).
TORCH_OPTIMIZER_SUBMODULES = frozenset({
    "sgd", "adam", "adamw", "adadelta", "adagrad", "adamax", "asgd", "nadam", "radam",
    "rmsprop", "rprop", "lbfgs", "sparse_adam", "_adafactor", "adafactor", "_muon", "muon",
})
# Base classes in torch.optim, never instantiated as an optimizer or scheduler.
TORCH_OPTIM_BASES = frozenset({"Optimizer", "LRScheduler", "_LRScheduler"})
# The float64 dtypes and tensor types, and the words that may name them in a source.
FLOAT64_NAMES = frozenset({"torch.float64", "torch.double", "torch.DoubleTensor",
                           "torch.cuda.DoubleTensor"})
FLOAT64_WORDS = ("float64", "double", "DoubleTensor")
# The base of custom autograd ops: their `forward` and `backward` run inside a model's.
AUTOGRAD_FUNCTIONS = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})
# Tensor methods that convert to another dtype than float64.
DTYPE_CAST_METHODS = frozenset({"float", "half", "bfloat16", "int", "long", "short", "bool",
                                "byte", "char"})
# The dtypes, as named under `torch.`.
TORCH_DTYPES = frozenset({
    "float16", "half", "float32", "float", "float64", "double", "bfloat16", "uint8", "int8",
    "int16", "short", "int32", "int", "int64", "long", "bool", "complex64", "complex128",
    "cfloat", "cdouble", "float8_e4m3fn", "float8_e5m2",
})


# Constructors from data: given a list or tuple, they read each tensor in it as a number
# (`torch.tensor([t1, t2])`); given one tensor, they copy it.
TENSORS_FROM_DATA = frozenset({"torch.tensor", "torch.as_tensor", "torch.asarray"})


@lru_cache(maxsize=1)
def tensor_api() -> tuple[frozenset[str], frozenset[str]]:
    """torch.Tensor's data attributes (`T`, `grad`, the metadata, and the fields of the
    named tuples ops return, `x.max(dim=0).values`) and its methods, as
    `data/tensor_api.json` lists them (`scripts/generate_tensor_api.py`)."""
    import json
    from importlib import resources  # (not on a warm run's path, which reads no analysis)

    text = resources.files("cslint").joinpath("data/tensor_api.json").read_text("utf-8")
    data = json.loads(text)
    return (frozenset(data["attributes"]) | frozenset(data["return_type_fields"]),
            frozenset(data["methods"]))
