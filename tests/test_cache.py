"""The findings cache: the same output as a run without it, after any edit anywhere."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cslint.config import Config
from cslint.engine import CacheOptions, lint
from cslint.source import SourceFile
from helpers import REPO

# A package whose findings cross files: a base class, a helper the step calls, a traced
# function made traced by its caller, and an optimizer using all three.
PACKAGE = {
    "pkg/__init__.py": "",
    "pkg/base.py": '''\
import torch
import cerebras.pytorch as cstorch


class Base(cstorch.optim.Optimizer):
    def preinitialize(self):
        pass

    def momentum(self, p):
        return self.state[p]["m"]
''',
    "pkg/helpers.py": '''\
def clip(value, limit):
    if value > limit:
        return limit
    return value


def scale(value):
    return value * 2


def gate(value):
    if value > 0:
        return value
    return -value
''',
    "pkg/opt.py": '''\
import torch
from pkg.base import Base
from pkg.helpers import clip


class Opt(Base):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                g = clip(p.grad, 1.0)
                p.add_(g)
''',
    "pkg/other.py": '''\
import torch


def unrelated(x):
    return x + 1
''',
}


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def findings(root: Path, cached: bool, paths: list[str] | None = None,
             config: Config = Config(select=("ALL",))) -> list[tuple]:
    result = lint(paths or [str(root)], config, project_root=root,
                  cache=CacheOptions() if cached else None)
    return ([(f.path, f.location, f.code, f.message, f.fingerprint) for f in result.findings],
            [e.render() for e in result.errors], result.files_checked)


@pytest.fixture
def package(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    write(tmp_path, PACKAGE)
    return tmp_path


def assert_cache_agrees(root: Path) -> None:
    assert findings(root, cached=True) == findings(root, cached=False)


def test_a_warm_run_gives_what_a_cold_run_gives_and_parses_nothing(package, monkeypatch):
    cold = findings(package, cached=True)
    assert cold[0], "the package has findings"
    assert (package / ".cslint_cache" / ".gitignore").read_text().strip().endswith("*")
    parsed = []
    original = SourceFile.parse
    monkeypatch.setattr(SourceFile, "parse", lambda self: parsed.append(self) or original(self))
    assert findings(package, cached=True) == cold == findings(package, cached=False)[:3]
    parsed.clear()
    findings(package, cached=True)
    assert parsed == []


@pytest.mark.parametrize("arguments", [[], ["--format", "json"], ["--format", "github"],
                                       ["--format", "gitlab"], ["--format", "sarif"],
                                       ["--show-source"]])
def test_a_warm_report_is_the_cold_one_and_reads_files_only_for_their_lines(
        package, arguments, monkeypatch):
    """Each format's report from the cache is the one a cold run prints. The files
    behind the cached findings are read only where the report shows their lines
    (--show-source) or their fixes as edits (SARIF): a warm run's time went into that."""
    from click.testing import CliRunner

    from cslint.cli import main

    def report() -> str:
        old = os.getcwd()
        os.chdir(package)
        try:
            result = CliRunner().invoke(main, ["check", "--no-config", "--select", "ALL",
                                               *arguments, "."])
        finally:
            os.chdir(old)
        return result.stdout

    cold = report()
    read = []
    original = SourceFile.read
    monkeypatch.setattr(SourceFile, "read", staticmethod(
        lambda *args, **kwargs: read.append(args[1]) or original(*args, **kwargs)))
    assert report() == cold
    needs_text = bool(set(arguments) & {"--show-source", "sarif"})
    assert bool(read) == needs_text, read


def test_a_warm_run_loads_no_analysis_and_no_rule(package):
    """A run whose every file the cache holds has nothing to analyse: it chooses its
    codes from `cslint.codes` and imports no analysis, no rule family, not the checks
    nor the file index (a third of a warm run's time went into those imports)."""
    probe = (
        "import sys\n"
        "from cslint.cli import main\n"  # (`python -m cslint` ends with os._exit)
        "sys.argv = ['cslint', 'check', '--no-config', '--select', 'ALL', '.']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exit:\n"
        "    code = exit.code\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('cslint.semantic.',\n"
        "                'cslint.rules.', 'cslint.checking', 'cslint.fingerprints',\n"
        "                'cslint.baseline', 'cslint.suppressions', 'hashlib')))\n"
        "print('EXIT', code, 'LOADED', loaded)\n"
    )

    def run() -> str:
        return subprocess.run([sys.executable, "-c", probe], cwd=package, capture_output=True,
                              text=True, check=True).stdout

    cold = run()
    assert "EXIT 1 LOADED ['cslint.checking'" in cold, cold
    assert "EXIT 1 LOADED []" in run()
    (package / "pkg" / "other.py").write_text("def unrelated(x):\n    return x + 2\n")
    assert "cslint.semantic.tensor_values" in run()


