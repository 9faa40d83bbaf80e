"""The pre-commit hooks of `.pre-commit-hooks.yaml`, run by the real pre-commit in a
temporary git repository, as a user's `git commit` runs them."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import REPO

# What `pip install .` reads to build cslint, and the hook definitions.
INSTALLED_FILES = ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml", "src", "rules")

BASE = '''\
import abc

import torch
import cerebras.pytorch as cstorch


class Base(cstorch.optim.Optimizer):
    def preinitialize(self):
        pass

    def init_buffers(self, p):
        state = self.state[p]
        if "m" not in state:
            state["m"] = torch.zeros_like(p)

    @abc.abstractmethod
    def step(self, closure=None):
        ...
'''
LAZY_CREATION_LINE = BASE.splitlines().index('            state["m"] = torch.zeros_like(p)') + 1
# Base's helper creates state only when reached from this subclass's step, in another file.
SUB = '''\
from base import Base


class Sub(Base):
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                self.init_buffers(p)
'''
FIXED_BASE = '''\
import abc

import cerebras.pytorch as cstorch


class Base(cstorch.optim.Optimizer):
    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["m"] = cstorch.zeros_like(p)

    def init_buffers(self, p):
        pass

    @abc.abstractmethod
    def step(self, closure=None):
        ...
'''
EAGER_CONSTANT = '''\
import torch
import cerebras.pytorch as cstorch


class Eager(cstorch.optim.Optimizer):
    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["m"] = torch.zeros_like(p)

    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["m"].mul_(0.9).add_(p.grad)
'''


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def _missing(what: str) -> None:
    """Skip without `what` on a laptop; fail under CI=true, where these tests must run."""
    message = f"needs {what}"
    if _in_ci():
        pytest.fail(f"CI=true but {message}", pytrace=False)
    pytest.skip(message)


def _environment(pre_commit_home: Path) -> dict[str, str]:
    env = dict(os.environ, PRE_COMMIT_HOME=str(pre_commit_home),
               GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    # The hook must run the cslint installed in its own environment, not a source tree.
    env.pop("PYTHONPATH", None)
    for variable in ("SKIP", "PRE_COMMIT_ALLOW_NO_CONFIG", "GIT_DIR", "GIT_INDEX_FILE"):
        env.pop(variable, None)
    return env


def _git(cwd: Path, *args: str, env: dict[str, str]) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def _new_repository(path: Path, env: dict[str, str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q", env=env)
    _git(path, "config", "user.name", "cslint tests", env=env)
    _git(path, "config", "user.email", "tests@cslint.invalid", env=env)
    _git(path, "config", "commit.gpgsign", "false", env=env)
    return path


@pytest.fixture(scope="session")
def hook_source(tmp_path_factory) -> tuple[Path, str, dict[str, str]]:
    """This project as a pre-commit `repo:`: a git repository holding its working tree as
    it is now (uncommitted edits too), and the environment that runs pre-commit with a
    store shared by the session, so the hook's environment is built once."""
    if shutil.which("git") is None:
        _missing("git")
    try:
        importlib.metadata.version("pre-commit")
    except importlib.metadata.PackageNotFoundError:
        _missing("the pre-commit package (the `test` extra installs it)")
    env = _environment(tmp_path_factory.mktemp("pre-commit-home"))
    source = _new_repository(tmp_path_factory.mktemp("cslint-source"), env)
    for name in INSTALLED_FILES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(REPO / name, source / name)
    _git(source, "add", "-A", env=env)
    _git(source, "commit", "-q", "-m", "cslint as the tests see it", env=env)
    return source, _git(source, "rev-parse", "HEAD", env=env), env


def _project(tmp_path: Path, hook_source, *hook_ids: str) -> Path:
    """A git repository whose .pre-commit-config.yaml runs `hook_ids` from this project."""
    source, rev, env = hook_source
    project = _new_repository(tmp_path / "project", env)
    hooks = "".join(f"      - id: {hook_id}\n" for hook_id in hook_ids)
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {source.as_posix()}\n    rev: {rev}\n    hooks:\n{hooks}")
    return project


def _run(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=project, env=env, capture_output=True, text=True)


