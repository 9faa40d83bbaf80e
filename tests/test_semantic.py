"""The semantic model: names through imports, class hierarchy across files, the official
table, and the guarantee that one file checked alone gets the findings of a whole-tree run."""

from __future__ import annotations

import gc
import textwrap
from pathlib import Path

import pytest

from cslint.config import DEFAULT_MAX_FILE_SIZE, Config
from cslint.engine import lint
from cslint.discovery import module_name_for
from cslint.semantic.module_index import ModuleIndex, build_module_index
from cslint.semantic.official import load_official_api
from cslint.semantic.project import ProjectIndex
from cslint.source import SourceFile
from helpers import lint_source

STEP_CREATES = """
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["m"] = p.grad.clone()
"""


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def findings(root: Path, *paths: str, **config) -> set[tuple[str, int, str]]:
    result = lint([str(root / p) for p in paths], Config(**config), project_root=root)
    assert not result.errors, [e.render() for e in result.errors]
    return {(Path(f.path).name, f.location.line, f.code) for f in result.findings}


def index(root: Path, *names: str) -> ProjectIndex:
    modules = []
    for name in names:
        path = root / name
        source = SourceFile.read(path, name, DEFAULT_MAX_FILE_SIZE)
        modules.append(build_module_index(source.parse(), path, name))
    return ProjectIndex(modules, load_official_api(), Config())


def test_module_names_follow_the_init_chain(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/sub/__init__.py": "", "pkg/sub/mod.py": "",
                     "script.py": ""})
    assert module_name_for(tmp_path / "pkg/sub/mod.py") == ("pkg.sub.mod", False)
    assert module_name_for(tmp_path / "pkg/sub/__init__.py") == ("pkg.sub", True)
    assert module_name_for(tmp_path / "script.py") == ("script", False)


@pytest.mark.parametrize("imports, base", [
    ("import cerebras.pytorch as cstorch", "cstorch.optim.Optimizer"),
    ("from cerebras.pytorch.optim import Optimizer as CSOpt", "CSOpt"),
    ("import cerebras.pytorch.optim as csopt", "csopt.Optimizer"),
    ("from cerebras.pytorch.optim.optimizer import Optimizer", "Optimizer"),
    ("import cerebras.pytorch", "cerebras.pytorch.optim.Optimizer"),
    ("import cslint.cstorch as cstorch", "cstorch.optim.Optimizer"),
    ("from cslint.cstorch.optim import Optimizer", "Optimizer"),
    ("from cerebras.pytorch.optim import *", "Optimizer"),
])
def test_cstorch_optimizer_through_every_import_form(tmp_path, imports, base):
    write(tmp_path, {"opt.py": f"{imports}\n\nclass Mine({base}):\n    pass\n"})
    project = index(tmp_path, "opt.py")
    ref = project.project_classes[0]
    assert project.kinds(ref).cstorch_optimizer
    assert findings(tmp_path, "opt.py") == {("opt.py", 3, "CS103")}


def test_torch_optimizer_under_public_and_defining_names(tmp_path):
    write(tmp_path, {
        "a.py": "import torch\n\nclass A(torch.optim.Optimizer):\n    pass\n",
        "b.py": "from torch.optim.optimizer import Optimizer\n\nclass B(Optimizer):\n    pass\n",
        "c.py": "from torch import optim\n\nclass C(optim.Optimizer):\n    pass\n",
    })
    project = index(tmp_path, "a.py", "b.py", "c.py")
    for ref in project.project_classes:
        kinds = project.kinds(ref)
        assert kinds.torch_optimizer and not kinds.cstorch_optimizer


def test_hierarchy_across_files_and_relative_imports(tmp_path):
    write(tmp_path, {
        "pkg/__init__.py": "from .base import MyAdamBase\n",
        "pkg/base.py": """
            import cerebras.pytorch as cstorch

            class MyAdamBase(cstorch.optim.Optimizer):
                def preinitialize(self):
                    pass
            """,
        "pkg/adamw.py": "from . import MyAdamBase\n\nclass AdamW(MyAdamBase):\n" + STEP_CREATES,
        "other.py": "from pkg import MyAdamBase\n\nclass Other(MyAdamBase):\n" + STEP_CREATES,
    })
    found = findings(tmp_path, "pkg", "other.py")
    # Both subclasses inherit preinitialize (no CS103) and create "m" in step.
    assert found == {("adamw.py", 8, "CS101"), ("other.py", 8, "CS101"),
                     ("base.py", 4, "CS103")}


