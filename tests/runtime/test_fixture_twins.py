"""Runtime twins of the lint fixtures (issue 5, "Must show").

Every fixture in fixtures/optimizer_state/ and fixtures/traced/ (files and package folders,
discovered when the tests are collected) is executed with `cerebras.pytorch` (and its optim
submodules) mapped to `cslint.cstorch`, and each optimizer, scheduler, nn.Module and traced
function it defines is driven the way a user's unit test drives it: an optimizer is built on
two small parameters with its constructor defaults and stepped 5 times; a scheduler is built
on a small cstorch optimizer and stepped; a module's forward runs inside a `cstorch.trace`d
step; a traced function is called with small tensors.

`test_twin[<fixture>::<Class>]` (one case per class/function, plus VARIANTS):
* every ComplianceError raised is at a `# expect:` line carrying that runtime code (CS101,
  CS102, CS201-CS206, CS305), the line being the deepest traceback frame in the fixture and
  the line the message names;
* a CS103 class is abstract: constructing it raises TypeError;
* a class without runtime marks (a compliant look-alike) runs its 5 steps clean, or raises
  only at marked lines of the helpers it calls;
* each runtime mark inside the class is raised by one of its twins or accounted for below.
A class whose definition fails under cslint.cstorch (it subclasses an official optimizer
the reference does not have, say) is skipped with the failing line as the reason.

A run stops at its first error, so a class with several marked lines reaches only the
first. To give the later lines a twin too, the case is re-run ("replayed") with the
statements already raised run unchecked (a trace function wraps them in the runtime's
`host_side()`, what step closures use; for an if/while/for only the header), until a run
is clean or ends in another exception. A mark no replay reaches is "not reached after the
first error" and needs its one-line reason in NOT_REACHED. Since an unchecked statement
can leave state or host values the real run never has, a replay raising at an unmarked
line is a failure unless REPLAY_ARTIFACTS says why.

`test_mark[<fixture>:<line>:<code>]` (one per runtime mark): some twin run raised that code
at that line; otherwise it is skipped with its case (class not definable or drivable, with
the reason), or with its NOT_REACHED reason, and fails when a guarded step ran the line
without raising (a runtime miss) or nothing reached it.

Lint-only codes (CS103-CS107, CS3xx but CS305, CS4xx) are not expected at run time.
Disagreements between the runtime and the linter are xfail(strict=True) with the precise
reason (XFAIL_CASES, XFAIL_MARKS).
"""

from __future__ import annotations

import __future__ as future_module
import ast
import contextlib
import functools
import importlib
import inspect
import sys
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
import torch.nn as nn

import cslint.cstorch as cstorch
from cslint.cstorch.guard import host_side
from cslint.cstorch.optim.lr_scheduler import LRScheduler
from cslint.cstorch.optim.scheduler import Scheduler
from cstorch_helpers import CompliantSGD, cerebras_modules, swapped_modules

_TESTS = Path(__file__).resolve().parents[1]
if str(_TESTS) not in sys.path:  # tests/helpers.py, shared with tests/test_fixtures.py
    sys.path.insert(0, str(_TESTS))
from helpers import FIXTURES, expected_findings, options_in  # noqa: E402

FAMILIES = ("optimizer_state", "traced")
RUNTIME_CODES = frozenset(
    {"CS101", "CS102", "CS201", "CS202", "CS203", "CS204", "CS205", "CS206", "CS305"}
)
STEPS = 5
MAX_REPLAYS = 40

# ---------------------------------------------------------------------------------------
# Tables. A fixture unit is its path under fixtures/; marked lines are named by a text
# occurring on exactly one marked line of the unit (robust to edits that move lines).
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """Another twin of a target, configured to reach marks its defaults do not."""

    why: str
    kwargs: dict = field(default_factory=dict)  # constructor arguments
    group: dict = field(default_factory=dict)  # extra param-group entries
    calls: tuple = ()  # methods called (no arguments) after construction
    reaches: str = ""  # a marked line this twin must raise at


VARIANTS: dict[tuple[str, str], dict[str, Variant]] = {
    ("traced/torch_functional_layout.py", "FunctionalMomentum"): {
        "foreach": Variant("the foreach update runs only with foreach=True",
                           kwargs={"foreach": True},
                           reaches="torch._foreach_add_(params, exp_avgs, alpha=-lr)"),
    },
    ("optimizer_state/dict_methods.py", "UpdateAndOrAdam"): {
        "track_extremes": Variant("line 53 runs only for a group with track_extremes",
                                  group={"track_extremes": True},
                                  reaches="state.update(grad_max="),
    },
    ("optimizer_state/dict_methods.py", "ResetDictInStep"): {
        "reset_every_1": Variant("line 100 runs only with reset_every == 1",
                                 kwargs={"reset_every": 1},
                                 reaches='self.state[p] = {"momentum_buffer": torch'),
    },
    ("optimizer_state/seed_sgd_adaptive_ports.py", "RegularizedSGD"): {
        "momentum": Variant("the lazy momentum buffer is made only when momentum != 0",
                            kwargs={"momentum": 0.9},
                            reaches="buf = param_state['momentum_buffer'] = torch.clone"),
    },
    ("optimizer_state/other_methods.py", "ResettableAdam"): {
        "reset_state": Variant("reset_state() is a maintenance method the loop calls",
                               calls=("reset_state",), reaches='st["reset_count"] = torch'),
        "start_swa": Variant("start_swa() is a maintenance method the loop calls",
                             calls=("start_swa",), reaches='st["swa_weight"] = p.detach()'),
    },
    ("optimizer_state/cross_module", "MyAdamW"): {
        "amsgrad": Variant("_amsgrad_buffer() runs only with amsgrad=True",
                           kwargs={"amsgrad": True},
                           reaches='state["max_exp_avg_sq"] = torch.zeros_like(p)'),
    },
    ("optimizer_state/helpers_and_aliases.py", "FunctionalAdam"): {
        "amsgrad": Variant("the max_exp_avg_sq key is made only with amsgrad=True",
                           kwargs={"amsgrad": True},
                           reaches='state["max_exp_avg_sq"] = torch.zeros_like(p)'),
    },
    ("optimizer_state/novograd_port.py", "NovoGrad"): {
        "amsgrad": Variant("the max_exp_avg_sq key is made only with amsgrad=True",
                           kwargs={"amsgrad": True},
                           reaches='state["max_exp_avg_sq"] = torch.zeros([])'),
    },
    ("optimizer_state/rebinding.py", "FunctionalStyleAdam"): {
        "amsgrad": Variant("max_exp_avg_sq is rebound only with amsgrad=True",
                           kwargs={"amsgrad": True},
                           reaches='state["max_exp_avg_sq"] = torch.maximum('),
    },
    ("optimizer_state/rebinding.py", "DecayAllStateSGD"): {
        "decay_0": Variant("the momentum buffer is reset only with decay == 0.0",
                           kwargs={"decay": 0.0},
                           reaches='state["momentum_buffer"] = torch.zeros_like(p)'),
    },
    ("traced/helpers_taint.py", "LocalDispatchSGD"): {
        "momentum": Variant("momentum_update() is chosen only when momentum > 0",
                            kwargs={"momentum": 0.9}, reaches="while grad.norm() > 1.0:"),
    },
    ("traced/materialize.py", "TorchPortedAdam"): {
        "verbose": Variant("the step prints only with verbose=True",
                           kwargs={"verbose": True}, reaches='print(f"step {step_value}'),
    },
    ("traced/two_modules", "ClippedLion"): {
        "verbose": Variant("log_ratio() is called only with verbose=True",
                           kwargs={"verbose": True}, reaches='print(f"update/weight ratio'),
    },
}

