"""How to fix each situation cslint reports, written once.

Shared by the linter's messages (the advice after the problem) and the runtime's
errors (`cslint.cstorch`, the `fix:` line), so both say the same thing. The
linter imports this module without torch, so it imports nothing. Templates name
their fields in braces, for `str.format`.
"""

# -- Tensor values on the host (CS201-CS205) ------------------------------------------------

# An `if`/`while` test, `and`/`or`/`not`, bool(), min()/max() of a device tensor.
TRUTH_TEST = "compute both branches with torch.where / torch.clamp / torch.minimum instead"

# range() bounded by a device tensor.
TENSOR_LOOP_BOUND = "use a fixed number of iterations (a hyperparameter) and mask with torch.where"

# .item(), float(), .tolist(), printing, formatting or logging a device tensor.
HOST_READ = "keep it a tensor (torch ops), or log it from a @cstorch.step_closure function"

# `torch.tensor([t1, t2])`: the tensors' values copied through the host into a new one.
TENSORS_TO_TENSOR = "build it with torch.stack (or torch.cat) of the tensors, a tensor op"

# A device tensor turned into a Python int by `__index__` (a list index).
TENSOR_AS_INDEX = (
    "index with tensors (torch.index_select, gather) or with Python ints known from "
    "hyperparameters or shapes"
)

# A device tensor where an op needs a Python number (alpha=, value=, a size).
TENSOR_AS_NUMBER = "fold it into tensor arithmetic instead (e.g. p.add_(-scale * g))"

# A scheduled hyperparameter (the lr) where an op needs a Python number.
SCHEDULED_AS_NUMBER = "multiply instead: p.add_(-lr * grad), p.addcdiv_(-lr * m, denom)"
SCHEDULED_AS_FOREACH_NUMBER = ("multiply the list instead: "
                               "torch._foreach_add_(params, torch._foreach_mul(grads, -lr))")
SCHEDULED_AS_WEIGHT_LIST = ("give a tensor per list entry instead: "
                            "torch._foreach_lerp_(xs, ys, [lr] * len(xs))")

# The same for the runtime, which sees it only as a scalar argument; its own words,
# which tests/runtime/test_runtime_host_reads.py pins (`p.add_(-lr * g)`).
SCHEDULED_AS_SCALAR_ARGUMENT = (
    "multiply by the tensor instead of passing it as a Python number: "
    "`p.add_(-lr * g)` rather than `p.add_(g, alpha=-lr)`, "
    "`p.addcdiv_(-lr * m, denom)` rather than `value=-lr`"
)

# -- Data-dependent shapes (CS206) ------------------------------------------------------------

# x[mask] with a boolean mask.
BOOLEAN_MASK = "use torch.where(mask, x, 0) or multiply by the mask"

# nonzero, unique, masked_select, torch.where(cond) and the like.
DATA_DEPENDENT_SHAPE = "use torch.where(cond, a, b) or multiply by a mask"

# F.one_hot(labels) without num_classes.
ONE_HOT_CLASSES = (
    "pass num_classes (a Python int, e.g. the model's vocabulary size): "
    "F.one_hot(x, num_classes=n)"
)

# -- Precision (CS403) -------------------------------------------------------------------------

# A float64 tensor made in traced code.
FLOAT64 = (
    "use torch.float32 (drop .double() and dtype=torch.float64); the system inserts the "
    "float16 casts itself. Host-side float64 work belongs outside the step, cast to float32 "
    "before the step reads it"
)

# -- Optimizer state (CS101, CS102, CS107) ----------------------------------------------------

# A state entry created outside preinitialize().
STATE_OUTSIDE_PREINITIALIZE = "create it in preinitialize() and only update it in place in step()"

# A tensor a param group gains on the first step (`if "k" not in group: group["k"] = ...`).
GROUP_TENSOR_OUTSIDE_PREINITIALIZE = (
    'make it in preinitialize() (`for group in self.param_groups: group["{key}"] = ...`) '
    "and only update it in place in step()"
)