def test_one_file_alone_gets_the_findings_of_a_whole_tree_run(tmp_path):
    """The helper in base.py creates state only when reached from a subclass's step in
    another file; a pre-commit run over base.py alone must still find it."""
    write(tmp_path, {
        "pyproject.toml": "[project]\nname = 'demo'\n",
        "base.py": """
            import torch
            import cerebras.pytorch as cstorch

            class Base(cstorch.optim.Optimizer):
                def preinitialize(self):
                    pass

                def init_buffers(self, p):
                    state = self.state[p]
                    if "m" not in state:
                        state["m"] = torch.zeros_like(p)
            """,
        "sub.py": """
            from base import Base

            class Sub(Base):
                def step(self, closure=None):
                    for group in self.param_groups:
                        for p in group["params"]:
                            self.init_buffers(p)
            """,
        "unrelated.py": "x = 1\n",
    })
    whole = findings(tmp_path, ".")
    assert ("base.py", 12, "CS101") in whole
    for name in ("base.py", "sub.py"):
        alone = findings(tmp_path, name)
        assert alone == {f for f in whole if f[0] == name}


def test_one_file_alone_sees_callers_that_reach_it_through_another_file(tmp_path):
    """helpers.py's float() calls read tensors only because of code two files away that
    names nothing of helpers.py: Dist passes parameters to a method it inherits from Base,
    which calls total(); Plain passes them to wrapped.largest_of(), which calls largest().
    A run over helpers.py alone must read those files too."""
    write(tmp_path, {
        "pyproject.toml": "[project]\nname = 'demo'\n",
        "helpers.py": """
            def total(values):
                return sum(float(v) for v in values)

            def largest(values):
                return max(float(v) for v in values)
            """,
        "base.py": """
            import cerebras.pytorch as cstorch
            from helpers import total

            class Base(cstorch.optim.Optimizer):
                def preinitialize(self):
                    pass

                def norm(self, params):
                    return total(params)

                def step(self, closure=None):
                    pass
            """,
        "dist.py": """
            from base import Base

            class Dist(Base):
                def step(self, closure=None):
                    for group in self.param_groups:
                        self.norm(group["params"])
            """,
        "wrapped.py": """
            from helpers import largest

            def largest_of(params):
                return largest(params)
            """,
        "plain.py": """
            import cerebras.pytorch as cstorch
            from wrapped import largest_of

            class Plain(cstorch.optim.Optimizer):
                def preinitialize(self):
                    pass

                def step(self, closure=None):
                    for group in self.param_groups:
                        largest_of(group["params"])
            """,
    })
    whole = findings(tmp_path, ".")
    assert {("helpers.py", 3, "CS204"), ("helpers.py", 6, "CS204")} <= whole
    for name in ("helpers.py", "base.py", "dist.py", "wrapped.py", "plain.py"):
        assert findings(tmp_path, name) == {f for f in whole if f[0] == name}


def test_official_table_knows_inherited_methods_and_state(tmp_path):
    write(tmp_path, {"mine.py": """
        import torch
        import cerebras.pytorch as cstorch

        class MyAdam(cstorch.optim.Adam):
            def step(self, closure=None):
                for group in self.param_groups:
                    for p in group["params"]:
                        state = self.state[p]
                        state["exp_avg"].mul_(0.9).add_(p.grad)
                        state["exp_avg_sq"] = state["exp_avg_sq"] * 0.99
                        state["velocity"] = torch.zeros_like(p)
        """})
    assert findings(tmp_path, "mine.py") == {("mine.py", 11, "CS102"), ("mine.py", 12, "CS101")}


def test_global_step_of_official_optimizers_counts_as_existing(tmp_path):
    write(tmp_path, {"mine.py": """
        import cerebras.pytorch as cstorch

        class MyASGD(cstorch.optim.ASGD):
            def step(self, closure=None):
                for group in self.param_groups:
                    for p in group["params"]:
                        self.state[p]["step"] += 1
                        self.state[p]["ax"].add_(p)
        """})
    assert findings(tmp_path, "mine.py") == set()


def test_mixin_supplies_a_method_and_unknown_bases_are_not_guessed(tmp_path):
    write(tmp_path, {"mine.py": """
        import cerebras.pytorch as cstorch
        from thirdparty import SomeMixin

        class SparsifyMixin:
            def state_names_to_sparsify(self):
                return ["m"]

        class WithMixin(SparsifyMixin, cstorch.optim.Optimizer):
            def preinitialize(self):
                pass

            def step(self, closure=None):
                pass

        class WithUnknown(SomeMixin, cstorch.optim.Optimizer):
            pass
        """})
    assert findings(tmp_path, "mine.py", cstorch_version=(2, 4)) == set()


