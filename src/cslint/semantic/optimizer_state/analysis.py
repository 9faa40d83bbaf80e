"""The analysis: each optimizer class's methods walked from their entry points, by role."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from cslint.semantic.analysis_error import AnalysisError
from cslint.source import TOO_DEEP, internal_error
from cslint.semantic.module_index import FunctionInfo, ModuleIndex, dotted_name
from cslint.semantic.optimizer_state.facts import StateFact
from cslint.semantic.optimizer_state.values import OPTIMIZER, Role, value_signature
from cslint.semantic.optimizer_state.walker import FunctionCall, StateWalker
from cslint.semantic.project import ClassRef, ProjectIndex
from cslint.semantic.torch_api import NEW_TENSOR_METHODS

RESTORATION_METHODS = frozenset({"load_state_dict", "__setstate__", "_load_from_state_dict"})


def _is_dict(node: ast.expr) -> bool:
    """A dict display or `dict(...)`."""
    return node.__class__ is ast.Dict or (node.__class__ is ast.Call
                                         and dotted_name(node.func) == "dict")


def _makes_a_tensor(project: ProjectIndex, module: ModuleIndex, node: ast.expr) -> bool:
    """Whether a dict's values include a tensor made there (`torch.tensor(1.0)`,
    `torch.zeros_like(p)`, `p.new_zeros(())`, `p.clone()`): a dict of numbers or
    metadata is no state of the graph."""
    values = node.values if node.__class__ is ast.Dict else [k.value for k in node.keywords]
    for value in values:
        if value.__class__ is not ast.Call:
            continue
        func = value.func
        if func.__class__ is ast.Attribute and (func.attr in NEW_TENSOR_METHODS
                                                or func.attr in ("clone", "detach")):
            return True
        dotted = dotted_name(func)
        qualified = project.qualified_name(module, dotted) if dotted else None
        if qualified and qualified.startswith(("torch.", "cerebras.pytorch.")):
            return True
    return False


def _is_empty_dict(node: ast.expr) -> bool:
    """`{}`, `dict()`, `OrderedDict()`, `defaultdict(dict)`: a dict made empty."""
    if node.__class__ is ast.Dict:
        return not node.keys
    if node.__class__ is ast.Call and not node.keywords:
        name = (dotted_name(node.func) or "").rsplit(".", 1)[-1]
        return (name in ("dict", "OrderedDict") and not node.args) or (
            name == "defaultdict" and len(node.args) <= 1)
    return False


@dataclass
class OptimizerClass:
    """One concrete optimizer class and what its preinitialize creates."""

    ref: ClassRef
    created_keys: set[str] = field(default_factory=set)
    # Keys we cannot enumerate (dynamic keys, or an unseen base's preinitialize).
    open_keys: bool = False
    # Dicts of per-parameter state the class keeps besides `self.state` (`self._state =
    # {}` in `__init__`, filled by the step): read as the optimizer's state.
    private_maps: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return self.ref.short_name


class OptimizerStateAnalysis:
    """The state facts of every optimizer class of a project."""

    def __init__(self, project: ProjectIndex):
        self.project = project
        self.version = project.config.cstorch_version
        self.errors: list[AnalysisError] = []
        self._facts_by_module: dict[int, list[StateFact]] | None = None
        # Per optimizer class analysed (by id of its ref): the state keys its preinitialize
        # creates.
        self.created_keys: dict[int, tuple[frozenset[str], bool]] = {}
        # Walks that did not depend on their class: (calls made, how `self.x` resolved).
        self._class_free_calls: dict[tuple, tuple[list[FunctionCall], list[tuple]]] = {}
        # Summaries of each class's MRO (`ProjectIndex.along_mro`), by id of its ref.
        self._method_names_by_class: dict[int, list[str]] = {}
        self._official_keys_by_class: dict[int, tuple[frozenset[str], bool]] = {}
        self._attribute_uses_by_class: dict[int, tuple] = {}

    def run(self) -> None:
        # Classes sharing a method find the same facts in it: keep the first of each.
        seen: set[tuple] = set()
        grouped: dict[int, list[StateFact]] = {}
        for ref in self.optimizer_classes():
            try:
                facts = self._analyse_class(ref)
            except RecursionError:
                self.errors.append(AnalysisError(ref.info.module, TOO_DEEP))
                continue
            except Exception as error:  # a bug of ours must not stop the other files
                self.errors.append(AnalysisError(ref.info.module,
                                                 internal_error(error, ref.short_name)))
                continue
            for fact in facts:
                key = (id(fact.function.module), type(fact), fact.node.lineno,
                       fact.node.col_offset)
                if key not in seen:
                    seen.add(key)
                    grouped.setdefault(id(fact.function.module), []).append(fact)
        self._facts_by_module = grouped

    def facts_in(self, module: ModuleIndex) -> list[StateFact]:
        """The module's facts, in the order the analysis found them."""
        if self._facts_by_module is None:
            raise RuntimeError("OptimizerStateAnalysis.run() has not run")
        return self._facts_by_module.get(id(module), [])

    def optimizer_classes(self) -> list[ClassRef]:
        """Optimizer classes that can be instantiated, or that nothing derives from."""
        project = self.project
        result = []
        for ref, kinds in project.classified_classes:
            if not kinds.optimizer or project.is_machinery(ref):
                continue
            leaf = not project.subclasses.get(id(ref))
            if leaf or self._instantiable(ref, kinds.cstorch_optimizer):
                result.append(ref)
        return result

    def _instantiable(self, ref: ClassRef, cstorch: bool) -> bool:
        if self.project.is_abstract(ref):
            return False
        if not cstorch:
            return True
        for name in ("preinitialize", "step"):
            found = self.project.find_method(ref, name, self.version)
            if found is None or found.abstract:
                return False
        return True

    # ---- one optimizer class -----------------------------------------------------

    def _analyse_class(self, ref: ClassRef) -> list[StateFact]:
        optimizer_class = OptimizerClass(ref, private_maps=self._private_state_maps(ref))
        # A class with dicts of its own sees state where others see none: its walks
        # neither reuse nor share walks made for other classes.
        shares_walks = not optimizer_class.private_maps
        facts: list[StateFact] = []
        visited: set[tuple] = set()
        reached: set[int] = set()

        def run(entries: list[FunctionCall]) -> None:
            queue = list(entries)
            while queue:
                call = queue.pop()
                key = (id(call.function), call.role,
                       tuple(value_signature(b) for b in call.bindings), call.guarded)
                if key in visited:
                    continue
                visited.add(key)
                reached.add(id(call.function))
                if not self._may_touch_state(call, optimizer_class):
                    continue
                shared_key = (*key, call.via)
                cached = self._class_free_calls.get(shared_key) if shares_walks else None
                if cached is not None and self._same_resolutions(ref, cached[1]):
                    queue.extend(cached[0])
                    continue
                walker = StateWalker(self, optimizer_class, call, facts)
                reported = len(facts)
                try:
                    # Restoration writes no findings, and a function that cannot see
                    # state matters only through what it calls; for other methods not
                    # even that: each method of the class is an entry of its own.
                    if call.role is not Role.RESTORE and \
                            self._holds_state(call, optimizer_class):
                        walker.walk()
                    elif call.role is not Role.OTHER:
                        walker.scan_calls()
                except RecursionError:
                    self.errors.append(AnalysisError(call.function.module,
                                                     TOO_DEEP))
                    continue
                queue.extend(walker.calls)
                # A walk that wrote no state and found nothing did not depend on this
                # class: other classes inheriting the same method reuse what it calls.
                if call.role is not Role.PREINIT and not walker.wrote_state \
                        and len(facts) == reported and shares_walks:
                    self._class_free_calls[shared_key] = (walker.calls, walker.resolutions)

        self._seed_created_keys(optimizer_class)
        preinit = self._entry(ref, "preinitialize", Role.PREINIT)
        run([preinit] if preinit else [])
        restore = [c for n in RESTORATION_METHODS if (c := self._entry(ref, n, Role.RESTORE))]
        run(restore)
        step = self._entry(ref, "step", Role.STEP)
        run([step] if step else [])
        # Every other method is an entry of its own unless one already reached it; one
        # that never names `state` can only matter through what it calls.
        for name in self._method_names(ref):
            function = self._entry_function(ref, name)
            if function is not None and id(function) not in reached \
                    and self._mentions_state(function, optimizer_class):
                run([self._call(function, Role.OTHER, name)])
        self.created_keys[id(ref)] = (frozenset(optimizer_class.created_keys),
                                      optimizer_class.open_keys)
        return facts

    @staticmethod
    def _mentions_state(function: FunctionInfo, optimizer_class: OptimizerClass) -> bool:
        """Whether a function may reach optimizer state: its text names `.state` (or a
        dict of the class's own state), or it calls through `self` or `super()` (a
        textual, conservative prefilter)."""
        return function.mentions(".state") or function.mentions("self") or \
            function.mentions("super(") or any(
                function.mentions(f".{name}") for name in optimizer_class.private_maps)

    def _may_touch_state(self, call: FunctionCall, optimizer_class: OptimizerClass) -> bool:
        """A function given no optimizer or state value that never names `.state` nor
        calls through self cannot create or update optimizer state: skip its walk."""
        if any(value_signature(b) is not None for b in call.bindings):
            return True
        return self._mentions_state(call.function, optimizer_class)

    def _holds_state(self, call: FunctionCall, optimizer_class: OptimizerClass) -> bool:
        """Whether a function can see optimizer state: it names `.state` or
        `.param_groups` (tensors kept in param groups) or a dict of the class's own state,
        or an argument is state (the optimizer itself only counts through those)."""
        if any(value_signature(b) is not None and b is not OPTIMIZER for b in call.bindings):
            return True
        function = call.function
        return function.mentions(".state") or function.mentions(".param_groups") or any(
            function.mentions(f".{name}") for name in optimizer_class.private_maps)

    def _private_state_maps(self, ref: ClassRef) -> frozenset[str]:
        """The attributes the class (and its project bases) make an empty dict in
        `__init__` and set nowhere else (but where a checkpoint is restored), nor empty
        (`.clear()`), whose entries are dicts wherever one is stored (Magma's `self.
        _state[id(p)] = {"alignment": ...}`): dicts of per-parameter state kept between
        steps, besides `self.state`. (A dict of tensors, numbers or strings by parameter
        is not read as state: its entries are no parameter's state dict.)"""
        made, other, holds_dicts = self.project.along_mro(
            ref, self._attribute_uses_by_class, self._attribute_uses,
            lambda entry, then: self._attribute_uses([entry], then))
        return frozenset((made & holds_dicts) - other - {"state", "param_groups", "defaults"})

    def _attribute_uses(self, order: list[ClassRef], then: tuple = (
            frozenset(), frozenset(), frozenset())) -> tuple:
        """For `_private_state_maps`, over the classes of `order` and `then` (what the
        classes after them give): the attributes made an empty dict in `__init__`, those
        set or emptied otherwise, and those an entry is stored in as a dict."""
        made, other, holds_dicts = set(then[0]), set(then[1]), set(then[2])
        for entry in order:
            info = entry.info
            if info is None or self.project.is_machinery(entry):
                continue
            for name, method in info.methods.items():
                if not method.parameter_names or name in RESTORATION_METHODS:
                    continue
                self_name = method.parameter_names[0]
                if not method.mentions(f"{self_name}."):
                    continue
                for node in method.statements:
                    if node.__class__ is ast.Assign:
                        targets, value = node.targets, node.value
                    elif node.__class__ is ast.AnnAssign and node.value is not None:
                        targets, value = [node.target], node.value
                    else:
                        continue
                    for target in targets:
                        if target.__class__ is ast.Attribute and \
                                target.value.__class__ is ast.Name and \
                                target.value.id == self_name:
                            if name == "__init__" and _is_empty_dict(value):
                                made.add(target.attr)
                            else:
                                other.add(target.attr)
                        elif target.__class__ is ast.Subscript and \
                                target.value.__class__ is ast.Attribute and \
                                target.value.value.__class__ is ast.Name and \
                                target.value.value.id == self_name:
                            if not _is_dict(value):
                                other.add(target.value.attr)
                            elif _makes_a_tensor(self.project, method.module, value):
                                holds_dicts.add(target.value.attr)
                text = method.source_text
                if text is not None and ".clear(" in text:
                    other.update(re.findall(rf"\b{re.escape(self_name)}\.(\w+)\.clear\(", text))
        return frozenset(made), frozenset(other), frozenset(holds_dicts)

    def _same_resolutions(self, ref: ClassRef, resolutions: list[tuple]) -> bool:
        for name, after_name, function_id in resolutions:
            after = next((e for e in self.project.mro(ref) if e.name == after_name), None) \
                if after_name else None
            found = self.project.find_method(ref, name, self.version, after=after)
            if id(found.function if found else None) != function_id:
                return False
        return True

    def _method_names(self, ref: ClassRef) -> list[str]:
        """The project methods along the MRO (not machinery's), nearest first, each once,
        but preinitialize and step."""
        return self.project.along_mro(ref, self._method_names_by_class, self._methods_of_order,
                                      lambda entry, names: self._methods_of_order([entry], names))

    def _methods_of_order(self, order: list[ClassRef], then: list[str] = ()) -> list[str]:
        names: dict[str, None] = {}  # ordered, without repeats
        for entry in order:
            if entry.info is None or self.project.is_machinery(entry):
                continue
            for name in entry.info.methods:
                if name not in ("preinitialize", "step"):
                    names[name] = None
        if not names:
            return list(then)
        names.update(dict.fromkeys(then))
        return list(names)

    def _entry(self, ref: ClassRef, name: str, role: Role) -> FunctionCall | None:
        function = self._entry_function(ref, name)
        return self._call(function, role, name) if function is not None else None

    def _entry_function(self, ref: ClassRef, name: str) -> FunctionInfo | None:
        """The project function a class runs for method `name` (not machinery's, not
        an abstract one)."""
        found = self.project.find_method(ref, name, self.version)
        if found is None or found.function is None or found.function.is_abstract \
                or self.project.is_machinery(found.owner):
            return None
        return found.function

    @staticmethod
    def _call(function: FunctionInfo, role: Role, name: str) -> FunctionCall:
        bindings = (OPTIMIZER,) if function.kind in ("method", "property") else ()
        return FunctionCall(function, role, bindings, False, f"{name}()")

    def _seed_created_keys(self, optimizer_class: OptimizerClass) -> None:
        """Keys created by bases we only know from the official table, and the global step."""
        project = self.project
        preinit = project.find_method(optimizer_class.ref, "preinitialize", self.version)
        official_keys, unknown_base = project.along_mro(
            optimizer_class.ref, self._official_keys_by_class, self._official_keys,
            lambda entry, inherited: self._official_keys([entry], inherited))
        optimizer_class.created_keys |= official_keys
        optimizer_class.open_keys = optimizer_class.open_keys or unknown_base
        if preinit is not None and preinit.function is None and preinit.owner.unknown:
            optimizer_class.open_keys = True
        if project.has_global_step(optimizer_class.ref):
            optimizer_class.created_keys.add("step")

    @staticmethod
    def _official_keys(order: list[ClassRef], then: tuple[frozenset[str], bool] = (
            frozenset(), False)) -> tuple[frozenset[str], bool]:
        """The state keys the official classes of `order` create, and whether a class we
        cannot see is among them (it may create any key); `then`: those of the classes
        after `order`."""
        keys, unknown = set(then[0]), then[1]
        for entry in order:
            if entry.official is not None:
                keys |= entry.official.state_keys
                if entry.official.global_step:
                    keys.add("step")
            elif entry.unknown:
                unknown = True
        return (then[0] if len(keys) == len(then[0]) else frozenset(keys)), unknown