# Marks no twin reaches, with the reason ("not reached after the first error": the
# replays of the class end before the line).
NOT_REACHED: dict[tuple[str, str], str] = {
    **{("traced/materialize.py", text): (
        "not reached after the first error: DiagnosticsOptimizer's replays end at line 101, "
        "where `schedule[phase]` run unchecked indexes a 3-entry list with the argmax of "
        "12 gradient entries (IndexError)")
       for text in ("if torch.equal(p, prev):", "if grad.sum().item() > 0:",
                    "head = grad[:norm.long()]", "fill = torch.full_like(grad, norm)")},
    **{("traced/optimizer_branches.py", text): (
        "not reached after the first error: ShrinkingStep's replays end at line 107, where "
        "`range(count)` run unchecked fails on the float32 `count` (cstorch.zeros([])): "
        "PyTorch refuses a float tensor as an index (TypeError)")
       for text in ("scale = 1.0 if update.norm() > 1.0", "assert torch.isfinite(update)",
                    "trust = bool(p.norm() > 0)", "factor = min(update.norm(), 1.0)",
                    "nonzero = [g for g in (grad, update)", "w = p.norm() > 0 and update")},
    ("traced/trace_tensor_evidence.py", "if batch.abs().max() > 100.0:"):
        "in a @cstorch.trace method of a plain trainer class: the twins drive module-level "
        "traced functions, modules, optimizers and schedulers, not other classes' methods",
}

# Cases that cannot be built or driven generically: (unit, target) -> reason.
SKIP: dict[tuple[str, str], str] = {
}

# Replays run earlier statements unchecked, so they can build state or host values the
# real run never has; the cases whose replays raise at an unmarked line (or with an
# unmarked code) say why here: (unit, "Target" or "Target[variant]") -> reason.
REPLAY_ARTIFACTS: dict[tuple[str, str], str] = {
    ("optimizer_state/seed_simple_adam.py", "SimpleAdam"):
        "with line 44 run unchecked state['step'] is a Python int, so `state['step'] += 1` "
        "(line 51, unmarked) rebinds it: CS102; the real run stops at line 44",
    ("traced/data_dependent_shape.py", "SparseMomentum"):
        "with every marked line run unchecked the step reaches line 51, where `self.kept = "
        "(...)` keeps the step's tensors in an optimizer attribute: CS101 (state outside "
        "self.state, which the linter's CS101 does not cover); the real run stops at line 29",
    ("traced/schedulers.py", "WarmupCosineLR"):
        "with lines 25 and 28 run unchecked the closed form returns a Python float: CS305 at "
        "its def line (unmarked); the real run stops at line 25",
}

_TORCH_BASE = (
    "strict mode guards only cstorch.optim.Optimizer subclasses: this optimizer derives "
    "from torch.optim.Optimizer, so the lazy state its step() creates is never checked "
    "(the linter: CS101 for any optimizer, plus CS105 for the base)")
_OUTSIDE_STEP = (
    "the runtime freezes optimizer state only while step() runs: a key added in {where} "
    "passes (the linter: CS101, only preinitialize() may create state)")
_LOGGING = (
    "no host conversion happens at the call: logging formats `%s` arguments only when a "
    "handler emits the record, not at the default WARNING level; with INFO enabled the "
    "handler's formatting raises CS204 but logging's handleError swallows it (it prints "
    "'--- Logging error ---'), so no test sees it (the linter: CS204)")
_CREATED_ON_DEVICE = (
    "`torch.tensor(v, device=device)` in to_tensor(), given the caller's `p.device`, is a "
    "host constant to the runtime (made in the step from a Python value; issue 5: a CPU run "
    "cannot tell device= apart), so `.item()` on it passes (the linter: CS204, a tensor "
    "created on the device its caller names)")

