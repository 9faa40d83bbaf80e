"""What cslint reads: only regular files, none over `max-file-size`, and each file with
the project it belongs to.

A checked file (named or found in a named folder) that cannot be read is one line on
stderr, exit 2, and the other files are still checked; a file read only for context is
left out silently (it is reported when it is itself checked)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cslint import engine, project_files
from cslint.cli import main
from cslint.config import DEFAULT_MAX_FILE_SIZE, Config
from cslint.discovery import find_project_root
from cslint.source import InputError, read_regular_file
from helpers import REPO
from test_cli import CLEAN, LAZY, run

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
needs_symlinks = pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with one file that has a finding (lazy.py:17:21: CS101)."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "lazy.py").write_text(LAZY)
    return tmp_path


def cslint(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """`cslint ARGS` in its own process, for the inputs that once blocked a run: a hang
    then fails the test instead of stopping the suite."""
    return subprocess.run([sys.executable, "-m", "cslint", *args], cwd=cwd, timeout=60,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")})


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


@needs_fifo
def test_a_fifo_named_py_is_reported_when_checked_and_never_opened(project):
    os.mkfifo(project / "fifo.py")
    for args in (["check", "."], ["check", "fifo.py", "lazy.py"]):
        result = cslint(args, project)
        assert result.returncode == 2
        assert error_lines(result.stderr) == [
            "cslint: error: fifo.py: not a regular file (a FIFO)"]
        assert "lazy.py:17:21: CS101" in result.stdout


@needs_fifo
def test_a_fifo_named_py_in_the_project_is_skipped_silently_as_context(project):
    os.mkfifo(project / "fifo.py")
    result = cslint(["check", "lazy.py"], project)
    assert (result.returncode, result.stderr) == (1, "")
    assert "lazy.py:17:21: CS101" in result.stdout


@needs_symlinks
@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero here")
def test_a_symlink_to_a_device_is_reported_not_read(project):
    (project / "zero.py").symlink_to("/dev/zero")
    result = cslint(["check", "."], project)
    assert result.returncode == 2
    assert error_lines(result.stderr) == [
        "cslint: error: zero.py: not a regular file (a character device)"]
    assert "lazy.py:17:21: CS101" in result.stdout
    context_only = cslint(["check", "lazy.py"], project)
    assert (context_only.returncode, context_only.stderr) == (1, "")


@needs_symlinks
@pytest.mark.parametrize("args", [["."], ["loop.py", "lazy.py"]])
def test_a_symlink_loop_named_py_is_one_line_not_a_traceback(project, args):
    (project / "loop.py").symlink_to("loop.py")
    result = run(["check", *args], project)
    assert result.exit_code == 2
    [line] = error_lines(result.stderr)
    assert line.startswith("cslint: error: loop.py: cannot read: ")
    assert "lazy.py:17:21: CS101" in result.stdout


@needs_symlinks
def test_a_symlink_loop_in_the_project_is_skipped_silently_as_context(project):
    (project / "loop.py").symlink_to("loop.py")
    result = run(["check", "lazy.py"], project)
    assert (result.exit_code, result.stderr) == (1, "")


@needs_symlinks
def test_a_dangling_symlink_is_reported_as_broken(project):
    (project / "dangling.py").symlink_to("nowhere.py")
    for args in (["."], ["dangling.py", "lazy.py"]):
        result = run(["check", *args], project)
        assert result.exit_code == 2
        assert error_lines(result.stderr) == ["cslint: error: dangling.py: broken symbolic link"]
        assert "lazy.py:17:21: CS101" in result.stdout
    assert run(["check", "lazy.py"], project).stderr == ""


def test_a_folder_named_py_is_walked_as_a_folder(project):
    (project / "odd.py").mkdir()
    (project / "odd.py" / "inner.py").write_text(LAZY)
    result = run(["check", "."], project)
    assert (result.exit_code, result.stderr) == (1, "")
    assert "odd.py/inner.py:17:21: CS101" in result.stdout


def test_an_unreadable_file_in_the_project_is_skipped_silently_as_context(project,
                                                                          monkeypatch):
    (project / "secret.py").write_text("from lazy import Lazy\n\nclass Sub(Lazy):\n    pass\n")
    real_open = os.open

    def refuse(path, *args, **kwargs):  # as root, file modes do not stop reads
        if Path(path).name == "secret.py":
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    result = run(["check", "lazy.py"], project)
    assert (result.exit_code, result.stderr) == (1, "")
    result = run(["check", "."], project)
    assert error_lines(result.stderr) == ["cslint: error: secret.py: cannot read: "
                                          "Permission denied"]


def test_a_path_longer_than_path_max_is_one_line(project):
    too_long = "a/" * 3000 + "x.py"
    result = run(["check", too_long, "lazy.py"], project)
    assert result.exit_code == 2
    [line] = error_lines(result.stderr)
    assert line.startswith(f"cslint: error: {too_long}: cannot read: ")
    assert "lazy.py:17:21: CS101" in result.stdout


def test_a_file_whose_absolute_path_is_longer_than_path_max_is_checked(tmp_path,
                                                                       monkeypatch):
    """Named relative to a deep current folder, it can be read; its package and project
    are looked up by its absolute path, which the system refuses."""
    monkeypatch.chdir(tmp_path)
    while len(os.getcwd()) <= 4200:
        Path("d" * 200).mkdir()
        monkeypatch.chdir("d" * 200)
    Path("lazy.py").write_text(LAZY)
    # (Not `run`: it changes to the absolute folder and back, which the system refuses.)
    result = CliRunner().invoke(main, ["check", "lazy.py"], catch_exceptions=False)
    assert (result.exit_code, result.stderr) == (1, "")
    assert "lazy.py:17:21: CS101" in result.stdout


def test_a_file_deleted_after_it_was_found_is_reported(project, monkeypatch):
    (project / "gone.py").write_text(CLEAN)
    real_walk = engine.walk_python_files

    def walk_then_delete(root, exclude):
        found = real_walk(root, exclude)
        (project / "gone.py").unlink(missing_ok=True)
        return found

    monkeypatch.setattr(engine, "walk_python_files", walk_then_delete)
    result = run(["check", "."], project)
    assert result.exit_code == 2
    assert error_lines(result.stderr) == ["cslint: error: gone.py: no such file or directory"]
    assert "lazy.py:17:21: CS101" in result.stdout


def test_a_project_file_deleted_after_it_was_found_is_skipped_silently(project, monkeypatch):
    (project / "gone.py").write_text("from lazy import Lazy\n\nclass Sub(Lazy):\n    pass\n")
    real_walk = project_files.walk_python_files

    def walk_then_delete(root, exclude, **options):
        found = real_walk(root, exclude, **options)
        (project / "gone.py").unlink(missing_ok=True)
        return found

    monkeypatch.setattr(project_files, "walk_python_files", walk_then_delete)
    result = run(["check", "lazy.py"], project)
    assert (result.exit_code, result.stderr) == (1, "")


@needs_fifo
def test_a_file_that_becomes_a_fifo_before_it_is_opened_is_not_waited_on(tmp_path,
                                                                         monkeypatch):
    target = tmp_path / "swapped.py"
    target.write_text("x = 1\n")
    real_stat = os.stat
    swapped = []

    def stat_then_swap(path, *args, **kwargs):
        info = real_stat(path, *args, **kwargs)
        if Path(path) == target and not swapped:
            target.unlink()
            os.mkfifo(target)
            swapped.append(target)
        return info

    monkeypatch.setattr(os, "stat", stat_then_swap)
    signal.signal(signal.SIGALRM, signal.default_int_handler)
    signal.alarm(10)  # opened without O_NONBLOCK, the FIFO would wait for a writer
    try:
        with pytest.raises(InputError, match="not a regular file"):
            read_regular_file(target, "swapped.py", DEFAULT_MAX_FILE_SIZE)
    finally:
        signal.alarm(0)


def test_a_file_that_grows_after_it_was_measured_is_read_no_further_than_the_limit(
        tmp_path, monkeypatch):
    target = tmp_path / "growing.py"
    target.write_bytes(b"#" * 5000)
    real_fstat = os.fstat

    def stale_fstat(descriptor):  # the size as it was before the file grew
        info = real_fstat(descriptor)
        return os.stat_result((*info[:6], 100, *info[7:10]))

    monkeypatch.setattr(os, "fstat", stale_fstat)
    with pytest.raises(InputError, match="is over max-file-size"):
        read_regular_file(target, "growing.py", 1000)


def test_a_file_over_max_file_size_is_skipped_with_one_line(project):
    (project / "gen.py").write_bytes(b"#" * 20_000_000)
    result = run(["check", "gen.py", "lazy.py"], project)
    assert result.exit_code == 2
    assert error_lines(result.stderr) == [
        "cslint: error: gen.py: 20.0 MB is over max-file-size (10.0 MB); skipped"]
    assert "lazy.py:17:21: CS101" in result.stdout


@pytest.mark.parametrize("setting", ["2000", '"2KB"', '"2 kb"'])
def test_max_file_size_is_read_from_the_configuration(project, setting):
    (project / "pyproject.toml").write_text(f"[tool.cslint]\nmax-file-size = {setting}\n")
    (project / "gen.py").write_bytes(b"#" * 2500)
    result = run(["check", "."], project)
    assert result.exit_code == 2
    assert error_lines(result.stderr) == [
        "cslint: error: gen.py: 2.5 KB is over max-file-size (2.0 KB); skipped"]
    assert "lazy.py:17:21: CS101" in result.stdout


def test_code_from_stdin_over_max_file_size_is_skipped(project):
    (project / "pyproject.toml").write_text("[tool.cslint]\nmax-file-size = 100\n")
    result = run(["check", "-"], project, input=LAZY.encode())
    assert result.exit_code == 2
    assert error_lines(result.stderr) == [
        f"cslint: error: <stdin>: {len(LAZY.encode())} bytes is over max-file-size "
        "(100 bytes); skipped"]


def test_a_project_file_over_max_file_size_is_skipped_silently_as_context(project):
    """The base class lives in a file over the limit: unread, its subclass is not known
    as an optimizer."""
    (project / "base.py").write_text("import cerebras.pytorch as cstorch\n\n\n"
                                     "class Base(cstorch.optim.Optimizer):\n    pass\n"
                                     + "#" * 3000 + "\n")
    (project / "sub.py").write_text(LAZY.replace("import cerebras.pytorch as cstorch",
                                                 "from base import Base")
                                    .replace("cstorch.optim.Optimizer", "Base"))
    assert run(["check", "sub.py"], project).exit_code == 1
    (project / "pyproject.toml").write_text("[tool.cslint]\nmax-file-size = 2000\n")
    result = run(["check", "sub.py"], project)
    assert (result.exit_code, result.stderr) == (0, "")


@pytest.mark.parametrize("setting", ["0", "-5", '"ten"', '"10 TB"', "true", "1.5"])
def test_a_bad_max_file_size_is_exit_2_naming_the_key(project, setting):
    (project / "pyproject.toml").write_text(f"[tool.cslint]\nmax-file-size = {setting}\n")
    result = run(["check", "."], project)
    assert result.exit_code == 2
    [line] = error_lines(result.stderr)
    assert "`max-file-size`" in line


BASE = '''\
import cerebras.pytorch as cstorch


class Base(cstorch.optim.Optimizer):
    def preinitialize(self):
        pass
'''
SUBCLASS = LAZY.replace("import cerebras.pytorch as cstorch", "from pkg.base import Base") \
    .replace("cstorch.optim.Optimizer", "Base")


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """pkg/base.py holds an optimizer base class, pkg/optim/lazy.py a subclass that
    creates state in step(); no pyproject.toml or .git above them."""
    if any((p / "pyproject.toml").exists() or (p / ".git").exists()
           for p in (tmp_path, *tmp_path.parents)):
        pytest.skip("the temporary folder lies in a project")
    optim = tmp_path / "pkg" / "optim"
    optim.mkdir(parents=True)
    for folder in (tmp_path / "pkg", optim):
        (folder / "__init__.py").write_text("")
    (tmp_path / "pkg" / "base.py").write_text(BASE)
    (optim / "lazy.py").write_text(SUBCLASS)
    return tmp_path


def test_without_markers_the_project_is_the_top_of_the_package_chain(package):
    top = package / "pkg"
    assert find_project_root([top / "optim" / "lazy.py"]) == top.resolve()
    assert find_project_root([top / "optim"]) == top.resolve()
    assert find_project_root([top]) == top.resolve()
    (package / "script.py").write_text("")  # no package: its own folder
    assert find_project_root([package / "script.py"]) == package.resolve()


@pytest.mark.parametrize("checked", ["pkg/optim/lazy.py", "pkg/optim", "pkg"])
def test_a_file_checked_alone_gets_its_package_as_context(package, checked):
    result = run(["check", "--no-config", checked], package)
    assert result.exit_code == 1, result.stdout + result.stderr
    assert f"{Path('pkg/optim/lazy.py')}:17:21: CS101" in result.stdout


def test_unrelated_trees_are_each_their_own_context_not_everything_between_them(
        tmp_path, monkeypatch):
    """`cslint check ~/a/pkg ~/b/pkg2` with no project above them: their common folder is
    the home folder, whose every Python file would be read as context (the whole disk
    for trees under / and /root: minutes and gigabytes). Each tree is its own context;
    there is no project folder, so no cache is written."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for folder, package in (("a", "first"), ("b", "second")):
        (tmp_path / folder / package).mkdir(parents=True)
        (tmp_path / folder / package / "__init__.py").write_text("")
        (tmp_path / folder / package / "model.py").write_text(
            f"class {package.title()}Base:\n    pass\n")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "elsewhere.py").write_text("from first.model import FirstBase\n")
    read = []
    reader = project_files.read_regular_file
    monkeypatch.setattr(project_files, "read_regular_file",
                        lambda path, *rest: read.append(Path(path).name) or reader(path, *rest))
    result = engine.lint([str(tmp_path / "a" / "first"), str(tmp_path / "b" / "second")],
                         Config(select=("ALL",)))
    assert result.errors == [] and result.files_checked == 4
    assert result.project_root is None
    assert "elsewhere.py" not in read
    assert not any(tmp_path.rglob(".cslint_cache"))


