"""`cslint port`: each golden fixture ports to its expected file exactly, a second port
changes nothing, what cannot be rewritten stays and is reported, bad input is one line,
and --verify runs original and port side by side."""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cslint.cli import main
from cslint.config import Config
from cslint.port import port_file
from helpers import FIXTURES

PORT_FIXTURES = sorted((FIXTURES / "port").glob("*.in.py"))


def _golden(source: Path) -> Path:
    return source.with_name(source.name.replace(".in.py", ".out.py"))


@functools.cache
def _port_of_fixture(source: Path):
    """A golden fixture's port, made once for the tests that read it (a port lints the
    file several times)."""
    return port_file(str(source), Config())


@pytest.mark.parametrize("source", PORT_FIXTURES, ids=lambda p: p.name)
def test_each_fixture_ports_to_its_golden_file_exactly(source: Path):
    ported = _port_of_fixture(source)
    assert ported.ported == _golden(source).read_bytes()
    assert all(found.ported for found in ported.classes)
    assert not ported.findings


@pytest.mark.parametrize("source", PORT_FIXTURES, ids=lambda p: p.name)
def test_porting_a_ported_file_again_changes_nothing(source: Path):
    golden = _golden(source)
    assert port_file(str(golden), Config()).ported == golden.read_bytes()


def test_every_fixture_named_in_the_issue_is_there():
    names = {p.name.removesuffix(".in.py") for p in PORT_FIXTURES}
    assert names >= {"adam", "sgd", "rmsprop", "adagrad", "lion", "simple_adam"}


UNPORTABLE = '''\
import torch


class Clipped(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if len(state) == 0:
                    state["buf"] = torch.zeros_like(p)
                # keep this comment
                norm = p.grad.norm()
                if norm > 1e6:  # a tensor-dependent if with a side effect
                    raise FloatingPointError("the gradient diverged")
                state["buf"].add_(p.grad)
                p.add_(state["buf"], alpha=-group["lr"])
'''


# The preinitialize() the port gives a class whose lazily made state stays in step.
UNMOVED = "def preinitialize(self):\n        pass  # step() still makes its state (CS101): move it here\n"


def _only_unmoved_preinitialize(text: str) -> bool:
    return text.count("def preinitialize") == 1 and UNMOVED in text


RENORMALISED_FIRST = '''\
import torch


class Renormed(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    # the first step renormalises the parameter: not state to make
                    p.div_(p.norm().add(1e-8))
                    state["exp_avg"] = torch.zeros_like(p)
                state["exp_avg"].mul_(0.9).add_(p.grad, alpha=0.1)
                p.add_(state["exp_avg"], alpha=-group["lr"])
'''


def test_a_class_whose_state_stays_lazy_gets_a_preinitialize_that_says_so(small_ports):
    """cstorch's preinitialize() is abstract: a class whose state cannot move still gets
    one, so that the port can be constructed; the rest of it runs with the numbers
    unchanged, which verify shows with strict mode off, beside what strict mode stops."""
    code, verdicts = small_ports["renormed.py"]
    text = code.decode()
    assert _only_unmoved_preinitialize(text)
    assert "p.div_(p.norm().add(1e-8))" in text and 'p.add_(-group["lr"] * state["exp_avg"])' in text
    verified = verdicts["Renormed"]
    assert (verified.numbers_equal, verified.strict_clean) == (True, False), verified
    assert "CS101" in verified.problem and "'exp_avg'" in verified.problem, verified


def test_verify_compares_the_numbers_of_a_port_strict_mode_stops(small_ports):
    """The same port with its update changed: strict mode stops it as before, and the
    run with strict mode off finds the other numbers."""
    _, verdicts = small_ports["renormed, other numbers"]
    verified = verdicts["Renormed"]
    assert (verified.numbers_equal, verified.strict_clean) == (False, False), verified
    assert "CS101" in verified.problem and "numbers differ" in verified.problem, verified


COUNT_STARTED_BY_DEFAULTS = '''\
import math

import torch


class OneBasedCount(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01, beta=0.9):
        defaults = {"lr": lr, "beta": beta, "step": 1}
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            if "step" not in group:
                group["step"] = 0
            correction = 1.0 - math.pow(group["beta"], group["step"])
            group["step"] += 1
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.add_(p.grad, alpha=-group["lr"] / correction)
'''


def test_a_group_count_the_defaults_start_starts_at_their_number(small_ports):
    """Prodigy's defaults hold `'step': 1`, so the step's `if "step" not in group:
    group["step"] = 0` never runs: the tensor preinitialize makes starts at 1 (at 0, the
    first bias correction would divide by zero)."""
    code, verdicts = small_ports["onebased.py"]
    text = code.decode()
    assert 'group["step"] = cstorch.full((), 1)\n' in text
    assert 'group["step"] = 0' not in text
    verified = verdicts["OneBasedCount"]
    assert (verified.numbers_equal, verified.strict_clean) == (True, True), verified


@pytest.mark.parametrize("made", [
    "torch.tensor([0.0], device=device)", "torch.tensor(0)", "torch.tensor([1, 1.0])",
    "torch.tensor([2, 2])", "torch.tensor([0], dtype=torch.float32)",
    "torch.zeros(1, device=device)", "torch.zeros((2, 3), dtype=torch.float16)",
    "torch.ones(())", "torch.full((3,), 1, device=device)", "torch.full((), 2.5)"])
def test_a_group_entry_of_constants_is_made_by_cstorch_alike(made: str):
    """What preinitialize makes in place of the step's creation has its shape, dtype and
    numbers (`torch.tensor(0)` is int64, `torch.tensor([1, 1.0])` float32)."""
    import torch

    import cslint.cstorch as cstorch
    from cslint.port.rewrite import _constant_tensor

    ported = _constant_tensor(ast.parse(made, mode="eval").body, "cstorch")
    assert ported is not None and "device" not in ported
    original = eval(made, {"torch": torch, "device": torch.device("cpu")})  # noqa: S307
    again = eval(ported, {"torch": torch, "cstorch": cstorch})  # noqa: S307
    assert (again.shape, again.dtype) == (original.shape, original.dtype), ported
    assert torch.equal(again, original), ported


def test_a_lazy_group_entry_stays_where_the_class_asks_whether_a_group_has_it(
        tmp_path: Path):
    """Made in preinitialize, the entry would be in every group from the start: code
    that asks for it (`group.get("k")`, `"k" in group`) would take another path. Nor
    does an entry made from more than constants move."""
    source = (FIXTURES / "port" / "group_lazy_entry.in.py").read_text()
    asked = source.replace('        gradient_sum = group["gradient_sum"]\n',
                           '        gradient_sum = group.get("gradient_sum")\n')
    made_from_values = source.replace(
        'group["steps_seen"] = torch.zeros(1, dtype=torch.float32, device=device)',
        'group["steps_seen"] = torch.tensor([0.0, 1.0], device=device)')
    assert asked != source and made_from_values != source
    for name, text, stays in (("asked.py", asked, '"gradient_sum" not in group'),
                              ("values.py", made_from_values, '"steps_seen" not in group')):
        path = tmp_path / name
        path.write_text(text)
        ported = port_file(str(path), Config())
        assert stays in ported.ported.decode(), name
        assert "CS101" in ported.classes[0].remaining, name


SLOW_WEIGHTS_AFTER_THE_INNER_STEP = '''\
from collections import defaultdict

import torch
from torch.optim import Optimizer


class SlowWeights(Optimizer):
    def __init__(self, optimizer, alpha=0.5):
        self.optimizer = optimizer
        self.alpha = alpha
        self.param_groups = optimizer.param_groups
        self.state = defaultdict(dict)
        self.defaults = dict(optimizer.defaults)

    def _average(self, group):
        for fast in group["params"]:
            param_state = self.state[fast]
            if "slow_param" not in param_state:
                param_state["slow_param"] = torch.clone(fast.data).detach()
            slow = param_state["slow_param"]
            fast.data.mul_(self.alpha).add_(slow, alpha=1.0 - self.alpha)
            slow.data.copy_(fast)

    def step(self, closure=None):
        loss = self.optimizer.step(closure=closure)
        for group in self.param_groups:
            self._average(group)
        return loss
'''


def test_state_made_from_the_parameters_after_the_wrapped_step_stays_lazy(tmp_path: Path):
    """torch-optimizer's Lookahead clones the parameters after the optimizer it wraps has
    stepped: preinitialize would clone them before, and the first average would pull
    the parameters back (the numbers would change). The state stays, listed; without the
    wrapped step first, the same clone moves."""
    path = tmp_path / "slow.py"
    path.write_text(SLOW_WEIGHTS_AFTER_THE_INNER_STEP)
    ported = port_file(str(path), Config())
    text = ported.ported.decode()
    assert 'if "slow_param" not in param_state:' in text
    assert _only_unmoved_preinitialize(text)
    assert "CS101" in ported.classes[0].remaining
    before = tmp_path / "before.py"
    before.write_text(SLOW_WEIGHTS_AFTER_THE_INNER_STEP.replace(
        "        loss = self.optimizer.step(closure=closure)\n", "").replace(
        "        return loss\n", "        return self.optimizer.step(closure=closure)\n"))
    text = port_file(str(before), Config()).ported.decode()
    assert 'if "slow_param" not in param_state:' not in text
    assert 'param_state["slow_param"] = torch.clone(fast.data).detach()' in \
        text[text.index("def preinitialize"):]


STEP_KEPT_IN_A_CACHE = '''\
import math

import torch
from torch.optim import Optimizer


class CachedCorrection(Optimizer):
    def __init__(self, params, lr=0.01, beta=0.9):
        super().__init__(params, dict(lr=lr, beta=beta, buffer=[[None, None] for _ in range(2)]))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                state["step"] += 1
                state["exp_avg"].mul_(group["beta"]).add_(p.grad, alpha=1 - group["beta"])
                buffered = group["buffer"][int(state["step"] % 2)]
                if state["step"] == buffered[0]:
                    correction = buffered[1]
                else:
                    buffered[0] = state["step"]
                    correction = 1 - group["beta"] ** state["step"]
                    buffered[1] = correction
                p.add_(state["exp_avg"], alpha=-group["lr"] / correction)
'''


# The cache's slot read again after the `if`: the memo is more than a memo there.
STEP_KEPT_IN_A_READ_CACHE = STEP_KEPT_IN_A_CACHE.replace(
    "CachedCorrection", "ReadCache").replace(
    'alpha=-group["lr"] / correction)', 'alpha=-group["lr"] / buffered[1])')


def test_a_memo_of_values_by_step_goes_and_its_computation_runs_every_step(small_ports):
    """RAdam's cache of corrections by step (`buffered = group["buffer"][int(step %
    10)]`; `if step == buffered[0]:` read them back, else compute and store them) saves
    work the graph does anyway: the port computes them every step, and the cache's
    host-side test and index go. The numbers are the original's, strict mode passes."""
    code, verdicts = small_ports["cached.py"]
    text = code.decode()
    assert "buffered" not in text
    assert '                correction = 1 - group["beta"] ** state["step"]\n' in text
    verified = verdicts["CachedCorrection"]
    assert (verified.numbers_equal, verified.strict_clean) == (True, True), verified


@pytest.mark.parametrize("change", [
    # the slot keeps another key than the one it is tested with
    ('buffered[0] = state["step"]', 'buffered[0] = state["step"] + 1'),
    # the computation changes a tensor: running it at every step does more than a hit
    ('correction = 1 - group["beta"] ** state["step"]\n',
     'correction = 1 - group["beta"] ** state["step"]\n'
     '                    state["exp_avg"].mul_(1.0)\n'),
    # the slot is read again before it is taken (a pass of the loop reads the last one)
    ('state["step"] += 1\n', 'state["step"] += 1\n                last = buffered\n'),
])
def test_a_memo_that_is_more_than_a_memo_stays(tmp_path: Path, change):
    """The memo goes only where the slot keeps the key it is tested with, the `else`
    only binds names, and nothing but the `if` and the line above it reads the slot."""
    old, new = change
    assert old in STEP_KEPT_IN_A_CACHE
    path = tmp_path / "memo.py"
    path.write_text(STEP_KEPT_IN_A_CACHE.replace(old, new, 1))
    text = port_file(str(path), Config()).ported.decode()
    assert "if state[\"step\"] == buffered[0]:" in text