def test_a_warm_run_that_changed_nothing_writes_nothing(package):
    """Entries that have seen every change are not marked again: the database's
    generation (a counter of the runs that saved) stays where it was."""
    import sqlite3

    def generation() -> int:
        [database] = (package / ".cslint_cache").glob("*.sqlite")
        with sqlite3.connect(database) as connection:
            return connection.execute("SELECT value FROM meta WHERE key = 'generation'"
                                      ).fetchone()[0]

    cold = findings(package, cached=True)
    saved = generation()
    assert findings(package, cached=True) == cold and generation() == saved
    (package / "pkg" / "other.py").write_text("def unrelated(x):\n    return x + 2\n")
    assert findings(package, cached=True) == findings(package, cached=False)
    assert generation() == saved + 1


def test_entries_lists_of_files_are_read_only_once_a_file_changed(package, monkeypatch):
    """An entry holds while none of the files it depends on changed since it was made
    (the files table's generations): a run that changed nothing decodes no entry's list
    of files (on transformers 2.6 million, 2.5 s of a warm run)."""
    from cslint.cache import FindingsCache

    decoded = []
    original = FindingsCache.depends_ids
    monkeypatch.setattr(FindingsCache, "depends_ids",
                        lambda self, entry: decoded.append(entry) or original(self, entry))
    cold = findings(package, cached=True)
    decoded.clear()
    assert findings(package, cached=True) == cold and decoded == []
    (package / "pkg" / "helpers.py").write_text(PACKAGE["pkg/helpers.py"].replace(
        "return limit\n", "return limit.item()\n"))
    assert findings(package, cached=True) == findings(package, cached=False)
    assert decoded


def test_a_file_checked_again_reads_the_files_that_used_it(package, monkeypatch):
    """An entry records its file's users (the files whose code ran into its own); a
    pre-commit run over it once edited reads those, and what its names resolve into, not
    every file its findings depended on (transformers: 1,100 files for one model, 11 s
    against 0.6 s), and reports what a run over the whole tree reports."""
    from cslint.cache import FindingsCache
    from cslint.project_files import ProjectFiles

    whole = findings(package, cached=True)
    users = {}
    original = FindingsCache.users_paths

    def recording(self, entry):
        found = original(self, entry)
        users[entry.digest] = found
        return found

    monkeypatch.setattr(FindingsCache, "users_paths", recording)
    read = []
    original_read = ProjectFiles.read_paths
    monkeypatch.setattr(ProjectFiles, "read_paths", lambda self, paths: read.extend(
        p.name for p in paths) or original_read(self, paths))
    helpers = package / "pkg" / "helpers.py"
    helpers.write_text(PACKAGE["pkg/helpers.py"] + "# edited\n")
    alone = findings(package, cached=True, paths=[str(helpers)])
    assert [Path(p).name for found in users.values() for p in found or ()] == ["opt.py"]
    assert read == ["opt.py"]
    assert alone[0] == [f for f in whole[0] if f[0].endswith("helpers.py")]


def assert_gate_reached_in_a_run_over_helpers(package: Path) -> None:
    """A cached run over helpers.py alone reports what a whole-tree run reports for it,
    `gate`'s test of a tensor (line 12) among them."""
    helpers = str(package / "pkg" / "helpers.py")
    alone = findings(package, cached=True, paths=[helpers])
    whole = findings(package, cached=False)
    assert alone[0] == [f for f in whole[0] if f[0] == helpers]
    assert any(f[2] == "CS201" and f[1].line == 12 for f in alone[0])