def test_abstract_classes_are_not_reported(tmp_path):
    write(tmp_path, {"mine.py": """
        from abc import abstractmethod
        import cerebras.pytorch as cstorch

        class Base(cstorch.optim.Optimizer):
            @abstractmethod
            def update(self, p):
                ...

        class Concrete(Base):
            def preinitialize(self):
                pass

            def update(self, p):
                pass
        """})
    assert findings(tmp_path, "mine.py") == {("mine.py", 10, "CS103")}


CSTORCH_OPTIM_PACKAGE = {
    "cerebras/pytorch/__init__.py": "",
    "cerebras/pytorch/optim/__init__.py": "",
    "cerebras/pytorch/optim/optimizer.py": """
        from abc import ABC, abstractmethod
        import torch

        class Optimizer(torch.optim.Optimizer, ABC):
            def visit_state(self, fn):
                for state in self.state.values():
                    for key, val in state.items():
                        state[key] = fn(val)

            @abstractmethod
            def preinitialize(self):
                ...

            @abstractmethod
            def step(self, closure=None):
                ...
        """,
    "cerebras/pytorch/optim/sgd.py": """
        from .optimizer import Optimizer

        class SGD(Optimizer):
            def preinitialize(self):
                pass
        """,
}


def test_a_base_left_abstract_by_its_own_base_is_not_a_concrete_optimizer(tmp_path):
    """MuonBase(BaseOptimizer) in pytorch-optimizer's port: BaseOptimizer declares an
    abstract `init_group` that MuonBase does not define, so Python cannot instantiate
    MuonBase either; its subclass defining everything is concrete."""
    write(tmp_path, {"opt.py": """
        from abc import abstractmethod

        import cerebras.pytorch as cstorch

        class Base(cstorch.optim.Optimizer):
            @abstractmethod
            def init_group(self, group):
                ...

        class Shared(Base):
            def helper(self):
                pass

        class Done(Shared):
            def init_group(self, group):
                pass

        class Missing(Shared):
            def init_group(self, group):
                pass

            def preinitialize(self):
                pass

            def step(self, closure=None):
                pass
        """})
    # Base and Shared are abstract; Done defines init_group but neither official method.
    assert findings(tmp_path, "opt.py") == {("opt.py", 15, "CS103")}


def test_machinery_is_recognised_by_class_name_and_path(tmp_path):
    write(tmp_path, CSTORCH_OPTIM_PACKAGE)
    found = findings(tmp_path, "cerebras", cstorch_version=(2, 4))
    assert found == {("sgd.py", 4, "CS103"), ("sgd.py", 4, "CS106")}


def test_machinery_is_recognised_whatever_the_path_typed(tmp_path, monkeypatch):
    """`optim/` typed from inside the package names the same files as the absolute path."""
    write(tmp_path, CSTORCH_OPTIM_PACKAGE)
    monkeypatch.chdir(tmp_path / "cerebras/pytorch")
    result = lint(["optim"], Config(cstorch_version=(2, 4)), project_root=tmp_path)
    assert not result.errors, [e.render() for e in result.errors]
    found = {(f.path, f.location.line, f.code) for f in result.findings}
    assert found == {("optim/sgd.py", 4, "CS103"), ("optim/sgd.py", 4, "CS106")}


def test_a_project_package_named_like_cstorch_is_not_machinery(tmp_path):
    """Only `cerebras/pytorch/optim/` is cstorch's: `mylib/pytorch/optim/` is user code."""
    write(tmp_path, {name.replace("cerebras/", "mylib/"): text
                     for name, text in CSTORCH_OPTIM_PACKAGE.items()})
    project = index(tmp_path, "mylib/pytorch/optim/optimizer.py")
    [optimizer] = project.modules[0].classes.values()
    assert not project.is_machinery(project.ref_for_info(optimizer))


def test_a_module_name_given_twice_resolves_beside_the_importer_whatever_the_path_typed(
        tmp_path, monkeypatch):
    """Two scripts folders each have a `util.py`: `from util import Base` in b/x.py is
    b/util.py's, also when b/x.py is typed relative and the other files are found from
    the project root."""
    write(tmp_path, {"pyproject.toml": "", "a/util.py": "class Base:\n    pass\n",
                     "b/util.py": """
        import cerebras.pytorch as cstorch

        class Base(cstorch.optim.Optimizer):
            def preinitialize(self):
                pass
        """, "b/x.py": "from util import Base\n\nclass Mine(Base):\n" + STEP_CREATES})
    monkeypatch.chdir(tmp_path / "b")
    result = lint(["x.py"], Config())
    assert not result.errors, [e.render() for e in result.errors]
    assert {(f.path, f.location.line, f.code) for f in result.findings} == {("x.py", 8, "CS101")}


