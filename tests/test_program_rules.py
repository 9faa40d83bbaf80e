"""CS401-CS404 beyond the fixtures: the signature table against the installed torch,
messages and fixes, the release gate of CS404."""

from __future__ import annotations

import inspect
import textwrap

import pytest

from cslint.semantic.program import torch_equivalents
from helpers import lint_source

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
    for name, entry in torch_equivalents()["optimizers"].items():
        cls = getattr(torch.optim, name)
        assert cls is not None
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


def test_drop_ins_are_exactly_the_issue_list():
    drop_ins = {n for n, e in torch_equivalents()["optimizers"].items()
                if e["status"] == "drop-in"}
    assert drop_ins == {"SGD", "Adam", "AdamW", "Adadelta", "Adagrad", "Adamax", "ASGD",
                        "NAdam", "RAdam", "RMSprop", "Rprop"}


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
        def f(x):
            assert x.dtype != torch.float64
            return x.float()
    """
    assert _findings(tmp_path, body, "CS403") == []


@pytest.mark.parametrize("line_break", ["\n", "\r\n", "\r"])
def test_cs403_lines_counted_as_python_counts_them(tmp_path, line_break):
    # A form feed and NEL inside strings are line breaks to str.splitlines, not to Python.
    body = 'SEP = "\x0c\x85"\nx = torch.zeros(3, dtype=torch.float64)\n'
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