def test_a_new_file_calling_a_held_file_is_seen_by_a_run_over_that_file(package):
    """A pre-commit run over an unchanged file whose functions a new file now calls
    (a finding appears in the unchanged file) reports what a whole-tree run does."""
    findings(package, cached=True)
    (package / "pkg" / "caller.py").write_text(
        "import torch\nfrom pkg.helpers import gate\n\n\n"
        "class Gate(torch.nn.Module):\n"
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
        "        return gate(x)\n")
    assert_gate_reached_in_a_run_over_helpers(package)


def test_a_fixed_file_brings_the_callers_it_had_when_it_did_not_parse(package):
    """relay.py did not parse, so no users of it were recorded; once fixed it calls a
    helper, and user.py, unchanged, calls it from a traced forward: a run over the
    helper's file alone reads user.py too (the files that import relay.py's names)."""
    (package / "pkg" / "relay.py").write_text("def relay(x):\n    return x +\n")
    (package / "pkg" / "user.py").write_text(
        "import torch\nfrom pkg.relay import relay\n\n\n"
        "class User(torch.nn.Module):\n"
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
        "        return relay(x)\n")
    findings(package, cached=True)
    (package / "pkg" / "relay.py").write_text(
        "from pkg.helpers import gate\n\n\ndef relay(x):\n    return gate(x)\n")
    assert_gate_reached_in_a_run_over_helpers(package)


@pytest.mark.parametrize("edit", [
    # The base class: the subclass's file must be checked again.
    ("pkg/base.py", "class Base(cstorch.optim.Optimizer):", "class Base(torch.nn.Module):"),
    # The callee: the caller's value changes.
    ("pkg/helpers.py", "        return limit", "        return limit.item()"),
    # The caller: a new call makes `scale` traced.
    ("pkg/opt.py", "                p.add_(g)", "                p.add_(scale(g))\n"
                   "                if scale(g) > 0:\n                    pass"),
    # A file that reaches nothing: nothing else changes.
    ("pkg/other.py", "x + 1", "x + 2"),
])
def test_an_edit_elsewhere_rechecks_the_files_it_affects(package, edit):
    name, old, new = edit
    findings(package, cached=True)
    path = package / name
    text = path.read_text()
    if name == "pkg/opt.py":
        text = text.replace("from pkg.helpers import clip", "from pkg.helpers import clip, scale")
    path.write_text(text.replace(old, new))
    assert_cache_agrees(package)


def test_a_new_file_that_calls_a_checked_function_rechecks_it(package):
    findings(package, cached=True)
    before = findings(package, cached=True)[0]
    write(package, {"pkg/caller.py": '''\
from pkg.base import Base
from pkg.helpers import gate


class Gated(Base):
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.add_(gate(p.grad))
'''})
    assert_cache_agrees(package)
    after = findings(package, cached=True)[0]
    assert [f for f in after if f[0].endswith("helpers.py")] != \
        [f for f in before if f[0].endswith("helpers.py")]


def test_a_deleted_base_rechecks_its_subclasses(package):
    findings(package, cached=True)
    (package / "pkg/base.py").unlink()
    assert_cache_agrees(package)


def test_a_config_change_does_not_reuse_findings(package):
    all_rules = findings(package, cached=True)
    only_cs2 = Config(select=("CS2",))
    assert findings(package, cached=True, config=only_cs2) == \
        findings(package, cached=False, config=only_cs2)
    assert findings(package, cached=True) == all_rules


def test_paths_in_any_order_give_the_same_output(package):
    files = sorted(str(p) for p in package.rglob("*.py"))
    forward = findings(package, cached=False, paths=files)
    assert findings(package, cached=False, paths=files[::-1]) == forward
    assert findings(package, cached=True, paths=files[::-1]) == forward
    assert findings(package, cached=True, paths=files) == forward