# Runtime/linter disagreements on one marked line: (unit, text of the line) -> reason.
XFAIL_MARKS: dict[tuple[str, str], str] = {
    ("optimizer_state/torch_base.py", 'state["exp_avg"] = torch.zeros_like(p)'): _TORCH_BASE,
    ("optimizer_state/torch_base.py", 'state["exp_avg_sq"] = torch.zeros_like(p)'):
        _TORCH_BASE,
    ("optimizer_state/torch_base_plain_torch.py", 'state["exp_avg"] = torch.zeros_like(p)'):
        _TORCH_BASE,
    ("optimizer_state/torch_base_plain_torch.py", 'state["exp_avg_sq"] = torch.zeros_like'):
        _TORCH_BASE,
    ("optimizer_state/torch_base_runtime_reference.py", 'state["exp_avg"] = torch.zeros'):
        _TORCH_BASE,
    ("optimizer_state/other_methods.py", 'state["ema"] = p.detach().clone()'):
        _OUTSIDE_STEP.format(where="__init__ after super().__init__()"),
    ("optimizer_state/other_methods.py", 'state["momentum_buffer"] = torch.zeros_like(p)'):
        _OUTSIDE_STEP.format(where="__init__ after super().__init__()"),
    ("optimizer_state/other_methods.py", 'self.state[p]["num_updates"] = torch.tensor'):
        _OUTSIDE_STEP.format(where="_init_counters(), called from __init__"),
    ("optimizer_state/other_methods.py", 'st["reset_count"] = torch.tensor(1.0)'):
        _OUTSIDE_STEP.format(where="reset_state(), called between steps"),
    ("optimizer_state/other_methods.py", 'st["swa_weight"] = p.detach().clone()'):
        _OUTSIDE_STEP.format(where="start_swa(), called between steps"),
    ("optimizer_state/more_spellings.py", 'self.state[p] = {"exp_avg": cstorch.zeros_like'):
        _OUTSIDE_STEP.format(where="__init__ (a whole state dict) after super().__init__()"),
    ("optimizer_state/more_spellings.py", 'self.state[p]["exp_avg"] = th.zeros_like(p)'):
        "dead at run time: preinitialize() made exp_avg and exp_avg_sq, so "
        "`len(self.state[p]) == 0` never holds in step() and the write never runs (the "
        "linter: CS101 for the guarded lazy init)",
    ("optimizer_state/more_spellings.py", 'st["momentum_buffer"] = p.grad.detach().clone()'):
        "never runs: preinitialize() creates no state, so self.state has no entries and "
        "`for p, st in self.state.items()` iterates nothing (the optimizer silently never "
        "updates; the linter: CS101)",
    ("optimizer_state/helpers_and_aliases.py", 'state["exp_avg"] = cstorch.zeros_like(p)'):
        "dead in step(): preinitialize() already made the key, so _ensure_state's "
        "`not in state` guard is false when step() calls it and the line runs only from "
        "preinitialize() (the linter: CS101 because step() reaches the helper)",
    ("optimizer_state/helpers_and_aliases.py", 'state["exp_avg_sq"] = cstorch.zeros_like(p)'):
        "dead in step(): preinitialize() already made the key, so _ensure_state's "
        "`not in state` guard is false when step() calls it and the line runs only from "
        "preinitialize() (the linter: CS101 because step() reaches the helper)",
    ("optimizer_state/more_spellings.py", 'self._slots[id(p)] = {"avg": torch.zeros_like'):
        "strict mode guards `self.state` only: a dict of per-parameter state the optimizer "
        "keeps itself is not watched, so the first step's creation passes; a `@cstorch."
        "trace`d step still sees it, as a graph that changes at step 2 (CS501; how the "
        "runtime stopped pytorch-optimizer's Magma), and the linter names it (CS101)",
    ("traced/materialize.py", 'logger.info("grad norm %s", norm)'): _LOGGING,
    ("traced/python_values_twins.py", 'to_tensor(group["decay_rate"], device=p.device)'):
        _CREATED_ON_DEVICE,
    ("traced/python_values_twins.py", "floor = to_tensor(0.1, device).item()"):
        _CREATED_ON_DEVICE,
    ("traced/modules_forward.py", 'logger.debug("block output %s", h)'): _LOGGING,
    ("traced/propagation.py", 'logging.info("largest %s", largest)'): _LOGGING,
    ("traced/propagation.py", "pair[0].mul_(beta1).add_(source, alpha=half)"):
        "`half = torch.tensor(0.5, device=p.device)` is a host constant to the runtime (made "
        "in the step from a Python value; issue 5: a CPU run cannot tell device= apart), so "
        "reading it as alpha passes (the linter: CS204, a tensor created on the device)",
}


# Runtime/linter disagreements on a whole case: (unit, "Target" or "Target[variant]").
XFAIL_CASES: dict[tuple[str, str], str] = {
    ("optimizer_state/other_methods.py", "ResettableAdam[reset_state]"):
        _OUTSIDE_STEP.format(where="reset_state(), called between steps"),
    ("optimizer_state/other_methods.py", "ResettableAdam[start_swa]"):
        _OUTSIDE_STEP.format(where="start_swa(), called between steps"),
}


def _trace_step_globals(namespace: dict) -> dict:
    model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))
    return {"backend": None, "model": model,
            "optimizer": CompliantSGD(model.parameters(), lr=0.01)}


def _test_sgd_globals(namespace: dict) -> dict:
    return {"optimizer": CompliantSGD(namespace["model"].parameters(), lr=0.01)}


_NO_CSTORCH_SGD = "cslint.cstorch has no optim.SGD: the test SGD of cstorch_helpers stands in"

# Module-level globals a fixture builds with cerebras.pytorch APIs the runtime reference
# does not have: unit -> (reason, factory(namespace) -> globals to set).
SUBSTITUTES = {
    "traced/trace_step.py": (
        "cslint.cstorch has no backend()/compile()/optim.SGD: the model runs uncompiled and "
        "the test SGD of cstorch_helpers stands in for the optimizer",
        _trace_step_globals,
    ),
    "traced/trace_python_arguments.py": (_NO_CSTORCH_SGD, _test_sgd_globals),
    "traced/trace_tensor_evidence.py": (_NO_CSTORCH_SGD, _test_sgd_globals),
}


def _classification_batch(g):
    return torch.randn(4, 16, generator=g), torch.randint(0, 4, (4,), generator=g)


# Arguments of traced functions that are not plain tensors: (unit, name) -> factory.
TRACED_ARGS = {
    ("traced/trace_step.py", "training_step"): lambda g: (_classification_batch(g), {}),
    ("traced/trace_step.py", "eval_step"): lambda g: ((_classification_batch(g),), {}),
    ("traced/trace_step.py", "accumulate_step"):
        lambda g: (([_classification_batch(g), _classification_batch(g)],), {}),
    # The loop's step counter is a Python int.
    ("traced/trace_python_arguments.py", "train_step"):
        lambda g: ((1, torch.randn(4, 8, generator=g)), {}),
}

# Forward arguments that are not a (2, 4, dim) tensor, for modules whose callers pass
# Python values or other shapes: (unit, name) -> factory(generator) -> positional args.
FORWARD_ARGS = {
    ("traced/forward_python_arguments.py", "PositionBias"): lambda g: [3, 5],
    ("traced/forward_python_arguments.py", "PatchEmbed"):
        lambda g: [torch.randn(2, 3, 8, 8, generator=g)],
    ("traced/forward_python_arguments.py", "WindowBlock"):
        lambda g: [torch.randn(2, 16, 8, generator=g), (4, 4), 1],
    ("traced/forward_python_arguments.py", "Backbone"):
        lambda g: [torch.randn(2, 3, 8, 8, generator=g)],
}

# Optional forward arguments given to modules: (unit, name) -> factory(generator) -> kwargs.
FORWARD_KWARGS = {
    ("traced/modules_forward.py", "Block"):
        lambda g: {"mask": torch.rand(2, 4, 1, generator=g) > 0.5},
    ("traced/data_dependent_shape.py", "TokenPooler"):
        lambda g: {"attention_mask": torch.rand(2, 4, generator=g) > 0.5},
    ("traced/forward_tensor_evidence.py", "Attention"):
        lambda g: {"mask": torch.rand(2, 4, 4, generator=g) > 0.5},
}

