"""Rule codes and their one-line meanings.

Shared by the linter and the runtime reference (`cslint.cstorch`), whose
errors carry the same codes. Imports nothing: both sides load it cheaply.
Codes are public API: never renumber or reuse one.
"""

from __future__ import annotations

import re
from typing import Iterable, NamedTuple


class Code(NamedTuple):
    code: str
    name: str
    summary: str
    # Raised by the runtime reference's strict mode as well as reported by the linter.
    runtime: bool = False
    # Only the runtime can detect it (no linter rule).
    runtime_only: bool = False
    # What the runtime sees, for the rule page's header.
    runtime_detail: str = ""
    # Reported when no selector names it (`select` not given), as ruff's default rules.
    default_on: bool = True
    # A release-specific rule: on by default only for a `cstorch-version` below this
    # release ("": every release). Here rather than on the rule, so a run chooses its
    # codes (and finds them all in its cache) without importing any rule.
    before_release: str = ""


CODES: dict[str, Code] = {
    c.code: c
    for c in (
        Code("CS101", "state-outside-preinitialize",
             "optimizer state created outside preinitialize()", runtime=True),
        Code("CS102", "state-rebound-in-step",
             "optimizer state entry rebound to a new tensor instead of updated in place",
             runtime=True),
        Code("CS103", "missing-optimizer-method",
             "concrete cstorch optimizer without preinitialize() or step()"),
        Code("CS104", "eager-constant-state",
             "constant-filled state created with an eager torch op instead of a cstorch lazy op"),
        Code("CS105", "torch-optimizer-base",
             "optimizer derives from torch.optim.Optimizer instead of cstorch.optim.Optimizer"),
        Code("CS106", "missing-state-names-to-sparsify",
             "concrete cstorch optimizer without state_names_to_sparsify()",
             before_release="2.5"),
        Code("CS107", "lost-state-update",
             "state tensor rebound to a new value that is never stored back"),
        Code("CS201", "tensor-dependent-if",
             "`if` condition depends on a device tensor value", runtime=True,
             runtime_detail="`Tensor.__bool__` of a device value inside an `if` / `elif` test"),
        Code("CS202", "tensor-dependent-loop",
             "loop condition or bound depends on a device tensor value", runtime=True,
             runtime_detail=("`Tensor.__bool__` in a `while` test, `Tensor.__index__` inside "
                             "`range(...)`")),
        Code("CS203", "tensor-dependent-expression",
             "truth value of a device tensor taken in an expression", runtime=True,
             runtime_detail="`Tensor.__bool__` of a device value outside `if` / `while` tests"),
        Code("CS204", "tensor-materialized",
             "device tensor value forced to the host", runtime=True,
             runtime_detail=("`Tensor.item`, `tolist`, `numpy`, `__float__`, `__int__`, "
                             "`__index__`, `__repr__` / `__format__`, `torch.equal`, "
                             "`torch.tensor` of a list of device values, and scalar reads "
                             "of device values")),
        Code("CS205", "lr-as-python-scalar",
             "scheduled hyperparameter (a tensor) passed where a Python number is required",
             runtime=True,
             runtime_detail=("a scheduled hyperparameter read as a Python number, "
                             "`aten._local_scalar_dense`")),
        Code("CS206", "data-dependent-shape",
             "op whose output shape depends on tensor values", runtime=True,
             runtime_detail=("the aten ops `nonzero`, `masked_select`, `unique`, boolean "
                             "`index`, ... and `F.one_hot` without `num_classes` on device "
                             "values")),
        Code("CS301", "scheduler-missing-closed-form",
             "cstorch scheduler without a closed form"),
        Code("CS302", "scheduler-recursive-form",
             "schedule reads back its own previous value"),
        Code("CS303", "scheduler-mutates-state",
             "closed form mutates scheduler state"),
        Code("CS304", "torch-scheduler-base",
             "scheduler derives from a torch scheduler instead of a cstorch scheduler"),
        Code("CS305", "closed-form-not-tensor",
             "closed form returns a Python number instead of a tensor", runtime=True),
        Code("CS401", "vanilla-torch-optimizer",
             "torch.optim optimizer instantiated in cstorch code"),
        Code("CS402", "vanilla-torch-scheduler",
             "torch.optim.lr_scheduler scheduler instantiated in cstorch code"),
        Code("CS403", "unsupported-precision",
             "float64 used; only mixed precision is supported", runtime=True,
             runtime_detail="a float64 tensor made inside a traced step"),
        Code("CS404", "train-and-eval-mode",
             'mode="train_and_eval" is not supported by this release',
             before_release="2.0"),
        Code("CS501", "graph-changed",
             "the traced graph changed between steps", runtime=True,
             runtime_detail=("the graph check of a `@cstorch.trace` step's first calls, and "
                             "`cslint.cstorch.check_static_graph`")),
    )
}


def summary(code: str) -> str:
    return CODES[code].summary


_SELECTOR = re.compile(r"^(ALL|CS\d{0,3})$")


def selector_specificity(selector: str, code: str) -> int:
    """How specifically `selector` (`ALL`, a prefix such as `CS1`, or a code) names
    `code`: 0 when it does not, more for a longer prefix. Used by --select/--ignore,
    per-file-ignores and `# noqa: CODES`."""
    if selector == "ALL":
        return 1
    return len(selector) + 1 if code.startswith(selector) else 0


def selected_by_any(selectors: Iterable[str], code: str) -> bool:
    return any(selector_specificity(selector, code) for selector in selectors)


def validate_selector(selector: str) -> str | None:
    """None if `selector` names at least one code (`ALL`, `CS1`, `CS101`), else the problem."""
    if not _SELECTOR.match(selector):
        return f"`{selector}` is not a rule code or prefix (like CS101, CS1 or ALL)"
    if selector != "ALL" and not any(code.startswith(selector) for code in CODES):
        return f"`{selector}` matches no rule"
    return None