def test_random_edits_of_the_fixtures_keep_the_cache_exact(tmp_path):
    """Fixtures copied into one project, then rounds of random edits (a file emptied, a
    line deleted, two files swapped): after each, the cached run equals a fresh one."""
    root = tmp_path / "fixtures"
    shutil.copytree(REPO / "fixtures", root)
    (tmp_path / "pyproject.toml").write_text("")
    files = sorted(root.rglob("*.py"))
    generator = random.Random(20261125)
    assert_cache_agrees(root)
    for _ in range(6):
        victim = generator.choice(files)
        lines = victim.read_text().splitlines(keepends=True)
        action = generator.choice(["delete-line", "empty", "swap"])
        if action == "delete-line" and lines:
            del lines[generator.randrange(len(lines))]
            victim.write_text("".join(lines))
        elif action == "empty":
            victim.write_text("")
        else:
            other = generator.choice(files)
            text = other.read_text()
            other.write_text(victim.read_text())
            victim.write_text(text)
        assert_cache_agrees(root)


def test_a_corrupt_cache_is_set_aside(package):
    cold = findings(package, cached=True)
    for database in (package / ".cslint_cache").glob("cslint-*.sqlite"):
        database.write_bytes(b"this is not a database" * 100)
    assert findings(package, cached=True) == cold
    assert findings(package, cached=True) == cold


def test_rows_of_the_wrong_shape_are_checked_again(package):
    import sqlite3

    cold = findings(package, cached=True)
    (database,) = (package / ".cslint_cache").glob("cslint-*.sqlite")
    with sqlite3.connect(database) as connection:
        connection.execute("UPDATE entries SET result = '{\"findings\": [{\"code\": 1}]}', "
                           "depends = '[[1, 2]]'")
    connection.close()
    assert findings(package, cached=True) == cold
    # A list of files of the wrong shape is read only once a file changed; users that
    # cannot be read are looked for in the files' text.
    with sqlite3.connect(database) as connection:
        connection.execute("UPDATE entries SET depends = '[\"pkg/base.py\"]', "
                           "users = '{\"a\": 1}'")
    connection.close()
    assert findings(package, cached=True) == cold
    (package / "pkg" / "other.py").write_text("def unrelated(x):\n    return x + 2\n")
    assert findings(package, cached=True) == findings(package, cached=False)


def test_a_cache_of_another_cslint_build_is_not_read(package, monkeypatch):
    import cslint.cache

    findings(package, cached=True)
    before = set((package / ".cslint_cache").glob("cslint-*.sqlite"))
    monkeypatch.setattr(cslint.cache, "_build_signature", lambda: "another build")
    findings(package, cached=True)
    after = set((package / ".cslint_cache").glob("cslint-*.sqlite"))
    assert len(after - before) == 1


def test_two_runs_at_once_are_both_right(package):
    expected = subprocess.run([sys.executable, "-m", "cslint", "check", "--no-config",
                               "--select", "ALL", "--format", "json", "--no-cache", "."],
                              cwd=package, capture_output=True, text=True).stdout
    command = [sys.executable, "-m", "cslint", "check", "--no-config", "--select", "ALL",
               "--format", "json", "."]
    for _ in range(3):
        runs = [subprocess.Popen(command, cwd=package, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for _ in range(3)]
        for process in runs:
            out, err = process.communicate()
            assert out == expected, err
            assert process.returncode == 1, err
    assert json.loads(expected)


def test_the_cli_cache_options(package):
    def check(*options):
        return subprocess.run([sys.executable, "-m", "cslint", "check", "--no-config",
                               *options, "."], cwd=package, capture_output=True, text=True)

    check("--no-cache")
    assert not (package / ".cslint_cache").exists()
    check("--cache-dir", "elsewhere")
    assert list((package / "elsewhere").glob("cslint-*.sqlite"))
    (package / "pyproject.toml").write_text('[tool.cslint]\ncache-dir = "configured"\n')
    subprocess.run([sys.executable, "-m", "cslint", "check", "."], cwd=package,
                   capture_output=True)
    assert list((package / "configured").glob("cslint-*.sqlite"))


def test_the_cache_code_never_unpickles_or_evaluates():
    forbidden = re.compile(r"\b(pickle|marshal|shelve|eval|exec)\b|__import__|importlib")
    for name in ("cache.py", "cached_run.py", "dependencies.py"):
        source = (REPO / "src" / "cslint" / name).read_text()
        code = "\n".join(line for line in source.splitlines()
                         if not line.lstrip().startswith("#"))
        assert not forbidden.search(re.sub(r'""".*?"""', "", code, flags=re.S)), name
