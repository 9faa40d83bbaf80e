"""The project index: every module of the run, merged.

It answers the questions rules ask across files: what a qualified name refers to
(following re-exports through package `__init__` files), a class's bases and MRO
(mixing project classes, the built-in official API and unknown third-party
classes), which kind of class it is, and where a method is defined.
"""

from __future__ import annotations

import ast
import posixpath
import sys
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Protocol, TypeVar, Union

from cslint.config import Config, Version
from cslint.semantic.module_index import (
    ClassInfo, FunctionInfo, ModuleIndex, canonical, enables_global_step,
)
from cslint.semantic.official import (
    CSTORCH_OPTIMIZER, CSTORCH_SCHEDULERS, MACHINERY_FILES, NEUTRAL_BASES, NN_MODULE,
    TORCH_OPTIMIZER, TORCH_SCHEDULERS, OfficialApi, OfficialClass,
)
from cslint.semantic.torch_api import AUTOGRAD_FUNCTIONS

Symbol = Union[ClassInfo, FunctionInfo, OfficialClass]
T = TypeVar("T")
_MISSING = object()
# Layers a class's method table keeps before it merges them (see `_table_with`).
_TABLE_LAYERS = 4
_MethodTable = tuple[tuple[dict[str, "MethodLookup"], ...], "MethodLookup | None"]
_MAX_REEXPORT_HOPS = 16


@dataclass(frozen=True, eq=False)
class ClassRef:
    """A class as the project knows it: from source, from the official table, or unknown."""

    name: str
    info: ClassInfo | None = None
    official: OfficialClass | None = None

    @property
    def unknown(self) -> bool:
        return self.info is None and self.official is None

    @property
    def short_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]


@dataclass(slots=True)  # immutable by convention (frozen costs a setattr per field)
class MethodLookup:
    """Where a method resolves along an MRO."""

    owner: ClassRef
    function: FunctionInfo | None  # None: official, or assigned as a class attribute
    abstract: bool


# The methods a cstorch optimizer defines for the system (CS103, CS106).
_OPTIMIZER_METHODS = frozenset({"preinitialize", "step", "state_names_to_sparsify"})

# A method that may come from a class we cannot see (a third-party base).
UNKNOWN_METHOD = MethodLookup(ClassRef("<unknown>"), None, False)


@dataclass(frozen=True)
class ClassKinds:
    cstorch_optimizer: bool
    torch_optimizer: bool
    cstorch_scheduler: bool
    torch_scheduler: bool
    nn_module: bool

    @property
    def optimizer(self) -> bool:
        return self.cstorch_optimizer or self.torch_optimizer


class ModuleLoader(Protocol):
    """Loads the project's other modules by name, when resolving a name needs them."""

    def load_module(self, name: str) -> list[ModuleIndex]: ...