def test_configured_optimizer_base(tmp_path):
    write(tmp_path, {"mine.py": "from mycorp.optim import CerebrasOptimizer\n\n"
                                "class Mine(CerebrasOptimizer):\n"
                                "    def preinitialize(self):\n        pass\n" + STEP_CREATES})
    assert findings(tmp_path, "mine.py") == set()
    found = findings(tmp_path, "mine.py", optimizer_bases=("mycorp.optim.CerebrasOptimizer",))
    assert found == {("mine.py", 10, "CS101")}


def test_state_dict_named_state_is_not_optimizer_state(tmp_path):
    write(tmp_path, {"mine.py": """
        import torch
        import cerebras.pytorch as cstorch

        class Mine(cstorch.optim.Optimizer):
            def preinitialize(self):
                pass

            def step(self, closure=None):
                pass

            def load_state_dict(self, state_dict):
                for param, state in state_dict["state"].items():
                    state["legacy"] = torch.tensor(0.0)
                super().load_state_dict(state_dict)

            def convert(self, checkpoint):
                state = checkpoint["state"]
                state["m"] = 1
        """})
    assert findings(tmp_path, "mine.py") == set()


def test_project_root_stops_at_installed_packages(tmp_path):
    """A git checkout above an install folder (pyenv is one) is not the project."""
    from cslint.discovery import find_project_root

    (tmp_path / ".git").mkdir()
    site = tmp_path / "lib" / "site-packages"
    (site / "torch" / "optim").mkdir(parents=True)
    (site / "torch" / "optim" / "adam.py").write_text("")
    assert find_project_root([site / "torch" / "optim"]) == site / "torch"
    assert find_project_root([site / "torch" / "optim" / "adam.py"]) == site / "torch"
    assert find_project_root([site]) == site
    assert find_project_root([tmp_path / "lib"]) == tmp_path


def test_star_import_chains_resolve_once(tmp_path):
    """Every module star-imports every earlier one (sympy does this widely): resolving a
    name that none defines must not walk every path through the chain (2**18 here)."""
    files = {"pkg/__init__.py": ""}
    for i in range(18):
        earlier = "".join(f"from .m{j} import *\n" for j in range(i))
        files[f"pkg/m{i}.py"] = earlier + f"def f{i}():\n    pass\n"
    files["pkg/user.py"] = ("from .m17 import *\nimport cerebras.pytorch as cstorch\n\n"
                            "class Opt(Missing, cstorch.optim.Optimizer):\n    pass\n")
    write(tmp_path, files)
    project = index(tmp_path, *sorted(files))
    ref = next(r for r in project.project_classes if r.short_name == "Opt")
    assert project.kinds(ref).cstorch_optimizer
    assert project.has_unknown_ancestor(ref)  # `Missing` resolves to nothing, quickly
    assert isinstance(project.resolve("pkg.user.f3"), type(project.resolve("pkg.m3.f3")))


ANALYSED = '''
import torch
import cerebras.pytorch as cstorch


class Broken(cstorch.optim.Optimizer):
    def preinitialize(self):
        pass

    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["m"] = torch.zeros_like(p)
                if p.grad.sum() > 0:
                    p.mul_(2)


class Decay(cstorch.optim.lr_scheduler.LRScheduler):
    def _get_closed_form(self):
        return 0.5
'''


@pytest.mark.parametrize("analysis, method", [
    ("cslint.semantic.optimizer_state.analysis.OptimizerStateAnalysis", "_analyse_class"),
    ("cslint.semantic.tensor_values.analysis.TensorValueAnalysis", "summary"),
    ("cslint.semantic.scheduler.SchedulerAnalysis", "_reach_from"),
])
def test_a_bug_in_an_analysis_is_reported_against_the_file_not_raised(
        tmp_path, monkeypatch, analysis, method):
    """The file is reported as an internal error (exit 2); the run goes on and the other
    analyses' findings are still reported."""
    import importlib

    module_name, class_name = analysis.rsplit(".", 1)
    cls = getattr(importlib.import_module(module_name), class_name)

    def broken(*args, **kwargs):
        raise ValueError("boom")

    monkeypatch.setattr(cls, method, broken)
    path = tmp_path / "optim.py"
    path.write_text(ANALYSED, encoding="utf-8")
    result = lint([str(path)], Config(select=("ALL",)), project_root=tmp_path)
    errors = [e.render() for e in result.errors]
    assert errors and all(
        e.startswith(f"{path}: internal error while analysing ")
        and e.endswith("(ValueError: boom); other files were checked; please report this")
        for e in errors), errors
    assert result.findings, "the other analyses still report"


