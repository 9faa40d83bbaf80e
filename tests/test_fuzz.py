"""Fuzzing: whatever valid Python it is given, the linter finishes each file in seconds,
with its findings and no internal error or exception.

Two sources of code: hypothesmith's modules drawn from Python's grammar (any construct,
rarely one the rules care about), and the shapes the rules do care about (an optimizer's
`step`, a scheduler's closed form, a module's `forward`, a `@cstorch.trace` function)
with statements drawn from a small grammar over the names the analyses follow spliced
into them. Examples are derandomized, so every run checks the same ones; the `slow`
variants check ten times as many (`python -m pytest -m slow tests/test_fuzz.py`).
"""

from __future__ import annotations

import signal
import sys
import tempfile
import threading
import warnings
from contextlib import contextmanager
from datetime import timedelta
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():  # libcst's type-inference module, which it imports, is old
    warnings.simplefilter("ignore", DeprecationWarning)
    import hypothesmith

from cslint.config import config_from_table
from cslint.engine import lint

ALL_RULES = config_from_table({"select": ["ALL"]}, None)
# Per file: over this the example fails as too slow (Hypothesis's deadline); a file that
# runs past HANG_SECONDS is stopped, so a hang fails the test rather than the CI job.
DEADLINE = timedelta(seconds=5)
HANG_SECONDS = 20
# The default run (both tests together) stays well under a minute on 2 cores.
GRAMMAR_EXAMPLES = 200
TEMPLATE_EXAMPLES = 300


