"""The released cerebras-pytorch sources (2.10.0): what the linter reports on the official
optim folder by release, and the data tables checked against the release they describe.

These read the unpacked wheel that `.ci/run` downloads (the `cerebras_pytorch` fixture in
conftest.py): they skip without it, and fail in CI (CI=true) without it.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from cslint.config import DEFAULT_MAX_FILE_SIZE, Config
from cslint.engine import lint
from cslint.semantic.program import torch_equivalents
from helpers import REPO, init_signatures, official_api_table


def _class_defined_at(path: str, line: int) -> str:
    text = Path(path).read_text(encoding="utf-8").splitlines()[line - 1]
    match = re.match(r"\s*class\s+(\w+)", text)
    assert match, f"{path}:{line} is not a class definition: {text}"
    return match.group(1)


def _classes_needing_before_2_5(method: str, leaves_only: bool = False) -> set[str]:
    """Module-level classes of cerebras.pytorch.optim that, by the official API table, must
    define `method` before 2.5; `leaves_only`: without those that others of them derive
    from. (Nested classes are left out: the table also lists the docs-only stub
    `torch.optim.Optimizer` that optimizer.py defines under `if _generating_docs:`.)"""
    classes = {qualname: entry for qualname, entry in official_api_table()["classes"].items()
               if re.fullmatch(r"cerebras\.pytorch\.optim\.\w+\.\w+", qualname)
               and method in entry.get("before", {}).get("2.5", {}).get("methods", ())}
    if leaves_only:
        bases = {base for entry in classes.values() for base in entry["bases"]}
        classes = {qualname: entry for qualname, entry in classes.items()
                   if qualname not in bases}
    return {qualname.rsplit(".", 1)[-1] for qualname in classes}


def test_official_optim_folder_on_its_own_release(cerebras_pytorch):
    """On 2.10 the whole default rule set finds exactly Muon's lazily created, rebound
    momentum buffer, and nothing in the schedulers, the base classes or the other
    optimizers."""
    result = lint([str(cerebras_pytorch / "optim")], Config(cstorch_version=(2, 10)))
    assert not result.errors, [e.render() for e in result.errors]
    found = [(Path(f.path).name, f.location.line, f.code) for f in result.findings]
    assert found == [("Muon.py", 228, "CS101"), ("Muon.py", 231, "CS107")], found


def test_official_optim_folder_against_release_2_4(cerebras_pytorch):
    """Against 2.4, the 2.10 sources lack what releases before 2.5 required: every concrete
    optimizer its state_names_to_sparsify() (CS106), every LR scheduler its
    _get_closed_form_lr() (CS301); the classes are those the official table marks (CS301
    reports a scheduler other schedulers derive from at those, not itself: ChainedLR
    through ChainedScheduler)."""
    result = lint([str(cerebras_pytorch / "optim")], Config(cstorch_version=(2, 4)))
    assert not result.errors, [e.render() for e in result.errors]
    counts = Counter(f.code for f in result.findings)
    assert counts == {"CS106": 16, "CS301": 19, "CS101": 1, "CS107": 1}, counts
    for code, expected in (
            ("CS106", _classes_needing_before_2_5("state_names_to_sparsify")),
            ("CS301", _classes_needing_before_2_5("_get_closed_form_lr", leaves_only=True))):
        flagged = [_class_defined_at(f.path, f.location.line)
                   for f in result.findings if f.code == code]
        assert sorted(flagged) == sorted(expected), code


def test_official_schedulers_are_analysed(cerebras_pytorch):
    """The clean result on 2.10 is not for lack of looking: the closed forms are reached."""
    from cslint.project_files import load_file
    from cslint.semantic.scheduler import SchedulerAnalysis
    from cslint.semantic.official import load_official_api
    from cslint.semantic.project import ProjectIndex

    files = sorted((cerebras_pytorch / "optim").glob("*.py"))
    modules = [load_file(f, str(f), DEFAULT_MAX_FILE_SIZE).module for f in files]
    project = ProjectIndex(modules, load_official_api(), Config(cstorch_version=(2, 10)))
    analysis = SchedulerAnalysis(project)
    analysis.run()
    reached = {r.function.qualname.rsplit(".", 2)[-2] + "." + r.function.name
               for r in analysis.reached.values()}
    assert {"CyclicScheduler._get_closed_form", "CyclicScheduler.set_scale_fn",
            "OneCycleScheduler._annealing_cos", "ScalePerParamScheduler.get"} <= reached
    assert sum(1 for _, cstorch in analysis.schedulers if cstorch) >= 50


def test_official_api_table_is_what_the_generator_makes_of_the_release(
        cerebras_pytorch, tmp_path, monkeypatch):
    """`data/official_api.json` is regenerated from these sources (and the installed torch)
    by scripts/generate_official_api.py: the packaged table must be its current output."""
    torch = pytest.importorskip("torch")
    table = official_api_table()
    if not torch.__version__.startswith(table["releases"]["torch"]):
        pytest.skip("the table was generated with another torch release")
    spec = importlib.util.spec_from_file_location(
        "generate_official_api", REPO / "scripts" / "generate_official_api.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    output = tmp_path / "official_api.json"
    monkeypatch.setattr(generator, "OUTPUT", output)
    monkeypatch.setattr(sys, "argv", ["generate_official_api.py",
                                      "--cerebras", str(cerebras_pytorch)])
    generator.main()
    assert json.loads(output.read_text(encoding="utf-8")) == table, (
        "official_api.json is stale: run scripts/generate_official_api.py")


def test_torch_equivalents_cstorch_signatures_are_the_release_signatures(cerebras_pytorch):
    """The cstorch half of `data/torch_equivalents.json` (what CS401's fix writes against)
    is read from each optimizer's `__init__` in the release."""
    signatures = init_signatures(cerebras_pytorch / "optim")
    entries = {name: entry for name, entry in torch_equivalents()["optimizers"].items()
               if "cstorch" in entry}
    assert entries, "no cstorch signatures in the table"
    for name, entry in entries.items():
        assert name in signatures, f"cstorch.optim has no {name}.__init__"
        table = [(row["name"], row.get("default", "<required>"), bool(row.get("keyword_only")))
                 for row in entry["cstorch"]]
        released = [(param, list(default) if isinstance(default, tuple) else default, kw)
                     for param, default, kw in signatures[name]]
        assert table == released, name