def test_a_run_frees_its_module_indexes_without_waiting_for_the_garbage_collector(tmp_path):
    """The flake8 plugin and the server lint again and again in one process. The engine
    freezes the collector's view of each run's trees, so a tree kept alive by a cycle
    waits for a full collection that seldom comes: the process grew by the project's
    trees on every run (1.3 GB after linting a 150-file project twice, file by file)."""
    write(tmp_path, {"base.py": "import cerebras.pytorch as cstorch\n\n\n"
                                "class Base(cstorch.optim.Optimizer):\n" + STEP_CREATES,
                     "adam.py": "from base import Base\n\n\nclass Adam(Base):\n"
                                "    def helper(self):\n        pass\n"})
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()  # from here only reference counting frees anything
    try:
        for _ in range(2):
            findings(tmp_path, "adam.py")
        # (`type`, not `isinstance`: that asks every object of the process its class,
        # and some of torch's warn when asked.)
        left = [module.display_path for module in gc.get_objects()
                if type(module) is ModuleIndex and tmp_path in module.path.parents]
    finally:
        if collecting:
            gc.enable()
    assert left == []


HIERARCHIES = [
    # A diamond, mixins before and after a base, and a deeper lattice.
    "class A: pass\nclass B(A): pass\nclass C(A): pass\nclass D(B, C): pass\n",
    "class M: pass\nclass N: pass\nclass A: pass\nclass B(M, A, N): pass\n"
    "class C(A, N): pass\nclass D(B, C): pass\n",
    "class O: pass\nclass F(O): pass\nclass E(O): pass\nclass D(O): pass\n"
    "class C(D, F): pass\nclass B(D, E): pass\nclass A(B, C): pass\n",
]


def _random_hierarchy(seed: int) -> str:
    """Classes with one to three random earlier classes as bases, in an order Python
    accepts (fewer bases where it refuses one)."""
    import random

    rng = random.Random(seed)
    lines = ["class K0: pass"]
    namespace: dict = {}
    exec(lines[0], namespace)
    for i in range(1, 12):
        bases = rng.sample(range(i), min(i, rng.randint(1, 3)))
        while True:
            line = f"class K{i}({', '.join(f'K{b}' for b in bases)}): pass"
            try:
                exec(line, namespace)
                break
            except TypeError:  # no consistent order
                bases.pop()
        lines.append(line)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("source", HIERARCHIES + [_random_hierarchy(seed) for seed in range(40)])
def test_the_mro_is_pythons(tmp_path, source):
    namespace: dict = {}
    exec(source, namespace)
    write(tmp_path, {"classes.py": source})
    project = index(tmp_path, "classes.py")
    for ref in project.project_classes:
        expected = [c.__name__ for c in namespace[ref.short_name].__mro__ if c is not object]
        assert [entry.short_name for entry in project.mro(ref)] == expected


def test_an_inconsistent_hierarchy_keeps_a_depth_first_order(tmp_path):
    write(tmp_path, {"classes.py": "class A: pass\nclass B(A): pass\nclass C(A, B): pass\n"})
    project = index(tmp_path, "classes.py")
    ref = next(r for r in project.project_classes if r.short_name == "C")
    assert [entry.short_name for entry in project.mro(ref)] == ["C", "A", "B"]


def test_bases_that_derive_from_each_other_end(tmp_path):
    write(tmp_path, {"classes.py": "from classes import B as Base\n\n"
                                   "class A(Base): pass\nclass B(A): pass\nclass C(B): pass\n"})
    project = index(tmp_path, "classes.py")
    orders = {ref.short_name: [e.short_name for e in project.mro(ref)]
              for ref in project.project_classes}
    assert orders["C"][:3] == ["C", "B", "A"]


def test_a_chain_of_10000_classes_is_analysed_in_seconds(tmp_path):
    """Each class derives from the one before: each MRO is computed once, from its base's
    (it was a C3 merge recomputed per class, cubic: 900 classes took 4 s)."""
    import time

    classes = "".join(f"class C{i}(C{i - 1}):\n    pass\n\n\n" for i in range(1, 10_000))
    write(tmp_path, {"chain.py": "import torch\n\n\nclass C0(torch.optim.Optimizer):\n"
                                 "    def step(self, closure=None):\n"
                                 "        for p in self.param_groups[0]['params']:\n"
                                 "            p.grad.item()\n\n\n" + classes})
    started = time.perf_counter()
    assert findings(tmp_path, "chain.py") == {("chain.py", 7, "CS204")}
    assert time.perf_counter() - started < 20


