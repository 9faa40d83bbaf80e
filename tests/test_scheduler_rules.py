"""CS301-CS305 beyond the fixtures: release-dependent names, real-world sources (PyTorch's
own schedulers, the official cerebras-pytorch optim folder), cross-file reach."""

from __future__ import annotations

import os
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from cslint.config import Config
from cslint.engine import lint
from helpers import lint_source

CEREBRAS_PYTORCH = Path(os.environ.get("CSLINT_CEREBRAS_PYTORCH", "/tmp/csp/cerebras/pytorch"))


def _codes(result, code):
    return [f for f in result.findings if f.code == code]


SEED_SCHEDULER = textwrap.dedent('''\
    import torch
    import cerebras.pytorch as cstorch


    class CustomScheduler(cstorch.optim.lr_scheduler.LRScheduler):
        def __init__(self, optimizer, total_iters, last_epoch=-1):
            super().__init__(optimizer, total_iters=total_iters, last_epoch=last_epoch)

        def _get_closed_form_lr(self) -> torch.Tensor:
            return torch.tensor(0.1) * torch.pow(0.9, self.last_epoch)
''')


@pytest.mark.parametrize("version, flagged", [(None, False), ("2.4", False), ("2.5", True),
                                              ("2.10", True)])
def test_seed_docs_scheduler_by_release(tmp_path, version, flagged):
    options = {"select": ["CS301"]}
    if version:
        options["cstorch-version"] = version
    result = lint_source(SEED_SCHEDULER, tmp_path, options=options)
    found = _codes(result, "CS301")
    assert bool(found) == flagged
    if flagged:
        assert "rename it" in found[0].message
        assert found[0].location.line == 5 and found[0].location.column == 7


def test_modern_name_before_2_5_names_the_release_name(tmp_path):
    source = SEED_SCHEDULER.replace("_get_closed_form_lr", "_get_closed_form")
    result = lint_source(source, tmp_path, options={"select": ["CS301"],
                                                    "cstorch-version": "2.4"})
    (finding,) = _codes(result, "CS301")
    assert "_get_closed_form_lr()" in finding.message and "before 2.5" in finding.message
    assert not _codes(lint_source(source, tmp_path, options={"select": ["CS301"]}), "CS301")


def test_helper_reached_from_two_schedulers_across_files_is_reported_once(tmp_path):
    (tmp_path / "base.py").write_text(textwrap.dedent('''\
        import torch
        import cerebras.pytorch as cstorch


        class Base(cstorch.optim.lr_scheduler.LRScheduler):
            def _previous(self):
                return self.optimizer.param_groups[0]["lr"]

            def _get_closed_form(self):
                return self._previous() * 0.5

            def get_lr(self):
                return [self._previous()]
    '''))
    (tmp_path / "children.py").write_text(textwrap.dedent('''\
        from base import Base


        class A(Base):
            pass


        class B(Base):
            def _get_closed_form(self):
                return self._previous() * 0.25
    '''))
    config = Config(select=("CS3",))
    both = lint([str(tmp_path / "base.py"), str(tmp_path / "children.py")], config,
                project_root=tmp_path)
    found = _codes(both, "CS302")
    assert [(Path(f.path).name, f.location.line) for f in found] == [("base.py", 7)]
    # Checking the children alone reports nothing in them (the line is in base.py).
    alone = lint([str(tmp_path / "children.py")], config, project_root=tmp_path)
    assert not alone.findings
    # Checking the base alone still finds it (its subclasses are read as dependents).
    base = lint([str(tmp_path / "base.py")], config, project_root=tmp_path)
    assert [f.location.line for f in _codes(base, "CS302")] == [7]


def test_closed_form_analysis_reaches_bound_methods(tmp_path):
    source = textwrap.dedent('''\
        import torch
        import cerebras.pytorch as cstorch


        class Annealing(cstorch.optim.lr_scheduler.LRScheduler):
            def _cos(self, pct):
                self.calls += 1
                return torch.cos(pct)

            def _get_closed_form(self):
                anneal = self._cos
                return anneal(self.last_epoch / 100.0)
    ''')
    result = lint_source(source, tmp_path, options={"select": ["CS303"]})
    assert [f.location.line for f in result.findings] == [7]


# ---- PyTorch's own schedulers ---------------------------------------------------------------

def _torch_lr_scheduler() -> Path:
    torch = pytest.importorskip("torch")
    return Path(torch.__file__).parent / "optim" / "lr_scheduler.py"


def test_torch_recursive_schedulers_get_cs302_once_per_line():
    path = _torch_lr_scheduler()
    result = lint([str(path)], Config(select=("CS3",)), project_root=path.parent)
    assert not result.errors
    found = _codes(result, "CS302")
    lines = [f.location.line for f in found]
    assert len(lines) == len(set(lines)), "a line reported twice"
    by_class = Counter(f.message.split(".")[0] for f in found)
    for name in ("ExponentialLR", "StepLR", "MultiStepLR", "MultiplicativeLR",
                 "CosineAnnealingLR", "ConstantLR", "LinearLR", "PolynomialLR"):
        assert by_class[name] >= 1, (name, by_class)
    # CosineAnnealingLR.get_lr: the initial read, and both recursive branches.
    assert by_class["CosineAnnealingLR"] == 3
    # Closed forms (base_lrs, the step) are never reported.
    assert not any("_get_closed_form_lr" in f.message for f in found)
    assert {f.code for f in result.findings} <= {"CS302"}
    text = path.read_text(encoding="utf-8").splitlines()
    for finding in found:
        line = text[finding.location.line - 1]
        assert '"lr"' in line, line


# ---- the official cerebras-pytorch optim folder ------------------------------------------------

@pytest.mark.skipif(not (CEREBRAS_PYTORCH / "optim").is_dir(),
                    reason="needs the cerebras-pytorch 2.10 sources (CSLINT_CEREBRAS_PYTORCH)")
def test_official_optim_folder_has_no_scheduler_or_program_findings():
    result = lint([str(CEREBRAS_PYTORCH / "optim")],
                  Config(select=("CS3", "CS4"), cstorch_version=(2, 10)))
    assert not result.errors
    assert result.findings == [], [f"{f.path}:{f.location.line} {f.code} {f.message}"
                                   for f in result.findings]


@pytest.mark.skipif(not (CEREBRAS_PYTORCH / "optim").is_dir(),
                    reason="needs the cerebras-pytorch 2.10 sources (CSLINT_CEREBRAS_PYTORCH)")
def test_official_schedulers_are_analysed():
    """The clean result above is not for lack of looking: the closed forms are reached."""
    from cslint.engine import _load
    from cslint.semantic.official import load_official_api
    from cslint.semantic.project import ProjectIndex
    from cslint.semantic.scheduler import SchedulerAnalysis

    files = sorted((CEREBRAS_PYTORCH / "optim").glob("*.py"))
    modules = [_load(f, str(f)).module for f in files]
    project = ProjectIndex(modules, load_official_api(), Config(cstorch_version=(2, 10)))
    analysis = SchedulerAnalysis(project)
    analysis.run()
    reached = {r.function.qualname.rsplit(".", 2)[-2] + "." + r.function.name
               for r in analysis.reached.values()}
    assert {"CyclicScheduler._get_closed_form", "CyclicScheduler.set_scale_fn",
            "OneCycleScheduler._annealing_cos", "ScalePerParamScheduler.get"} <= reached
    assert sum(1 for _, cstorch in analysis.schedulers if cstorch) >= 50