@pytest.mark.parametrize("change", [
    # the flag read twice: each `if first:` would become a test of its own
    ("                g = p.grad", "                if first:\n"
     "                    norm = norm * 1.0\n                g = p.grad"),
    # the state changed between the flag and its test
    ("                norm = p.grad.pow(2).sum()\n",
     "                norm = p.grad.pow(2).sum()\n                state.clear()\n"),
    # the entry `.get` gives read before its test
    ('                if buf is None:\n', '                p.mul_(0.5 if buf is None else 1.0)\n'
     '                if buf is None:\n'),
    # made without binding the name, then read after the `if`: None there on the first step
    ('                    buf = state["momentum_buffer"] = p.grad.clone()',
     '                    state["momentum_buffer"] = p.grad.clone()'),
])
def test_a_first_step_test_written_otherwise_stays_where_it_is_more(tmp_path: Path, change):
    """A flag (`first = len(state) == 0`) becomes its test only where `if first:` is its
    one use and nothing changes the state between them; an entry read with `.get` only
    where nothing but its test, the branch making it and the `else` reads the name, and
    the branch making it binds it where it is read after."""
    source = (FIXTURES / "port" / "lazy_tests.in.py").read_text()
    old, new = change
    assert old in source
    path = tmp_path / "lazy.py"
    path.write_text(source.replace(old, new, 1))
    text = port_file(str(path), Config()).ported.decode()
    assert ("first = len(state) == 0" in text) if "first" in old + new or "clear" in new \
        else ('buf = state.get("momentum_buffer")' in text)


TWO_FIRST_STEP_PATHS = '''\
import torch
from torch.optim import Optimizer


class TwoPaths(Optimizer):
    def __init__(self, params, lr=0.01, momentum=0.9, batched=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, batched=batched))

    def _batched_buffers(self, group):
        buffers, firsts = [], []
        for p in group["params"]:
            state = self.state[p]
            first_step = "momentum_buffer" not in state
            if first_step:
                state["momentum_buffer"] = torch.empty_like(p)
            buffers.append(state["momentum_buffer"])
            firsts.append(first_step)
        return buffers, firsts

    def _one_by_one(self, group):
        for p in group["params"]:
            state = self.state[p]
            {lazy}
                buf = state["momentum_buffer"] = p.grad.clone()
            else:
                {bound}buf.mul_(group["momentum"]).add_(p.grad)
            p.add_(buf, alpha=-group["lr"])

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            if group["batched"]:
                buffers, firsts = self._batched_buffers(group)
                for p, buf, first in zip(group["params"], buffers, firsts):
                    if first:
                        buf.copy_(p.grad)
                    else:
                        buf.mul_(group["momentum"]).add_(p.grad)
                    p.add_(buf, alpha=-group["lr"])
            else:
                self._one_by_one(group)
'''


@pytest.mark.parametrize("lazy, bound", [
    ('buf = state.get("momentum_buffer")\n            if buf is None:', ""),
    ('if "momentum_buffer" not in state:',
     'buf = state["momentum_buffer"]\n                '),
])
def test_state_another_path_makes_under_its_own_first_step_test_stays_lazy(
        tmp_path: Path, lazy, bound):
    """A second path that makes the same entry under its own test of whether the state
    has it (pytorch-optimizer's SGDW: a foreach path recording `first_step =
    "momentum_buffer" not in state` for its first update) would never take its first
    step's branch again once preinitialize makes the entry: the state stays lazy, listed,
    and the `.get` form is left as written."""
    source = TWO_FIRST_STEP_PATHS.format(lazy=lazy, bound=bound)
    ast.parse(source)
    path = tmp_path / "two_paths.py"
    path.write_text(source)
    ported = port_file(str(path), Config())
    text = ported.ported.decode()
    assert [(c.name, c.remaining) for c in ported.classes] == [("TwoPaths", ("CS101",))]
    assert "first_step = \"momentum_buffer\" not in state" in text
    assert lazy.splitlines()[0] in text


def test_a_step_count_kept_elsewhere_is_kept_as_a_copy(small_ports):
    """The count becomes one tensor the global step counts in place: a cache of
    corrections by step whose slot is read again later stays, and storing the step in it
    (`buffered[0] = state["step"]`) would hold that tensor, equal to the step at every
    later step, and give a stale correction: it keeps a copy. What the cache does on
    the host stays, listed; with strict mode off the numbers are the original's."""
    code, verdicts = small_ports["read_cache.py"]
    text = code.decode()
    assert 'buffered[0] = state["step"].clone()' in text
    verified = verdicts["ReadCache"]
    assert (verified.numbers_equal, verified.strict_clean) == (True, False), verified


def test_what_cannot_be_rewritten_stays_and_is_listed_with_its_code(tmp_path: Path):
    path = tmp_path / "clipped.py"
    path.write_text(UNPORTABLE)
    ported = port_file(str(path), Config())
    text = ported.ported.decode()
    ast.parse(text)
    assert "def preinitialize(self):" in text
    assert "if norm > 1e6:  # a tensor-dependent if with a side effect" in text
    assert "# keep this comment" in text
    assert [(c.name, c.remaining) for c in ported.classes] == [("Clipped", ("CS201",))]
    path.write_bytes(ported.ported)
    assert port_file(str(path), Config()).ported == ported.ported


def test_the_command_prints_the_diff_writes_nothing_and_exits_1_when_codes_remain(
        tmp_path: Path):
    path = tmp_path / "clipped.py"
    path.write_text(UNPORTABLE)
    result = CliRunner().invoke(main, ["port", str(path)])
    assert result.exit_code == 1
    assert "+    def preinitialize(self):" in result.stdout
    assert f"{path}: Clipped: not ported, remaining CS201" in result.stderr
    assert path.read_text() == UNPORTABLE


def test_write_rewrites_the_file_and_a_second_write_changes_nothing(tmp_path: Path):
    path = tmp_path / "lion.py"
    path.write_bytes((FIXTURES / "port" / "lion.in.py").read_bytes())
    first = CliRunner().invoke(main, ["port", "--write", str(path)])
    assert first.exit_code == 0, first.output
    assert path.read_bytes() == (FIXTURES / "port" / "lion.out.py").read_bytes()
    second = CliRunner().invoke(main, ["port", str(path)])
    assert second.exit_code == 0 and second.stdout == ""


def test_state_names_to_sparsify_is_generated_for_releases_before_2_5(tmp_path: Path):
    path = tmp_path / "adam.py"
    path.write_bytes((FIXTURES / "port" / "adam.in.py").read_bytes())
    result = CliRunner().invoke(main, ["port", "--write", "--cstorch-version", "2.4", str(path)])
    assert result.exit_code == 0, result.output
    assert ("    def state_names_to_sparsify(self):\n"
            "        return ['exp_avg', 'exp_avg_sq', 'max_exp_avg_sq']\n") in path.read_text()


def test_runtime_reference_imports_cslint_cstorch(tmp_path: Path):
    path = tmp_path / "sgd.py"
    path.write_bytes((FIXTURES / "port" / "sgd.in.py").read_bytes())
    port_text = port_file(str(path), Config(), runtime_reference=True).ported.decode()
    assert "import cslint.cstorch as cstorch\n" in port_text
    assert "cerebras" not in port_text


def test_a_file_that_does_not_parse_is_one_line_and_exit_2(tmp_path: Path):
    broken = tmp_path / "broken.py"
    broken.write_text("class A(:\n")
    good = tmp_path / "lion.py"
    good.write_bytes((FIXTURES / "port" / "lion.in.py").read_bytes())
    result = CliRunner().invoke(main, ["port", str(broken), str(good), "--format", "json"])
    assert result.exit_code == 2
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 1 and str(broken) in errors[0] and "Traceback" not in result.output
    assert [entry["class"] for entry in json.loads(result.stdout)] == ["Lion"]


def test_a_missing_path_is_one_line_and_exit_2(tmp_path: Path):
    result = CliRunner().invoke(main, ["port", str(tmp_path / "missing.py")])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"cslint: error: {tmp_path / 'missing.py'}: no such file " \
                                    "or folder"


def test_verify_reports_each_golden_fixture_equal_and_strict_clean():
    from cslint.port.verify import ABSTRACT, verify_ports

    names = [sorted(c.name for c in _port_of_fixture(source).classes)
             for source in PORT_FIXTURES]
    verified = verify_ports([(str(source), _golden(source).read_bytes(), classes)
                             for source, classes in zip(PORT_FIXTURES, names)], steps=8)
    for source, classes, results in zip(PORT_FIXTURES, names, verified):
        concrete = [n for n in classes if results[n].problem != ABSTRACT]
        assert {n: (results[n].numbers_equal, results[n].strict_clean) for n in concrete} == \
            {n: (True, True) for n in concrete}, (source.name, results)


def test_verify_compares_only_the_options_the_original_runs(tmp_path: Path):
    """An option the original itself cannot run here (timm's `capturable=True`, which
    wants a GPU) is not held against the port: it is named, the others are compared."""
    from cslint.port.verify import verify_port

    source = tmp_path / "gpu_only.py"
    source.write_text(
        (FIXTURES / "port" / "lion.in.py").read_text()
        .replace("def step(self, closure=None):",
                 "def step(self, closure=None):\n"
                 "        if self.capturable:\n"
                 "            raise AssertionError('capturable=True needs a GPU')")
        .replace("super().__init__(params, defaults)",
                 "super().__init__(params, defaults)\n        self.capturable = capturable"))
    assert "self.capturable" in source.read_text()
    text = source.read_text()
    signature = text[text.index("def __init__(self"):text.index("):", text.index("def __init__(self"))]
    source.write_text(text.replace(signature, signature + ", capturable=False"))
    ported = port_file(str(source), Config())
    assert ported.ported != source.read_bytes() and not ported.findings
    verified = verify_port(str(source), ported.ported, ["Lion"], steps=8)["Lion"]
    assert (verified.numbers_equal, verified.strict_clean) == (True, True)
    assert verified.problem.startswith("not compared: the original's step fails with "
                                       "capturable=True: AssertionError")
    # A port that fails where the original runs still fails.
    broken = ported.ported.replace(b"if self.capturable:", b"if not self.capturable:")
    failed = verify_port(str(source), broken, ["Lion"], steps=8)["Lion"]
    assert failed.numbers_equal is False and failed.problem.startswith("the port's step fails")


_FLAGGED_GROUPS = """
import torch
from torch.optim import Optimizer


class SplitSign(Optimizer):
    \"\"\"Sign steps for the groups flagged `use_sign`, SGD for the others (the way
    Muon's groups are given).\"\"\"

    def __init__(self, params, lr=0.01):
        params = list(params)
        for group in params:
            if "use_sign" not in group:
                raise ValueError("`use_sign` must be set.")
            if group["use_sign"]:
                group["lr"] = group.get("lr", lr) / 10
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                update = torch.sign(p.grad) if group["use_sign"] else p.grad
                p.add_(update, alpha=-group["lr"])
"""


def test_verify_gives_flagged_param_groups_to_a_class_that_requires_them(tmp_path: Path):
    """A constructor that wants a flag in every param group (Muon's `use_muon`) cannot
    take a plain list of parameters: verify runs it with a group of each flag value."""
    from cslint.port.verify import verify_ports

    source = tmp_path / "split_sign.py"
    source.write_text(_FLAGGED_GROUPS)
    ported = port_file(str(source), Config())
    assert ported.ported != source.read_bytes() and not ported.findings
    # Tested for but not a flag the constructor branches on: the failure is reported.
    unflagged = tmp_path / "split_sign_unflagged.py"
    unflagged.write_text(_FLAGGED_GROUPS.replace(
        'if group["use_sign"]:\n                group',
        'if group.get("use_sign"):\n                group'))
    assert unflagged.read_text() != _FLAGGED_GROUPS
    # A port that changes the flagged groups' update only.
    wrong = ported.ported.replace(b"torch.sign(p.grad)", b"torch.sign(p.grad) * 2")
    assert wrong != ported.ported
    runs = verify_ports([(str(source), ported.ported, ["SplitSign"]),
                         (str(unflagged), port_file(str(unflagged), Config()).ported,
                          ["SplitSign"]),
                         (str(source), wrong, ["SplitSign"])], steps=8)
    right, refused, caught = (run["SplitSign"] for run in runs)
    assert (right.numbers_equal, right.strict_clean, right.problem) == (True, True, None)
    assert refused.numbers_equal is None
    assert refused.problem.startswith("the original fails with the defaults: ")
    assert caught.numbers_equal is False