def test_a_chain_of_500_star_imports_and_100_recursive_helpers_are_analysed_in_seconds(
        tmp_path):
    import time

    files = {"m0.py": "import torch\n\n\nclass Base(torch.optim.Optimizer):\n    pass\n"}
    files.update({f"m{i}.py": f"from m{i - 1} import *\n" for i in range(1, 500)})
    helpers = "".join(
        f"def helper{i}(t, k, state):\n    if k:\n"
        f"        t = helper{(i + 1) % 100}(t * 2, k - 1, state)\n"
        f"        t = helper{(i + 7) % 100}(t, k - 1, state)\n"
        f"    state['m{i}'] = t\n    return t\n\n\n" for i in range(100))
    files["opt.py"] = ("from m499 import *\n\n\n" + helpers + "class Opt(Base):\n"
                       "    def step(self, closure=None):\n"
                       "        for p in self.param_groups[0]['params']:\n"
                       "            helper0(p.grad, 3, self.state[p]).item()\n")
    write(tmp_path, files)
    started = time.perf_counter()
    found = findings(tmp_path, "opt.py")
    assert time.perf_counter() - started < 20
    item_line = files["opt.py"].count("\n")  # the step's `.item()`, the last line
    assert ("opt.py", item_line, "CS204") in found  # Base seen through the 499 files
    assert {code for _, _, code in found} == {"CS101", "CS204"}  # each helper's state key