def _pre_commit(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return _run(project, env, sys.executable, "-m", "pre_commit", *args)


def _whole_tree_run(project: Path) -> subprocess.CompletedProcess:
    """`cslint check .` by the cslint under test (this process's environment)."""
    return subprocess.run([sys.executable, "-m", "cslint", "check", "."], cwd=project,
                          capture_output=True, text=True)


def _finding_lines(output: str) -> set[str]:
    return {line for line in output.splitlines() if ": CS" in line}


def test_a_commit_runs_the_hook_on_its_staged_files(tmp_path, hook_source):
    _, _, env = hook_source
    project = _project(tmp_path, hook_source, "cslint")
    installed = _pre_commit(project, env, "install")
    assert installed.returncode == 0, installed.stdout + installed.stderr

    # No Python file staged: the hook has nothing to check, and the commit goes through.
    (project / "notes.txt").write_text("release notes\n")
    _git(project, "add", ".pre-commit-config.yaml", "notes.txt", env=env)
    commit = _run(project, env, "git", "commit", "-m", "notes")
    assert commit.returncode == 0, commit.stdout + commit.stderr
    assert "(no files to check)Skipped" in commit.stdout + commit.stderr

    (project / "sub.py").write_text(SUB)
    _git(project, "add", "sub.py", env=env)
    _git(project, "commit", "-q", "--no-verify", "-m", "sub", env=env)

    # Only base.py is staged and handed to the hook; its finding shows through sub.py.
    (project / "base.py").write_text(BASE)
    _git(project, "add", "base.py", env=env)
    commit = _run(project, env, "git", "commit", "-m", "base")
    output = commit.stdout + commit.stderr
    assert commit.returncode == 1, output
    assert "- hook id: cslint" in output
    hook_findings = _finding_lines(output)
    assert any(line.startswith(f"base.py:{LAZY_CREATION_LINE}:") and ": CS101 " in line
               for line in hook_findings), output
    whole_tree = _whole_tree_run(project)
    assert whole_tree.returncode == 1, whole_tree.stderr
    assert hook_findings == {line for line in _finding_lines(whole_tree.stdout)
                             if line.startswith("base.py:")}
    assert _git(project, "rev-list", "--count", "HEAD", env=env) == "2"  # refused

    (project / "base.py").write_text(FIXED_BASE)
    _git(project, "add", "base.py", env=env)
    commit = _run(project, env, "git", "commit", "-m", "base, state in preinitialize")
    output = commit.stdout + commit.stderr
    assert commit.returncode == 0, output
    assert re.search(r"^cslint\.+Passed$", output, re.MULTILINE), output
    assert _git(project, "rev-list", "--count", "HEAD", env=env) == "3"


def test_the_hook_leaves_out_the_files_the_configuration_excludes(tmp_path, hook_source):
    """pre-commit names every staged file; a whole-tree run skips the excluded ones, and
    so must the hook."""
    _, _, env = hook_source
    project = _project(tmp_path, hook_source, "cslint")
    (project / "pyproject.toml").write_text('[tool.cslint]\nexclude = ["legacy/**"]\n')
    (project / "legacy").mkdir()
    (project / "legacy" / "base.py").write_text(BASE)
    (project / "legacy" / "sub.py").write_text(SUB)
    _git(project, "add", "-A", env=env)

    result = _pre_commit(project, env, "run", "cslint")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert re.search(r"^cslint\.+Passed$", output, re.MULTILINE), output
    whole_tree = _whole_tree_run(project)
    assert whole_tree.returncode == 0, whole_tree.stdout + whole_tree.stderr


def test_the_fix_hook_rewrites_the_staged_file(tmp_path, hook_source):
    _, _, env = hook_source
    project = _project(tmp_path, hook_source, "cslint-fix")
    (project / "eager.py").write_text(EAGER_CONSTANT)
    _git(project, "add", "-A", env=env)

    # pre-commit fails a hook that changes files, so the user sees and stages the fix.
    result = _pre_commit(project, env, "run", "cslint-fix")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "- files were modified by this hook" in output
    fixed = (project / "eager.py").read_text()
    assert fixed == EAGER_CONSTANT.replace('= torch.zeros_like(p)', '= cstorch.zeros_like(p)')

    _git(project, "add", "eager.py", env=env)
    result = _pre_commit(project, env, "run", "cslint-fix")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_hook_environment_holds_the_linter_without_torch(tmp_path, hook_source):
    source, _, env = hook_source
    project = _project(tmp_path, hook_source, "cslint")
    installed = _pre_commit(project, env, "install-hooks")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    site_packages = list(Path(env["PRE_COMMIT_HOME"]).glob(
        "repo*/py_env-*/lib*/python*/site-packages"))
    assert len(site_packages) == 1, site_packages
    installed_names = {distribution.metadata["Name"].lower().replace("_", "-")
                       for distribution in importlib.metadata.distributions(
                           path=[str(site_packages[0])])}
    assert {"cslint", "libcst", "click"} <= installed_names
    assert "torch" not in installed_names
