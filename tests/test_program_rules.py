"""CS401-CS404 beyond the fixtures: the signature table against the installed torch (and
CS401's drop-in set against the released cstorch signatures), messages and fixes, the
release gate of CS404."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest

from cslint.fixes.apply import fix_source
from cslint.semantic.program import torch_equivalents
from helpers import REQUIRED, init_signatures, lint_source, official_api_table

HEADER = "import torch\nimport cerebras.pytorch as cstorch\n\n"


def _findings(tmp_path, body: str, code: str, **options):
    options.setdefault("select", [code])
    result = lint_source(HEADER + textwrap.dedent(body), tmp_path, options=options)
    assert not result.errors
    return [f for f in result.findings if f.code == code]


# ---- the data table -----------------------------------------------------------------------------

def test_table_matches_the_installed_torch_signatures():
    torch = pytest.importorskip("torch")
    if not torch.__version__.startswith(torch_equivalents()["releases"]["torch"]):
        pytest.skip("the table describes another torch release")
    exported = _torch_optimizers(torch)
    table = torch_equivalents()["optimizers"]
    assert set(table) == set(exported), "the table must name exactly torch.optim's optimizers"
    for name, entry in table.items():
        cls = exported[name]
        if entry["status"] != "drop-in":
            continue
        parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
        table = entry["torch"]
        assert [p.name for p in parameters] == [e["name"] for e in table], name
        for parameter, row in zip(parameters, table):
            if parameter.default is inspect.Parameter.empty:
                assert "default" not in row, (name, row)
            else:
                default = parameter.default
                expected = list(default) if isinstance(default, tuple) else default
                assert row["default"] == expected, (name, row)
            assert bool(row.get("keyword_only")) == (parameter.kind == parameter.KEYWORD_ONLY)


def test_table_names_every_torch_scheduler():
    torch = pytest.importorskip("torch")
    schedulers = {name for name, obj in vars(torch.optim.lr_scheduler).items()
                  if isinstance(obj, type) and issubclass(obj, torch.optim.lr_scheduler.LRScheduler)}
    assert schedulers <= set(torch_equivalents()["schedulers"])


def _torch_optimizers(torch) -> dict:
    """The optimizer classes the installed torch exports from torch.optim."""
    return {name: obj for name, obj in vars(torch.optim).items()
            if isinstance(obj, type) and issubclass(obj, torch.optim.Optimizer)
            and obj is not torch.optim.Optimizer}


def _cs401(tmp_path, name: str):
    """The CS401 finding on `torch.optim.<name>(params)`, and the source its fix makes."""
    result = lint_source(HEADER + f"opt = torch.optim.{name}(params)\n", tmp_path,
                         options={"select": ["CS401"]})
    assert not result.errors
    (finding,) = result.findings
    if finding.fix is None:
        return finding, None
    fixed = fix_source(result.sources[finding.path], [finding])
    assert fixed.applied == [finding], fixed.dropped
    return finding, fixed.new_raw.decode("utf-8")


def test_every_torch_optimizer_is_reported_and_fixed_only_into_a_cstorch_class(tmp_path):
    """What the table's statuses are for: every torch.optim optimizer gets CS401; one that
    cstorch.optim lacks (by the official API table, generated from the release) is
    "not supported" and has no fix; a fix always names the cstorch class of that name."""
    torch = pytest.importorskip("torch")
    official = {alias.rsplit(".", 1)[-1]
                for entry in official_api_table()["classes"].values()
                for alias in entry.get("aliases", ())
                if alias.startswith("cerebras.pytorch.optim.")}
    fixed_any = False
    for name in sorted(_torch_optimizers(torch)):
        finding, fixed = _cs401(tmp_path, name)
        if name not in official:
            assert fixed is None and "not supported" in finding.message, (name, finding.message)
            continue
        assert "not supported" not in finding.message, name
        if fixed is not None:
            fixed_any = True
            call = ast.parse(fixed).body[-1].value
            assert ast.unparse(call.func) == f"cstorch.optim.{name}", fixed
    assert fixed_any


def test_cs401_fixes_exactly_where_cstorch_keeps_torch_defaults(tmp_path, cerebras_pytorch):
    """The drop-in set, derived from the two releases' signatures rather than restated:
    `torch.optim.X(params)` can become `cstorch.optim.X(...)` when cstorch has X, every torch
    parameter cstorch lacks defaults to off (False or None: `maximize`, `fused`, ...) and
    every cstorch-only parameter has a default. Where the fix is offered, the rewritten
    call, bound to the real cstorch signature, gives every shared hyperparameter torch's
    default."""
    torch = pytest.importorskip("torch")
    cstorch = init_signatures(cerebras_pytorch / "optim")
    expected, offered = set(), set()
    for name, cls in sorted(_torch_optimizers(torch).items()):
        torch_params = {p.name: p.default
                        for p in list(inspect.signature(cls.__init__).parameters.values())[1:]}
        finding, fixed = _cs401(tmp_path, name)
        if fixed is not None:
            offered.add(name)
        if name not in cstorch:
            continue
        cs_params = {n: default for n, default, _ in cstorch[name]}
        switched_off = all(torch_params[n] is False or torch_params[n] is None
                           for n in set(torch_params) - set(cs_params))
        optional = all(cs_params[n] is not REQUIRED for n in set(cs_params) - set(torch_params))
        if switched_off and optional:
            expected.add(name)
        if fixed is None:
            continue
        call = ast.parse(fixed).body[-1].value
        positional = [n for n, _, keyword_only in cstorch[name] if not keyword_only]
        bound = dict(cs_params)
        bound.update(zip(positional, (ast.literal_eval(a) if n != "params" else None
                                      for n, a in zip(positional, call.args))))
        bound.update((k.arg, ast.literal_eval(k.value)) for k in call.keywords)
        for parameter in set(bound) & set(torch_params) - {"params"}:
            want, got = torch_params[parameter], bound[parameter]
            assert got is not REQUIRED, (name, parameter, fixed)
            assert _same(got, want), (name, parameter, got, want, fixed)
    assert offered == expected


def _same(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


# ---- CS401 --------------------------------------------------------------------------------------

def test_cs401_fix_is_unsafe_and_says_why(tmp_path):
    (finding,) = _findings(tmp_path, "opt = torch.optim.AdamW(params)\n", "CS401")
    assert finding.fix is not None and not finding.fix.safe
    assert "eps=1e-08, weight_decay=0.01" in finding.message
    assert "unsafe" in finding.message and "eps placement" in finding.message


@pytest.mark.parametrize("call, phrase", [
    ("torch.optim.Adafactor(params, lr=0.01)", "Adafactor"),
    ("torch.optim.Muon(params)", "Muon"),
    ("torch.optim.LBFGS(params)", "not supported"),
    ("torch.optim.SparseAdam(params)", "not supported"),
    ("torch.optim.AdamW(params, 1e-3, (0.9, 0.999), 1e-8, 0.01, True)", "amsgrad"),
    ("torch.optim.Adam(params, **overrides)", "**kwargs"),
])
def test_cs401_without_fix(tmp_path, call, phrase):
    (finding,) = _findings(tmp_path, f"opt = {call}\n", "CS401")
    assert finding.fix is None and phrase in finding.message


def test_cs401_only_in_cstorch_code(tmp_path):
    result = lint_source("import torch\nopt = torch.optim.SGD(params, lr=0.1)\n", tmp_path,
                         options={"select": ["CS401"]})
    assert result.findings == []


def test_cs401_star_import(tmp_path):
    body = "from torch.optim import *\n\nopt = AdamW(params)\n"
    (finding,) = _findings(tmp_path, body, "CS401")
    assert "cstorch.optim.AdamW" in finding.message


# ---- CS402 --------------------------------------------------------------------------------------

def test_cs402_names_the_replacement_signature(tmp_path):
    body = "from torch.optim.lr_scheduler import LinearLR\ns = LinearLR(opt, 0.1, 1.0, 10)\n"
    (finding,) = _findings(tmp_path, body, "CS402")
    assert "cstorch.optim.lr_scheduler.LinearLR(optimizer, initial_learning_rate, " \
           "end_learning_rate, total_iters" in finding.message
    assert finding.fix is None


def test_cs402_reduce_on_plateau_has_no_equivalent(tmp_path):
    (finding,) = _findings(tmp_path, "s = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)\n",
                           "CS402")
    assert "no cstorch equivalent" in finding.message


# ---- CS403 --------------------------------------------------------------------------------------

def test_cs403_ignores_dtype_checks(tmp_path):
    body = """\
        @cstorch.trace
        def f(x):
            assert x.dtype != torch.float64
            return x.float()
    """
    assert _findings(tmp_path, body, "CS403") == []


CS403_FLOWS = {
    "moved to a device, still float64, into a buffer": ("""\
        class M(torch.nn.Module):
            def __init__(self, device):
                super().__init__()
                table = torch.arange(4, dtype=torch.float64)
                self.register_buffer("t", table.to(device))
    """, 1),
    "returned by helpers of the module, stored on it": ("""\
        def base():
            return torch.ones(3).double()
        def scaled():
            return base() * 2
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = scaled()
    """, 1),
    "a float64 function stored on a module": ("""\
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.cast = lambda x: x.double()
    """, 1),
    "a submodule converted": ("""\
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = torch.nn.Linear(2, 2)
            def widen(self):
                self.encoder.double()
    """, 1),
    "a class attribute of a module": ("""\
        class M(torch.nn.Module):
            compute_dtype = torch.float64
    """, 1),
    "stored on a module in parts": ("""\
        class M(torch.nn.Module):
            def __init__(self, a):
                super().__init__()
                for self.k in range(2):
                    pass
                self.x, self.y = a.double(), 1
    """, 1),
    "a custom autograd op's forward": ("""\
        class Op(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.to(torch.float64).sum().float()
    """, 1),
    "cast to a dtype the caller chooses": ("""\
        class M(torch.nn.Module):
            def __init__(self, dtype):
                super().__init__()
                table = torch.arange(4, dtype=torch.float64)
                self.register_buffer("t", table.to(dtype))
    """, 0),
    "read on the host as Python numbers": ("""\
        class M(torch.nn.Module):
            def __init__(self, values):
                super().__init__()
                self.eps = torch.finfo(torch.float64).eps
                self.total = values.double().sum().item()
    """, 0),
    "stored on an object traced code does not read": ("""\
        class Processor:
            def __init__(self):
                self.bins = torch.linspace(0, 1, 8, dtype=torch.float64)
    """, 0),
    "returned by a helper only the host calls": ("""\
        def stats(t):
            return t.double().var()
        def report(t):
            print(stats(t))
    """, 0),
}


@pytest.mark.parametrize("case", CS403_FLOWS)
def test_cs403_follows_float64_to_the_device(tmp_path, case):
    body, expected = CS403_FLOWS[case]
    assert len(_findings(tmp_path, body, "CS403")) == expected


def test_cs403_keeps_what_it_found_before_code_too_deep_to_follow(tmp_path):
    deep_sum = " + ".join(["y"] * 1200)  # deeper than the interpreter's stack
    body = f"torch.set_default_dtype(torch.float64)\nx = {deep_sum}\n"
    assert len(_findings(tmp_path, body, "CS403")) == 1


@pytest.mark.parametrize("line_break", ["\n", "\r\n", "\r"])
def test_cs403_lines_counted_as_python_counts_them(tmp_path, line_break):
    # A form feed and NEL inside strings are line breaks to str.splitlines, not to Python.
    body = 'SEP = "\x0c\x85"\ntorch.set_default_dtype(torch.float64)\n'
    source = (HEADER + body).replace("\n", line_break)
    (finding,) = lint_source(source, tmp_path, options={"select": ["CS403"]}).findings
    assert finding.location.line == HEADER.count("\n") + 2


# ---- CS404 --------------------------------------------------------------------------------------

BODY_404 = "trainer.fit(mode='train_and_eval')\n"


def test_cs404_is_off_without_a_release(tmp_path):
    result = lint_source(HEADER + BODY_404, tmp_path, options={})
    assert "CS404" not in [f.code for f in result.findings]


def test_cs404_by_release(tmp_path):
    assert _findings(tmp_path, BODY_404, "CS404", **{"cstorch-version": "1.9",
                                                     "select": ["CS4"]})
    assert not _findings(tmp_path, BODY_404, "CS404", **{"cstorch-version": "2.0",
                                                         "select": ["CS4"]})


def test_cs404_selected_by_code(tmp_path):
    assert _findings(tmp_path, BODY_404, "CS404", select=["CS404"])


def test_model_zoo_code_is_cerebras_code_for_every_rule(tmp_path):
    """One answer to "does this run on Cerebras": importing the model zoo counts for the
    optimizer and scheduler rules as it does for the precision and mode rules."""
    source = (
        "import torch\n"
        "from cerebras.modelzoo.common.run_utils import main\n"
        "\n"
        "def build(model):\n"
        "    optimizer = torch.optim.Adam(model.parameters())\n"
        "    return torch.optim.lr_scheduler.StepLR(optimizer, 10)\n"
    )
    result = lint_source(source, tmp_path, options={"select": ["CS4"]})
    assert sorted(f.code for f in result.findings) == ["CS401", "CS402"]