def test_a_process_that_lints_again_sees_a_package_made_meanwhile(tmp_path):
    """The language server and flake8 lint again and again in one process: an
    `__init__.py` created between two runs makes `from pkg.base import` resolve."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "base.py").write_text(
        "import cerebras.pytorch as cstorch\n\n\n"
        "class Base(cstorch.optim.Optimizer):\n"
        "    def preinitialize(self):\n        pass\n")
    (package / "opt.py").write_text(
        "import torch\nfrom pkg.base import Base\n\n\n"
        "class Lazy(Base):\n"
        "    def step(self, closure=None):\n"
        "        for group in self.param_groups:\n"
        "            for p in group['params']:\n"
        "                state = self.state[p]\n"
        "                if len(state) == 0:\n"
        "                    state['m'] = torch.zeros_like(p)\n")
    files = [str(package / "base.py"), str(package / "opt.py")]
    before = lint(files, Config(select=("CS101",)), project_root=tmp_path)
    (package / "__init__.py").write_text("")
    after = lint(files, Config(select=("CS101",)), project_root=tmp_path)
    assert [f.code for f in before.findings] == []
    assert [f.code for f in after.findings] == ["CS101"]


def test_the_files_that_reach_a_checked_file_are_found_by_whole_words_transitively(tmp_path):
    """`ProjectFiles.dependents`: a file that names a checked class is read, then a file
    that names what that file defines, and so on; a longer word holding the name is not
    the name."""
    from cslint.project_files import ProjectFiles, load_file

    checked = tmp_path / "base.py"
    checked.write_text("class Base:\n    pass\n")
    files = {
        "user.py": "from base import Base\n\n\nclass Child(Base):\n    pass\n",
        "grandchild.py": "from user import Child\n\n\ndef build():\n    return Child()\n",
        "longer_word.py": "class BaseLine:\n    pass\n",
        "unrelated.py": "def helper():\n    return 1\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    project = ProjectFiles(sorted(tmp_path / name for name in files), DEFAULT_MAX_FILE_SIZE,
                           tmp_path)
    found = project.dependents([load_file(checked, "base.py", DEFAULT_MAX_FILE_SIZE).module])
    assert sorted(module.path.name for module in found) == ["grandchild.py", "user.py"]
    assert project.pending == {tmp_path / "longer_word.py", tmp_path / "unrelated.py"}



def test_a_name_defined_or_imported_elsewhere_is_not_the_checked_files(tmp_path):
    """`ProjectFiles.dependents` follows imports, not words: a file that defines its own
    function of the same name (transformers copies `eager_attention_forward` into 371
    model files), or imports one from a module that defines its own, does not reach the
    checked file; re-exports, a module alias and a star import do. Files parsed to learn
    that stay pending (read only if a name resolves into them)."""
    from cslint.project_files import ProjectFiles, load_file

    checked = tmp_path / "attention.py"
    checked.write_text("def eager_attention_forward(q):\n    return q\n\n\n"
                       "class BertModel:\n    pass\n")
    files = {
        "copy.py": "def eager_attention_forward(q):\n    return q * 2\n\n\n"
                   "def run(q):\n    return eager_attention_forward(q)\n",
        "llama.py": "def eager_attention_forward(q):\n    return q * 3\n",
        "modular.py": "from llama import eager_attention_forward\n\n\n"
                      "def run(q):\n    return eager_attention_forward(q)\n",
        "docstring_only.py": 'def describe():\n    """Like BertModel."""\n    return 1\n',
        "reexport.py": "from attention import eager_attention_forward\n",
        "via_reexport.py": "from reexport import eager_attention_forward\n\n\n"
                           "def run(q):\n    return eager_attention_forward(q)\n",
        "alias.py": "import attention as att\n\n\ndef build():\n    return att.BertModel()\n",
        "star.py": "from attention import *\n\n\nclass Child(BertModel):\n    pass\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    project = ProjectFiles(sorted(tmp_path / name for name in files), DEFAULT_MAX_FILE_SIZE,
                           tmp_path)
    found = project.dependents([load_file(checked, "attention.py",
                                          DEFAULT_MAX_FILE_SIZE).module])
    assert sorted(module.path.name for module in found) == [
        "alias.py", "reexport.py", "star.py", "via_reexport.py"]
    assert project.pending == {tmp_path / name for name in (
        "copy.py", "docstring_only.py", "llama.py", "modular.py")}
    assert [m.path.name for m in project.load_module("modular")] == ["modular.py"]

DEFINITIONS = (
    "import functools\r\n"
    "\r\n"
    "@functools.lru_cache(\r\n"
    "    maxsize=None)  # a decorator over two lines\r\n"
    "def top(x):\r\n"
    "    return x\r\n"
    "\r\n"
    "if True:\r\n"
    "\tclass Inner:  # a tab-indented block\r\n"
    "\t\t@staticmethod\r\n"
    "\t\tasync def method(y):\r\n"
    "\t\t\tdef nested(z):\r\n"
    "\t\t\t\treturn '''text\r\n"
    "less indented'''\r\n"
    "\t\t\treturn nested\r\n"
    "\r\n"
    "@dataclass\r\n"
    "class Decorated: pass\r\n"
)


def test_a_definition_parsed_from_its_own_lines_is_the_whole_parse_s_node(tmp_path):
    """A released tree's definitions come back from their own lines, at the positions
    of a whole parse (decorators over several lines, tabs, CRLF, nested functions, a
    string less indented than its function); a whole parse then re-points them."""
    import ast

    path = tmp_path / "definitions.py"
    path.write_bytes(DEFINITIONS.encode())
    source = SourceFile.read(path, "definitions.py", DEFAULT_MAX_FILE_SIZE)
    module = build_module_index(source.parse(), path, "definitions.py",
                                source_text=source.text)
    entries = [*module.functions.values(), *module.classes.values(),
               *(m for c in module.classes.values() for m in c.methods.values()),
               *(f for f, _ in module.nested_functions)]
    assert len(entries) == 5
    whole = {id(e): ast.dump(e.node, include_attributes=True) for e in entries}
    module.release_tree()
    parses = []
    for entry in entries:
        assert entry.definition is None
        node = entry.node
        assert module.held_tree is None, f"{entry.qualname}: its own lines sufficed"
        assert ast.dump(node, include_attributes=True) == whole[id(entry)]
        parses.append(node)
    tree = module.tree  # a rule asks for the whole tree: the entries find theirs there
    in_tree = {id(n) for n in ast.walk(tree)}
    assert all(id(entry.node) in in_tree for entry in entries)
    module.release_tree()
    assert all(entry.definition is None for entry in entries)


def test_a_definition_whose_lines_do_not_stand_alone_comes_from_the_whole_tree(tmp_path):
    path = tmp_path / "one_line.py"
    path.write_text("x = (1,\n     2)\ndef f(): pass\n")
    source = SourceFile.read(path, "one_line.py", DEFAULT_MAX_FILE_SIZE)
    module = build_module_index(source.parse(), path, "one_line.py", source_text=source.text)
    module.release_tree()
    function = module.functions["f"]
    function.first_lineno = 2  # lines that start inside another statement
    assert function.node.name == "f" and module.held_tree is not None


_FILLED_LISTS = '''
import torch
import cerebras.pytorch as cstorch


def fill(group, out):
    for p in group["params"]:
        out.append(p)


def fill_then_rebind(group, out):
    out.append(group["params"][0])
    out = []
    return out


def fill_starred(*lists):
    for xs in lists:
        xs.append(torch.ones(1))


class Opt(cstorch.optim.Optimizer):
    def preinitialize(self):
        pass

    def step(self):
        for group in self.param_groups:
            positional, by_keyword, rebound = [], [], []
            fill(group, positional)
            fill(group, out=by_keyword)
            fill_then_rebind(group, rebound)
            if positional[0].sum() > 0:  # the parameter, filled in by fill()
                pass
            if by_keyword[0].sum() > 0:  # the same, passed by keyword
                pass
            if rebound[0].sum() > 0:  # not known: the callee binds its name again
                pass
'''


def test_a_list_a_callee_fills_holds_what_it_appended(tmp_path):
    """torch's `self._init_group(group, params, grads, state_steps)` fills the step's
    lists: the caller's list holds what the callee appended, by position or keyword;
    not where the callee binds its parameter's name again."""
    result = lint_source(_FILLED_LISTS, tmp_path)
    lines = _FILLED_LISTS.splitlines()
    found = sorted((f.location.line, f.code) for f in result.findings)
    assert found == [(lines.index(line) + 1, "CS201") for line in lines
                     if "filled in" in line or "by keyword" in line]