# Values for required constructor arguments of modules and schedulers, by name.
SIZE_ARGS = {"dim": 8, "hidden": 8, "hidden_size": 8, "in_features": 8, "out_features": 8,
             "vocab": 11, "vocab_size": 11, "num_embeddings": 11}
SCHEDULER_ARGS = {"base_lr": 0.1, "initial_lr": 0.1, "min_lr": 0.01, "base": 0.1,
                  "warmup": 2, "warmup_steps": 2, "total_iters": 10, "period": 3,
                  "every": 2, "decay": 0.5, "decay_rate": 0.5, "gamma": 0.5,
                  "phases": [2, 3], "values": [0.1, 0.05], "start": 0.1, "end": 0.01,
                  "step_size": 2, "final_wd": 0.01}

# ---------------------------------------------------------------------------------------
# Discovery and loading
# ---------------------------------------------------------------------------------------


def _units() -> list[Path]:
    units = []
    for family in FAMILIES:
        folder = FIXTURES / family
        if not folder.is_dir():
            continue
        for entry in sorted(folder.iterdir()):
            if entry.suffix == ".py" and not entry.name.endswith((".in.py", ".out.py")):
                units.append(entry)
            elif entry.is_dir() and not entry.name.startswith(("_", ".")):
                units.append(entry)
    return units


def _unit_id(unit: Path) -> str:
    return unit.relative_to(FIXTURES).as_posix()


def _files(unit: Path) -> list[Path]:
    return sorted(unit.rglob("*.py")) if unit.is_dir() else [unit]


@dataclass(frozen=True)
class Mark:
    file: str  # as the fixture's code objects name it
    line: int
    code: str
    text: str

    def where(self) -> str:
        return f"{Path(self.file).name}:{self.line}"


@dataclass(eq=False)
class Target:
    unit: str
    file: str
    name: str
    kind: str  # optimizer | abstract | scheduler | module | traced | undefined
    span: tuple[int, int]
    obj: object = None
    why_undefined: str = ""


@dataclass
class LoadedUnit:
    unit_id: str
    path: Path
    files: list[str]
    marks: list[Mark]
    targets: list[Target]
    options: dict
    trees: dict[str, ast.Module]


class _DeclaredSchedulerBase(LRScheduler):
    """Stands in for a project scheduler base a fixture declares (`scheduler-bases`)."""

    def __init__(self, optimizer, total_iters=None, **kwargs):
        super().__init__(optimizer, total_iters=total_iters, **kwargs)


def _stub(modules: dict, dotted: str, value) -> None:
    """Put `value` at the dotted name `package.module.attribute`, making stub modules."""
    module_name, _, attribute = dotted.rpartition(".")
    parts = module_name.split(".")
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        if name not in modules:
            stub = types.ModuleType(name)
            stub.__path__ = []
            modules[name] = stub
            if depth > 1:
                setattr(modules[".".join(parts[: depth - 1])], parts[depth - 1], stub)
    setattr(modules[module_name], attribute, value)


def _fixture_modules(options: dict) -> dict:
    """`cerebras.pytorch` and its submodules mapped to cslint.cstorch; stubs for the
    project APIs a fixture declares in its options (installed packages, not in the run):
    `optimizer-bases` are the cstorch Optimizer, `scheduler-bases` an LRScheduler,
    `traced-decorators` cstorch.trace."""
    modules = cerebras_modules()
    for dotted in options.get("optimizer-bases", []):
        _stub(modules, dotted, cstorch.optim.Optimizer)
    for dotted in options.get("scheduler-bases", []):
        _stub(modules, dotted, _DeclaredSchedulerBase)
    for dotted in options.get("traced-decorators", []):
        _stub(modules, dotted, cstorch.trace)
    return modules