HOST_READ = '''\
import math

import torch
import cerebras.pytorch as cstorch


class Reads(cstorch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def preinitialize(self):
        pass

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.mul_(math.sqrt(p.sum()))
'''

SHADOWING_MATH = "def sqrt(x):\n    return x\n"


def test_a_script_alone_gets_its_folder_and_its_packages_not_every_tree_below(
        tmp_path, monkeypatch):
    """A script with no project marked above it (a downloads folder, /tmp) is read with
    the files beside it and the packages it can import, not every folder below (a lone
    file in a crowded /tmp took 5 s); a `math.py` among those other folders' scripts is
    not the `math` it imports."""
    if any((p / "pyproject.toml").exists() or (p / ".git").exists()
           for p in (tmp_path, *tmp_path.parents)):
        pytest.skip("the temporary folder lies in a project")
    (tmp_path / "script.py").write_text(HOST_READ)
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "__init__.py").write_text("")
    (tmp_path / "helpers" / "model.py").write_text("X = 1\n")
    (tmp_path / "elsewhere" / "tools").mkdir(parents=True)
    (tmp_path / "elsewhere" / "tools" / "math.py").write_text(SHADOWING_MATH)
    read = []
    reader = project_files.read_regular_file
    monkeypatch.setattr(project_files, "read_regular_file",
                        lambda path, *rest: read.append(Path(path).name) or reader(path, *rest))
    result = engine.lint([str(tmp_path / "script.py")], Config(select=("ALL",)))
    assert [f.code for f in result.findings] == ["CS204"]
    assert "model.py" in read and "math.py" not in read