def test_verify_finds_a_port_that_changes_the_numbers(small_ports):
    """And says from which step (the changed momentum update shows from the second), and
    where the port is furthest from the original."""
    _, verdicts = small_ports["lion, other numbers"]
    assert verdicts["Lion"].numbers_equal is False
    assert re.fullmatch(r"numbers differ with the defaults from step 2: the \([\d, ]+\) "
                        r"parameter is \S+ against \S+ \(\|a-b\| <= \S+ is equal\)",
                        verdicts["Lion"].problem), verdicts["Lion"].problem


def test_verify_finds_a_port_that_strict_mode_stops(small_ports):
    code, verdicts = small_ports["lion, lr read on the host"]
    assert code != _golden(FIXTURES / "port" / "lion.in.py").read_bytes()
    assert verdicts["Lion"].strict_clean is False


def test_verify_finds_a_port_whose_graph_changes_between_steps(small_ports):
    """A step count left a Python number: numbers equal, no host read, but each step
    records another graph (CS501), which the system does not allow."""
    code, verdicts = small_ports["group step, a Python count"]
    assert code != _golden(FIXTURES / "port" / "group_step.in.py").read_bytes()
    assert verdicts["GroupStepAdam"].strict_clean is False
    assert verdicts["GroupStepAdam"].strict_codes == ("CS501",)