def _bound_names(statement: ast.stmt) -> list[str]:
    if isinstance(statement, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return [statement.name]
    names = []
    for node in ast.walk(statement):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
        elif isinstance(node, ast.alias):
            names.append((node.asname or node.name).split(".")[0])
    return names


def _exec_by_statement(path: Path, namespace: dict) -> dict[str, str]:
    """Run a fixture module one top-level statement at a time, so that one statement using
    an API the runtime reference lacks does not hide the classes after it. Returns the
    names whose defining statement failed, with the reason."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    flags = 0
    failed = {}
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
            for alias in statement.names:
                flags |= getattr(future_module, alias.name).compiler_flag
        code = compile(ast.Module(body=[statement], type_ignores=[]), str(path), "exec",
                       flags=flags, dont_inherit=True)
        try:
            exec(code, namespace)
        except Exception as exc:  # noqa: BLE001 - becomes the skip reason of these names
            reason = f"line {statement.lineno} fails: {type(exc).__name__}: {exc}"
            for name in _bound_names(statement):
                failed[name] = reason
    return failed


def _load_single(path: Path) -> tuple[dict, dict]:
    # Named like the file, as the linter names modules (`traced-functions=stem.func`).
    module = types.ModuleType(path.stem)
    module.__file__ = str(path)
    failed = _exec_by_statement(path, module.__dict__)
    return {str(path): module.__dict__}, failed


def _load_package(path: Path) -> tuple[dict, dict]:
    """Import a package fixture from a temporary sys.path entry, each of its modules."""
    def ours(name):
        return name == path.name or name.startswith(path.name + ".")

    if any(ours(name) for name in sys.modules):
        raise RuntimeError(f"a module named {path.name!r} is already imported")
    namespaces, failed = {}, {}
    root = str(path.parent)
    sys.path.insert(0, root)
    try:
        importlib.invalidate_caches()
        for file in _files(path):
            parts = list(file.relative_to(path.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join(parts)
            try:
                module = importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 - becomes the skip reason of its names
                tree = ast.parse(file.read_text(encoding="utf-8"))
                for statement in tree.body:
                    for bound in _bound_names(statement):
                        failed[bound] = f"importing {name} fails: {type(exc).__name__}: {exc}"
                continue
            namespaces[module.__file__] = module.__dict__
    finally:
        sys.path.remove(root)
        for name in [name for name in sys.modules if ours(name)]:
            del sys.modules[name]
    return namespaces, failed


def _decorated_with_trace(node: ast.FunctionDef, namespace: dict, filename: str) -> bool:
    for decorator in node.decorator_list:
        try:
            value = eval(compile(ast.Expression(decorator), filename, "eval"), dict(namespace))
        except Exception:  # noqa: BLE001 - a decorator we cannot evaluate is not trace
            continue
        if value is cstorch.trace:
            return True
    return False


def _looks_traced(node: ast.FunctionDef) -> bool:
    return any((getattr(d, "attr", None) or getattr(d, "id", "")).endswith("trace")
               for d in node.decorator_list)


def _own_forward(cls) -> bool:
    return any("forward" in klass.__dict__ for klass in cls.__mro__
               if klass is not nn.Module and issubclass(klass, nn.Module))


def _classify(obj, node: ast.ClassDef, marks_in_span) -> str | None:
    if not isinstance(obj, type):
        return None
    if issubclass(obj, torch.optim.Optimizer):
        if inspect.isabstract(obj):
            # Abstract intermediate bases are no case; a CS103 class is (TypeError).
            return "abstract" if any(m.code == "CS103" for m in marks_in_span) else None
        return "optimizer"
    if issubclass(obj, (Scheduler, torch.optim.lr_scheduler.LRScheduler)):
        return None if inspect.isabstract(obj) or obj is _DeclaredSchedulerBase else "scheduler"
    if issubclass(obj, nn.Module):
        return "module" if _own_forward(obj) else None
    return None


@functools.lru_cache(maxsize=None)
def load_unit(unit_id: str) -> LoadedUnit:
    path = FIXTURES / unit_id
    marks, options, trees, broken = [], {}, {}, {}
    for file in _files(path):
        text = file.read_text(encoding="utf-8")
        lines = text.splitlines()
        options.update(options_in(text))
        try:
            trees[str(file)] = ast.parse(text, str(file))
        except SyntaxError as exc:  # a fixture mid-edit: its marks are skipped with it
            trees[str(file)] = ast.Module(body=[], type_ignores=[])
            broken[str(file)] = f"{file.name} does not parse: {exc}"
        for line, code in sorted(expected_findings(file)):
            marks.append(Mark(str(file), line, code, lines[line - 1].strip()))
    namespaces, failed = {}, {}
    if not broken:
        with swapped_modules(_fixture_modules(options)):
            if path.is_dir():
                namespaces, failed = _load_package(path)
            else:
                namespaces, failed = _load_single(path)
    if unit_id in SUBSTITUTES:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            for namespace in namespaces.values():
                namespace.update(SUBSTITUTES[unit_id][1](namespace))
    targets = []
    for file, tree in trees.items():
        namespace = namespaces.get(file, {})
        for node in tree.body:
            if not isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                continue
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            span = (first, node.end_lineno)
            in_span = [m for m in marks if m.file == file and span[0] <= m.line <= span[1]]
            obj = namespace.get(node.name)
            if isinstance(node, ast.FunctionDef):
                if obj is None and _looks_traced(node):
                    targets.append(Target(unit_id, file, node.name, "undefined", span,
                                          why_undefined=failed.get(node.name, "not defined")))
                elif obj is not None and _decorated_with_trace(node, namespace, file):
                    targets.append(Target(unit_id, file, node.name, "traced", span, obj))
                elif obj is not None and f"{Path(file).stem}.{node.name}" in options.get(
                        "traced-functions", []):
                    # Declared traced by the fixture's options: the twin traces it.
                    targets.append(Target(unit_id, file, node.name, "traced", span,
                                          cstorch.trace(obj)))
                continue
            if obj is None or node.name in failed:
                targets.append(Target(unit_id, file, node.name, "undefined", span,
                                      why_undefined=failed.get(node.name, "not defined")))
                continue
            kind = _classify(obj, node, in_span)
            if kind is not None:
                targets.append(Target(unit_id, file, node.name, kind, span, obj))
    for file, reason in broken.items():
        targets.append(Target(unit_id, file, f"<{Path(file).name}>", "undefined",
                              (1, 10**9), why_undefined=reason))
    return LoadedUnit(unit_id, path, [str(f) for f in _files(path)], marks, targets, options,
                      trees)


# ---------------------------------------------------------------------------------------
# Replays: statements already matched run unchecked
# ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _statement_header(unit_id: str, file: str, line: int) -> tuple[int, int] | None:
    """(first, last) line of the innermost statement holding `line`; for a compound
    statement (if/elif, for, while, with) only its header, so its body stays checked."""
    best = None
    for node in ast.walk(load_unit(unit_id).trees[file]):
        if isinstance(node, ast.stmt) and node.lineno <= line <= node.end_lineno:
            body = getattr(node, "body", None)
            last = node.end_lineno
            if isinstance(body, list) and body and not isinstance(
                    node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                last = max(node.lineno, body[0].lineno - 1)
                if line > last:
                    continue  # the line is in the body: a statement inside holds it
            if best is None or node.lineno > best[0]:
                best = (node.lineno, last)
    return best


# ---------------------------------------------------------------------------------------
# Driving
# ---------------------------------------------------------------------------------------


class CannotDrive(Exception):
    """The target needs arguments the generic twin cannot supply."""


class _Tracer:
    """Records the fixture lines executed, split into guarded (step, closed form, traced
    call), host (construction, maintenance calls) and unchecked phases, and runs the
    statements of `unchecked` ({(file, first line): last line}) host-side, with the
    runtime's checks off (`guard.host_side()`, what step closures use)."""

    def __init__(self, files, unchecked: dict):
        self.files = frozenset(files)
        self.unchecked = unchecked
        self.guarded: set[tuple[str, int]] = set()
        self.host: set[tuple[str, int]] = set()
        self.skipped_lines: set[tuple[str, int]] = set()
        self.current = self.host
        self._open: list = []  # (frame, first, last, context, recording set)

    def _close(self, frame, line=None):
        while self._open and self._open[-1][0] is frame and (
                line is None or not self._open[-1][1] <= line <= self._open[-1][2]):
            _, _, _, context, recording = self._open.pop()
            context.__exit__(None, None, None)
            self.current = recording

    def _local(self, frame, event, arg):
        if event == "line":
            self._close(frame, frame.f_lineno)
            where = (frame.f_code.co_filename, frame.f_lineno)
            last = self.unchecked.get(where)
            if last is not None:
                context = host_side()
                context.__enter__()
                self._open.append((frame, where[1], last, context, self.current))
                self.current = self.skipped_lines
            self.current.add(where)
        elif event == "return":
            self._close(frame)
        return self._local

    def _global(self, frame, event, arg):
        if frame.f_code.co_filename in self.files:
            return self._local
        return None

    @contextlib.contextmanager
    def phase(self, guarded: bool):
        previous = self.current
        self.current = self.guarded if guarded else self.host
        try:
            yield
        finally:
            self.current = previous

    def __enter__(self):
        self._previous = sys.gettrace()
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc):
        sys.settrace(self._previous)
        while self._open:
            self._open.pop()[3].__exit__(None, None, None)
        return False