class ProjectIndex:
    def __init__(self, modules: list[ModuleIndex], official: OfficialApi, config: Config,
                 loader: ModuleLoader | None = None):
        self.modules: list[ModuleIndex] = []
        self.official = official
        self.config = config
        self.loader = loader
        self.modules_by_name: dict[str, list[ModuleIndex]] = {}
        self.classes_by_name: dict[str, list[ClassInfo]] = {}
        self._asked_loader: set[str] = set()
        for module in modules:
            self._add(module)
        # The modules given up front: checked files and the files that may depend on them.
        self.primary_modules = list(modules)
        self.optimizer_roots = {CSTORCH_OPTIMIZER, *config.optimizer_bases}
        self.scheduler_roots = {*CSTORCH_SCHEDULERS, *config.scheduler_bases}
        self._refs: dict[int, ClassRef] = {}
        self._unknown_refs: dict[str, ClassRef] = {}
        self._resolving: set[str] = set()
        self._resolved: dict[tuple[str, int | None], Symbol | None] = {}
        self._star_bindings: dict[tuple[int, str], str | None] = {}
        self._machinery: dict[int, str | None] = {}
        self._resolved_in_module: dict[tuple[int, str], Symbol | None] = {}
        self._callees: dict[tuple[int, str], tuple] = {}
        # The names `known_ancestors` records: those the analyses ask about.
        self.known_names = frozenset({*self.optimizer_roots, *self.scheduler_roots,
                                      TORCH_OPTIMIZER, *TORCH_SCHEDULERS, NN_MODULE,
                                      *AUTOGRAD_FUNCTIONS})
        self._lineages: dict[int, _Lineage] = {}
        self._global_step_by_class: dict[int, bool] = {}
        self._global_step_by_init: dict[int, bool] = {}
        self._kinds: dict[int, ClassKinds] = {}
        # By version, then by class: every name the MRO resolves, and what others get.
        # Each table is layers of names, nearest first (see `_table_with`).
        self._method_tables: dict[Version | None, dict[int, _MethodTable]] = {}
        self._open_abstract: dict[int, frozenset[str]] = {}
        # By class, version and the class after which super() looks.
        self._tables_after: dict[tuple, _MethodTable] = {}
        self._entry_methods: dict[tuple[int, Version | None], dict[str, MethodLookup]] = {}
        # What each module's names resolved into: by id of the module a name was written
        # in (None: a name given whole), the modules whose indexes the resolution read
        # (`reads`), and among them those defining the class or function found
        # (`symbol_reads`: code there may run under the reader's analysis). A cache of
        # findings follows these edges to the files a file's findings depend on.
        self.reads: dict[int | None, dict[int, ModuleIndex]] = {}
        self.symbol_reads: dict[int | None, dict[int, ModuleIndex]] = {}

    def _add(self, module: ModuleIndex) -> None:
        self.modules.append(module)
        self.modules_by_name.setdefault(module.name, []).append(module)
        for info in module.classes.values():
            self.classes_by_name.setdefault(info.qualname, []).append(info)

    def modules_named(self, name: str) -> list[ModuleIndex]:
        if name not in self.modules_by_name and self.loader is not None \
                and name not in self._asked_loader:
            self._asked_loader.add(name)
            for module in self.loader.load_module(name):
                self._add(module)
        return self.modules_by_name.get(name, [])

    # ---- names -------------------------------------------------------------

    def _note_reads(self, origin: ModuleIndex | None, candidates: list,
                    symbols: bool = False) -> None:
        key = id(origin) if origin is not None else None
        read = self.reads.setdefault(key, {})
        defining = self.symbol_reads.setdefault(key, {}) if symbols else None
        for candidate in candidates:
            module = candidate if isinstance(candidate, ModuleIndex) else candidate.module
            read[id(module)] = module
            if defining is not None:
                defining[id(module)] = module

    def _pick(self, candidates: list, origin: ModuleIndex | None):
        """Several files may give one module name (scripts in different folders):
        prefer the one beside the importing file."""
        self._note_reads(origin, candidates, symbols=not isinstance(candidates[0], ModuleIndex))
        if len(candidates) > 1 and origin is not None:
            for candidate in candidates:
                module = candidate if isinstance(candidate, ModuleIndex) else candidate.module
                if posixpath.dirname(module.location) == posixpath.dirname(origin.location):
                    return candidate
        return candidates[0]

    def resolve(self, qualname: str, origin: ModuleIndex | None = None) -> Symbol | None:
        """The project or official definition a qualified name refers to. Memoised: chains
        of star imports (`from .core import *` in every package of sympy) would otherwise
        explore every path through them again for each name."""
        key = (qualname, id(origin) if origin is not None else None)
        if key in self._resolved:
            return self._resolved[key]
        if qualname in self._resolving:
            return None  # star imports that import each other
        self._resolving.add(qualname)
        try:
            found = self._resolve(qualname, origin)
        finally:
            self._resolving.discard(qualname)
        self._resolved[key] = found
        return found

    def _resolve(self, qualname: str, origin: ModuleIndex | None) -> Symbol | None:
        seen: set[str] = set()
        name: str | None = qualname
        for _ in range(_MAX_REEXPORT_HOPS):
            if name is None or name in seen:
                break
            seen.add(name)
            if name not in self.classes_by_name and "." in name:
                self.modules_named(name.rsplit(".", 1)[0])  # a class of a module not yet read
            if name in self.classes_by_name:
                return self._pick(self.classes_by_name[name], origin)
            found, name = self._step_through_module(name, origin)
            if found is not None:
                return found
        return self.official.lookup(canonical(qualname))

    def _step_through_module(self, name: str, origin: ModuleIndex | None):
        """Split `pkg.mod.Attr.rest` at the longest project module; follow its binding."""
        parts = name.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            candidates = _visible(self.modules_named(".".join(parts[:cut])), origin)
            if not candidates:
                continue
            module = self._pick(candidates, origin)
            head, rest = parts[cut], parts[cut + 1:]
            suffix = ("." + ".".join(rest)) if rest else ""
            if head in module.top_level_classes:
                return None, module.top_level_classes[head] + suffix
            if head in module.functions and not rest:
                self._note_reads(origin, [module], symbols=True)
                return module.functions[head], None
            if head in module.imports:
                return None, module.imports[head] + suffix
            target = self.star_binding(module, head)
            return None, (target + suffix) if target else None
        return None, None

    def star_binding(self, module: ModuleIndex, name: str) -> str | None:
        """The qualified name `name` has in `module` through its star imports, searched
        breadth-first over the star-import graph and memoised per (module, name): sympy's
        packages star-import each other hundreds of modules deep."""
        key = (id(module), name)
        if key in self._star_bindings:
            return self._star_bindings[key]
        result = None
        seen = {id(module)}
        frontier = list(module.star_imports)
        while frontier and result is None:
            star = frontier.pop(0)
            sources = self.modules_named(star)
            self._note_reads(module, sources)
            if not sources and self.official.lookup(canonical(f"{star}.{name}")) is not None:
                result = f"{star}.{name}"  # `from cerebras.pytorch.optim import *`
            for source in sources:
                if id(source) in seen:
                    continue
                seen.add(id(source))
                if name in source.top_level_classes:
                    result = source.top_level_classes[name]
                elif name in source.functions:
                    result = source.functions[name].qualname
                elif name in source.imports:
                    result = source.imports[name]
                else:
                    frontier.extend(source.star_imports)
                    continue
                break
        self._star_bindings[key] = result
        return result

    def resolve_in_module(self, module: ModuleIndex, dotted: str) -> Symbol | None:
        """What a dotted name written in `module` refers to (memoised: every call site
        of a name asks again)."""
        key = (id(module), dotted)
        if key not in self._resolved_in_module:
            self._resolved_in_module[key] = self._resolve_in_module(module, dotted)
        return self._resolved_in_module[key]

    def _resolve_in_module(self, module: ModuleIndex, dotted: str) -> Symbol | None:
        qualified = module.qualify(dotted)
        if qualified is None:
            head, _, rest = dotted.partition(".")
            target = self.star_binding(module, head)
            if target is None:
                return None
            return self.resolve(f"{target}.{rest}" if rest else target, module)
        return self.resolve(qualified, module)

    def callee(self, module: ModuleIndex, dotted: str
               ) -> tuple[str | None, FunctionInfo | None, tuple[ClassInfo, str] | None]:
        """What a called dotted name is: its qualified name, the project function it
        names, or the project class and method of `ClassName.method(...)`. Memoised per
        module and name: every call site of a name asks again."""
        key = (id(module), dotted)
        found = self._callees.get(key)
        if found is None:
            target = self.resolve_in_module(module, dotted)
            function = target if isinstance(target, FunctionInfo) else None
            owner = None
            head, _, method = dotted.rpartition(".")
            if function is None and head:
                info = self.resolve_in_module(module, head)
                if isinstance(info, ClassInfo):
                    owner = (info, method)
            found = self._callees[key] = (self.qualified_name(module, dotted), function, owner)
        return found

    def qualified_name(self, module: ModuleIndex, dotted: str) -> str | None:
        """Canonical qualified name of a dotted expression (project or external)."""
        qualified = module.qualify(dotted)
        if qualified is None and dotted in ("object",):
            return "builtins.object"
        return canonical(qualified) if qualified else None

    # ---- classes -----------------------------------------------------------

    def ref_for_info(self, info: ClassInfo) -> ClassRef:
        ref = self._refs.get(id(info))
        if ref is None:
            ref = ClassRef(info.qualname, info=info)
            self._refs[id(info)] = ref
        return ref

    def ref_for_name(self, qualname: str, origin: ModuleIndex | None = None) -> ClassRef:
        found = self.resolve(qualname, origin)
        if isinstance(found, ClassInfo):
            return self.ref_for_info(found)
        if isinstance(found, OfficialClass):
            ref = self._refs.get(id(found))
            if ref is None:
                ref = ClassRef(found.qualname, official=found)
                self._refs[id(found)] = ref
            return ref
        name = canonical(qualname)
        if name not in self._unknown_refs:
            # A configured compliant base outside the run stands for the cstorch base.
            stands_for = (self.official.lookup(CSTORCH_OPTIMIZER) if name in self.optimizer_roots
                          else self.official.lookup(CSTORCH_SCHEDULERS[0])
                          if name in self.scheduler_roots else None)
            self._unknown_refs[name] = ClassRef(name, official=stands_for)
        return self._unknown_refs[name]

    def machinery_root(self, ref: ClassRef) -> str | None:
        """The official base a project class *is* (its own source is in the run)."""
        if ref.info is None:
            return None
        key = id(ref)
        if key not in self._machinery:
            self._machinery[key] = self._find_machinery_root(ref)
        return self._machinery[key]

    def _find_machinery_root(self, ref: ClassRef) -> str | None:
        for (class_name, suffix), root in MACHINERY_FILES.items():
            if ref.info.name == class_name and ref.info.module.path_ends_with(suffix):
                return root
        if ref.info.qualname in self.optimizer_roots or ref.info.qualname in self.scheduler_roots:
            return ref.info.qualname
        return None

    def is_machinery(self, ref: ClassRef) -> bool:
        return self.machinery_root(ref) is not None

    def is_abstract(self, ref: ClassRef) -> bool:
        """Whether the class declares an `@abstractmethod`, or leaves one of a base of
        the project abstract along its MRO (Python will not instantiate it either:
        `MuonBase(BaseOptimizer)` leaving `init_group`). The optimizer's own methods
        (`preinitialize`, `step`, `state_names_to_sparsify`), abstract in the official
        base or declared so again in a base of yours, are left out: a subclass lacking
        one is what CS103 and CS106 report."""
        if ref.info is not None and ref.info.declares_abstract:
            return True
        return bool(self._open_abstract_methods(ref) - _OPTIMIZER_METHODS)

    def _open_abstract_methods(self, ref: ClassRef) -> frozenset[str]:
        """The names of the project's abstract methods `ref` leaves abstract."""
        def declared(entry: ClassRef) -> list[str]:
            if entry.info is None or entry.official is not None or self.is_machinery(entry):
                return []
            return [name for name, method in entry.info.methods.items() if method.is_abstract]

        def still_abstract(owner: ClassRef, names: list[str]) -> frozenset[str]:
            return frozenset(name for name in names
                             if (lookup := self.find_method(owner, name)) is not None
                             and lookup.abstract)

        # (A name the base resolves to a body stays one unless the class declares it.)
        return self.along_mro(
            ref, self._open_abstract,
            lambda order: still_abstract(order[0], [n for e in order for n in declared(e)]),
            lambda entry, inherited: still_abstract(entry, [*inherited, *declared(entry)]))

    def bases(self, ref: ClassRef) -> list[ClassRef]:
        return [base for _, base in self._numbered_bases(ref)]

    def base_pairs(self, ref: ClassRef) -> list[tuple[ast.expr | None, ClassRef]]:
        """Each base with the expression naming it (None for official bases);
        `object`, `ABC`, `Generic` and the like are left out."""
        numbered = self._numbered_bases(ref)
        if ref.info is None or ref.official is not None:
            return [(None, base) for _, base in numbered]
        expressions = ref.info.base_exprs  # (from the tree: parsed again if released)
        return [(expressions[number], base) for number, base in numbered]

    def _numbered_bases(self, ref: ClassRef) -> list[tuple[int | None, ClassRef]]:
        """`base_pairs` with each base's position in the class's list, from the index
        alone (no syntax tree)."""
        if ref.official is not None:
            return [(None, self.ref_for_name(b)) for b in ref.official.bases
                    if b not in NEUTRAL_BASES]
        if ref.info is None:
            return []
        result = []
        for number, (base_name, kind) in enumerate(zip(ref.info.base_names,
                                                       ref.info.base_kinds)):
            if base_name is None:
                result.append((number, self.ref_for_name(f"<{kind}>")))
                continue
            if base_name == "object":
                continue
            qualified = ref.info.module.qualify(base_name)
            if qualified is not None:
                if canonical(qualified) not in NEUTRAL_BASES:
                    result.append((number, self.ref_for_name(qualified, ref.info.module)))
                continue
            # A name this module does not bind may still come from a star import.
            found = self.resolve_in_module(ref.info.module, base_name)
            if isinstance(found, ClassInfo):
                result.append((number, self.ref_for_info(found)))
            elif isinstance(found, OfficialClass):
                result.append((number, self.ref_for_name(found.qualname)))
            else:
                result.append((number, self.ref_for_name(base_name)))
        return result

    def mro(self, ref: ClassRef) -> list[ClassRef]:
        """`ref`, then its ancestors in Python's method resolution order (C3)."""
        lineage = self._lineage(ref)
        return lineage.shared[lineage.length - 1::-1]

    def known_ancestors(self, ref: ClassRef) -> frozenset[str]:
        """The names among `known_names` (the optimizer and scheduler bases, nn.Module,
        autograd.Function: what the analyses ask about) of the classes `ref` is or
        derives from. Only those: a set of every ancestor's name for each class of a
        chain of 10,000 would hold 50 million names."""
        return self._lineage(ref).known_names

    def _lineage(self, ref: ClassRef) -> "_Lineage":
        lineage = self._lineages.get(id(ref))
        return lineage if lineage is not None else self._linearise(ref)

    def _linearise(self, start: ClassRef) -> "_Lineage":
        """The lineage of `start` and of each ancestor not yet seen, each computed once
        from its bases' (bases first, depth first, in order, as the recursive definition
        reads; without recursion, as a chain of classes may be 10,000 deep)."""
        lineages = self._lineages
        lineages[id(start)] = _Lineage.placeholder(start)
        pending = [(start, self.bases(start), 0)]
        while pending:
            ref, bases, done = pending[-1]
            if done < len(bases):
                pending[-1] = (ref, bases, done + 1)
                base = bases[done]
                if id(base) not in lineages:
                    lineages[id(base)] = _Lineage.placeholder(base)
                    pending.append((base, self.bases(base), 0))
                continue
            pending.pop()
            lineages[id(ref)] = self._lineage_from_bases(ref, bases)
        return lineages[id(start)]

    def _lineage_from_bases(self, ref: ClassRef, bases: list[ClassRef]) -> "_Lineage":
        of_bases = [self._lineages[id(base)] for base in bases]
        own = self._own_known_names(ref)
        if any(lineage.cyclic for lineage in of_bases):
            # Bases that derive from each other (Python refuses them; a name may still
            # resolve so): the general merge, and the names read off the order itself.
            order = [ref] + _c3_merge([lineage.order() for lineage in of_bases] + [bases])
            names = frozenset(name for entry in order for name in self._own_known_names(entry))
            return _Lineage(order[::-1], len(order), names, bases, cyclic=True)
        if len(of_bases) == 1:
            # One base: its order with `ref` in front. A base that ends its shared list
            # (the last class of a chain so far) lends it: `ref` is appended, not copied.
            base = of_bases[0]
            if base.length == len(base.shared):
                shared = base.shared
                shared.append(ref)
            else:
                shared = base.shared[:base.length] + [ref]
            names = base.known_names if own <= base.known_names else base.known_names | own
            return _Lineage(shared, base.length + 1, names, bases)
        order = [ref] + _c3_merge([lineage.order() for lineage in of_bases] + [bases])
        names = own.union(*(lineage.known_names for lineage in of_bases))
        return _Lineage(order[::-1], len(order), names, bases)

    def has_global_step(self, ref: ClassRef | None) -> bool:
        """Whether an `__init__` of `ref`'s MRO (not the official classes' own) passes
        `enable_global_step=True` to cstorch's optimizer: each parameter's
        `state["step"]` is then the global step tensor, made with the state."""
        if ref is None:
            return False
        return self.along_mro(
            ref, self._global_step_by_class,
            lambda order: any(self._init_has_global_step(entry) for entry in order),
            lambda entry, inherited: inherited or self._init_has_global_step(entry))

    def _init_has_global_step(self, entry: ClassRef) -> bool:
        init = entry.info.methods.get("__init__") if entry.info else None
        if init is None or self.is_machinery(entry):
            return False
        if id(init) not in self._global_step_by_init:
            self._global_step_by_init[id(init)] = enables_global_step(init)
        return self._global_step_by_init[id(init)]

    def along_mro(self, ref: ClassRef, cache: dict[int, T],
                  whole: Callable[[list[ClassRef]], T], extend: Callable[[ClassRef, T], T]) -> T:
        """What `whole(self.mro(ref))` gives, memoised by class in `cache`. `extend(entry,
        summary)` must give `whole([entry, *order])` from `summary = whole(order)`: a
        class with one base extends its base's summary, so the classes of a chain of
        10,000 cost 10,000 steps, not 50 million (nor a recursion 10,000 deep)."""
        found = cache.get(id(ref), _MISSING)
        if found is not _MISSING:
            return found
        climbed = []  # `ref` and the ancestors up to the first summarised on its own
        top = ref
        while id(top) not in cache:
            lineage = self._lineage(top)
            if lineage.cyclic or len(lineage.bases) != 1:
                cache[id(top)] = whole(self.mro(top))
                break
            climbed.append(top)
            top = lineage.bases[0]
        summary = cache[id(top)]
        for entry in reversed(climbed):
            summary = cache[id(entry)] = extend(entry, summary)
        return summary

    def _own_known_names(self, entry: ClassRef) -> frozenset[str]:
        names = {canonical(entry.name), self.machinery_root(entry)}
        if entry.official is not None:
            names.add(entry.official.qualname)
        return frozenset(names & self.known_names)

    def kinds(self, ref: ClassRef) -> ClassKinds:
        found = self._kinds.get(id(ref))
        if found is None:
            names = self.known_ancestors(ref)
            found = self._kinds[id(ref)] = ClassKinds(
                cstorch_optimizer=bool(names & self.optimizer_roots),
                torch_optimizer=TORCH_OPTIMIZER in names,
                cstorch_scheduler=bool(names & self.scheduler_roots),
                torch_scheduler=any(n in names for n in TORCH_SCHEDULERS),
                nn_module=NN_MODULE in names,
            )
        return found

    def is_plain_class(self, ref: ClassRef) -> bool:
        """A class of the project's own that is no module, optimizer or scheduler, nor
        machinery, with no base we cannot see (a helper such as GaLore's projector)."""
        kinds = self.kinds(ref)
        return not (kinds.nn_module or kinds.optimizer or kinds.cstorch_scheduler
                    or kinds.torch_scheduler or self.is_machinery(ref)
                    or self.has_unknown_ancestor(ref))

    def has_unknown_ancestor(self, ref: ClassRef) -> bool:
        return any(entry.unknown for entry in self.mro(ref))

    def find_method(self, ref: ClassRef, name: str, version: Version | None = None,
                    after: ClassRef | None = None) -> MethodLookup | None:
        """Resolve `name` along the MRO (after `after`, for super()). None: not defined;
        UNKNOWN_METHOD: a class we cannot see comes first and may define it."""
        layers, others = self._method_table(ref, version, after)
        for layer in layers:
            found = layer.get(name, _MISSING)
            if found is not _MISSING:
                return found
        return others

    def _method_table(self, ref: ClassRef, version: Version | None, after: ClassRef | None
                      ) -> _MethodTable:
        """Every name the MRO (after `after`) resolves, and what other names get: one
        table per class, built from each entry's own names (analyses ask for every
        method of every class)."""
        if after is None:
            return self.along_mro(ref, self._method_tables.setdefault(version, {}),
                                  lambda order: self._table_of(order, version),
                                  lambda entry, inherited: self._table_with(
                                      entry, inherited, version))
        key = (id(ref), version, id(after))
        found = self._tables_after.get(key)
        if found is None:
            order = self.mro(ref)
            positions = [i for i, entry in enumerate(order) if entry is after]
            order = order[positions[0] + 1:] if positions else []
            found = self._tables_after[key] = self._table_of(order, version)
        return found

    def _table_of(self, order: list[ClassRef], version: Version | None) -> _MethodTable:
        others = None
        for position, entry in enumerate(order):
            if entry.unknown:  # it may define any name the entries before it do not
                order, others = order[:position], UNKNOWN_METHOD
                break
        table: dict[str, MethodLookup] = {}
        for entry in reversed(order):  # nearer entries override farther ones
            table.update(self._own_methods(entry, version))
        return (table,), others

    def _table_with(self, entry: ClassRef, inherited: _MethodTable,
                    version: Version | None) -> _MethodTable:
        """`_table_of([entry, *order])` from the table of `order` (`entry` is known: an
        unknown class has no bases): its own names before the layers it inherits, which
        it shares with its base (a merged copy for each class was 45 MB of the six
        packages' peak), merged into one once there are more than `_TABLE_LAYERS`."""
        own = self._own_methods(entry, version)
        if not own:
            return inherited
        layers, others = inherited
        layers = (own, *layers)
        if len(layers) > _TABLE_LAYERS:
            merged: dict[str, MethodLookup] = {}
            for layer in reversed(layers):
                merged.update(layer)
            layers = (merged,)
        return layers, others

    def _own_methods(self, entry: ClassRef, version: Version | None) -> dict[str, MethodLookup]:
        """The names one class defines itself: methods, then attributes assigned in its
        body (`step = _step`), then for official classes their table's methods."""
        key = (id(entry), version)
        found = self._entry_methods.get(key)
        if found is None:
            found = {}
            if entry.info is not None:
                for name in entry.info.class_attributes:
                    found[name] = MethodLookup(entry, None, False)
                for name, function in entry.info.methods.items():  # methods win
                    found[name] = MethodLookup(entry, function, function.is_abstract)
            elif entry.official is not None:
                methods, abstract = entry.official.methods_for(version)
                for name in methods | abstract:
                    found[name] = MethodLookup(entry, None, name in abstract)
            self._entry_methods[key] = found
        return found

    @cached_property
    def project_classes(self) -> list[ClassRef]:
        return [self.ref_for_info(info) for m in self.primary_modules
                for info in m.classes.values()]

    @property
    def classified_classes(self) -> list[tuple[ClassRef, ClassKinds]]:
        """The project's classes with their kinds (what the analyses start from)."""
        return self._classification[0]

    @property
    def unclassifiable_classes(self) -> list[ClassRef]:
        """Project classes whose hierarchy is too deep to classify."""
        return self._classification[1]

    @cached_property
    def _classification(self) -> tuple[list[tuple[ClassRef, ClassKinds]], list[ClassRef]]:
        classified, unclassifiable = [], []
        for ref in self.project_classes:
            try:
                classified.append((ref, self.kinds(ref)))
            except RecursionError:
                unclassifiable.append(ref)
        return classified, unclassifiable

    @cached_property
    def subclasses(self) -> dict[int, list[ClassRef]]:
        """Direct project subclasses of each class, by id of its ref."""
        result: dict[int, list[ClassRef]] = {}
        for ref in self.project_classes:
            for base in self.bases(ref):
                result.setdefault(id(base), []).append(ref)
        return result