def test_a_script_named_like_the_standard_library_shadows_it_only_beside_itself(tmp_path):
    """In a project, `tools/math.py` (a folder of scripts) is the `math` of the scripts
    beside it (their folder comes first on sys.path), not of the project's other files;
    a package of the project named like one (`profile/`) stays the project's."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "math.py").write_text(SHADOWING_MATH)
    (tmp_path / "tools" / "beside.py").write_text(HOST_READ)
    (tmp_path / "train.py").write_text(HOST_READ)
    (tmp_path / "profile").mkdir()
    (tmp_path / "profile" / "__init__.py").write_text("from .base import Base\n")
    (tmp_path / "profile" / "base.py").write_text(
        "import cerebras.pytorch as cstorch\n\n\nclass Base(cstorch.optim.Optimizer):\n"
        "    def preinitialize(self):\n        pass\n")
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "lazy.py").write_text(
        "import torch\nfrom profile import Base\n\n\nclass Lazy(Base):\n"
        "    def step(self, closure=None):\n        for group in self.param_groups:\n"
        "            for p in group['params']:\n"
        "                self.state[p]['m'] = torch.zeros_like(p)\n")
    result = engine.lint([str(tmp_path)], Config(select=("ALL",)))
    assert sorted((Path(f.path).name, f.code) for f in result.findings) == \
        [("base.py", "CS103"), ("lazy.py", "CS101"), ("train.py", "CS204")]