def fuzz_settings(examples: int):
    return settings(max_examples=examples, deadline=DEADLINE, derandomize=True,
                    database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


@contextmanager
def stopped_after(seconds: int):
    """Raise TimeoutError in the test when the block runs longer than `seconds`."""
    if not hasattr(signal, "setitimer") \
            or threading.current_thread() is not threading.main_thread():
        yield  # no interval timer here: the deadline still fails slow examples
        return

    def stop(signum, frame):
        raise TimeoutError(f"linting ran over {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def lint_project(files: dict[str, str]) -> list[str]:
    """Lint `files` ({name: code}) as one project with every rule: the problems reported
    (the files that could not be checked, and why; the findings may be anything). An
    exception fails the example."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "pyproject.toml").write_text("[project]\nname = 'fuzzed'\n", encoding="utf-8")
        for name, code in files.items():
            (root / name).write_text(code, encoding="utf-8")
        with stopped_after(HANG_SECONDS):
            result = lint([str(root / name) for name in files], ALL_RULES, project_root=root)
    return [error.render() for error in result.errors]


# ---- (a) modules from Python's grammar ------------------------------------------------------

def check_grammar_module(code: str) -> None:
    problems = lint_project({"generated.py": code})
    assert not [problem for problem in problems if "internal error" in problem], code


# Hypothesmith compiles what it generates: `1()` warns.
@pytest.mark.filterwarnings("ignore::SyntaxWarning")
@fuzz_settings(GRAMMAR_EXAMPLES)
@given(hypothesmith.from_grammar())
def test_modules_from_the_grammar_are_linted_without_internal_errors(code):
    check_grammar_module(code)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::SyntaxWarning")
@fuzz_settings(GRAMMAR_EXAMPLES * 10)
@given(hypothesmith.from_grammar())
def test_ten_times_more_modules_from_the_grammar_are_linted_without_internal_errors(code):
    check_grammar_module(code)


# ---- (b) the shapes the rules check, with statements spliced in ----------------------------

# What the analyses follow: parameters, their gradients and state, param-group values,
# the scheduler's step counter, tensors made by torch and the host reads of them.
ATOMS = (
    "p", "grad", "p.grad", "state", 'state["exp_avg"]', 'state["step"]', "group",
    'group["lr"]', 'group["params"]', "self.param_groups", "self.state", "self.state[p]",
    "self.last_epoch", "self.base_lrs", "self.optimizer.param_groups[0]['lr']", "self.gamma",
    "self.fc", "self.training", "self", "x", "lr", "i", "value", "closure", "batch", "0",
    "1", "0.5", "-1", "True", "None", '"lr"', "torch.float64", "...", "torch.Tensor",
    'f"value={x} {lr!r:>{i}}"', 'f"{p.grad.sum()=}"', "torch", "cstorch", "self.optimizer",
    "self._last_lr", "1j", "10 ** 100", "0x1F", 'b"bytes"', "größe",
    # Characters where `str.splitlines` breaks a line and Python does not, and
    # non-ASCII text: what maps `ast`'s byte offsets to the columns fixes edit.
    '"é\u2028ß"', '"form\x0cfeed"', '"\x85"',
)
TARGETS = (
    "p", "grad", "state", "x", "lr", "i", "value", "group", 'state["exp_avg"]',
    'state["step"]', 'group["lr"]', "self.state[p]", "self.last_epoch", "self.x",
    "self.base_lrs", "p.grad", "x[0]", "x[i:]", "(x, lr)", "[value, *rest]", "(i, (x, lr))",
    "*rest, x", "self.state", "self.param_groups", 'self.optimizer.param_groups[0]["lr"]',
    "torch", "float", "self", "größe",
)
# Templates of one expression: `{}` holes are filled with smaller expressions.
COMPOUND_EXPRESSIONS = (
    "torch.where({}, {}, {})", "torch.zeros_like({})", "cstorch.zeros_like({})",
    "torch.ones_like({})", "torch.sum({})", "torch.tensor({})", "torch.pow({}, {})",
    "torch.clamp({}, min={})", "torch.nonzero({})", "torch.cat([{}, {}])",
    "{}.item()", "float({})", "int({})", "bool({})", "len({})", "{}.sum()", "{}.norm()",
    "{}.mul_({})", "{}.add_({}, alpha={})", "{}.addcdiv_({}, {}, value={})",
    "{}.to(torch.float64)", "{}.double()", "{}.tolist()", "{}.numpy()", "{}.shape[0]",
    "{}.copy_({})", '{}.get("lr", {})', "{}.zero_()", "{}.any()", "{}.masked_fill({}, {})",
    "{} + {}", "{} - {}", "{} * {}", "{} / {}", "{} ** {}", "{} // {}", "{} % {}",
    "{} @ {}", "{} & {}", "{} and {}", "{} or {}", "{} < {}", "{} > {} >= {}", "{} == {}",
    "{} is not {}", "{} in {}", "-{}", "not {}", "~{}", "({} if {} else {})",
    "[{} for x in {}]", "[{} for x in {} if {}]", "{{x: {} for x in {}}}", "{{{} for x in {}}}",
    "sum({} for p in {})", "[[{} for i in x] for x in {}]",
    "(lambda x, *args, k={}, **kwargs: {})", "(lambda: {})()", "(x := {})", "(value := {})",
    "helper({}, *{}, **{})", "self.helper({}, lr={})", "{}[{}]", "{}[{}:{}]", "{}[..., None]",
    "({}, {})", "[{}, *{}]", '{{"lr": {}, **{}}}',
    "super().step({})", "self.get_last_lr()", "self._get_closed_form()",
    'getattr(self, "lr", {})', "isinstance({}, torch.Tensor)", "print({})", "range({})",
    "enumerate({})", "zip({}, {})", "max({}, {})", "math.cos({})", "(yield {})",
    "self.state[{}]", "{}.param_groups", "self.optimizer.param_groups[{}][{}]",
    "torch.where(*{})", "torch.zeros_like({}, **{})", "{}.add_(**{})", "{}[{}, ::2]",
    "{}.get({}).item()", "{}()({})", "{}[0]({})", "super(Fuzzed, self).step({})",
    "type(self).step(self, {})", "[{} for x in {} for i in x if (value := i)]",
    'setattr(self, "state", {})', 'getattr(torch, "where")({}, {}, {})',
    "torch.zeros(3, dtype=torch.float64) + {}", "(lambda x={}: x)({})",
    "torch.set_default_dtype({})", "(\n{}\n+ {}\n)", "{}.train() if {} else {}.eval()",
    "torch.optim.SGD({}, lr={})", "cstorch.optim.lr_scheduler.LinearLR({}, {})",
)
AUGMENTED_OPERATORS = ("+=", "-=", "*=", "/=", "//=", "**=", "@=", "|=", "%=")
EXCEPTIONS = ("Exception", "(ValueError, RuntimeError)", "StopIteration")
PATTERNS = (
    "0 | 1", "[x, *rest]", '{"lr": lr, **rest}', "torch.Tensor(shape=value)",
    "str() as value", "(i, x)", "None", "[]", "{}", "_",
)
MAX_EXPRESSION_DEPTH = 3
MAX_BLOCK_DEPTH = 3


@lru_cache(maxsize=None)
def expressions(depth: int = MAX_EXPRESSION_DEPTH) -> st.SearchStrategy[str]:
    atoms = st.sampled_from(ATOMS)
    if depth == 0:
        return atoms
    smaller = expressions(depth - 1)

    def filled(template: str) -> st.SearchStrategy[str]:
        holes = template.count("{}")
        return st.tuples(*[smaller] * holes).map(
            lambda parts: template.format(*map(_grouped, parts)))

    return st.one_of(atoms, st.sampled_from(COMPOUND_EXPRESSIONS).flatmap(filled))


def _grouped(part: str) -> str:
    # Parenthesized, a part keeps its meaning and its syntax wherever it goes (`0.item()`
    # does not parse, `(0).item()` does).
    return part if part.isidentifier() else f"({part})"


def expression() -> st.SearchStrategy[str]:
    return expressions()


def lines(*parts: st.SearchStrategy[str] | str, template: str) -> st.SearchStrategy[list[str]]:
    """One line from `template` with its `{}` holes filled from `parts`."""
    strategies = [st.just(part) if isinstance(part, str) else part for part in parts]
    return st.tuples(*strategies).map(lambda values: [template.format(*values)])


def indented(block: list[str]) -> list[str]:
    return ["    " + line for line in block]


@lru_cache(maxsize=None)
def blocks(depth: int, in_loop: bool, in_async: bool = False
           ) -> st.SearchStrategy[list[str]]:
    """Statements for a block (lines, relative to the block's indentation): simple ones,
    and at `depth` > 0 compound ones holding smaller blocks. `in_loop` allows break and
    continue; `in_async`, await and the async statements."""
    target, value = st.sampled_from(TARGETS), expression()
    # `with ... as` takes a starred target only in parentheses.
    with_target = target.map(lambda name: f"({name})" if name.startswith("*") else name)
    name = st.sampled_from(("x", "lr", "value", "i"))
    simple = [
        lines(target, value, template="{} = {}"),
        lines(target, target, value, template="{} = {} = {}"),
        lines(st.sampled_from(("x", "lr", 'state["step"]', "self.last_epoch", "p")),
              st.sampled_from(AUGMENTED_OPERATORS), value, template="{} {} {}"),
        lines(name, value, template="{}: torch.Tensor = {}"),
        lines(name, template="{}: float"),
        lines(value, template="{}"),
        lines(value, template="return {}"),
        lines(template="return"),
        lines(st.sampled_from(("x", 'state["exp_avg"]', "self.state[p]", "x[0], lr")),
              template="del {}"),
        lines(value, value, template="assert {}, {}"),
        lines(value, template="raise ValueError({})"),
        lines(template="pass"),
        lines(st.sampled_from(("lr", "x", "value")), template="global {}"),
        lines(st.sampled_from(("import math", "from torch import where as select",
                               "import cerebras.pytorch as cstorch",
                               "import torch.nn.functional as F")), template="{}"),
        lines(target, value, template="x = 1; {} = {}"),
        lines(target, value, st.sampled_from(("# noqa", "# noqa: CS2", "# noqa: CS101,CS204")),
              template="{} = {}  {}"),
    ]
    if in_loop:
        simple += [lines(template="break"), lines(template="continue")]
    if in_async:
        grouped = value.map(_grouped)
        simple += [lines(grouped, template="await {}"),
                   lines(target, grouped, template="{} = await {}")]
    if depth == 0:
        return st.lists(st.one_of(simple), min_size=1, max_size=3).map(_joined)

    body = blocks(depth - 1, in_loop, in_async)
    loop_body = blocks(depth - 1, True, in_async)
    function_body = blocks(depth - 1, False)
    async_body = blocks(depth - 1, False, True)

    def compound(header: str, *parts, inner=body) -> st.SearchStrategy[list[str]]:
        strategies = [st.just(part) if isinstance(part, str) else part for part in parts]
        return st.tuples(st.tuples(*strategies), inner).map(
            lambda drawn: [header.format(*drawn[0])] + indented(drawn[1]))

    def chained(*clauses: st.SearchStrategy[list[str]]) -> st.SearchStrategy[list[str]]:
        return st.tuples(*clauses).map(lambda parts: [line for part in parts for line in part])

    optional = lambda clause: st.one_of(st.just([]), clause)  # noqa: E731
    statements = simple + [
        chained(compound("if {}:", value), optional(compound("elif {}:", value)),
                optional(compound("else:"))),
        chained(compound("while {}:", value, inner=loop_body), optional(compound("else:"))),
        chained(compound("for {} in {}:", target, value, inner=loop_body),
                optional(compound("else:"))),
        compound("for i, (x, lr) in enumerate(zip({}, {})):", value, value, inner=loop_body),
        compound("with {} as {}, {}:", value, with_target, value),
        compound("with ({} as x, {} as lr):", value, value),
        chained(compound("try:"), compound("except {} as error:", st.sampled_from(EXCEPTIONS)),
                optional(compound("else:")), optional(compound("finally:"))),
        chained(compound("try:"), compound("finally:")),
        chained(lines(value, template="match {}:"),
                st.lists(compound("case {}:", st.sampled_from(PATTERNS)), min_size=1,
                         max_size=3).map(lambda cases: indented(_joined(cases))),
                optional(compound("case x if {}:", value)).map(indented)),
        compound("@{}\ndef helper(a, b={}, /, *args, c, d={}, **kwargs):", value, value, value,
                 inner=function_body),
        chained(lines(template="x = 0"),
                compound("def inner(*values):\n    nonlocal x", inner=function_body)),
        compound("async def fetch(q={}):", value, inner=async_body),
        compound("class Local({}):", value, inner=function_body),
        compound("@{}\nclass Local({}, metaclass={}):", value, value, value,
                 inner=function_body),
    ]
    if sys.version_info >= (3, 11):
        statements.append(chained(compound("try:"), compound("except* {}:", st.sampled_from(
            ("ValueError", "(TypeError, KeyError)")))))
    if in_async:
        statements += [compound("async for {} in {}:", target, value, inner=loop_body),
                       compound("async with {} as {}:", value, with_target)]
    return st.lists(st.one_of(statements), min_size=1, max_size=3).map(_joined)


def _joined(statements: list[list[str]]) -> list[str]:
    # A header may hold several lines (a decorator and its def): split them out.
    return [line for statement in statements for text in statement
            for line in text.split("\n")]


TEMPLATE = '''\
import math

import torch
import cerebras.pytorch as cstorch

from helpers import helper


class Fuzzed(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))
        {INITIALIZE}

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["exp_avg"] = cstorch.zeros_like(p)
                {PREINITIALIZE}

    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                state = self.state[p]
                {STEP}
        {STEP_END}


class FuzzedLR(cstorch.optim.lr_scheduler.LRScheduler):
    def __init__(self, optimizer, gamma=0.5, total_iters=10):
        self.gamma = gamma
        super().__init__(optimizer, total_iters=total_iters)

    def _get_closed_form(self):
        {CLOSED_FORM}
        return torch.pow(self.gamma, self.last_epoch) * self.base_lrs[0]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x, scale=1.0):
        {FORWARD}
        return self.fc(x) * scale


@cstorch.trace
def training_step(batch, lr=0.1):
    {TRACED}
    return batch


model = cstorch.compile(Net(), cstorch.backend("CSX"))
optimizer = Fuzzed(model.parameters())
scheduler = FuzzedLR(optimizer)
{MODULE}
'''
HELPERS = '''\
import torch


def helper(p, *values, lr=None, **options):
    {HELPER}
    return p
'''
HOLES = {  # where statements go, and whether a loop is around them
    "INITIALIZE": False, "PREINITIALIZE": True, "STEP": True, "STEP_END": False,
    "CLOSED_FORM": False, "FORWARD": False, "TRACED": False, "MODULE": False,
}


def spliced(template: str, holes: dict[str, list[str]]) -> str:
    """`template` with each `{HOLE}` line replaced by its lines, at the hole's indentation."""
    out = []
    for line in template.splitlines():
        stripped = line.strip()
        if stripped.startswith("{") and stripped[1:-1] in holes:
            margin = line[:len(line) - len(line.lstrip())]
            out.extend(margin + added if added.strip() else added
                       for added in holes[stripped[1:-1]])
        else:
            out.append(line)
    return "\n".join(out) + "\n"


@st.composite
def fuzzed_projects(draw) -> dict[str, str]:
    main = spliced(TEMPLATE, {hole: draw(blocks(MAX_BLOCK_DEPTH, in_loop))
                              for hole, in_loop in HOLES.items()})
    helpers = spliced(HELPERS, {"HELPER": draw(blocks(MAX_BLOCK_DEPTH, False))})
    return {"fuzzed.py": main, "helpers.py": helpers}


def check_template_project(files: dict[str, str]) -> None:
    problems = lint_project(files)
    assert problems == [], "\n\n".join([*problems, *files.values()])


@fuzz_settings(TEMPLATE_EXAMPLES)
@given(fuzzed_projects())
def test_the_checked_shapes_with_statements_spliced_in_are_linted_without_problems(files):
    check_template_project(files)


@pytest.mark.slow
@fuzz_settings(TEMPLATE_EXAMPLES * 10)
@given(fuzzed_projects())
def test_ten_times_more_spliced_shapes_are_linted_without_problems(files):
    check_template_project(files)