@dataclass(slots=True)
class _Lineage:
    """A class's MRO, kept root first as the first `length` entries of `shared` (the
    classes of a chain of single inheritance share one list), with what the project
    index derives from it along the way."""

    shared: list[ClassRef]
    length: int
    known_names: frozenset[str]
    bases: list[ClassRef]
    # Its bases derive from it (Python refuses that; a name may still resolve so).
    cyclic: bool = False

    @classmethod
    def placeholder(cls, ref: ClassRef) -> "_Lineage":
        """What a class's bases see of it while its MRO is being computed: a cycle in
        the bases ends there."""
        return cls([ref], 1, frozenset(), [], cyclic=True)

    def order(self) -> list[ClassRef]:
        return self.shared[self.length - 1::-1]


def _c3_merge(sequences: list[list[ClassRef]]) -> list[ClassRef]:
    """C3: take the first head that no sequence holds further on, drop it from every
    sequence, again. Each sequence is read from a moving start and a count says how
    many hold each class past their start, so each step costs the number of sequences,
    not their lengths."""
    sequences = [s for s in sequences if s]
    starts = [0] * len(sequences)
    further_on: dict[int, int] = {}
    for sequence in sequences:
        for entry in sequence[1:]:
            further_on[id(entry)] = further_on.get(id(entry), 0) + 1
    result: list[ClassRef] = []
    while True:
        head = None
        for sequence, start in zip(sequences, starts):
            if start < len(sequence) and not further_on.get(id(sequence[start])):
                head = sequence[start]
                break
        if head is None:
            break
        result.append(head)
        for index, sequence in enumerate(sequences):
            start = starts[index]
            if start < len(sequence) and sequence[start] is head:
                starts[index] = start = start + 1
                if start < len(sequence):
                    further_on[id(sequence[start])] -= 1
    if any(start < len(sequence) for sequence, start in zip(sequences, starts)):
        # Inconsistent hierarchy (Python would refuse it): keep a depth-first order.
        taken = {id(entry) for entry in result}
        for sequence, start in zip(sequences, starts):
            for entry in sequence[start:]:
                if id(entry) not in taken:
                    taken.add(id(entry))
                    result.append(entry)
    return result


def _visible(candidates: list[ModuleIndex], origin: ModuleIndex | None) -> list[ModuleIndex]:
    """The project modules an import in `origin` may mean. A script named like a standard
    library module (`math.py` in a folder that is no package: cerebras-pytorch's MLIR
    dialects) shadows it only for the files beside it (their folder is first on
    `sys.path` when one runs); anywhere else, `import math` is the standard library's.
    A package of the project so named stays the project's."""
    if not candidates or "." in candidates[0].name \
            or candidates[0].name not in sys.stdlib_module_names:
        return candidates
    here = posixpath.dirname(origin.location) if origin is not None else None
    return [module for module in candidates if module.location.endswith("/__init__.py")
            or posixpath.dirname(module.location) == here]