def test_the_verify_command_prints_one_json_object_per_class():
    result = subprocess.run([sys.executable, "-m", "cslint", "port", "--verify", "--format",
                             "json", str(FIXTURES / "port" / "sgd.in.py")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [{
        "path": str(FIXTURES / "port" / "sgd.in.py"), "class": "SGD", "ported": True,
        "numbers_equal": True, "strict_clean": True, "remaining": []}]


GRADIENT_INITIALISED = '''\
import torch


class Averaged(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def init_group(self, group):
        for p in group["params"]:
            grad = p.grad
            state = self.state[p]
            if len(state) == 0:
                state["average"] = grad.clone()

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            self.init_group(group)
            for p in group["params"]:
                self.state[p]["average"].lerp_(p.grad, 0.1)
                p.add_(self.state[p]["average"], alpha=-group["lr"])
'''


def test_state_a_helper_makes_from_the_first_gradient_takes_its_values_on_the_first_step(
        tmp_path: Path):
    """preinitialize makes it zeros like the parameter, with a flag of the parameter's
    state; the helper computes the first value each step and selects it on the first."""
    path = tmp_path / "averaged.py"
    path.write_text(GRADIENT_INITIALISED)
    ported = port_file(str(path), Config())
    text = ported.ported.decode()
    assert """\
            first_step = state["initialised"] == 0
            first_average = grad.clone()
            state["average"].copy_(torch.where(
                first_step, first_average, state["average"]))
            state["initialised"].fill_(1.0)
""" in text
    assert """\
                state["average"] = cstorch.zeros_like(p)
                state["initialised"] = cstorch.zeros(())
""" in text
    assert [(c.name, c.remaining) for c in ported.classes] == [("Averaged", ())]


FIRST_VALUES_LEFT_ALONE = '''\
import torch


class NotLikeTheParameter(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                state = self.state[p]
                if len(state) == 0:
                    state["rows"] = grad.sum(dim=-1, keepdim=True)
                state["rows"].mul_(0.9).add_(grad.sum(dim=-1, keepdim=True))
                p.add_(-group["lr"] * grad / state["rows"])


class TwoChecks(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                state = self.state[p]
                if "m" not in state:
                    state["m"] = grad.clone()
                if "v" not in state:
                    state["v"] = grad.square()
                state["m"].lerp_(grad, 0.1)
                state["v"].lerp_(grad.square(), 0.01)
                p.add_(-group["lr"] * state["m"] / (state["v"].sqrt() + 1e-8))


class ReadsOtherState(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                state = self.state[p]
                if len(state) == 0:
                    state["m"] = grad.clone()
                    state["m"].mul_(state["scale"])
                p.add_(-group["lr"] * state["m"])
'''


def test_first_values_not_shaped_like_the_parameter_or_read_with_other_state_stay(
        tmp_path: Path):
    """Only state shaped like the parameter or 0-dim (not a sum along a dimension),
    changed afterwards only in place by calls that read no other state, takes its first
    values by selection; the
    others stay as they were, listed as CS101. Two checks get a flag each."""
    path = tmp_path / "first_values.py"
    path.write_text(FIRST_VALUES_LEFT_ALONE)
    ported = port_file(str(path), Config())
    text = ported.ported.decode()
    assert {c.name: "CS101" in c.remaining for c in ported.classes} == \
        {"NotLikeTheParameter": True, "TwoChecks": False, "ReadsOtherState": True}
    two_checks = text[text.index("class TwoChecks"):text.index("class ReadsOtherState")]
    assert 'state["m_initialised"] = cstorch.zeros(())' in two_checks
    assert 'state["v_initialised"] = cstorch.zeros(())' in two_checks
    assert two_checks.count("first_step = ") == 2
    assert 'state["rows"] = grad.sum(dim=-1, keepdim=True)' in text and 'state["m"].mul_(state["scale"])' in text


FIRST_STEP_ELSE_LEFT_ALONE = '''\
import torch


class ElseUpdatesZeros(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                state = self.state[p]
                if len(state) == 0:
                    state["m"] = grad.clone()
                    state["v"] = torch.zeros_like(p)
                else:
                    state["m"].lerp_(grad, 0.1)
                    state["v"].lerp_(grad.square(), 0.01)
                p.add_(-group["lr"] * state["m"] / (state["v"].sqrt() + 1e-8))


class ElseChangesTheParameter(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                state = self.state[p]
                if len(state) == 0:
                    state["m"] = grad.clone()
                else:
                    state["m"].lerp_(grad, 0.1)
                    p.mul_(0.99)
                p.add_(-group["lr"] * state["m"])


class LocalReadAfter(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                state = self.state[p]
                buf = grad
                if "buf" not in state:
                    buf = grad.clone()
                    state["buf"] = buf
                else:
                    state["buf"].mul_(0.9).add_(grad)
                p.add_(-group["lr"] * buf)


class LocalReadAfterNoElse(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                state = self.state[p]
                buf = grad
                if "buf" not in state:
                    buf = grad.clone()
                    state["buf"] = buf
                state["buf"].mul_(0.9).add_(grad)
                p.add_(-group["lr"] * buf)
'''


def test_a_first_step_with_an_else_that_does_more_than_update_its_state_stays(
        tmp_path: Path):
    """The `else` runs on every step in the port: only where it changes nothing but the
    state the first step takes values for (not state made as zeros, not the parameter),
    and where a local the check binds to the new state is the entry either way after
    it. The others stay, listed as CS101."""
    path = tmp_path / "first_step_else.py"
    path.write_text(FIRST_STEP_ELSE_LEFT_ALONE)
    ported = port_file(str(path), Config())
    text = ported.ported.decode()
    assert {c.name: "CS101" in c.remaining for c in ported.classes} == {
        "ElseUpdatesZeros": True, "ElseChangesTheParameter": True, "LocalReadAfter": True,
        "LocalReadAfterNoElse": True}
    assert text.count("else:") == 3 and "first_step" not in text


LEAVING_EARLY_LEFT_ALONE = '''\
import torch


class NestedLeave(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if len(state) == 0:
                    state["m"] = torch.zeros_like(p)
                norm = p.grad.norm()
                if group["lr"] > 0:
                    if norm > 1.0:
                        state["m"].zero_()
                        continue
                state["m"].add_(p.grad)
                p.add_(-group["lr"] * state["m"])


class TwoWaysOut(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if len(state) == 0:
                    state["m"] = torch.zeros_like(p)
                norm = p.grad.norm()
                if norm > 1.0:
                    state["m"].zero_()
                    if group["lr"] > 1.0:
                        break
                    continue
                state["m"].add_(p.grad)
                p.add_(-group["lr"] * state["m"])
'''


def test_a_tensor_test_that_leaves_its_block_stays_unless_the_rest_is_its_else(
        tmp_path: Path):
    """`if t: ...; continue` is read as `if t: ... / else: <the rest>` only at the top
    of the loop's body (nested in an option's `if`, the rest runs where the option is
    false too) and where the work has no other way out (`break`)."""
    path = tmp_path / "leaving.py"
    path.write_text(LEAVING_EARLY_LEFT_ALONE)
    ported = port_file(str(path), Config())
    text = ported.ported.decode()
    assert [(c.name, c.remaining) for c in ported.classes] == [
        ("NestedLeave", ("CS201",)), ("TwoWaysOut", ("CS201",))]
    assert text.count("continue") == 2 and "torch.where" not in text


WRITTEN_STATE_LEFT_ALONE = '''\
import torch


class ReadNextStep(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                grad = p.grad
                if "previous" in state:
                    grad = grad + 0.5 * state["previous"]
                p.add_(-group["lr"] * grad)
                state["previous"] = p.grad.clone()


class ShapeNotKnown(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["rows"] = p.grad.sum(dim=-1)
                p.add_(-group["lr"] * p.grad)


class OneWriteUnknown(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1, by_rows=False):
        super().__init__(params, dict(lr=lr, by_rows=by_rows))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if group["by_rows"]:
                    state["norm"] = p.grad.norm(dim=-1)
                else:
                    state["norm"] = p.grad.norm()
                p.add_(-group["lr"] * p.grad)


class ChangedAfter(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                norm = p.grad.norm()
                state["norm"] = norm
                norm.clamp_(min=1e-8)
                p.add_(-group["lr"] * p.grad / norm)
'''


def test_state_written_each_step_stays_where_its_entry_is_read_or_its_shape_unknown(
        tmp_path: Path):
    """An entry written afresh at each step is made in preinitialize and copied into
    only where nothing asks whether it is there (the first step reads no previous
    value), the value's shape is known (at every place that writes it), and the copy
    holds what the entry held (the local is not changed in place after)."""
    path = tmp_path / "written.py"
    path.write_text(WRITTEN_STATE_LEFT_ALONE)
    ported = port_file(str(path), Config())
    text = ported.ported.decode()
    assert {c.name: "CS101" in c.remaining for c in ported.classes} == {
        "ReadNextStep": True, "ShapeNotKnown": True, "OneWriteUnknown": True,
        "ChangedAfter": True}
    assert ".copy_(" not in text


SHAPES_LEFT_ALONE = '''\
import torch


class ShapeUsedAfter(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if len(state) == 0:
                    shape = list(p.shape)
                    if p.dim() >= 2:
                        shape[-1] = 1
                    state["scale"] = p.new_zeros(shape)
                state["scale"].add_(p.grad.square().mean(dim=-1, keepdim=True) if p.dim() >= 2
                                    else p.grad.square())
                p.sub_(group["lr"] * p.grad / (state["scale"].sqrt() + 1e-8))


class TestOfTheGradient(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                state = self.state[p]
                if len(state) == 0:
                    shape = list(p.shape)
                    if grad.abs().max() > 1.0:
                        shape[0] = 1
                    state["scale"] = p.new_zeros(shape)
                state["scale"].add_(grad.square().mean())
                p.sub_(group["lr"] * grad)
'''


def test_shapes_a_check_computes_move_with_it_but_not_when_step_or_values_need_them(
        tmp_path: Path):
    """The check's own work on the shapes of its creations (`shape[0] = 1` under `if
    p.dim() >= 2:`) moves with them (golden `port/shaped_state`); not a name step reads
    after the check (in another class, `shape` would be read before it is bound), nor a
    test of the gradient's values, which preinitialize does not have."""
    path = tmp_path / "shapes.py"
    path.write_text(SHAPES_LEFT_ALONE.replace(
        'state["scale"].add_(p.grad.square().mean(dim=-1, keepdim=True) if p.dim() >= 2',
        'state["scale"].add_(p.grad.square().mean(dim=-1, keepdim=True) if len(shape) >= 2'))
    ported = port_file(str(path), Config())
    assert {c.name: "CS101" in c.remaining for c in ported.classes} == \
        {"ShapeUsedAfter": True, "TestOfTheGradient": True}
    path.write_text(SHAPES_LEFT_ALONE)
    ported = port_file(str(path), Config())
    assert {c.name: "CS101" in c.remaining for c in ported.classes} == \
        {"ShapeUsedAfter": False, "TestOfTheGradient": True}
    assert "if grad.abs().max() > 1.0:" in ported.ported.decode()


REBOUND_EACH_STEP = '''\
import torch


class Averaged(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1, betas=(0.5, 0.9)):
        super().__init__(params, dict(lr=lr, betas=betas))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if len(state) == 0:
                    state["buffers"] = {beta: torch.zeros_like(p) for beta in group["betas"]}
                    state["lr_sum"] = 0.0
                state["lr_sum"] = state["lr_sum"] + group["lr"]
                for beta, buffer in state["buffers"].items():
                    buffer.mul_(beta).add_(p.grad)
                    p.sub_(buffer * group["lr"])
'''


def test_checked_creations_move_and_a_number_accumulated_each_step_becomes_a_tensor(
        tmp_path: Path):
    """A Python number the step replaces each time with a tensor (the lr's sum: CS102)
    is made a 0-dim tensor in preinitialize and updated in place."""
    path = tmp_path / "averaged.py"
    path.write_text(REBOUND_EACH_STEP)
    ported = port_file(str(path), Config())
    text = ported.ported.decode()
    ast.parse(text)
    preinitialize = text[text.index("def preinitialize"):text.index("def step")]
    # The comprehension's own variable is not a name preinitialize lacks.
    assert '{beta: torch.zeros_like(p) for beta in group["betas"]}' in preinitialize
    assert 'state["lr_sum"] = cstorch.zeros(())' in preinitialize
    assert "if len(state) == 0" not in text
    assert 'state["lr_sum"].copy_(state["lr_sum"] + group["lr"])' in text
    assert [(c.name, c.remaining) for c in ported.classes] == [("Averaged", ())]
    path.write_bytes(ported.ported)
    assert port_file(str(path), Config()).ported == ported.ported


def test_the_bundled_example_ports_into_its_placeholder_preinitialize(tmp_path: Path):
    """examples/simple_adam.py already has `def preinitialize(self): pass`: the creations
    take the place of the `pass`, and the port is clean and settles."""
    path = tmp_path / "simple_adam.py"
    path.write_bytes((Path(__file__).parents[1] / "examples" / "simple_adam.py").read_bytes())
    first = CliRunner().invoke(main, ["port", "--write", str(path)])
    assert first.exit_code == 0, first.output
    ported = path.read_text()
    preinitialize = next(node for node in ast.walk(ast.parse(ported))
                         if isinstance(node, ast.FunctionDef) and node.name == "preinitialize")
    assert not any(isinstance(statement, ast.Pass) for statement in preinitialize.body)
    assert 'state["m"] = cstorch.zeros_like(p)' in ported
    assert "len(state) == 0" not in ported
    second = CliRunner().invoke(main, ["port", str(path)])
    assert second.exit_code == 0 and second.stdout == ""
    checked = CliRunner().invoke(main, ["check", "--no-cache", str(path)])
    assert checked.exit_code == 0, checked.output


SHARED_HELPER = '''\
import math

from torch.optim import Optimizer


class Base(Optimizer):
    @staticmethod
    def debias(beta: float, step: int) -> float:
        return 1.0 - math.pow(beta, step)
'''

HELPED_OPTIMIZER = '''\
import math

import torch

from pkg.base import Base


class Decayed(Base):
    def __init__(self, params, lr=0.1, beta=0.9):
        super().__init__(params, dict(lr=lr, beta=beta))

    def init_group(self, group):
        if "step" not in group:
            group["step"] = 0

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            self.init_group(group)
            group["step"] += 1
            correction = self.debias(group["beta"], group["step"])
            scale = math.sqrt(self.debias(group["beta"], group["step"]))
            for p in group["params"]:
                if p.grad is not None:
                    p.sub_(group["lr"] * correction / scale * p.grad)
'''


def test_a_shared_helper_is_ported_for_what_its_ported_callers_pass(tmp_path: Path):
    """The helper's file alone has nothing to port: its callers pass Python numbers.
    Once their step count is a tensor, `math.pow` of it reads it on the host; each file
    is ported seeing the others' ports, so the helper becomes `beta ** step`, and
    `math.sqrt` of what it returns (a finding at the helper call) `torch.sqrt`."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text(SHARED_HELPER)
    (package / "decayed.py").write_text(HELPED_OPTIMIZER)
    result = CliRunner().invoke(main, ["port", "--write", str(package)])
    assert "1.0 - beta ** step" in (package / "base.py").read_text(), result.output
    assert 'group["step"] = cstorch.zeros(())' in (package / "decayed.py").read_text()
    assert 'torch.sqrt(self.debias(group["beta"], group["step"]))' in \
        (package / "decayed.py").read_text(), result.output
    ported = {path.name: path.read_bytes() for path in package.iterdir()}
    again = CliRunner().invoke(main, ["port", "--write", str(package)])
    assert {path.name: path.read_bytes() for path in package.iterdir()} == ported, again.output


SELECTIONS_LEFT_ALONE = '''\
import torch
import cerebras.pytorch as cstorch


class Picky(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def preinitialize(self):
        for p in self._params():
            self.state[p]["a"] = cstorch.zeros_like(p)
            self.state[p]["b"] = cstorch.zeros_like(p)

    def _params(self):
        return [p for group in self.param_groups for p in group["params"]]

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                norm = p.grad.norm()
                if norm > 1:  # an alias: updated in place below
                    buffer = state["a"]
                else:
                    buffer = state["b"]
                buffer.add_(p.grad)
                if norm > 2:
                    scale = p.grad.mul_(2).sum()
                else:
                    scale = norm * 1.0
                if norm > 3:
                    shrink = norm * 0.5  # clipped
                else:
                    shrink = norm * 1.0
                if norm > 4:
                    unbound = norm * 0.25
                if norm > 5:  # an in-place op in an argument
                    p.add_(p.grad.mul_(2))
                else:
                    p.sub_(p.grad)
                # a value the step sets further down, for the next step
                if norm > 7:
                    carried = group["gamma"] * norm
                else:
                    carried = norm * 1.0
                group["gamma"] = 0.5
                kept = norm * 1.0
                # both lines would test `kept`, which the first one sets
                if kept > 2:
                    kept = norm * 0.5
                    other = kept * 2.0
                else:
                    kept = norm * 0.25
                    other = kept * 4.0
                # an entry read as it is, changed in place below: a copy would not follow
                if norm > 8:
                    limit = norm * 0.5
                else:
                    limit = state["b"]
                state["b"].mul_(0.9)
                # an entry whose alias is changed in place
                if norm > 9:
                    cap = norm * 0.5
                else:
                    cap = group["cap"]
                ceiling = group["cap"]
                ceiling.clamp_(max=1.0)
                p.sub_(group["lr"] * scale * shrink * carried * kept * other * buffer * limit * cap)
'''


def test_a_tensor_if_that_is_not_a_pure_selection_of_one_value_stays(tmp_path: Path):
    """The statement `if` becomes torch.where only where both values are computed afresh
    and free of side effects, with an `else`, and no comment beside code inside: an alias
    of state (updated in place later), an in-place op, such a comment, a missing `else`
    for a name
    not bound above all stay; so
    do in-place additions whose argument is changed in place, a branch reading a value
    the step sets further down (it may not be set before the first step ends), and
    names assigned by branches whose test reads one of them; nor an entry read as it is
    in a branch where it, or a name bound to it, is changed in place."""
    path = tmp_path / "picky.py"
    path.write_text(SELECTIONS_LEFT_ALONE)
    ported = port_file(str(path), Config())
    assert ported.ported == path.read_bytes()
    assert sorted(f.location.line for f in ported.findings if f.code == "CS201") == \
        [23, 28, 32, 36, 38, 43, 50, 57, 63]


FIRST_STEP_CHOICE = '''\
import torch
import cerebras.pytorch as cstorch


def _update(p, grad, last_grad, step):
    if step == 1:
        # the gradient as it is on the first step
        change = grad
    else:
        change = (grad - last_grad).mul_(0.5).add_(grad)
    p.sub_(0.1 * change)
    last_grad.copy_(grad)


class FirstStepChoice(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr), enable_global_step=True)

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["last_grad"] = cstorch.zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                step = self.increment_global_step(p)
                _update(p, p.grad, self.state[p]["last_grad"], step)
'''


def test_a_selection_keeps_the_comments_of_its_branches_above_it(tmp_path: Path):
    """Comments on lines of their own in the branches go above the torch.where; a name
    that nothing changes in place nor aliases is selected like a value (timm's Mars:
    `c = grad` on the first step), and an in-place op on a tensor the value makes itself
    changes nothing else. Aliased (`grad = p.grad` beside `p.grad.mul_(2)`), it stays."""
    path = tmp_path / "first.py"
    path.write_text(FIRST_STEP_CHOICE)
    text = port_file(str(path), Config()).ported.decode()
    assert ("    # the gradient as it is on the first step\n"
            "    change = torch.where(step == 1, grad, (grad - last_grad).mul_(0.5).add_(grad))\n"
            ) in text
    aliased = FIRST_STEP_CHOICE.replace("def _update(p, grad, last_grad, step):\n",
                                        "def _update(p, given, last_grad, step):\n"
                                        "    grad = given\n")
    path.write_text(aliased)
    assert port_file(str(path), Config()).ported == aliased.encode()


def test_a_tensor_if_choosing_one_value_becomes_torch_where_beside_a_python_elif(
        tmp_path: Path):
    path = tmp_path / "rectified.py"
    path.write_bytes((FIXTURES / "port" / "rectified.in.py").read_bytes())
    ported = port_file(str(path), Config()).ported.decode()
    assert "rt = torch.where(\n                n_sma >= group[\"n_sma_threshold\"]," in ported
    assert '(1.0 if group["degenerated_to_sgd"] else 0.0),' in ported
    assert "if n_sma" not in ported and "elif group" not in ported


HELPED_AND_NOT = '''\
import torch
import cerebras.pytorch as cstorch


def _clip(update):
    if update.norm() > 1.0:
        update = update / update.norm()
        return update.clamp(-1.0, 1.0)
    return update


def _scaled(update, lr):
    return _clip(update) * lr


class Clipped(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def preinitialize(self):
        pass

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.sub_(_scaled(p.grad, group["lr"]))


class Plain(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def preinitialize(self):
        pass

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.sub_(group["lr"] * p.grad)
'''


def test_a_class_is_not_ported_while_a_module_function_it_calls_keeps_a_finding(
        tmp_path: Path):
    """The codes of a class include those in the file's functions it calls, through
    one another; a class that calls none of them is not charged with them."""
    path = tmp_path / "clipped.py"
    path.write_text(HELPED_AND_NOT)
    ported = port_file(str(path), Config())
    assert {c.name: c.remaining for c in ported.classes} == \
        {"Clipped": ("CS201",), "Plain": ()}


BOTH_BRANCHES = '''\
import torch
import cerebras.pytorch as cstorch


class Branchy(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["a"] = cstorch.zeros_like(p)

    def _shrink(self, p, scale):
        if scale < 1.0:
            p.mul_(scale)

    def _decay(self, p):
        self.decays += 1
        p.mul_(0.9)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                norm = p.grad.norm()
                if p.norm() > norm:
                    p.mul_(0.5)
                kept = norm * 1.0
                if norm > 2:
                    kept = norm * 3.0
                    state["a"].add_(p.grad)
                p.sub_(group["lr"] * kept * p.grad)
                if norm > 2.5:
                    self._shrink(p, 0.5)
                if norm > 3:
                    self._decay(p)
                if norm > 4:
                    group["seen"] = 1.0
                    p.mul_(0.5)
                if norm > 5:
                    p.mul_(0.5)
                    continue
                if norm > 6:
                    fresh = norm * 2.0
                    p.mul_(0.5)
                if norm > 7:
                    buffer = state["a"]
                    buffer.mul_(0.5)
                    torch._foreach_mul_([p], 0.5)
                if norm > 8:
                    for t in (p, state["a"]):
                        t.mul_(0.5)
                if norm > 9:
                    p.mul_(0.5)
                    p = state["a"]
                p.add_(fresh)
'''


def test_branches_that_change_tensors_in_place_both_run_and_each_tensor_is_selected(
        tmp_path: Path):
    """A tensor `if` whose branches change tensors in place (and bind names) runs both:
    each changed tensor is copied before, then takes the branch's values where the test
    holds (the test evaluated once, first: it may read what the branch changes), a name
    read later selected the same way; a method of the class changes what its code
    changes of its arguments. Where a branch may do more than that, the `if` stays: a
    method that also sets an attribute, an entry assigned, `continue`, a name read later
    that only the branch binds, a tensor changed through a name the branch binds (or
    rebinds after), a loop over what is not a list."""
    path = tmp_path / "branchy.py"
    path.write_text(BOTH_BRANCHES)
    ported = port_file(str(path), Config())
    text = ported.ported.decode()
    assert """
                # cslint port: both branches run; torch.where keeps the taken one's values
                taken = p.norm() > norm
                p_before = p.clone()
                p.mul_(0.5)
                p.copy_(torch.where(taken, p, p_before))
                kept = norm * 1.0
                # cslint port: both branches run; torch.where keeps the taken one's values
                taken = norm > 2
                a_before = state["a"].clone()
                kept_before = kept
                kept = norm * 3.0
                state["a"].add_(p.grad)
                state["a"].copy_(torch.where(taken, state["a"], a_before))
                kept = torch.where(taken, kept, kept_before)
                p.sub_(group["lr"] * kept * p.grad)
                # cslint port: both branches run; torch.where keeps the taken one's values
                taken = norm > 2.5
                p_before = p.clone()
                self._shrink(p, 0.5)
                p.copy_(torch.where(taken, p, p_before))
                if norm > 3:
""" in text
    assert text.endswith(BOTH_BRANCHES[BOTH_BRANCHES.index("                if norm > 3:"):])
    assert sorted(f.location.line for f in ported.findings if f.code == "CS201") == \
        [48, 50, 53, 56, 59, 63, 66]


CONDITIONAL_LISTS = '''\
import torch
import cerebras.pytorch as cstorch


class Blocks(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def preinitialize(self):
        pass

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                n = p.shape[0]
                sizes = [(n, n)] if p.grad.norm() > 1 else [(n, 1), (1, n)]
                scale = 0.5 if p.grad.norm() > 1 else 1.0
                p.add_(-group["lr"] * scale * p.grad * len(sizes))
'''


def test_a_tensor_conditional_choosing_between_lists_stays(tmp_path: Path):
    """`a if t else b` becomes torch.where only where both values may be tensors: a
    choice between lists (or tuples) of shapes stays, and is listed (CS203)."""
    path = tmp_path / "blocks.py"
    path.write_text(CONDITIONAL_LISTS)
    ported = port_file(str(path), Config()).ported.decode()
    assert "sizes = [(n, n)] if p.grad.norm() > 1 else [(n, 1), (1, n)]" in ported
    assert "scale = torch.where(p.grad.norm() > 1, 0.5, 1.0)" in ported
    remaining = [f.location.line for f in port_file(str(path), Config()).findings
                 if f.code == "CS203"]
    assert remaining == [17]


GUARDING_OPERAND = '''\
import torch
import cerebras.pytorch as cstorch


class Guarded(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["m"] = cstorch.zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                m = self.state[p]["m"]
                if p.grad is not None and p.grad.norm() > 1.0:
                    p.add_(-group["lr"] * p.grad / p.grad.norm())
                else:
                    p.add_(-group["lr"] * m)
                if m.norm() > 1.0 or p.norm() > 10.0:
                    p.add_(-0.1 * m)
                else:
                    p.add_(-0.2 * m)
'''


def test_an_and_or_test_selects_only_where_its_operands_may_all_be_computed(
        tmp_path: Path):
    """`t1 or t2` on tensors becomes torch.logical_or inside torch.where; an operand
    that guards the next (`x is not None and x.norm() > 1`) keeps its `if`."""
    path = tmp_path / "guarded.py"
    path.write_text(GUARDING_OPERAND)
    ported = port_file(str(path), Config())
    text = ported.ported.decode()
    assert "if p.grad is not None and p.grad.norm() > 1.0:" in text
    assert "torch.logical_or(m.norm() > 1.0, p.norm() > 10.0)" in text
    assert [f.location.line for f in ported.findings if f.code == "CS201"] == [19]


ITEMS = '''\
import torch
import cerebras.pytorch as cstorch


class Items(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1, weight_decay=0.01):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay))

    def preinitialize(self):
        pass

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                decay = group["weight_decay"] / p.norm().item()
                p.mul_(1 - decay)
                scale = p.grad.abs().mean().item()
                if scale > 1.0:
                    p.grad.div_(scale)
                p.add_(p.grad, alpha=-group["lr"] * p.grad.norm().item())
'''


def test_item_feeding_only_arithmetic_is_dropped_and_feeding_a_decision_stays(
        tmp_path: Path):
    """`t.item()` whose number only feeds arithmetic (through locals, into `alpha=`)
    becomes `t`; one that reaches an `if` stays, and is listed (CS204)."""
    path = tmp_path / "items.py"
    path.write_text(ITEMS)
    ported = port_file(str(path), Config())
    text = ported.ported.decode()
    assert 'decay = group["weight_decay"] / p.norm()\n' in text
    assert "p.add_(-group[\"lr\"] * p.grad.norm() * p.grad)" in text
    assert "scale = p.grad.abs().mean().item()" in text
    assert [f.location.line for f in ported.findings if f.code == "CS204"] == [18]


REBOUND_TENSOR = '''\
import torch
import cerebras.pytorch as cstorch


class Rebound(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["avg"] = cstorch.zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                before = state["avg"]
                state["avg"] = state["avg"] * 0.5 + p.grad
                p.add_(-group["lr"] * (state["avg"] - before))
'''


def test_state_rebound_while_a_local_still_reads_its_old_tensor_stays_and_is_listed(
        tmp_path: Path):
    """`state["avg"].copy_(...)` would change the tensor `before` still names: the
    rebinding stays, listed. With no such read, it becomes the copy."""
    path = tmp_path / "rebound.py"
    path.write_text(REBOUND_TENSOR)
    ported = port_file(str(path), Config())
    assert ported.ported == path.read_bytes()
    assert [(c.name, c.remaining) for c in ported.classes] == [("Rebound", ("CS102",))]

    path.write_text(REBOUND_TENSOR.replace("(state[\"avg\"] - before)", "state[\"avg\"]"))
    ported = port_file(str(path), Config())
    assert '                state["avg"].copy_(state["avg"] * 0.5 + p.grad)\n' \
        in ported.ported.decode()
    assert [(c.name, c.remaining) for c in ported.classes] == [("Rebound", ())]


GROUP_ENTRIES_LEFT_ALONE = '''\
import torch
import cerebras.pytorch as cstorch


class Entries(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        defaults = dict(lr=lr, total=0.0, scale=1.0, gain=1, carried=None, checked=None)
        super().__init__(params, defaults)

    def preinitialize(self):
        pass

    def reset(self):
        for group in self.param_groups:
            group["scale"] = 1.0

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            group["seen"] = group.get("seen", 0.0) + group["lr"]
            group["total"] = group["total"] + group["lr"]
            group["scale"] = group["scale"] * 0.5
            group["gain"] = group["gain"] * 0.5 + group["lr"]
            decay = 1.0 if group["checked"] is None else group["checked"]
            for p in group["params"]:
                p.add_(-group["total"] * group["scale"] * p.grad * decay)
            group["carried"] = group["lr"] * 2.0
            group["checked"] = group["lr"] * 0.5
'''


def test_only_group_entries_started_in_defaults_and_only_accumulated_become_tensors(
        tmp_path: Path):
    """An entry the defaults start at a number and the step only rebinds from itself
    becomes a tensor of preinitialize updated with copy_, as do one started at None
    that the step sets for the next and one the defaults lack that the step starts with
    `group.get(key, n)`; one also set another way (a reset to a number), or started at
    None and told apart from it, stays."""
    path = tmp_path / "entries.py"
    path.write_text(GROUP_ENTRIES_LEFT_ALONE)
    text = port_file(str(path), Config()).ported.decode()
    assert 'group["total"] = cstorch.zeros(())' in text
    assert 'group["total"].copy_(group["total"] + group["lr"])' in text
    assert 'group["scale"] = group["scale"] * 0.5' in text
    assert 'group["seen"] = cstorch.zeros(())' in text
    assert 'group["seen"].copy_(group.get("seen", 0.0) + group["lr"])' in text
    # An int default accumulates floats: the tensor is a float one.
    assert 'group["gain"] = cstorch.full((), 1.0)' in text
    assert 'group["carried"] = cstorch.zeros(())' in text
    assert 'group["carried"].copy_(group["lr"] * 2.0)' in text
    assert 'group["checked"] = group["lr"] * 0.5' in text


RELATIVE_IMPORT = '''\
import torch
from torch.optim import Optimizer

from ._defaults import MOMENTUM


class PackagedSGD(Optimizer):
    def __init__(self, params, lr=0.1, momentum=MOMENTUM):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["buf"] = torch.zeros_like(p)
                state["buf"].mul_(group["momentum"]).add_(p.grad)
                p.add_(state["buf"], alpha=-group["lr"])
'''


def _package(tmp_path: Path, files: dict[str, str], init: str = "") -> Path:
    """A package `optimizers` in `tmp_path` holding `files` (name -> text)."""
    package = tmp_path / "optimizers"
    package.mkdir()
    (package / "__init__.py").write_text(init)
    for name, text in files.items():
        (package / name).write_text(text)
    return package


def test_verify_imports_a_module_of_a_package_with_its_relative_imports(tmp_path: Path):
    """An optimizer in a package (`from ._defaults import MOMENTUM`) is imported as a
    module of that package, its port beside it, so both run."""
    from cslint.port.verify import verify_port

    package = _package(tmp_path, {"_defaults.py": "MOMENTUM = 0.9\n"})
    path = package / "packaged.py"
    path.write_text(RELATIVE_IMPORT)
    ported = port_file(str(path), Config())
    assert ported.classes[0].ported
    verified = verify_port(str(path), ported.ported, ["PackagedSGD"], steps=8)
    assert verified["PackagedSGD"].problem is None
    assert verified["PackagedSGD"].numbers_equal and verified["PackagedSGD"].strict_clean


def test_verify_imports_a_module_of_a_package_whose_init_cannot_be_imported(
        tmp_path: Path):
    """A package whose `__init__` imports what is not installed (timm's optimizers import
    the rest of timm): its modules are still imported, with their relative imports."""
    from cslint.port.verify import verify_port

    package = _package(tmp_path, {"_defaults.py": "MOMENTUM = 0.9\n"},
                       init="import a_package_not_installed\n")
    path = package / "packaged.py"
    path.write_text(RELATIVE_IMPORT)
    ported = port_file(str(path), Config())
    verified = verify_port(str(path), ported.ported, ["PackagedSGD"], steps=8)
    assert verified["PackagedSGD"].problem is None
    assert verified["PackagedSGD"].numbers_equal and verified["PackagedSGD"].strict_clean


def test_verify_runs_a_port_with_the_ports_of_the_files_it_imports(tmp_path: Path):
    """Two files of a package ported together (torch's adamw.py: `from .adam import
    Adam`): the port of the subclass runs on the port of its base, not the original."""
    from cslint.port.verify import verify_ports

    package = _package(tmp_path, {})
    (package / "adam.py").write_bytes((FIXTURES / "port" / "adam.in.py").read_bytes())
    base = port_file(str(package / "adam.py"), Config())
    name = base.classes[0].name
    (package / "adamw.py").write_text(
        f"from .adam import {name}\n\n\nclass Decoupled({name}):\n    pass\n")
    child = port_file(str(package / "adamw.py"), Config())
    verified = verify_ports([(str(package / "adam.py"), base.ported, [name]),
                             (str(package / "adamw.py"), child.ported, ["Decoupled"])],
                            steps=8)
    result = verified[1]["Decoupled"]
    assert (result.numbers_equal, result.strict_clean, result.problem) == (True, True, None)


NO_DEFAULT_LR = '''\
import torch
from torch.optim.optimizer import Optimizer, required


class RequiredLrSGD(Optimizer):
    def __init__(self, params, lr=required, momentum=0.9):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if "buf" not in state:
                    state["buf"] = torch.zeros_like(p)
                state["buf"].mul_(group["momentum"]).add_(p.grad)
                p.add_(state["buf"], alpha=-group["lr"])


class NeedsSteps(Optimizer):
    def __init__(self, params, total_steps, lr=0.1):
        self.total_steps = total_steps
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.add_(p.grad, alpha=-group["lr"])
'''


def test_verify_gives_a_learning_rate_to_a_class_with_none_of_its_own(small_ports):
    """`lr=required` (torch 1.x's SGD, and what copies it) or an `lr` with no default:
    verify runs the class with lr=1e-3; another argument with no default stops it."""
    _, verified = small_ports["required.py"]
    assert verified["RequiredLrSGD"].problem is None
    assert verified["RequiredLrSGD"].numbers_equal and verified["RequiredLrSGD"].strict_clean
    assert verified["NeedsSteps"].problem == "its constructor needs total_steps"


HELPED_ELSEWHERE = '''\
import torch
from torch.optim import Optimizer

from ._scalars import as_number


def _update(p, buf, lr, step):
    p.add_(buf, alpha=-lr / as_number(step))


class HelpedSGD(Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["buf"] = torch.zeros_like(p)
                    state["step"] = torch.zeros((), device=p.device)
                state["step"].add_(1)
                state["buf"].mul_(0.9).add_(p.grad)
                update = _update
                update(p, state["buf"], group["lr"], state["step"])
'''


def test_what_is_left_in_another_files_function_a_class_reaches_is_left_in_the_class(
        tmp_path: Path, monkeypatch):
    """`.item()` of the class's step in a helpers module (reached through a function
    the class names and calls later) keeps the class from being ported, and is listed
    with its file, as the user names it; a class reaching nothing there is ported."""
    from cslint.port.command import run_port

    _package(tmp_path, {
        "_scalars.py": "import torch\n\n\ndef as_number(x):\n"
                       "    return round(x.item(), 6) if isinstance(x, torch.Tensor) else x\n\n\n"
                       "def unused(x):\n    return float(x)\n",
        "helped.py": HELPED_ELSEWHERE,
        "plain.py": RELATIVE_IMPORT.replace("from ._defaults import MOMENTUM", "MOMENTUM = 0.9"),
    })
    monkeypatch.chdir(tmp_path)
    run = run_port(["optimizers/helped.py", "optimizers/plain.py"], Config(), write=False,
                   verify=False, runtime_reference=False)
    assert {c.name: c.remaining for c in run.classes} == \
        {"HelpedSGD": ("CS204",), "PackagedSGD": ()}
    listed = [(f.path, f.location.line, f.code) for file in run.ported for f in file.findings]
    assert listed == [("optimizers/_scalars.py", 5, "CS204")]


PROJECTED_ELSEWHERE = '''import torch

from ._projector import Projector


class ProjectedSGD(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1, gap=2):
        super().__init__(params, dict(lr=lr, gap=gap))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["projector"] = Projector(group["gap"])
                state["step"] += 1
                grad = state["projector"].project(p.grad, state["step"])
                p.add_(grad, alpha=-group["lr"])
'''


def test_what_is_left_in_the_methods_of_an_object_the_class_makes_is_left_in_the_class(
        tmp_path: Path, monkeypatch):
    """GaLore's projector: the class keeps an object of a helpers module's class in its
    state, whose method branches on the step it is given; once the step is the global
    step (a tensor) that branch is CS201, in the class's remaining codes and listed with
    the helpers module."""
    from cslint.port.command import run_port

    _package(tmp_path, {
        "_projector.py": "class Projector:\n    def __init__(self, gap):\n"
                         "        self.gap = gap\n\n    def project(self, grad, step):\n"
                         "        if step % self.gap == 0:\n            return grad.sign()\n"
                         "        return grad\n",
        "projected.py": PROJECTED_ELSEWHERE,
    })
    monkeypatch.chdir(tmp_path)
    run = run_port(["optimizers/projected.py"], Config(), write=False, verify=False,
                   runtime_reference=False)
    assert {c.name: c.remaining for c in run.classes} == {"ProjectedSGD": ("CS201",)}
    listed = [(f.path, f.location.line, f.code) for file in run.ported for f in file.findings]
    assert listed == [("optimizers/_projector.py", 6, "CS201")]


def test_a_cast_in_the_else_of_a_check_stays_unless_it_is_to_what_the_state_was_made_like(
        tmp_path: Path):
    """`else: state["m"] = state["m"].type_as(p_fp32)` goes with the check only where the
    check made `state["m"]` like `p_fp32`; a cast to something else keeps the check."""
    source = (FIXTURES / "port" / "recast_state.in.py").read_text()
    other = tmp_path / "cast_elsewhere.py"
    other.write_text(source.replace('state["momentum"].type_as(p_fp32)',
                                    'state["momentum"].type_as(grad)'))
    ported = port_file(str(other), Config())
    assert [found.remaining for found in ported.classes] == [("CS101",)]
    assert b'state["momentum"].type_as(grad)' in ported.ported
    assert UNMOVED in ported.ported.decode()


def test_a_helper_of_another_file_that_hands_a_tensor_back_as_a_number_is_not_called(
        tmp_path: Path, monkeypatch):
    """`as_number(step)` where the helpers module's `as_number(x)` is `x.item() if
    isinstance(x, torch.Tensor) else x`: in what step runs, the call becomes `step`,
    and nothing is left in the helper; a name imported with others loses its place in
    the list alone."""
    from cslint.port.command import run_port

    package = _package(tmp_path, {
        "_scalars.py": "import torch\n\n\ndef as_number(x):\n"
                       "    return x.item() if isinstance(x, torch.Tensor) else x\n",
        "helped.py": HELPED_ELSEWHERE,
    })
    monkeypatch.chdir(tmp_path)
    run = run_port(["optimizers/helped.py"], Config(), write=False, verify=False,
                   runtime_reference=False)
    assert {c.name: c.remaining for c in run.classes} == {"HelpedSGD": ()}
    (ported,) = run.ported
    assert b"p.add_(-lr / step * buf)" in ported.ported
    # Its import goes too, now that nothing reads it (ruff's F401 otherwise).
    assert b"as_number" not in ported.ported
    (package / "helped.py").write_text(HELPED_ELSEWHERE.replace(
        "from ._scalars import as_number",
        "from ._scalars import (\n    MOMENTUM,\n    as_number,\n    unused,\n)"))
    (package / "_scalars.py").write_text(
        "import torch\n\nMOMENTUM = 0.9\n\n\ndef as_number(x):\n"
        "    return x.item() if isinstance(x, torch.Tensor) else x\n\n\n"
        "def unused(x):\n    return x\n")
    (ported,) = run_port(["optimizers/helped.py"], Config(), write=False, verify=False,
                         runtime_reference=False).ported
    assert b"from ._scalars import (\n    MOMENTUM,\n    unused,\n)" in ported.ported
    for imported, left in (("as_number, unused", "unused"), ("unused, as_number", "unused"),
                           ("MOMENTUM, as_number, unused", "MOMENTUM, unused")):
        (package / "helped.py").write_text(HELPED_ELSEWHERE.replace(
            "from ._scalars import as_number", f"from ._scalars import {imported}"))
        (ported,) = run_port(["optimizers/helped.py"], Config(), write=False, verify=False,
                             runtime_reference=False).ported
        assert f"from ._scalars import {left}\n".encode() in ported.ported, imported
    # Named in `__all__`: others may import it from here, so it stays.
    (package / "helped.py").write_text(HELPED_ELSEWHERE + '\n__all__ = ["as_number"]\n')
    (ported,) = run_port(["optimizers/helped.py"], Config(), write=False, verify=False,
                         runtime_reference=False).ported
    assert b"from ._scalars import as_number\n" in ported.ported
    assert b"p.add_(-lr / step * buf)" in ported.ported


RETURNS = '''\
import torch
import cerebras.pytorch as cstorch


class Normed(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["norm"] = cstorch.zeros(())

    @staticmethod
    def rescaled(grad, exp_grad_norm):
        grad_norm = torch.linalg.norm(grad)
        exp_grad_norm.mul_(0.9).add_(0.1 * grad_norm)
        if grad_norm > 0 and exp_grad_norm > grad_norm:
            return grad.mul(exp_grad_norm.reshape(())).div_(grad_norm)

        return grad

    @staticmethod
    def warmed(norm, warmup=10.0):
        if norm < warmup:
            ratio: float = norm / warmup
            return 1.0 - (1.0 - ratio) ** 2
        return 1.0

    @staticmethod
    def split(grad):
        if grad.norm() > 1.0:
            return [grad, grad]
        return [grad]

    @staticmethod
    def maybe(grad):
        if grad.norm() > 1.0:
            return grad
        else:
            return None

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                g = self.rescaled(p.grad, self.state[p]["norm"])
                g = g * self.warmed(self.state[p]["norm"])
                p.add_(-group["lr"] * g * len(self.split(g)))
                if self.maybe(g) is not None:
                    p.mul_(0.9)
'''


def test_a_tensor_if_returning_one_of_two_values_returns_the_selection(tmp_path: Path):
    """`if t: return a` then `return b` -> `return torch.where(t, a, b)` (a value may
    change a tensor it makes itself; a name the branch computes for it alone is
    computed always); a choice between lists, or of None, stays."""
    path = tmp_path / "normed.py"
    path.write_text(RETURNS)
    ported = port_file(str(path), Config())
    text = ported.ported.decode()
    assert """
        exp_grad_norm.mul_(0.9).add_(0.1 * grad_norm)
        return torch.where(
            torch.logical_and(grad_norm > 0, exp_grad_norm > grad_norm),
            grad.mul(exp_grad_norm.reshape(())).div_(grad_norm),
            grad,
        )
""" in text
    assert """
        ratio: float = norm / warmup
        return torch.where(norm < warmup, 1.0 - (1.0 - ratio) ** 2, 1.0)
""" in text
    assert "            return [grad, grad]\n        return [grad]\n" in text
    assert "        else:\n            return None\n" in text
    assert sorted(f.location.line for f in ported.findings if f.code == "CS201") == [31, 37]


def test_a_shared_count_read_as_a_tensor_keeps_its_shape(tmp_path: Path):
    """`torch.tensor([0])` is made 0-dim only where the class reads it as a number alone
    (through `math`): read as a tensor, its [1] shape may matter, and it stays."""
    source = (FIXTURES / "port" / "shared_state.in.py").read_text()
    read_as_tensor = source.replace("        self.state[\"k\"].add_(1)\n",
                                    "        self.state[\"k\"].add_(self.state[\"k\"] * 0 + 1)\n")
    assert read_as_tensor != source
    path = tmp_path / "count.py"
    path.write_text(read_as_tensor)
    text = port_file(str(path), Config()).ported.decode()
    assert '        self.state["k"] = torch.tensor([0], dtype=torch.long)\n' in text
    path.write_text(source)
    text = port_file(str(path), Config()).ported.decode()
    assert '        self.state["k"] = torch.tensor(0, dtype=torch.long)\n' in text


@pytest.mark.parametrize("change", [
    # An early exit after the swap would skip the write-back.
    ("                pos.mul_(beta1 ** 2)", "                if p.dim() > 3:\n"
                                             "                    continue\n"
                                             "                pos.mul_(beta1 ** 2)"),
    # The entry read itself after the swap would be the old tensor, not the copy.
    ("                p.add_(update, alpha=-group[\"lr\"])",
     "                p.add_(update + state[\"neg\"], alpha=-group[\"lr\"])"),
    # A name rebound to another tensor: the write-back would put that back.
    ("                update = pos.mul", "                pos = pos * 1.0\n"
                                         "                update = pos.mul"),
    # With no return annotation, the dict's entries may be tensors, not lists.
    ("    def _collect(self, group, keys) -> tuple[list[torch.Tensor], list[torch.Tensor],\n"
     "                                             dict[str, list[torch.Tensor]]]:",
     "    def _collect(self, group, keys):"),
])
def test_entries_swapped_where_the_write_back_is_not_sure_stay(tmp_path: Path, change):
    source = (FIXTURES / "port" / "swapped_entries.in.py").read_text()
    old, new = change
    assert old in source
    path = tmp_path / "swapped.py"
    path.write_text(source.replace(old, new))
    ported = port_file(str(path), Config())
    remaining = {c.name: c.remaining for c in ported.classes}
    assert "CS201" in remaining["ForeachPositiveNegative" if "_collect" in old
                                else "PositiveNegative"], remaining


def test_a_helper_keyword_that_step_passes_differently_keeps_the_state_lazy(tmp_path: Path):
    """The option a helper reads from `**kwargs` goes to preinitialize as step's one call
    passes it; with calls that pass different values, there is no one value to read."""
    source = (FIXTURES / "port" / "helper_keywords.in.py").read_text()
    twice = source.replace("            self.init_group(group, beta1=beta1)\n",
                           "            self.init_group(group, beta1=beta1)\n"
                           "            self.init_group(group, beta1=0.5)\n")
    assert twice != source
    path = tmp_path / "keywords.py"
    path.write_text(twice)
    ported = port_file(str(path), Config())
    assert _only_unmoved_preinitialize(ported.ported.decode())
    assert "CS101" in ported.classes[0].remaining


FIRST_STEP_BY_EMPTY_STATE = '''\
import torch
from torch.optim import Optimizer


class FirstStepByEmptyState(Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                first = len(state) == 0
                if len(state) == 0:
                    state["exp_avg_sq"] = torch.zeros_like(p)
                if first:
                    state["exp_avg_sq"].addcmul_(p.grad, p.grad)
                    continue
                state["exp_avg_sq"].mul_(0.9).addcmul_(p.grad, p.grad, value=0.1)
                p.addcdiv_(p.grad, state["exp_avg_sq"].sqrt().add_(1e-8), value=-group["lr"])
'''


def test_state_whose_absence_marks_the_first_step_elsewhere_stays_lazy(tmp_path: Path):
    """timm's Adopt reads `len(state) == 0` beside the check that makes the state, to run
    its first step's own update: made in preinitialize, the state would always be there
    and that update would never run (the numbers would change, silently). The state
    stays where it is, listed."""
    path = tmp_path / "first.py"
    path.write_text(FIRST_STEP_BY_EMPTY_STATE)
    ported = port_file(str(path), Config())
    assert _only_unmoved_preinitialize(ported.ported.decode())
    assert "CS101" in ported.classes[0].remaining


def test_generated_lines_break_inside_brackets_never_inside_a_string():
    """The swap rewrite's long lines break after `, ` or before ` for ` within brackets,
    under the innermost open one; a comma in a string (quotes escaped in it too) is no
    place to break."""
    from cslint.port.branches import _wrapped

    line = ("                pos = torch.where(taken, state['it\\'s, a key'], state['neg'], "
            "state['another_long_key_name'])")
    wrapped = _wrapped(line)
    assert wrapped == [
        "                pos = torch.where(taken, state['it\\'s, a key'], state['neg'],",
        "                                  state['another_long_key_name'])"]
    ast.parse("if 1:\n" + "\n".join(wrapped))


COMMENTED_UPDATE = '''\
import torch
import cerebras.pytorch as cstorch


class ClippedStep(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def preinitialize(self):
        pass

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                norm = p.grad.norm()
                if norm > 1:
                    # a clipped step
                    p.add_(-0.1 * p.grad / norm)
                else:
                    p.add_(-0.1 * p.grad)
'''


def test_an_in_place_update_selected_by_a_tensor_test_keeps_its_comment_above(
        tmp_path: Path):
    path = tmp_path / "clipped.py"
    path.write_text(COMMENTED_UPDATE)
    ported = port_file(str(path), Config())
    text = ported.ported.decode()
    assert "                # a clipped step\n                p.add_(torch.where(" in text, text
    assert [c.remaining for c in ported.classes] == [()]
    ast.parse(text)


def test_swapped_entries_keep_crlf_line_endings(tmp_path: Path):
    """The swap rewrite's lines end as the file's do (no `\\r\\r\\n` from ending them
    twice)."""
    path = tmp_path / "swapped.py"
    source = (FIXTURES / "port" / "swapped_entries.in.py").read_bytes()
    path.write_bytes(source.replace(b"\n", b"\r\n"))
    ported = port_file(str(path), Config()).ported
    golden = (FIXTURES / "port" / "swapped_entries.out.py").read_bytes()
    assert ported == golden.replace(b"\n", b"\r\n")


_CHOSEN_UPDATE = '''\
import torch
from torch.optim import Optimizer


def _single_tensor(params, grads, state_steps):
    for param, grad, step in zip(params, grads, state_steps):
        step += 1
        if step.item() > 1:
            param.add_(grad, alpha=-0.1)


def _multi_tensor(params, grads, state_steps):
    torch._foreach_add_(state_steps, 1)
    torch._foreach_add_(params, grads, alpha=-0.1)


def update(params, grads, state_steps, foreach=False):
    func = _multi_tensor if foreach else _single_tensor
    func(params, grads, state_steps)


class Chosen(Optimizer):
    def __init__(self, params, lr=0.1, foreach=False):
        super().__init__(params, dict(lr=lr, foreach=foreach))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            params, grads, steps = [], [], []
            for p in group["params"]:
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = torch.zeros(())
                params.append(p)
                grads.append(p.grad)
                steps.append(state["step"])
            update(params, grads, steps, group["foreach"])
'''


def test_what_is_left_in_a_function_the_class_names_to_call_later_is_left_in_it(
        tmp_path: Path):
    """torch's layout: `adam()` picks `func = _single_tensor_adam` and calls `func(...)`:
    a finding left in `_single_tensor_adam` is left in the class, not ported."""
    path = tmp_path / "chosen.py"
    path.write_text(_CHOSEN_UPDATE)
    ported = port_file(str(path), Config())
    [found] = ported.classes
    assert (found.name, found.ported, found.remaining) == ("Chosen", False, ("CS204",))


_EITHER_WAY = '''\
import torch
from torch.optim.optimizer import Optimizer, _get_value


def _update(params, grads, state_steps, *, lr, capturable):
    for param, grad, step_t in zip(params, grads, state_steps):
        step_t += 1
        if capturable:
            step = step_t
        else:
            step = _get_value(step_t)
        param.add_(grad / (1 + step), alpha=-lr)


class EitherWay(Optimizer):
    def __init__(self, params, lr=0.1, capturable=False):
        super().__init__(params, dict(lr=lr, capturable=capturable))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            params, grads, steps = [], [], []
            for p in group["params"]:
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = torch.zeros(())
                params.append(p)
                grads.append(p.grad)
                steps.append(state["step"])
            _update(params, grads, steps, lr=group["lr"], capturable=group["capturable"])
'''


def test_an_if_whose_branches_become_the_same_assignment_becomes_that_assignment(
        tmp_path: Path):
    """torch's NAdam: `if capturable: step = step_t / else: step = _get_value(step_t)`;
    with `_get_value(step_t)` made `step_t`, the `if` is `step = step_t` alone."""
    path = tmp_path / "either_way.py"
    path.write_text(_EITHER_WAY)
    ported = port_file(str(path), Config())
    text = ported.ported.decode()
    assert ported.classes[0].ported
    assert "        step = step_t\n        param.add_(" in text and "if capturable" not in text


def test_the_ported_projection_takes_the_first_view_whose_test_holds(monkeypatch):
    """port/projection: the rows' view, the whole tensor's (when the rows' test does not
    hold), or neither, as the original's early return chose; the original changed its
    argument in place, the port returns a new tensor the caller binds."""
    import importlib.util
    import types

    import torch

    import cslint.cstorch as cstorch

    cerebras = types.ModuleType("cerebras")
    cerebras.pytorch = cstorch
    monkeypatch.setitem(sys.modules, "cerebras", cerebras)
    monkeypatch.setitem(sys.modules, "cerebras.pytorch", cstorch)

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, FIXTURES / "port" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    torch.manual_seed(0)
    p = torch.randn(3, 4)
    orthogonal = torch.randn(3, 4)
    orthogonal -= (orthogonal * p).sum(dim=1, keepdim=True) / (p * p).sum(dim=1, keepdim=True) * p
    balance = (p[0] * p[0]).sum() / (p[1:] * p[1:]).sum()
    whole_only = torch.cat([p[:1], -balance * p[1:]])
    # port/projection_cautious: a cautious step after the loop, on the path no view took.
    for name, options in (("projection", ()), ("projection_cautious", (False,)),
                          ("projection_cautious", (True,))):
        original, ported = load(f"{name}.in"), load(f"{name}.out")
        taken = []
        for grad in (p.clone(), orthogonal, whole_only):
            perturb = torch.randn(3, 4)
            expected, expected_wd = original.projection(p, grad, perturb.clone(), 0.1, 0.5,
                                                        1e-8, *options)
            got, got_wd = ported.projection(p, grad, perturb.clone(), 0.1, 0.5, 1e-8,
                                            *options)
            assert torch.allclose(got, expected, atol=1e-6) and float(got_wd) == expected_wd
            taken.append((not torch.equal(expected, perturb), expected_wd))
        assert taken == [(options == (True,), 1.0), (True, 0.5), (True, 0.5)], name


def test_a_projection_whose_caller_keeps_the_tensor_it_changed_stays(tmp_path: Path):
    """The original changes the caller's tensor in place; a caller that binds the result
    to another name (and may read the tensor it passed) keeps the loop as it was."""
    path = tmp_path / "kept.py"
    path.write_text((FIXTURES / "port" / "projection.in.py").read_text().replace(
        "d_p, wd_ratio = projection(p, p.grad, d_p,", "update, wd_ratio = projection(p, p.grad, d_p,"))
    assert "update, wd_ratio = projection(" in path.read_text()
    ported = port_file(str(path), Config())
    assert b"taken = None" not in ported.ported and "CS201" in ported.classes[0].remaining


def test_verify_imports_a_package_module_named_like_an_installed_one_through_its_package(
        tmp_path: Path):
    """lion-pytorch ships its own `triton.py`, which exits when triton is missing: with
    the package's folder on the path it was the `triton` torch imports while building an
    optimizer, and the verifier ended with no answer. A module of a package imports
    through the package; `exit()` in the user's code is that class's problem."""
    from cslint.port.verify import verify_port

    package = _package(tmp_path, {"triton.py": "print('triton is not installed')\nexit()\n"})
    path = package / "lion.py"
    path.write_text((FIXTURES / "port" / "lion.in.py").read_text().replace(
        "def __init__(self, params,", "def __init__(self, params, use_kernel=False,", 1)
        .replace("super().__init__(params, defaults)",
                 "super().__init__(params, defaults)\n"
                 "        if use_kernel:\n"
                 "            from optimizers import triton  # noqa: F401", 1))
    assert "use_kernel" in path.read_text() and "from optimizers import triton" in path.read_text()
    ported = port_file(str(path), Config())
    [found] = ported.classes
    verified = verify_port(str(path), ported.ported, [found.name], steps=8)[found.name]
    assert (verified.numbers_equal, verified.strict_clean) == (True, True), verified
    assert verified.problem.startswith("not compared: the original fails with "
                                       "use_kernel=True: SystemExit"), verified.problem


_TRAIN_MODE = '''\
import torch
from torch.optim import Optimizer


class ModeSGD(Optimizer):
    """Steps only in training mode, as schedule-free optimizers do."""

    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr, train_mode=False))

    def train(self):
        for group in self.param_groups:
            group["train_mode"] = True

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            if not group["train_mode"]:
                raise Exception("Optimizer was not in train mode when step is called")
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"])
'''


def test_verify_puts_an_optimizer_with_a_train_method_in_training_mode(small_ports):
    """Schedule-free optimizers step only after `optimizer.train()`: verify calls it on
    both sides, as a training loop does."""
    code, verdicts = small_ports["mode.py"]
    assert code != _TRAIN_MODE.encode()
    verified = verdicts["ModeSGD"]
    assert (verified.numbers_equal, verified.strict_clean, verified.problem) == \
        (True, True, None), verified


_WRAPPER = '''\
import torch
from torch.optim import Optimizer


class Centred(Optimizer):
    """Takes each gradient's mean out, then steps the optimizer it wraps."""

    def __init__(self, optimizer, keep=0.0):
        self.optimizer = optimizer
        self.keep = keep
        self.defaults = optimizer.defaults
        self._optimizer_step_pre_hooks = {}
        self._optimizer_step_post_hooks = {}
        self._patch_step_function()

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def state(self):
        return self.optimizer.state

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad.sub_(p.grad.mean() * (1.0 - self.keep))
        return self.optimizer.step(closure)
'''


_AVERAGING_WRAPPER = '''\
from collections import defaultdict

import torch
from torch.optim import Optimizer


class Averaged(Optimizer):
    """Steps the optimizer it wraps, then keeps a running average of each parameter
    in a state of its own."""

    def __init__(self, optimizer, decay=0.9):
        self.optimizer = optimizer
        self.decay = decay
        self.defaults = optimizer.defaults
        self.state = defaultdict(dict)
        self._optimizer_step_pre_hooks = {}
        self._optimizer_step_post_hooks = {}
        self._patch_step_function()

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @torch.no_grad()
    def step(self, closure=None):
        loss = self.optimizer.step(closure)
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if "average" not in state:
                    state["average"] = torch.zeros_like(p)
                state["average"].lerp_(p, 1.0 - self.decay)
        return loss
'''


_EVERY_FOURTH = '''\
import torch
{base_import}


class Decaying({base}):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))
        self.calls = 0
{preinitialize}
    @torch.no_grad()
    def step(self, closure=None):
        self.calls += 1
        for group in self.param_groups:
            for p in group["params"]:
                p.add_(-group["lr"] * p.grad)
                if self.calls % 4 == 0:
                    p.mul_(0.99)
'''


_GOT_ACCUMULATOR = '''\
import torch
from torch.optim import Optimizer


class Weighted(Optimizer):
    """Averages its updates with weights that grow with the largest lr seen so far;
    the running sums live in the param groups, started by `.get` where missing."""

    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr = group["lr"]
            lr_max = group["lr_max"] = max(lr, group.get("lr_max", 0.0))
            weight_sum = group["weight_sum"] = group.get("weight_sum", 0.0) + lr_max
            scale = lr_max / weight_sum
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-lr * scale)
'''


@pytest.fixture(scope="module")
def small_ports(tmp_path_factory) -> dict:
    """Small sources, each ported (or given a port made by hand, as a test needs), all
    verified in one verifier process: torch is imported once for them all. By label:
    (the ported text, the verdict of each class)."""
    from cslint.port.verify import verify_ports

    folder = tmp_path_factory.mktemp("small_ports")
    runs = []  # (label, the original's path, the port's code, the classes)

    def ported(name: str, source: str, classes: list[str]) -> bytes:
        path = folder / name
        path.write_text(source)
        code = port_file(str(path), Config()).ported
        runs.append((name, path, code, classes))
        return code

    centred = ported("centred.py", _WRAPPER, ["Centred"]).decode()
    ported("averaged.py", _AVERAGING_WRAPPER, ["Averaged"])
    ported("weighted.py", _GOT_ACCUMULATOR, ["Weighted"])
    ported("mode.py", _TRAIN_MODE, ["ModeSGD"])
    ported("required.py", NO_DEFAULT_LR, ["RequiredLrSGD", "NeedsSteps"])
    ported("onebased.py", COUNT_STARTED_BY_DEFAULTS, ["OneBasedCount"])
    ported("cached.py", STEP_KEPT_IN_A_CACHE, ["CachedCorrection"])
    ported("read_cache.py", STEP_KEPT_IN_A_READ_CACHE, ["ReadCache"])
    renormed = ported("renormed.py", RENORMALISED_FIRST, ["Renormed"])
    renormed_path = folder / "other" / "renormed.py"
    renormed_path.parent.mkdir()
    renormed_path.write_text(RENORMALISED_FIRST)
    runs.append(("renormed, other numbers", renormed_path,
                 renormed.replace(b"mul_(0.9)", b"mul_(0.8)"), ["Renormed"]))
    # A wrapper whose port adds state around the wrapped step (its `state` a read-only
    # property, so strict mode compares it after the step).
    made = "                    p.grad.sub_(p.grad.mean() * (1.0 - self.keep))\n"
    assert made in centred
    lazy = folder / "lazy" / "centred.py"
    lazy.parent.mkdir()
    lazy.write_text(_WRAPPER)
    runs.append(("centred with state", lazy, centred.replace(
        made, made + '                    self.state[p]["seen"] = 1.0\n').encode(), ["Centred"]))
    # A Python counter that changes the graph only every fourth step.
    decaying = folder / "decaying.py"
    decaying.write_text(_EVERY_FOURTH.format(
        base_import="from torch.optim import Optimizer", base="Optimizer", preinitialize=""))
    runs.append(("decaying", decaying, _EVERY_FOURTH.format(
        base_import="import cerebras.pytorch as cstorch", base="cstorch.optim.Optimizer",
        preinitialize="\n    def preinitialize(self):\n        pass\n").encode(), ["Decaying"]))
    # Golden ports made wrong by hand: what verify must catch.
    lion = FIXTURES / "port" / "lion.in.py"
    lion_port = _golden(lion).read_bytes()
    runs.append(("lion, other numbers", lion,
                 lion_port.replace(b"alpha=1 - beta2", b"alpha=1 - beta1"), ["Lion"]))
    # The lr read as a Python number inside step: CS205 on the system.
    runs.append(("lion, lr read on the host", lion, lion_port.replace(
        b'p.add_(-group["lr"] * torch.sign(update))',
        b'p.add_(torch.sign(update), alpha=-float(group["lr"]))'), ["Lion"]))
    # A step count left a Python number.
    group_step = FIXTURES / "port" / "group_step.in.py"
    runs.append(("group step, a Python count", group_step, _golden(group_step).read_bytes()
                 .replace(b'group["step"] = cstorch.zeros(())', b'group["step"] = 0')
                 .replace(b'torch.sqrt(1 - beta2', b'math.sqrt(1 - beta2'), ["GroupStepAdam"]))
    verdicts = verify_ports([(str(path), code, classes) for _, path, code, classes in runs],
                            steps=8)
    return {label: (code, verdict) for (label, _, code, _), verdict in zip(runs, verdicts)}


def test_verify_builds_a_wrapper_around_sgd(small_ports):
    """A constructor whose first argument is the optimizer to wrap gets one: torch's
    SGD for the original, the runtime reference's for the port; what the wrapper
    does around it is compared, in strict mode."""
    _, verdicts = small_ports["centred.py"]
    verified = verdicts["Centred"]
    assert (verified.numbers_equal, verified.strict_clean, verified.problem) == \
        (True, True, None), verified


def test_verify_finds_state_a_wrapper_makes_around_the_wrapped_step(small_ports):
    _, verdicts = small_ports["centred with state"]
    verified = verdicts["Centred"]
    assert verified.strict_clean is False
    assert "CS101" in verified.problem and "'seen'" in verified.problem, verified


def test_a_wrapper_that_calls_no_base_init_calls_the_preinitialize_it_gets(
        small_ports, tmp_path: Path):
    """cstorch's Optimizer.__init__ calls preinitialize(); a wrapper that never calls a
    base's __init__ would never make the state the port moved there."""
    code, verdicts = small_ports["averaged.py"]
    text, verified = code.decode(), verdicts["Averaged"]
    init = text[text.index("def __init__"):text.index("@property")]
    assert init.rstrip().endswith("self.preinitialize()")
    again = tmp_path / "again.py"
    again.write_text(text)
    assert port_file(str(again), Config()).ported.decode() == text
    assert (verified.numbers_equal, verified.strict_clean, verified.problem) == \
        (True, True, None), verified


def test_verify_compares_the_graph_of_every_step_with_the_first(small_ports):
    """A Python counter that changes the graph only every fourth step: the graphs of
    all the steps are compared, not only the first three."""
    _, verdicts = small_ports["decaying"]
    verified = verdicts["Decaying"]
    assert verified.strict_clean is False
    assert "CS501" in verified.problem and "step 4" in verified.problem, verified


def test_a_group_entry_started_by_get_becomes_a_group_tensor(small_ports):
    """`group.get("weight_sum", 0.0) + w` written back into the group each step (a
    running sum the defaults do not start): a group tensor preinitialize makes at the
    `.get`'s number, updated with `copy_`."""
    code, verdicts = small_ports["weighted.py"]
    text, verified = code.decode(), verdicts["Weighted"]
    assert 'group["weight_sum"] = cstorch.zeros(())' in text
    assert 'group["weight_sum"].copy_(' in text
    assert (verified.numbers_equal, verified.strict_clean, verified.problem) == \
        (True, True, None), verified


NONE_BEFORE = '''\\
import torch
import cerebras.pytorch as cstorch


class MaybeDenominator(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def preinitialize(self):
        pass

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                denominator = None
                if p.grad.norm() > 1:
                    denominator = p.grad.abs().add(1e-8)
                    p.sub_(group["lr"] * p.grad / denominator)
                if denominator is not None:
                    p.mul_(0.5)
'''


def test_a_name_none_before_a_tensor_if_keeps_the_if(tmp_path: Path):
    """A name the branch binds that was None before it cannot be kept with torch.where
    (`torch.where(t, x, None)` fails): the `if` stays, and is listed."""
    path = tmp_path / "none_before.py"
    path.write_text(NONE_BEFORE)
    ported = port_file(str(path), Config())
    assert ported.ported == path.read_bytes()
    [found] = ported.classes
    assert "CS201" in found.remaining


GUARDED_CONDITIONALS = '''\
import torch
import cerebras.pytorch as cstorch


class Guarded(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1, clip_of=None, rectify=False):
        super().__init__(params, dict(lr=lr, rectify=rectify))
        self.clip_of = clip_of

    def preinitialize(self):
        pass

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                norm = p.grad.norm()
                clip = self.clip_of(norm) if self.clip_of is not None and norm > 1 else 2.0
                mode = 2.0 if not group["rectify"] or norm >= 5 else 1.0
                p.sub_(group["lr"] * clip * mode * p.grad)
'''


def test_a_conditional_whose_joined_test_has_a_guard_stays(tmp_path: Path):
    """`a if t == 0 or s == 0 else b` of tensor tests becomes torch.where (golden
    port/trust_ratio); one whose test joins a tensor test with an option or a None test
    (`f(t) if f is not None and t > 1 else c`) stays: the guard may keep a branch from
    failing, and torch.where computes both."""
    path = tmp_path / "guarded.py"
    path.write_text(GUARDED_CONDITIONALS)
    ported = port_file(str(path), Config())
    assert ported.ported == path.read_bytes()
    [found] = ported.classes
    assert "CS203" in found.remaining


@pytest.mark.parametrize("code, alone", [
    ("x.sqrt().add_(eps)", True),
    ("torch.stack(torch._foreach_norm(ps)).clamp_(max=10.0)", True),
    ("torch.add(a, b, out=c).mul_(2)", False),  # `c` itself
    ("torch.narrow(x, 0, 0, 1).mul_(2)", False),  # a view of `x`
    ("x.add_(1)", False),
])
def test_an_in_place_op_is_free_of_side_effects_only_on_a_tensor_the_expression_made(
        code: str, alone: bool):
    """What a port may compute on both sides of a branch: an in-place op on a new tensor
    changes nothing outside the expression; on a view, on `out=` or on a name it does."""
    from cslint.port.rewrite import _side_effect_free

    assert _side_effect_free(ast.parse(code, mode="eval").body, on_new_tensors=True) is alone


MAYBE_A_NUMBER = '''\
import torch


class NoiseScaled(torch.optim.Optimizer):
    """SGD-SaI's gradient signal-to-noise ratio, every step: the deviation is a tensor for
    a matrix and the number 0 for a vector."""

    def __init__(self, params, lr=0.01, eps=1e-8):
        super().__init__(params, dict(lr=lr, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                sigma = grad.std() if grad.ndim > 1 else 0
                norm = grad.norm()
                scale = norm / (sigma + group["eps"]) if sigma != 0.0 else norm
                p.add_(grad, alpha=-group["lr"] / scale)
'''


def test_a_test_of_a_name_that_may_hold_a_number_is_made_a_tensor(tmp_path: Path):
    """`a if s != 0.0 else b`, where `s` is a tensor on one path and the number 0 on
    another: torch.where is given `torch.as_tensor(s != 0.0)` (a Python bool fails there),
    and the port runs equal to the original on 1-D and 2-D parameters."""
    from cslint.port.verify import verify_port

    path = tmp_path / "noise_scaled.py"
    path.write_text(MAYBE_A_NUMBER)
    ported = port_file(str(path), Config())
    assert "torch.where(torch.as_tensor(sigma != 0.0), " in ported.ported.decode()
    [found] = ported.classes
    assert found.ported, found.remaining
    verified = verify_port(str(path), ported.ported, ["NoiseScaled"], steps=8)["NoiseScaled"]
    assert (verified.numbers_equal, verified.strict_clean) == (True, True), verified