@dataclass
class Run:
    status: str  # clean | error | type_error | exception | cannot_drive | undefined
    detail: str = ""
    code: str | None = None
    site: tuple[str, int] | None = None  # deepest traceback frame in the fixture
    claimed: tuple[str, int] | None = None  # the site the error's message names
    unchecked: tuple = ()  # statements run with checks off: ((file, first line), ...)
    guarded: set = field(default_factory=set)
    host: set = field(default_factory=set)

    def describe(self) -> str:
        if self.status == "error":
            if self.site is None:
                return f"raised {self.code} outside the fixture ({self.detail})"
            return f"raised {self.code} at {Path(self.site[0]).name}:{self.site[1]}"
        return self.status + (f" ({self.detail})" if self.detail else "")


def _params(generator) -> list[nn.Parameter]:
    return [nn.Parameter(torch.randn(3, 4, generator=generator)),
            nn.Parameter(torch.randn(4, generator=generator))]


def _set_grads(params, generator) -> None:
    for p in params:
        p.grad = torch.randn(p.shape, generator=generator)


def _parameters(function, skip: int):
    for name, parameter in list(inspect.signature(function).parameters.items())[skip:]:
        if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            yield name, parameter


def _optimizer_kwargs(cls, overrides: dict) -> dict:
    kwargs = dict(overrides)
    for name, parameter in _parameters(cls.__init__, 2):
        if name in kwargs:
            continue
        if name == "lr" and parameter.default in (parameter.empty, None):
            kwargs["lr"] = 0.01  # required, or None (no usable default)
        elif name == "defaults" and parameter.default is parameter.empty:
            kwargs["defaults"] = {"lr": 0.01}
        elif parameter.default is parameter.empty:
            raise CannotDrive(f"{cls.__name__}() needs argument {name!r}")
    return kwargs


class _HeldHyperparameter(Scheduler):
    """Schedules group[key] as a constant 0-dim tensor: a declared tensor hyperparameter
    (`tensor-hyperparameters` option) is one a scheduler drives."""

    def __init__(self, optimizer, key):
        self._key = key
        self._value = float(optimizer.param_groups[0][key])
        super().__init__(optimizer, total_iters=None)

    @property
    def param_group_key(self):
        return self._key

    def _get_closed_form(self):
        return torch.tensor(self._value)


def _drive_optimizer(target, loaded, variant, tracer, generator):
    cls = target.obj
    params = _params(generator)
    groups = [{"params": params, **variant.group}] if variant.group else params
    kwargs = _optimizer_kwargs(cls, variant.kwargs)
    with tracer.phase(guarded=False):
        optimizer = cls(groups, **kwargs)
        if isinstance(optimizer, cstorch.optim.Optimizer):
            for key in loaded.options.get("tensor-hyperparameters", []):
                if key != "lr" and key in optimizer.param_groups[0]:
                    _HeldHyperparameter(optimizer, key)
        for method in variant.calls:
            getattr(optimizer, method)()
    for _ in range(STEPS):
        _set_grads(params, generator)
        with tracer.phase(guarded=True):
            optimizer.step()


def _drive_scheduler(target, loaded, variant, tracer, generator):
    cls = target.obj
    params = _params(generator)
    if issubclass(cls, Scheduler):
        optimizer = CompliantSGD(params, lr=0.1)
    else:
        optimizer = torch.optim.SGD(params, lr=0.1)
    kwargs = dict(variant.kwargs)
    for name, parameter in _parameters(cls.__init__, 2):
        if name in kwargs or parameter.default is not parameter.empty:
            continue
        if name not in SCHEDULER_ARGS:
            raise CannotDrive(f"{cls.__name__}() needs argument {name!r}")
        kwargs[name] = SCHEDULER_ARGS[name]
    # The closed form runs from construction on: construction is guarded code too.
    with tracer.phase(guarded=True):
        scheduler = cls(optimizer, **kwargs)
    for _ in range(STEPS):
        _set_grads(params, generator)
        optimizer.step()
        with tracer.phase(guarded=True):
            scheduler.step()


@cstorch.trace
def _module_step(module, args, kwargs):
    """A traced step running a module's forward (its parameters are device values)."""
    return module(*args, **kwargs)


def _is_int(annotation) -> bool:
    return annotation is int or annotation == "int"


def _drive_module(target, loaded, variant, tracer, generator):
    cls = target.obj
    kwargs = dict(variant.kwargs)
    for name, parameter in _parameters(cls.__init__, 1):
        if name in kwargs or parameter.default is not parameter.empty:
            continue
        if name not in SIZE_ARGS:
            raise CannotDrive(f"{cls.__name__}() needs argument {name!r}")
        kwargs[name] = SIZE_ARGS[name]
    with tracer.phase(guarded=False):
        module = cls(**kwargs)
    extra = FORWARD_KWARGS.get((target.unit, target.name), lambda g: {})
    given = FORWARD_ARGS.get((target.unit, target.name))
    for _ in range(STEPS):
        args = given(generator) if given is not None else []
        for name, parameter in _parameters(cls.forward, 1) if given is None else ():
            if parameter.default is not parameter.empty:
                continue
            if _is_int(parameter.annotation):
                args.append(2)
            elif name in ("ids", "input_ids", "tokens", "token_ids"):
                # Valid as token ids and as indices into the batch dimension (2).
                args.append(torch.randint(0, 2, (2, 4), generator=generator))
            else:
                args.append(torch.randn(2, 4, kwargs.get("dim", 8), generator=generator))
        with tracer.phase(guarded=True):
            _module_step(module, args, extra(generator))


def _drive_traced(target, loaded, variant, tracer, generator):
    # The twins compare per-step rules; the arguments made up here (a new model per
    # call, a constant step counter) are no training loop, so the CS501 check is off.
    with cstorch.graph_check_steps(0):
        _call_traced(target, tracer, generator)


def _call_traced(target, tracer, generator):
    factory = TRACED_ARGS.get((target.unit, target.name))
    for _ in range(STEPS):
        if factory is not None:
            args, kwargs = factory(generator)
        else:
            args, kwargs = [], {}
            for name, parameter in _parameters(inspect.unwrap(target.obj), 0):
                if parameter.default is not parameter.empty:
                    continue
                if _is_int(parameter.annotation):
                    args.append(2)
                elif name in ("model", "module", "net"):
                    args.append(nn.Linear(8, 8))
                else:
                    args.append(torch.randn(4, 8, generator=generator))
        with tracer.phase(guarded=True):
            target.obj(*args, **kwargs)


