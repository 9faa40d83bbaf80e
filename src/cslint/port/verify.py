"""`cslint port --verify`: run the original optimizer and its port side by side.

The parent (`verify_port`) writes the ported code to a temporary file and runs this
module in a subprocess (`python -m cslint.port.verify`, so torch is never loaded into
the linter's process), which imports both classes: `cerebras.pytorch` resolves to the
runtime reference `cslint.cstorch`, whose strict mode is on. For the class's default
hyperparameters and each of its boolean options flipped, both optimizers run STEPS
steps on random float32 parameters of shapes 1-D, 2-D and 4-D with the same random
gradients (where the constructor requires a flag in every param group, Muon's
`use_muon`, in two groups: True for the matrices and larger, False for the vectors; where
its first argument is an optimizer to wrap, around SGD with momentum: torch's for the
original, the runtime reference's for the port);
the port has a cstorch LR scheduler with a closed form attached (one lr for every
group, as a closed form gives), and the original gets the same learning rate as a
Python float before each step. The port's
step runs as a `cstorch.trace`d step: the graph of each of its calls must be the
first's (CS501), as on the system, where the step's Python runs once; where strict mode
stops it, the same run again with strict mode off compares the numbers. Torch's global random
generator is seeded alike before each side's construction and each of its steps, the
constructions with the first step's seed: random initial state that the original draws
in its first step and the port in `preinitialize()` draws the same numbers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

STEPS = 50
SHAPES = ((5,), (4, 3), (2, 3, 2, 2))
# Numbers are equal when |ported - original| <= ATOL + RTOL * |original| everywhere.
ATOL, RTOL = 1e-5, 1e-4
# The global random generator's seed before the constructions and the first step; step k
# (from 0) has RNG_SEED + k.
RNG_SEED = 20_240_917
# Why an abstract class is not run.
ABSTRACT = "an abstract class: nothing to run"
# Seconds one file's verification may take.
TIMEOUT = 300


@dataclass(frozen=True)
class Verified:
    """One class's run: `numbers_equal` / `strict_clean` are None when it could not run
    (`problem` says why; beside verdicts, it names the option sets not compared because
    the original itself fails with them)."""

    numbers_equal: bool | None
    strict_clean: bool | None
    problem: str | None = None
    strict_codes: tuple[str, ...] = ()


def verify_port(original_path: str, ported_code: bytes, classes: list[str],
                steps: int = STEPS) -> dict[str, Verified]:
    """Each class of `classes` in the file at `original_path` against its port."""
    return verify_ports([(original_path, ported_code, classes)], steps)[0]


def verify_ports(files: list[tuple[str, bytes, list[str]]], steps: int = STEPS
                 ) -> list[dict[str, Verified]]:
    """For each (original path, ported code, class names), each class against its port;
    all in one subprocess (torch is imported once)."""
    wanted = [(path, code, classes) for path, code, classes in files if classes]
    if not wanted:
        return [{} for _ in files]
    ported_paths: list[str] = []
    try:
        for path, code, _ in wanted:
            folder = os.path.dirname(os.path.abspath(path))
            handle, ported_path = tempfile.mkstemp(prefix=".cslint-port-", suffix=".py",
                                                   dir=folder)
            ported_paths.append(ported_path)
            with os.fdopen(handle, "wb") as stream:
                stream.write(code)
        request = json.dumps({"steps": steps, "files": [
            {"original": os.path.abspath(path), "ported": ported, "classes": classes}
            for (path, _, classes), ported in zip(wanted, ported_paths)]})
        timeout = TIMEOUT * len(wanted)
        try:
            done = subprocess.run([sys.executable, "-m", "cslint.port.verify"], input=request,
                                  capture_output=True, text=True, timeout=timeout,
                                  env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        except subprocess.TimeoutExpired:
            answers = None
            failure = f"did not finish in {timeout} s"
        else:
            try:
                answers = json.loads(done.stdout.splitlines()[-1])
            except (IndexError, ValueError):
                answers = None
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                failure = f"the verifier failed: {last}"
    finally:
        for ported_path in ported_paths:
            os.unlink(ported_path)
    results = iter(answers if answers is not None else [None] * len(wanted))
    verified = []
    for _, _, classes in files:
        if not classes:
            verified.append({})
            continue
        found = next(results)
        if found is None:
            verified.append({name: Verified(None, None, failure) for name in classes})
        else:
            verified.append({name: Verified(answer["numbers_equal"], answer["strict_clean"],
                                            answer.get("problem"),
                                            tuple(answer.get("strict_codes", ())))
                             for name, answer in found.items()})
    return verified


def _package_of(path: str) -> tuple[str, str]:
    """(the folder above the package, the package's dotted name) of a file in an
    `__init__.py` chain; ("", "") for a file outside one."""
    folder = os.path.dirname(os.path.abspath(path))
    parts: list[str] = []
    while os.path.isfile(os.path.join(folder, "__init__.py")) and \
            os.path.basename(folder).isidentifier():
        parts.insert(0, os.path.basename(folder))
        folder = os.path.dirname(folder)
    return (folder, ".".join(parts)) if parts else ("", "")


# ---- the subprocess ----------------------------------------------------------------------

# What the user's code may raise while imported, built or stepped: an exception, or
# `exit()` (lion-pytorch's triton module exits when triton is missing), reported as the
# class's problem instead of ending the verifier.
USER_CODE_ERRORS = (Exception, SystemExit)

# The package the ports of a package's files are modules of, beside the original.
PORTED_PACKAGE = "_cslint_ported"


class _PortedFiles:
    """Finds the ported file of a module of `PORTED_PACKAGE` (a meta path finder)."""

    def __init__(self, paths: dict[str, str]):
        self.paths = paths

    def find_spec(self, name, path=None, target=None):
        import importlib.util

        found = self.paths.get(name)
        return importlib.util.spec_from_file_location(name, found) if found else None


def _child() -> None:
    import importlib.util
    import types
    import warnings

    import cslint.cstorch as cstorch

    warnings.simplefilter("ignore")
    # `import cerebras.pytorch as cstorch` in the port: the runtime reference.
    cerebras = types.ModuleType("cerebras")
    cerebras.pytorch = cstorch
    sys.modules.setdefault("cerebras", cerebras)
    sys.modules.setdefault("cerebras.pytorch", cstorch)

    request = json.loads(sys.stdin.read())

    def load(path: str, name: str):
        # A file of a package is loaded as a module of that package, so that its
        # relative imports (`from ._types import ParamsT`) resolve.
        root, package = _package_of(path)
        if package:
            if root not in sys.path:
                sys.path.insert(0, root)
            try:
                importlib.import_module(package)
            except USER_CODE_ERRORS:  # noqa: BLE001
                # Its `__init__` needs what is not here (timm's optimizers import the rest
                # of timm): the package as a folder of modules, enough for the file's own
                # relative imports.
                folder = root
                for depth, part in enumerate(package.split(".")):
                    folder = os.path.join(folder, part)
                    dotted = ".".join(package.split(".")[:depth + 1])
                    if dotted not in sys.modules:
                        stub = types.ModuleType(dotted)
                        stub.__path__ = [folder]
                        sys.modules[dotted] = stub
            name = f"{package}.{name}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    # The ports of a package's files are its modules under a package of their own, so
    # that a port's relative import of a file also ported (`from .adam import Adam` in
    # AdamW's) gets the port; of another file, the original.
    ported_modules: dict[str, str] = {}  # module name -> the ported file
    shadow_of: dict[int, str] = {}  # a file of a package, by index -> its port's module
    for index, file in enumerate(request["files"]):
        root, package = _package_of(file["original"])
        if package:
            stem = os.path.splitext(os.path.basename(file["original"]))[0]
            shadow_of[index] = f"{PORTED_PACKAGE}.{package}.{stem}"
            ported_modules[shadow_of[index]] = file["ported"]
            folder = root
            for depth, part in enumerate(package.split(".")):
                folder = os.path.join(folder, part)
                dotted = ".".join([PORTED_PACKAGE, *package.split(".")[:depth + 1]])
                if dotted not in sys.modules:
                    shadow = types.ModuleType(dotted)
                    shadow.__path__ = [folder]
                    sys.modules[dotted] = shadow
    if ported_modules:
        sys.modules.setdefault(PORTED_PACKAGE, types.ModuleType(PORTED_PACKAGE))
        sys.meta_path.insert(0, _PortedFiles(ported_modules))

    results: list[dict[str, dict]] = []
    for index, file in enumerate(request["files"]):
        folder = os.path.dirname(file["original"])
        # A script's neighbours import as it does (`from utils import x`). A package's
        # modules import through the package (its folder on the path would make them
        # top-level modules: lion-pytorch's own `triton.py` the `triton` torch asks for).
        if folder not in sys.path and index not in shadow_of:
            sys.path.insert(0, folder)
        answers: dict[str, dict] = {}
        try:
            original = load(file["original"], f"_cslint_original_{index}")
            ported = importlib.import_module(shadow_of[index]) if index in shadow_of else \
                load(file["ported"], f"_cslint_ported_{index}")
        except USER_CODE_ERRORS as error:  # noqa: BLE001 - the user's module: report, do not crash
            problem = f"cannot import: {type(error).__name__}: {error}".splitlines()[0]
            answers = {name: {"numbers_equal": None, "strict_clean": None, "problem": problem}
                       for name in file["classes"]}
        else:
            for name in file["classes"]:
                answers[name] = _compare(getattr(original, name, None),
                                         getattr(ported, name, None), request["steps"])
        results.append(answers)
    print(json.dumps(results))


# The learning rate given to a class that has none of its own (`lr` with no default, or
# torch's `required`, as torch 1.x's SGD and the optimizers copied from it write it).
GIVEN_LR = 1e-3


def _options(cls) -> list[dict]:
    """The keyword sets to run: none (the defaults), then each boolean option flipped;
    each with the learning rate where the class has no default one."""
    import inspect

    signature = inspect.signature(cls.__init__)
    given = {"lr": GIVEN_LR} if _needs_lr(signature) else {}
    runs: list[dict] = [dict(given)]
    for parameter in list(signature.parameters.values())[2:]:
        if isinstance(parameter.default, bool):
            runs.append({**given, parameter.name: not parameter.default})
    return runs


def _needs_lr(signature) -> bool:
    import inspect

    from torch.optim.optimizer import required

    parameter = signature.parameters.get("lr")
    return parameter is not None and (parameter.default is inspect.Parameter.empty
                                      or parameter.default is required)


def _required(cls) -> list[str]:
    import inspect

    return [p.name for p in list(inspect.signature(cls.__init__).parameters.values())[2:]
            if p.default is inspect.Parameter.empty and p.name != "lr"
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


# The names a wrapper's constructor gives the optimizer it wraps, in place of the
# parameters (pytorch-optimizer's Lookahead, OrthoGrad, PCGrad; timm's Lookahead).
_WRAPPED_NAMES = ("optimizer", "base_optimizer", "inner_optimizer", "optim")


def _wraps_an_optimizer(cls) -> bool:
    """Whether the constructor's first argument is an optimizer to wrap, not parameters:
    named as one, or annotated with a type that names `Optimizer`."""
    import inspect

    arguments = list(inspect.signature(cls.__init__).parameters.values())[1:2]
    if not arguments:
        return False
    first = arguments[0]
    annotation = first.annotation
    named = annotation if isinstance(annotation, str) else \
        getattr(annotation, "__name__", "") or str(annotation)
    return first.name in _WRAPPED_NAMES or (
        annotation is not inspect.Parameter.empty and "Optimizer" in named
        and first.name not in ("params", "parameters"))


# The optimizer a wrapper wraps in a verify run: SGD with momentum, torch's for the
# original and the runtime reference's for the port (equal numbers, tested beside it).
WRAPPED_MOMENTUM = 0.9


def _wrapped(params: list, lr: float, ported: bool):
    import torch

    import cslint.cstorch as cstorch

    sgd = cstorch.optim.SGD if ported else torch.optim.SGD
    return sgd(params, lr=lr, momentum=WRAPPED_MOMENTUM)


def _compare(original_cls, ported_cls, steps: int) -> dict:
    import torch

    from cslint.cstorch import ComplianceError

    if original_cls is None or ported_cls is None:
        return {"numbers_equal": None, "strict_clean": None,
                "problem": "the class is not defined at import time"}
    import inspect

    if inspect.isabstract(original_cls):
        return {"numbers_equal": None, "strict_clean": None, "problem": ABSTRACT}
    required = _required(original_cls)
    if required:
        return {"numbers_equal": None, "strict_clean": None,
                "problem": f"its constructor needs {', '.join(required)}"}
    equal, clean, codes = True, True, set()
    not_run: list[str] = []
    difference = ""  # where the first option set whose numbers differ parts
    stopped = ""  # what stopped the port in strict mode first
    for index, options in enumerate(_options(original_cls)):
        outcome = _run_pair(original_cls, ported_cls, options, steps, torch, ComplianceError,
                            strict=not stopped)
        if outcome.get("strict_clean") is False:
            # What remains to port does not say whether what was ported changed the
            # numbers: the same run again with strict mode off compares them, and the
            # options left run that way too.
            stopped, clean = outcome["problem"], False
            codes |= set(outcome.get("codes", []))
            outcome = _run_pair(original_cls, ported_cls, options, steps, torch,
                                ComplianceError, strict=False)
        if "problem" in outcome and index and outcome.get("original_failed"):
            # An option the original itself cannot run here (timm's `capturable=True`
            # wants a GPU): nothing to compare the port with, and no fault of the port.
            not_run.append(outcome["problem"])
            continue
        if "problem" in outcome:
            return {"numbers_equal": None if outcome.get("original_failed") else False,
                    "strict_clean": False if stopped else outcome.get("strict_clean"),
                    "problem": "; ".join(filter(None, [stopped, outcome["problem"]])),
                    "strict_codes": sorted(codes | set(outcome.get("codes", [])))}
        equal = equal and outcome["numbers_equal"]
        clean = clean and outcome["strict_clean"]
        if "difference" in outcome and not difference:
            difference = outcome["difference"]
        codes |= set(outcome["codes"])
    answer = {"numbers_equal": equal, "strict_clean": clean, "strict_codes": sorted(codes)}
    said = [p for p in (stopped, difference) if p]
    if not_run:
        said.append("not compared: " + "; ".join(not_run))
    if said:
        answer["problem"] = "; ".join(said)
    return answer


def _schedule(cstorch, torch, base_lr: float, steps: int):
    class HalvingLR(cstorch.optim.lr_scheduler.LRScheduler):
        """lr falls linearly to half its first value over the run."""

        def _get_closed_form_lr(self):
            progress = self.last_epoch.to(torch.float32) / float(steps)
            return torch.tensor(base_lr, dtype=torch.float32) * (1.0 - 0.5 * progress)

    return HalvingLR


def _run_pair(original_cls, ported_cls, options: dict, steps: int, torch,
              compliance_error, strict: bool = True) -> dict:
    """Both classes run side by side with `options`; with `strict` off the port runs
    unchecked, for its numbers alone."""
    import cslint.cstorch as cstorch

    with cstorch.strict(strict):
        return _run_both(original_cls, ported_cls, options, steps, torch, compliance_error)


def _run_both(original_cls, ported_cls, options: dict, steps: int, torch,
              compliance_error) -> dict:
    import cslint.cstorch as cstorch

    what = ", ".join(f"{k}={v}" for k, v in options.items()) or "the defaults"
    generator = torch.Generator().manual_seed(0)
    start = [torch.randn(shape, generator=generator) for shape in SHAPES]
    original_params = [torch.nn.Parameter(t.clone()) for t in start]
    ported_params = [torch.nn.Parameter(t.clone()) for t in start]
    flags: list[str] = []  # param-group flags the class requires (none: a plain list)
    wraps = _wraps_an_optimizer(original_cls)
    if wraps:
        what += f" around SGD(momentum={WRAPPED_MOMENTUM})"
    try:
        torch.manual_seed(RNG_SEED)
        original = original_cls(_wrapped(original_params, GIVEN_LR, False) if wraps
                                else original_params, **options)
    except USER_CODE_ERRORS as error:  # noqa: BLE001
        flags = _group_flags(original_cls)
        if not flags:
            return {"problem": f"the original fails with {what}: {_one_line(error)}",
                    "original_failed": True}
        try:
            torch.manual_seed(RNG_SEED)
            original = original_cls(_flagged_groups(original_params, flags), **options)
        except USER_CODE_ERRORS:  # noqa: BLE001 - the first failure is the one to report
            return {"problem": f"the original fails with {what}: {_one_line(error)}",
                    "original_failed": True}
        what += " and param groups with " + ", ".join(f"{flag}=True/False" for flag in flags)
    try:
        torch.manual_seed(RNG_SEED)
        ported = ported_cls(_wrapped(ported_params, GIVEN_LR, True) if wraps
                            else _flagged_groups(ported_params, flags) if flags
                            else ported_params, **options)
        _to_training(original)
        _to_training(ported)
        base_lr = original.param_groups[0].get("lr", 1e-3)
        # An optimizer that computes its own step size (Adafactor's `lr=None` with
        # `relative_step=True`) has no lr to schedule: it runs with none.
        scheduler = _schedule(cstorch, torch, float(base_lr), steps)(ported, total_iters=steps) \
            if base_lr is not None else None
    except compliance_error as error:
        return {"problem": f"the port fails with {what}: {_one_line(error)}",
                "strict_clean": False, "codes": [getattr(error, "code", "")]}
    except USER_CODE_ERRORS as error:  # noqa: BLE001
        return {"problem": f"the port fails with {what}: {_one_line(error)}"}
    # Traced, as on the system: every call's graph is compared with the first's (CS501),
    # so a Python counter left in the port stops it like a host read does, even one
    # that changes the graph only every k steps (timm's Lookahead, k=6).
    cstorch.graph_check_steps(max(steps, 2))
    step_port = cstorch.trace(ported.step)
    codes: set[str] = set()
    apart_since = None  # the step after which the numbers differ, and do to the end
    apart = ""  # where they differ most after the latest step
    for number in range(steps):
        grads = [torch.randn(t.shape, generator=generator) for t in start]
        for param, grad in zip(original_params, grads):
            param.grad = grad.clone()
        for param, grad in zip(ported_params, grads):
            param.grad = grad.clone()
        if scheduler is not None:
            lrs = [float(group["lr"]) for group in ported.param_groups]
            for group, lr in zip(original.param_groups, lrs):
                group["lr"] = lr
        try:
            torch.manual_seed(RNG_SEED + number)
            original.step()
        except USER_CODE_ERRORS as error:  # noqa: BLE001
            return {"problem": f"the original's step fails with {what}: {_one_line(error)}",
                    "original_failed": True}
        try:
            torch.manual_seed(RNG_SEED + number)
            step_port()
        except compliance_error as error:
            codes.add(getattr(error, "code", "") or "")
            return {"problem": f"strict mode stops the port with {what}: {_one_line(error)}",
                    "strict_clean": False, "codes": sorted(codes)}
        except USER_CODE_ERRORS as error:  # noqa: BLE001
            return {"problem": f"the port's step fails with {what}: {_one_line(error)}"}
        if scheduler is not None:
            scheduler.step()
        apart = _apart(ported_params, original_params, torch)
        if not apart:
            apart_since = None
        elif apart_since is None:
            apart_since = number + 1
    # The verdict is the last step's; the step they parted for good tells a changed update
    # or rounding the optimizer amplifies (from step 1) from rounding that grew (late).
    if apart_since is None:
        return {"numbers_equal": True, "strict_clean": True, "codes": []}
    return {"numbers_equal": False, "strict_clean": True, "codes": [],
            "difference": f"numbers differ with {what} from step {apart_since}: {apart}"}


def _apart(ported_params: list, original_params: list, torch) -> str:
    """'' where every number of the port is within ATOL + RTOL * |original| of the
    original's, else where it is furthest from that: the parameter, the difference and
    what was allowed there."""
    worst, said = 1.0, ""
    for ported, original in zip(ported_params, original_params):
        ported, original = ported.detach(), original.detach()
        allowed = ATOL + RTOL * original.abs()
        excess = ((ported - original).abs() / allowed).nan_to_num(nan=float("inf"))
        if excess.numel() and float(excess.max()) > worst:
            at = int(excess.argmax())
            worst = float(excess.max())
            said = (f"the {tuple(original.shape)} parameter is {ported.flatten()[at]:.6g} "
                    f"against {original.flatten()[at]:.6g} (|a-b| <= "
                    f"{float(allowed.flatten()[at]):.2g} is equal)")
    return said


def _to_training(optimizer) -> None:
    """Schedule-free optimizers step only in training mode (`optimizer.train()`, as a
    training loop calls it): an optimizer with a `train()` of its own is put in it.
    (torch's Optimizer has none; a port keeps the original's.)"""
    train = getattr(type(optimizer), "train", None)
    if callable(train):
        optimizer.train()


def _flagged_groups(params: list, flags: list[str]) -> list[dict]:
    """Param groups that carry the class's flags (Muon's `use_muon`): each value is run,
    True on the matrices and tensors of more dimensions, False on the vectors."""
    return [{"params": [p for p in params if (p.dim() >= 2) == value],
             **{flag: value for flag in flags}} for value in (True, False)]


def _group_flags(cls) -> list[str]:
    """The flags a constructor in the class's MRO wants in every param group: a key that
    a loop over the groups requires (`if "use_muon" not in group: raise ValueError(...)`,
    right in the loop's body) and that the constructor then tests (`if
    group["use_muon"]:`)."""
    import ast
    import inspect
    import textwrap

    flags: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass.__module__.split(".")[0] == "torch":
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
        except (OSError, TypeError, SyntaxError):
            continue
        tested = {(test.value.id, test.slice.value) for node in ast.walk(tree)
                  if isinstance(node, ast.If) and isinstance(test := node.test, ast.Subscript)
                  and isinstance(test.value, ast.Name) and isinstance(test.slice, ast.Constant)}
        for loop in ast.walk(tree):
            if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)):
                continue
            for statement in loop.body:
                test = statement.test if isinstance(statement, ast.If) else None
                if isinstance(test, ast.Compare) and len(test.ops) == 1 \
                        and isinstance(test.ops[0], ast.NotIn) \
                        and isinstance(test.left, ast.Constant) \
                        and isinstance(test.left.value, str) \
                        and isinstance(test.comparators[0], ast.Name) \
                        and test.comparators[0].id == loop.target.id \
                        and any(isinstance(s, ast.Raise) for s in statement.body) \
                        and (loop.target.id, test.left.value) in tested:
                    flags.add(test.left.value)
    return sorted(flags)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:300]}"


if __name__ == "__main__":
    _child()
