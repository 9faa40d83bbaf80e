"""The linter reads the code it checks and never runs it: not the checked files, not the
project's other files it reads for context, in any mode or front end; and its source
holds no way of running code (exec, eval, compile, pickle, imports by name...)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tokenize
from io import StringIO
from pathlib import Path

import pytest
from click.testing import CliRunner

from cslint.cli import main
from cslint.config import Config
from cslint.engine import lint
from helpers import REPO

# Each file touches a marker file named after the place that ran. `{markers}` is the
# folder of the markers.
HEADER = "import pathlib\n\nMARKERS = pathlib.Path({markers!r})\n"
PROJECT = {
    "setup.py": HEADER + '(MARKERS / "setup").touch()\n',
    "conftest.py": HEADER + '(MARKERS / "conftest").touch()\n',
    "pkg/__init__.py": HEADER + '(MARKERS / "package_init").touch()\n',
    "pkg/helpers.py": HEADER + textwrap.dedent('''\
        (MARKERS / "imported_module").touch()


        def mark(name):
            (MARKERS / name).touch()
            return lambda function: function
        '''),
    # An optimizer with findings, fixable ones among them (CS104, CS205 and, unsafe,
    # CS401), so that every mode has something to report and to fix.
    "pkg/train.py": HEADER + textwrap.dedent('''\
        import torch
        import cerebras.pytorch as cstorch

        from pkg.helpers import mark

        (MARKERS / "top_level").touch()
        annotated: (MARKERS / "annotation").touch() = 1


        class Meta(type):
            def __new__(mcs, name, bases, namespace):
                (MARKERS / "metaclass").touch()
                return super().__new__(mcs, name, bases, namespace)


        class Base(cstorch.optim.Optimizer):
            def __init_subclass__(cls, **kwargs):
                (MARKERS / "init_subclass").touch()
                super().__init_subclass__(**kwargs)


        class Lazy(Base, metaclass=Meta):
            (MARKERS / "class_body").touch()

            def preinitialize(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        self.state[p]["sum"] = torch.ones_like(p)

            @mark("decorator")
            def step(self, closure=(MARKERS / "default_argument").touch()):
                for group in self.param_groups:
                    for p in group["params"]:
                        state = self.state[p]
                        if len(state) == 0:
                            state["m"] = torch.zeros_like(p)
                        p.add_(p.grad, alpha=-group["lr"])


        model = torch.nn.Linear(2, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        if __name__ == "__main__":
            (MARKERS / "main_guard").touch()
        '''),
}
EVERY_MARKER = {"setup", "conftest", "package_init", "imported_module", "top_level",
                "annotation", "metaclass", "init_subclass", "class_body", "decorator",
                "default_argument", "main_guard"}
# Just enough of torch and cerebras.pytorch for the project to run (the control below).
STUBS = {
    "torch/__init__.py": textwrap.dedent('''\
        class _Anything:
            def __getattr__(self, name):
                return _Anything()

            def __call__(self, *args, **kwargs):
                return _Anything()


        nn = optim = _Anything()
        '''),
    "cerebras/__init__.py": "",
    "cerebras/pytorch/__init__.py": textwrap.dedent('''\
        class optim:
            class Optimizer:
                pass
        '''),
}


def write_tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    """(the project's folder, the folder its markers go to: empty)."""
    markers = tmp_path / "markers"
    markers.mkdir()
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    write_tree(root, {name: text.format(markers=str(markers))
                      for name, text in PROJECT.items()})
    return root, markers


def markers_left(markers: Path) -> list[str]:
    return sorted(path.name for path in markers.iterdir())


def cli(args: list[str], cwd: Path, input: bytes | None = None):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, args, input=input, catch_exceptions=False)
    finally:
        os.chdir(old)


def test_the_project_leaves_every_marker_when_it_is_run(project, tmp_path):
    """The control: each marked place does run when Python runs the project, so the
    tests below, which find no marker, mean the linter ran none of them."""
    root, markers = project
    stubs = tmp_path / "stubs"
    write_tree(stubs, STUBS)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(stubs), str(root)])}
    for command in (["-m", "pkg.train"], ["conftest.py"], ["setup.py"]):
        subprocess.run([sys.executable, *command], cwd=root, env=environment, check=True,
                       capture_output=True)
    assert set(markers_left(markers)) == EVERY_MARKER


def run_command_line(root: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "cslint", "check", "--no-show-source", "."],
                          cwd=root, capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    return done.stdout


def run_fix(root: Path) -> str:
    result = cli(["check", ".", "--fix", "--unsafe-fixes"], root)
    assert result.exit_code == 1, result.output
    return (root / "pkg" / "train.py").read_text(encoding="utf-8")


def run_diff(root: Path) -> str:
    return cli(["check", ".", "--diff", "--unsafe-fixes"], root).stdout


def run_sarif(root: Path) -> str:
    sarif = json.loads(cli(["check", ".", "--format", "sarif"], root).stdout)
    return json.dumps([result for run in sarif["runs"] for result in run["results"]])


def run_stdin(root: Path) -> str:
    code = (root / "pkg" / "train.py").read_bytes()
    return cli(["check", "-", "--stdin-filename", "pkg/train.py", "--no-show-source"], root,
               input=code).stdout


