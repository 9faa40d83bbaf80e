"""The same output, byte for byte, for any order of the paths, any number of jobs, with
and without the cache."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from helpers import REPO


def check(root, *arguments: str) -> bytes:
    result = subprocess.run([sys.executable, "-m", "cslint", "check", "--no-config",
                             "--select", "ALL", "--format", "json", *arguments], cwd=root,
                            capture_output=True)
    assert result.returncode == 1, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def fixtures_project(tmp_path_factory):
    root = tmp_path_factory.mktemp("project")
    shutil.copytree(REPO / "fixtures", root / "fixtures")
    (root / "pyproject.toml").write_text("")
    return root


def test_jobs_order_and_cache_do_not_change_the_output(fixtures_project):
    root = fixtures_project
    files = sorted(str(path.relative_to(root)) for path in root.rglob("*.py"))
    assert len(files) >= 32, "enough files for two workers"
    expected = check(root, "--no-cache", "--jobs", "1", *files)
    assert check(root, "--no-cache", "--jobs", "2", *files) == expected
    assert check(root, "--no-cache", "--jobs", "1", *reversed(files)) == expected
    assert check(root, "--no-cache", "--jobs", "2", *reversed(files)) == expected
    assert check(root, "--jobs", "2", *files) == expected  # cold cache
    assert check(root, "--jobs", "1", *reversed(files)) == expected  # warm cache


def test_a_bad_jobs_value_is_a_usage_error(fixtures_project):
    result = subprocess.run([sys.executable, "-m", "cslint", "check", "--jobs", "0", "."],
                            cwd=fixtures_project, capture_output=True, text=True)
    assert result.returncode == 2
    assert "--jobs" in result.stderr and "Traceback" not in result.stderr


def test_a_helper_shared_by_two_files_is_explained_the_same_for_any_order(tmp_path):
    """Two optimizers in two files create state through one helper: the message names
    the class the canonical order meets first, whatever order the paths come in."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "shared.py").write_text(
        "import torch\n\n\ndef init_state(state, p):\n"
        "    state['m'] = torch.zeros_like(p)\n")
    for name in ("First", "Second"):
        (tmp_path / f"{name.lower()}.py").write_text(
            "import cerebras.pytorch as cstorch\nfrom shared import init_state\n\n\n"
            f"class {name}(cstorch.optim.Optimizer):\n"
            "    def preinitialize(self):\n        pass\n\n"
            "    def step(self, closure=None):\n"
            "        for group in self.param_groups:\n"
            "            for p in group['params']:\n"
            "                init_state(self.state[p], p)\n")
    outputs = {check(tmp_path, "--no-cache", *order)
               for order in (["first.py", "second.py", "shared.py"],
                             ["second.py", "first.py", "shared.py"],
                             ["shared.py", "second.py", "first.py"])}
    assert len(outputs) == 1
    assert b"First.step()" in outputs.pop()


def _optimizer_using_a_shared_helper(name: str, lr_expression: str) -> str:
    return ("import cerebras.pytorch as cstorch\nfrom shared import debiased\n\n\n"
            f"class {name}(cstorch.optim.Optimizer):\n"
            "    def preinitialize(self):\n        pass\n\n"
            "    def step(self, closure=None):\n"
            "        for group in self.param_groups:\n"
            f"            lr = {lr_expression}\n"
            "            for p in group['params']:\n"
            "                p.add_(p.grad, alpha=-debiased(lr, 0.9))\n")