_DRIVERS = {"optimizer": _drive_optimizer, "scheduler": _drive_scheduler,
            "module": _drive_module, "traced": _drive_traced}


def _deepest_fixture_frame(exc: BaseException, files) -> tuple[str, int] | None:
    site = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename in files:
            site = (frame.f_code.co_filename, lineno)
    return site


def _run_once(loaded: LoadedUnit, target: Target, variant: Variant, unchecked: dict) -> Run:
    generator = torch.Generator().manual_seed(0)
    tracer = _Tracer(loaded.files, unchecked)
    # Module initialisation draws from the global generator: the same values in every
    # replay, and the other tests' global generator left as it was.
    with swapped_modules(_fixture_modules(loaded.options)), \
            torch.random.fork_rng(devices=[]), tracer:
        torch.manual_seed(0)
        try:
            if target.kind == "abstract":
                target.obj(_params(generator))
            else:
                _DRIVERS[target.kind](target, loaded, variant, tracer, generator)
            run = Run("clean")
        except cstorch.ComplianceError as error:
            claimed = (error.filename, error.lineno) if error.filename else None
            site = _deepest_fixture_frame(error, tracer.files)
            if site is None and claimed is not None and claimed[0] in tracer.files:
                site = claimed  # raised after the user's code returned (CS305): its message
            run = Run("error", str(error).splitlines()[0], error.code, site, claimed)
        except CannotDrive as exc:
            run = Run("cannot_drive", str(exc))
        except Exception as exc:  # noqa: BLE001 - judged by the case
            site = _deepest_fixture_frame(exc, tracer.files)
            where = f" at {Path(site[0]).name}:{site[1]}" if site else ""
            status = "type_error" if target.kind == "abstract" and isinstance(
                exc, TypeError) and "abstract" in str(exc) else "exception"
            run = Run(status, f"{type(exc).__name__}: {exc}{where}", site=site)
    run.unchecked = tuple(unchecked)
    run.guarded, run.host = tracer.guarded, tracer.host
    return run


_RUNS: dict[tuple[str, str, str], list[Run]] = {}


def run_case(unit_id: str, name: str, variant_name: str = "") -> list[Run]:
    """The case's first run, then its replays: each runs the statements matched so far
    unchecked, until a run is clean, fails otherwise, or makes no progress."""
    key = (unit_id, name, variant_name)
    if key in _RUNS:
        return _RUNS[key]
    loaded = load_unit(unit_id)
    target = next(t for t in loaded.targets if t.name == name)
    variant = _variants(unit_id, name).get(variant_name) or Variant("defaults")
    if target.kind == "undefined":
        runs = [Run("undefined", target.why_undefined)]
    elif (unit_id, name) in SKIP:
        runs = [Run("cannot_drive", SKIP[(unit_id, name)])]
    else:
        runs, unchecked = [], {}
        while True:
            run = _run_once(loaded, target, variant, dict(unchecked))
            runs.append(run)
            # Replays go on past any error at a fixture line (an unmarked one is a case
            # failure unless REPLAY_ARTIFACTS explains it).
            if run.status != "error" or run.site is None or len(runs) > MAX_REPLAYS:
                break
            header = _statement_header(unit_id, *run.site)
            if header is None:
                break
            first, last = header
            if (run.site[0], first) in unchecked:
                run.detail += " [raised with its statement unchecked: replays end]"
                break
            unchecked[(run.site[0], first)] = last
    _RUNS[key] = runs
    return runs


# ---------------------------------------------------------------------------------------
# Expectations
# ---------------------------------------------------------------------------------------


def _runtime_marks(loaded: LoadedUnit) -> list[Mark]:
    return [m for m in loaded.marks if m.code in RUNTIME_CODES]


def _marks_named(loaded: LoadedUnit, text: str, strict: bool = True) -> list[Mark]:
    """The marks on the one marked line holding `text` ([] when not exactly one and not
    strict: collection must survive a fixture being edited; the tables test reports it)."""
    found = [m for m in _runtime_marks(loaded) if text in m.text]
    lines = {(m.file, m.line) for m in found}
    if len(lines) != 1:
        assert not strict, f"{loaded.unit_id}: {text!r} names {len(lines)} marked lines"
        return []
    return found


def _variants(unit_id: str, name: str) -> dict[str, Variant]:
    return VARIANTS.get((unit_id, name), {})


def _case_ids(unit_id: str) -> list[tuple[str, str]]:
    return [(target.name, variant) for target in load_unit(unit_id).targets
            for variant in ["", *_variants(unit_id, target.name)]]


def _label(name: str, variant: str) -> str:
    return name + (f"[{variant}]" if variant else "")


def _in_span(target: Target, mark: Mark) -> bool:
    return mark.file == target.file and target.span[0] <= mark.line <= target.span[1]


def check_case(unit_id: str, name: str, variant_name: str = "") -> None:
    loaded = load_unit(unit_id)
    target = next(t for t in loaded.targets if t.name == name)
    runs = run_case(unit_id, name, variant_name)
    label = f"{unit_id}::{_label(name, variant_name)}"
    first = runs[0]
    if first.status in ("undefined", "cannot_drive"):
        pytest.skip(f"{name}: {first.detail}")
    if target.kind == "abstract":
        assert first.status == "type_error", (
            f"{label}: a CS103 class is abstract (TypeError), got {first.describe()}")
        return
    # The first run: clean (5 steps), or its first error is a marked runtime line.
    assert first.status in ("clean", "error"), f"{label}: {first.describe()}"
    for run in runs:
        context = f" (replay with lines {[line for _, line in run.unchecked]} unchecked)" \
            if run.unchecked else ""
        if run.status != "error":
            continue  # a replay may end otherwise: a value read unchecked is a host value
        assert run.site is not None, f"{label}: error outside the fixture: {run.detail}"
        assert run.claimed == run.site, (
            f"{label}: the error names {run.claimed}, the traceback is at {run.site}"
            f"{context}: {run.detail}")
        codes = [m.code for m in loaded.marks if (m.file, m.line) == run.site]
        if run.code in codes:
            continue
        artifact = REPLAY_ARTIFACTS.get((unit_id, _label(name, variant_name)))
        assert run.unchecked and artifact, (
            f"{label}: {run.describe()}{context} but the line is marked "
            f"{codes or 'with no code'}: {run.detail}")
    # Every runtime mark of the class is raised by one of its twins, or accounted for
    # (its case skipped, NOT_REACHED, or an xfail mark); a clean run is otherwise a miss.
    if not variant_name:
        unaccounted = [(m, how) for m in _runtime_marks(loaded) if _in_span(target, m)
                       and _xfail_reason(loaded, m) is None
                       for verdict, how in [account_for(unit_id, m)] if verdict == "fail"]
        assert not unaccounted, f"{label}: " + "; ".join(
            f"{m.where()} {m.code} `{m.text}`: {how}" for m, how in unaccounted)
    variant = _variants(unit_id, name).get(variant_name)
    if variant is not None and variant.reaches:
        wanted = _marks_named(loaded, variant.reaches)[0]
        assert any(run.site == (wanted.file, wanted.line) for run in runs), (
            f"{label}: meant to raise {wanted.code} at {wanted.where()} `{wanted.text}`; "
            + "; ".join(run.describe() for run in runs)
            + (" (the line ran outside step)" if any((wanted.file, wanted.line) in run.host
                                                     for run in runs) else ""))