def run_flake8(root: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select", "CS", "."],
                          cwd=root, capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    return done.stdout


def run_engine(root: Path) -> str:
    result = lint([str(root)], Config(), project_root=root)
    assert not result.errors, [error.render() for error in result.errors]
    return " ".join(f"{finding.code} {finding.message}" for finding in result.findings)


# What each mode shows when it did its work: a finding, or the fix.
MODES = {
    "command line": (run_command_line, "CS101"),
    "--fix": (run_fix, "cstorch.optim.SGD"),
    "--diff": (run_diff, "+optimizer = cstorch.optim.SGD"),
    "SARIF": (run_sarif, "CS205"),
    "stdin": (run_stdin, "CS104"),
    "flake8 plugin": (run_flake8, "CS101"),
    "engine": (run_engine, "CS401"),
}


@pytest.mark.parametrize("mode", MODES)
def test_no_mode_of_the_linter_runs_the_code_it_checks(project, mode):
    root, markers = project
    check, shows = MODES[mode]
    assert shows in check(root)
    assert markers_left(markers) == []


# ---- the linter's source ----------------------------------------------------------------

# Any mention of these: modules and functions whose job is to run code or programs
# (unpickling runs code too).
RUNNING_NAMES = frozenset({
    "pickle", "cPickle", "marshal", "shelve", "runpy", "run_path", "run_module",
    "import_module", "__import__", "exec_module", "subprocess",
})
# The builtins that run or compile code: as names (`eval(...)`, `f = exec`,
# `builtins.eval`), not as attributes of other objects (`self.eval(node)`, a method
# of ours) nor as the names of our own methods (`def eval`).
RUNNING_BUILTINS = frozenset({"exec", "eval", "compile", "breakpoint"})
# Attributes of any object that compile code (`regex.compile` passes only as one of the
# ALLOWED_ATTRIBUTES).
COMPILING_ATTRIBUTES = frozenset({"compile"})
# Attributes that start programs.
RUNNING_ATTRIBUTES = {
    "os": frozenset({"system", "popen", "execl", "execle", "execlp", "execlpe", "execv",
                     "execve", "execvp", "execvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe",
                     "spawnv", "spawnve", "spawnvp", "spawnvpe", "posix_spawn",
                     "posix_spawnp", "startfile"}),
}
# `re.compile` compiles a regular expression, not code.
ALLOWED_ATTRIBUTES = frozenset({("re", "compile")})
_NOT_CODE = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                       tokenize.DEDENT, tokenize.STRING, tokenize.ENCODING,
                       tokenize.ENDMARKER})


def ways_of_running_code(text: str) -> list[str]:
    """`line: code` for each use in `text` of something that runs code. Tokenized, so
    strings and comments do not count (`"eval("` in a message is text)."""
    tokens = [token for token in tokenize.generate_tokens(StringIO(text).readline)
              if token.type not in _NOT_CODE]
    found = []
    for index, token in enumerate(tokens):
        if token.type != tokenize.NAME:
            continue
        name = token.string
        before = tokens[index - 1].string if index else ""
        owner = tokens[index - 2].string if before == "." and index >= 2 else None
        if before == "." and (owner, name) in ALLOWED_ATTRIBUTES:
            continue
        if name in RUNNING_NAMES \
                or name in RUNNING_ATTRIBUTES.get(owner, ()) \
                or name in RUNNING_BUILTINS and before not in (".", "def") \
                or name in RUNNING_BUILTINS and owner == "builtins" \
                or name in COMPILING_ATTRIBUTES and before == ".":
            found.append(f"{token.start[0]}: {token.line.strip()}")
    return found


def linter_sources() -> list[Path]:
    package = REPO / "src" / "cslint"
    runtime = package / "cstorch"
    # `cslint port --verify` runs the user's optimizer and its port, by request, in a
    # subprocess of its own: the runtime's side, like cslint.cstorch.
    verifier = package / "port" / "verify.py"
    return sorted(path for path in package.rglob("*.py")
                  if runtime not in path.parents and path != verifier)


def test_the_linters_source_holds_no_way_of_running_code():
    sources = linter_sources()
    assert len(sources) > 30  # the whole linter, not a moved folder's leftovers
    found = {str(path.relative_to(REPO)): uses for path in sources
             if (uses := ways_of_running_code(path.read_text(encoding="utf-8")))}
    assert found == {}


def test_the_source_scan_finds_each_way_of_running_code_and_not_strings_or_comments():
    runs = textwrap.dedent('''\
        exec(code)
        value = eval(text, {})
        code = compile(tree, "<x>", "exec")
        run = builtins.eval
        import pickle
        from marshal import loads
        import runpy
        module = importlib.import_module(name)
        module = __import__(name)
        spec.loader.exec_module(module)
        subprocess.run([sys.executable, path])
        os.system("python " + path)
        pattern = regex.compile(text)
        ''')
    assert [line.split(": ", 1)[0] for line in ways_of_running_code(runs)] == [
        str(number) for number in range(1, 14)]
    harmless = textwrap.dedent('''\
        pattern = re.compile(r"eval\\(")
        value = self.eval(node)  # our walker's method, not the builtin; exec(x) here
        message = "do not call exec() or pickle.loads()"

        class Walker:
            def eval(self, node):
                return ast.literal_eval(node)
        ''')
    assert ways_of_running_code(harmless) == []