# Optimizer state kept in an attribute (`self.buf = ...`, `self.history.append(...)`) in step.
ATTRIBUTE_STATE = (
    "keep it in self.state[p], created in preinitialize() and updated in place in step(); "
    "values for logging belong in a @cstorch.step_closure"
)

# A parameter's whole state bound to a new dict outside preinitialize().
PARAMETER_STATE_REBOUND = (
    "create every state tensor in preinitialize() and only update it in place afterwards"
)

# A state entry rebound to a new object; {name} is how the entry is written.
STATE_REBOUND = (
    "update it in place (e.g. {name}.mul_(beta).add_(g) or {name}.copy_(new_value)) so the "
    "traced graph keeps one state tensor"
)

# A state entry removed while step() runs.
STATE_REMOVED = "keep every state entry that preinitialize() creates and update it in place"

# State filled with a constant by an eager torch op; {lazy} is the cstorch twin.
EAGER_STATE_FILL = "use {lazy}(), which creates it lazily on the system (almost no memory or time)"

# A local {name} holding state {key} rebound and never stored back.
LOST_UPDATE = (
    "update it in place (e.g. {name}.mul_(...).add_(...)) or write it back with "
    "{key}.copy_({name})"
)

# A checkpoint whose state differs from what {optimizer}.preinitialize() creates.
CHECKPOINT_LAYOUT = (
    "load a checkpoint saved by {optimizer} with the same parameters and hyperparameters, "
    "or convert it before calling load_state_dict (override load_state_dict and "
    "rename/reshape the entries first)"
)

# -- Schedulers (CS302, CS303, CS305) ---------------------------------------------------------

# A schedule that reads back its own previous value (a recursive schedule).
RECURSIVE_SCHEDULE = ("compute the value in closed form from the step (self.last_epoch) and "
                      "the initial values instead")

# A schedule that changes self.base_lrs.
KEEP_BASE_RATES = "keep the initial learning rates fixed"

# Why a closed form must not change scheduler state (a clause that follows the problem).
CLOSED_FORM_IS_PURE = ("so the value depends on how often it was computed; the closed form "
                       "must be a pure function of the step (self.last_epoch) and the "
                       "hyperparameters")

# A scheduler's closed form that returns a Python number.
CLOSED_FORM_NOT_TENSOR = ("return a tensor (e.g. torch.tensor(value)), computed from the step "
                          "with torch ops where it varies")

# -- Static graph (CS501) ---------------------------------------------------------------------

# Two steps that trace different graphs.
GRAPH_CHANGED = (
    "keep values that change between steps in tensors (optimizer state created in "
    "preinitialize, the global step, scheduled hyperparameters) and select with "
    "torch.where instead of a Python branch; no Python counters or Python-number "
    "learning rates that change from step to step"
)

# A Python counter that traced code changes, deciding the graph (the linter's CS501).
PYTHON_COUNTER = (
    "keep the count in a tensor updated in place (optimizer state made in preinitialize, "
    "the global step) and choose with torch.where instead of a Python branch"
)
# A list of past values kept in the state, grown at every step (AdaShift's queue).
PYTHON_HISTORY = (
    "keep the values in a tensor made in preinitialize (k slots, one written in place at "
    "each step, at `step % k`) and choose with torch.where on the global step instead of "
    "the list's length"
)

# The first difference of two steps' graphs is an op the other step did not run.
GRAPH_PATH_CHANGED = (
    "the step took a different path through Python: select with torch.where instead of "
    "a Python branch, and loop a number of times fixed before training"
)

# The first difference is a tensor's shape.
GRAPH_SHAPE_CHANGED = (
    "give every step the same shapes (drop_last=True in the DataLoader, or pad the last "
    "batch): the system compiles the step for one set of shapes"
)

# The first difference is a tensor's dtype.
GRAPH_DTYPE_CHANGED = (
    "give each tensor the same dtype every step: cast it once, where it is made"
)