def _found_and_marked(source: str, tmp_path, mark: str, code: str
                      ) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(line, code) of every finding in `source`, and (line, `code`) of each line whose
    comment holds `mark`."""
    result = lint_source(source, tmp_path)
    lines = source.splitlines()
    return (sorted((f.location.line, f.code) for f in result.findings),
            [(number, code) for number, line in enumerate(lines, 1) if mark in line])


_GROUP_ENTRIES = '''\
import torch
import cerebras.pytorch as cstorch


def norms(group, device):
    total = torch.zeros((), device=device)
    for p in group["params"]:
        total.add_(p.norm())
    return total, total.sqrt()


class Opt(cstorch.optim.Optimizer):
    def preinitialize(self):
        pass

    def step(self):
        for group in self.param_groups:
            device = group["params"][0].device
            group["now"], group["root"] = norms(group, device)
            drift = (group["now"] - group["root"]).item()  # written: a device tensor
            group["root"] = 2.0
            if group["root"] > drift:  # bound again to a number
                pass
        for group in self.param_groups:
            if group["now"] > 0:  # another group: not known
                pass
'''


def test_a_param_group_entry_the_step_writes_reads_back_as_written(tmp_path):
    """pytorch-optimizer's ASGD keeps this step's norms in its param groups and reads
    them back (`(group["curr_param_norm"] - group["prev_param_norm"]).item()`): the
    entry holds what was written until it is written again or `group` is bound again."""
    found, marked = _found_and_marked(_GROUP_ENTRIES, tmp_path, "written: a device tensor",
                                      "CS204")
    assert found == marked


_WRAPPED_STATE = '''\
from collections import defaultdict

import torch
import cerebras.pytorch as cstorch


class Lookahead(cstorch.optim.Optimizer):
    def __init__(self, base_optimizer, alpha=0.5):
        self._base_optimizer = base_optimizer
        self.param_groups = base_optimizer.param_groups
        self.state = defaultdict(dict)
        self.alpha = alpha

    def preinitialize(self):
        pass

    def update_slow(self, group):
        for fast_p in group["params"]:
            param_state = self._base_optimizer.state[fast_p]
            if "slow_buffer" not in param_state:
                param_state["slow_buffer"] = torch.empty_like(fast_p)  # lazily made
                param_state["slow_buffer"].copy_(fast_p)
            slow = param_state["slow_buffer"]
            slow.add_(fast_p - slow, alpha=self.alpha)
            fast_p.copy_(slow)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._base_optimizer.step(closure)
        for group in self._base_optimizer.param_groups:
            self.update_slow(group)
        return loss
'''


def test_state_made_in_the_wrapped_optimizers_state_is_state(tmp_path):
    """timm's Lookahead keeps its slow weights in the state of the optimizer it wraps:
    made lazily in step, that is CS101 as in its own."""
    found, marked = _found_and_marked(_WRAPPED_STATE, tmp_path, "lazily made", "CS101")
    assert found == marked


_HYPERPARAMETER_TUPLE = '''\
import math

import torch
import cerebras.pytorch as cstorch


class Rectified(cstorch.optim.Optimizer):
    def preinitialize(self):
        pass

    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                state = self.state[p]
                state["rho_inf"] = 2.0 / (1.0 - beta2) - 1.0
                rt = math.sqrt(state["rho_inf"] - 4.0)  # a Python number
                moments = state["moments"]
                first, second = moments
                if first.sum() > 0:  # unpacked from state: a tensor
                    p.add_(-rt * second)
'''


def test_names_unpacked_from_a_param_group_tuple_are_python_values(tmp_path):
    """`beta1, beta2 = group["betas"]`: the betas are hyperparameters (no scheduler
    drives a tuple), so a state entry computed from them is a Python number; a tuple
    unpacked from the state is not."""
    found, marked = _found_and_marked(_HYPERPARAMETER_TUPLE, tmp_path, "unpacked from state",
                                      "CS201")
    # (The entry made in step is CS101 too.)
    assert [place for place in found if place[1] != "CS101"] == marked