def test_a_shared_helper_explains_each_caller_by_its_own_argument(tmp_path):
    """`debiased()` is analysed once for both callers; each finding's explanation still
    follows its own caller's `lr`, so it cannot change with the order of files or with
    which files a cached run re-reads."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "shared.py").write_text(
        "def debiased(step_size, beta):\n    return step_size / (1 - beta)\n")
    (tmp_path / "first.py").write_text(
        _optimizer_using_a_shared_helper("First", "group['lr']"))
    (tmp_path / "second.py").write_text(
        _optimizer_using_a_shared_helper("Second", "group['lr'] * group['gamma']"))
    fresh = check(tmp_path, "--no-cache", "second.py", "first.py", "shared.py")
    assert check(tmp_path, "--no-cache", "first.py", "second.py", "shared.py") == fresh
    findings = {item["path"]: item["message"] for item in json.loads(fresh)
                if item["code"] == "CS205"}
    assert "group['lr'] * group['gamma']" in findings["second.py"]
    assert "gamma" not in findings["first.py"]

    assert check(tmp_path, "first.py", "second.py", "shared.py") == fresh  # cold cache
    with open(tmp_path / "first.py", "a") as edited:
        edited.write("# an edit\n")
    # A warm run re-checks first.py alone: what it says equals a fresh run.
    assert check(tmp_path, "first.py", "second.py", "shared.py") == fresh


def test_with_no_jobs_asked_for_a_small_run_shares_nothing(fixtures_project, monkeypatch):
    """The default (the CPUs) forks workers only for a run of enough files to pay for
    them; a number asked for is used as it is, to read the files and to check them."""
    from cslint import checking, engine, parallel
    from cslint.config import Config

    shared = []

    def fake_map(work, count, jobs, report):
        shared.append(jobs)
        return [work(index) for index in range(count)]

    monkeypatch.setattr(parallel, "map_in_workers", fake_map)
    monkeypatch.setattr(parallel, "default_jobs", lambda: 4)
    paths = [str(fixtures_project / "fixtures")]
    default = engine.lint(paths, Config(), jobs=None)
    assert shared == [] and default.files_checked < checking._FILES_TO_SHARE_BY_DEFAULT
    asked = engine.lint(paths, Config(), jobs=2)
    assert shared == [2, 2]
    monkeypatch.setattr(checking, "_FILES_TO_SHARE_BY_DEFAULT", 1)
    engine.lint(paths, Config(), jobs=None)
    assert shared == [2, 2, 4, 4]
    assert [f.sort_key() for f in asked.findings] == [f.sort_key() for f in default.findings]


def test_optimizer_state_checked_in_a_process_beside_gives_the_same_output(
        fixtures_project, monkeypatch):
    """A project large enough runs the optimizer-state analysis and its rules in a forked
    process while this one runs the others: the findings, messages, fixes and problems
    are those of one process; `--jobs 1` and a run over little source fork nothing."""
    from cslint import checking, engine, parallel
    from cslint.config import Config

    config = Config().with_overrides(select=("ALL",))
    paths = [str(fixtures_project / "fixtures")]
    alone = engine.lint(paths, config, jobs=1)
    started = []
    original = parallel.run_beside
    monkeypatch.setattr(parallel, "run_beside",
                        lambda work: started.append(1) or original(work))
    monkeypatch.setattr(checking, "_SOURCE_TO_ANALYSE_BESIDE", 0)
    assert engine.lint(paths, config, jobs=1).findings == alone.findings and started == []
    beside = engine.lint(paths, config, jobs=None)
    assert started == [1]
    assert beside.findings == alone.findings and beside.errors == alone.errors
    assert any(f.code.startswith("CS1") for f in beside.findings)
    monkeypatch.setattr(checking, "_SOURCE_TO_ANALYSE_BESIDE", 10**12)
    engine.lint(paths, config, jobs=None)
    assert started == [1]


def test_work_that_fails_in_the_process_beside_is_done_here():
    import os

    from cslint.parallel import run_beside

    here = os.getpid()

    def work():
        if os.getpid() != here:
            raise RuntimeError("the child fails")
        return "done here"

    assert run_beside(work)() == "done here"
    assert run_beside(lambda: ["sent", 1])() == ["sent", 1]
    # A result that cannot be sent back (a function does not pickle) is computed here.
    unsendable = run_beside(lambda: (lambda: None) if os.getpid() != here else "not sent")
    assert unsendable() == "not sent"


@pytest.mark.parametrize("definitions_held", [None, 0])
def test_trees_let_go_and_parsed_again_give_the_same_findings(fixtures_project, monkeypatch,
                                                              definitions_held):
    """A project over the budget of held trees lets each tree go once indexed and once
    checked, and parses it again when an analysis or a rule asks (the analyses parse a
    function's own lines, and let them go between entry points past their budget; 0:
    at every one): the findings (their messages and fixes too) are those of a run that
    keeps every tree."""
    import ast

    from cslint import engine, project_files
    from cslint.config import Config
    from cslint.semantic.tensor_values import analysis

    if definitions_held is not None:
        monkeypatch.setattr(analysis, "DEFINITIONS_HELD_WHILE_WALKING", definitions_held)

    config = Config().with_overrides(select=("ALL",))
    paths = [str(fixtures_project / "fixtures")]
    kept = engine.lint(paths, config)
    parses = []
    original = ast.parse
    monkeypatch.setattr(ast, "parse", lambda *a, **k: parses.append(1) or original(*a, **k))
    monkeypatch.setattr(project_files, "HELD_SOURCE_BYTES", 0)
    let_go = engine.lint(paths, config)
    assert let_go.findings == kept.findings and let_go.errors == kept.errors
    assert len(parses) > let_go.files_checked, "some trees were parsed again"
    held = [shown for shown, module in let_go.modules.items() if module.held_tree is not None]
    assert held == [], "no tree outlives its file's check"


def test_files_that_cannot_be_read_are_reported_alike_by_workers(tmp_path):
    """Read by worker processes, a file that does not parse or decode is one line on
    stderr as when read here, and the others are still checked."""
    (tmp_path / "pyproject.toml").write_text("")
    for number in range(40):
        (tmp_path / f"module_{number:02}.py").write_text(
            "import cerebras.pytorch as cstorch\n\n\n"
            "class Opt(cstorch.optim.Optimizer):\n"
            "    def step(self):\n"
            "        for group in self.param_groups:\n"
            "            for p in group['params']:\n"
            "                self.state[p]['m'] = p.grad.clone()\n")
    (tmp_path / "module_07.py").write_text("def broken(:\n")
    (tmp_path / "module_21.py").write_bytes(b"# -*- coding: utf-8 -*-\nx = '\xff'\n")

    def run(jobs: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cslint", "check", "--no-config",
                               "--no-cache", "--jobs", jobs, "--format", "json", "."],
                              cwd=tmp_path, capture_output=True)

    alone, shared = run("1"), run("2")
    assert shared.returncode == alone.returncode == 2
    assert shared.stdout == alone.stdout and shared.stderr == alone.stderr
    assert len({f["path"] for f in json.loads(shared.stdout)}) == 38
    assert shared.stderr.count(b"\n") == 2 and b"Traceback" not in shared.stderr


def test_fixes_with_workers_write_what_one_process_writes(tmp_path):
    """With workers, the files' texts come back compressed (`SourceFile.from_packed`):
    a fix writes the same bytes, BOM and line endings kept, as a run in one process."""
    fixable = (b"\xef\xbb\xbfimport torch\r\nimport cerebras.pytorch as cstorch\r\n\r\n\r\n"
               b"class Plain(cstorch.optim.Optimizer):\r\n"
               b"    def preinitialize(self):\r\n        pass\r\n\r\n"
               b"    @torch.no_grad()\r\n    def step(self):\r\n"
               b"        for group in self.param_groups:\r\n"
               b"            for p in group[\"params\"]:\r\n"
               b"                p.add_(p.grad, alpha=-group[\"lr\"])\r\n")
    written = []
    for jobs in ("1", "2"):
        root = tmp_path / jobs
        root.mkdir()
        (root / "pyproject.toml").write_text("")
        for number in range(40):
            (root / f"m{number:02d}.py").write_bytes(fixable)
        result = subprocess.run([sys.executable, "-m", "cslint", "check", "--no-config",
                                 "--no-cache", "--select", "CS205", "--fix", "--unsafe-fixes",
                                 "--jobs", jobs,
                                 "."], cwd=root, capture_output=True)
        assert result.returncode == 0, result.stderr
        written.append([(root / f"m{number:02d}.py").read_bytes() for number in range(40)])
    assert written[0] == written[1]
    assert written[1][0] != fixable and written[1][0].startswith(b"\xef\xbb\xbf")
    assert b"p.add_(-group[\"lr\"] * p.grad)\r\n" in written[1][0]