def account_for(unit_id: str, mark: Mark) -> tuple[str, str]:
    """(verdict, explanation) for one runtime mark: raised | skip | fail."""
    loaded = load_unit(unit_id)
    where = (mark.file, mark.line)
    all_runs = [(target, variant, run)
                for target in loaded.targets
                for variant in ["", *_variants(unit_id, target.name)]
                for run in run_case(unit_id, target.name, variant)]
    for target, variant, run in all_runs:
        if run.status == "error" and run.site == where and run.code == mark.code:
            return "raised", f"raised by {_label(target.name, variant)}"
    for (table_unit, text), reason in NOT_REACHED.items():
        if table_unit == unit_id and mark in _marks_named(loaded, text, strict=False):
            return "skip", reason
    for target, variant, run in all_runs:
        if _in_span(target, mark) and run.status in ("undefined", "cannot_drive"):
            return "skip", f"twin skipped with its case {target.name}: {run.detail}"
    codes_here = {m.code for m in loaded.marks if (m.file, m.line) == where}
    for target, variant, run in all_runs:
        if run.status == "error" and run.site == where:
            if run.code in codes_here:
                return "skip", (f"the line raised {run.code}, also marked on it, first "
                                f"({_label(target.name, variant)})")
            return "fail", (f"{_label(target.name, variant)} raised {run.code} at the line "
                            f"instead" + (" (in a replay)" if run.unchecked else ""))
    for target, variant, run in all_runs:
        if where in run.guarded and where != run.site:
            return "fail", (f"MISSED: {_label(target.name, variant)} ran the line in a guarded "
                            f"step without raising ({run.describe()})")
    for target, variant, run in all_runs:
        if where in run.host:
            return "fail", (f"{_label(target.name, variant)} ran the line only outside "
                            f"step(), where the runtime does not check ({run.describe()})")
    owners = [(t, v, runs) for t in loaded.targets if _in_span(t, mark)
              for v in ["", *_variants(unit_id, t.name)]
              for runs in [run_case(unit_id, t.name, v)]]
    ends = "; ".join(f"{_label(t.name, v)}: " + " -> ".join(r.describe() for r in runs)
                     for t, v, runs in owners) or "no case's class holds the line"
    return "fail", f"no twin reaches it (add a variant or a NOT_REACHED reason): {ends}"


# ---------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------


def _case_params():
    params = []
    for unit in _units():
        unit_id = _unit_id(unit)
        for name, variant in _case_ids(unit_id):
            label = _label(name, variant)
            marks = [pytest.mark.xfail(reason=XFAIL_CASES[(unit_id, label)], strict=True)] \
                if (unit_id, label) in XFAIL_CASES else []
            params.append(pytest.param(unit_id, name, variant, id=f"{unit_id}::{label}",
                                       marks=marks))
    return params


def _xfail_reason(loaded: LoadedUnit, mark: Mark) -> str | None:
    for (unit_id, text), reason in XFAIL_MARKS.items():
        if unit_id == loaded.unit_id and mark in _marks_named(loaded, text, strict=False):
            return reason
    return None


def _mark_params():
    params = []
    for unit in _units():
        unit_id = _unit_id(unit)
        loaded = load_unit(unit_id)
        for mark in _runtime_marks(loaded):
            relative = Path(mark.file).resolve().relative_to(FIXTURES.resolve()).as_posix()
            reason = _xfail_reason(loaded, mark)
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            params.append(pytest.param(unit_id, mark, id=f"{relative}:{mark.line}:{mark.code}",
                                       marks=marks))
    return params


@pytest.mark.parametrize("unit_id, name, variant_name", _case_params())
def test_twin(unit_id, name, variant_name):
    check_case(unit_id, name, variant_name)


@pytest.mark.parametrize("unit_id, mark", _mark_params())
def test_mark(unit_id, mark):
    verdict, explanation = account_for(unit_id, mark)
    if verdict == "skip":
        pytest.skip(explanation)
    assert verdict == "raised", f"{mark.where()} {mark.code} `{mark.text}`: {explanation}"


def test_tables_name_existing_cases_and_lines():
    """Every table entry names a fixture case or one marked line (stale entries fail)."""
    for table in (NOT_REACHED, XFAIL_MARKS):
        for unit_id, text in table:
            _marks_named(load_unit(unit_id), text)
    for unit_id, text in NOT_REACHED:
        for mark in _marks_named(load_unit(unit_id), text):
            verdict, explanation = account_for(unit_id, mark)
            assert not explanation.startswith("raised"), f"stale NOT_REACHED: {explanation}"
    for table in (SKIP, XFAIL_CASES, VARIANTS):
        for unit_id, label in table:
            assert (unit_id, label.split("[")[0]) in {
                (unit_id, name) for name, _ in _case_ids(unit_id)}, (unit_id, label)


def test_sys_modules_restored():
    """Loading the fixtures leaves sys.modules as it was: no cerebras mapping, no stub of
    a declared project package, no fixture package."""
    for unit in _units():
        load_unit(_unit_id(unit))
    packages = {unit.name for unit in _units() if unit.is_dir()}
    stubs = {dotted.split(".")[0] for unit in _units()
             for key in ("optimizer-bases", "scheduler-bases", "traced-decorators")
             for dotted in load_unit(_unit_id(unit)).options.get(key, [])}
    leaked = [name for name in sys.modules
              if (sys.modules[name] is cstorch and name != "cslint.cstorch")
              or name.split(".")[0] in packages | stubs | {"cerebras"}]
    assert not leaked, leaked
