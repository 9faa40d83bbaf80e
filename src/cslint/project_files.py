"""Reading the project's files: each file is read, parsed and indexed here, once.

The checked files are loaded up front. The project's other files are read on demand:
when a name resolves into them (the project index asks while the analyses run), or
when they may depend on a checked file (so one changed file gets the findings a run
over the whole tree would give it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cslint.discovery import ExcludeMatcher, Target, context_folders, find_project_root, \
    is_marked_root, is_package_folder, module_name_for, resolved, walk_python_files
from cslint.memory import give_back_freed_memory
from cslint.source import TOO_DEEP, InputError, SourceFile, read_regular_file

if TYPE_CHECKING:
    from cslint.semantic.module_index import FunctionInfo, ModuleIndex


@dataclass
class LoadedFile:
    """A file as read and indexed."""

    source: SourceFile
    module: ModuleIndex


# Syntax trees take about 30 times the memory of their source. The first files read keep
# theirs, up to this much source in all (a project of a few hundred files: every tree);
# the others let theirs go once indexed, and are parsed again when an analysis or a
# check asks for them, so a large project's memory does not grow with all its trees.
HELD_SOURCE_BYTES = 4_000_000


# Trees let go of this much source (about 30 MB of tree) between returns of the freed
# memory to the system.
_RELEASED_BEFORE_GIVING_BACK = 1_000_000


class HeldTrees:
    """Which trees stay for the whole run: those of the first files read, up to a budget
    of source bytes. The others go once indexed, and again once checked (their source's
    lines too, split again when asked for): a tree parsed again for an analysis or a
    rule stays until its file's check, or, asked after it, until the end of the check
    that asked."""

    def __init__(self, budget: int | None = None):
        self.left = HELD_SOURCE_BYTES if budget is None else budget
        self._kept: set[int] = set()  # ids of the modules that keep theirs
        self._checked: set[int] = set()
        self._asked_after_check: list[ModuleIndex] = []
        self._released = 0  # source characters whose trees went since memory went back

    def indexed(self, module: ModuleIndex, size: int) -> None:
        # A module indexed elsewhere (a worker process) comes without its tree: keeping
        # the one parsed again here would hold it for the whole run.
        if module.held_tree is not None and 0 < self.left and size <= self.left:
            self.left -= size
            self._kept.add(id(module))
        else:
            module.on_parsed_again = self._parsed_again
            module.release_tree()

    def _parsed_again(self, module: ModuleIndex) -> None:
        if id(module) in self._checked:
            self._asked_after_check.append(module)

    def checked(self, loaded: LoadedFile) -> None:
        """The file has been checked: the analyses are done, and the other files' rules
        name its functions by position, so a later need parses it again."""
        module = loaded.module
        self._checked.add(id(module))
        if id(module) not in self._kept:
            if module.held_tree is not None:
                self._released += module.text_length
            module.release_tree()
            loaded.source.forget_lines()
        for other in self._asked_after_check:
            self._released += other.text_length
            other.release_tree()
        self._asked_after_check.clear()
        if self._released >= _RELEASED_BEFORE_GIVING_BACK:
            self._released = 0
            give_back_freed_memory()


def load_file(path: Path, shown: str, max_size: int, raw: bytes | None = None,
              held: HeldTrees | None = None) -> LoadedFile:
    """Read (unless given its bytes), parse and index one file (InputError when it cannot
    be). Only a regular file of at most `max_size` bytes is read. `held` decides whether
    its tree stays in memory (default: it does)."""
    # Imported by the first file read: a run the cache answers reads none.
    from cslint.semantic.module_index import build_module_index

    if raw is None:
        raw = read_regular_file(path, shown, max_size)
    source = SourceFile.from_bytes(path, shown, raw)
    tree = source.parse()
    try:
        module = build_module_index(tree, path, shown, source_text=source)
    except RecursionError:
        raise InputError(shown, TOO_DEEP) from None
    if held is not None:
        held.indexed(module, len(raw))  # (a UTF-8 source's `raw` is encoded again)
    return LoadedFile(source, module)


class ProjectFiles:
    """The project's other Python files: read when a name resolves into them, or when
    they may depend on a checked file (so one changed file gets the findings a run over
    the whole tree would give it).

    A file that cannot be read (not a regular file, over `max_size` bytes, unreadable)
    or parsed is left out silently: it is reported when it is itself checked."""

    def __init__(self, files: list[Path], max_size: int, root: Path | None = None,
                 unsaved: dict[Path, bytes] | None = None):
        self.root = root  # the project's folder (None without inputs)
        self.max_size = max_size
        # Contents to use instead of what is on disk, by absolute path (`cslint port`
        # sees each file with the other files' ports).
        self.unsaved = unsaved or {}
        self.held = HeldTrees()
        self.by_module: dict[str, list[Path]] = {}
        for path in files:
            self.by_module.setdefault(module_name_for(path)[0], []).append(path)
        self.pending = set(files)
        # The files parsed, by path: those read, and those parsed while looking for
        # dependents but not read yet.
        self._indexes: dict[Path, ModuleIndex] = {}
        self._checked: dict[str, ModuleIndex] = {}  # those `dependents` was asked about

    def _read(self, path: Path, raw: bytes | None = None) -> ModuleIndex | None:
        module = self._parsed(path, raw)
        self.pending.discard(path)
        return module

    def read_paths(self, paths: list[Path]) -> list[ModuleIndex]:
        """These files, those not read yet, in the order given."""
        return [m for m in map(self._read, [p for p in paths if p in self.pending])
                if m is not None]

    def load_module(self, name: str) -> list[ModuleIndex]:
        paths = [p for p in self.by_module.get(name, ()) if p in self.pending]
        return [m for m in map(self._read, paths) if m is not None]

    def dependents(self, checked: list[ModuleIndex]) -> list[ModuleIndex]:
        """Files whose code may reach the checked files: those that import a class or
        function of theirs (directly, through a module that imports it in turn, or through
        a package above it, which may re-export it), then those that import a class or
        function of such a file whose code uses what it imported (subclasses, callers),
        transitively. A file is parsed only when its words name one of those; a name it
        defines itself, or imports from elsewhere, is not the checked one (transformers
        copies `eager_attention_forward` into 371 files: by their words alone, one
        model's dependents were the whole package, by their imports 7 files)."""
        wanted = {f"{m.name}.{n}" for m in checked
                  for n in (*m.top_level_classes, *m.functions)}
        self._checked = {m.name: m for m in checked}
        # The modules holding wanted names, and every package above one.
        holders = _holders(wanted)
        found: list[ModuleIndex] = []
        new_names = set(wanted)
        # The words of each pending file, read once: a set intersection per file and
        # round stays linear in the text however many names the checked files define
        # (a search for each name took minutes with thousands of checked files).
        words_of: dict[Path, frozenset[bytes]] = {}
        mentions_of: dict[Path, _Mentions] = {}
        while new_names and self.pending:
            last_names = {name.rpartition(".")[2].encode() for name in new_names}
            new_names = set()
            for path in sorted(self.pending):
                words = words_of.get(path)
                text = None
                if words is None:
                    text = self._text(path)
                    if text is None:
                        continue
                    words = words_of[path] = frozenset(_WORD_BYTES.findall(text))
                named = last_names.intersection(words)
                if not named:
                    continue
                if text is None:
                    text = self._text(path)
                    if text is None:
                        continue
                mentions = mentions_of.get(path)
                if mentions is None:
                    mentions = mentions_of[path] = _Mentions(text)
                named = {n for n in named if not mentions.all_its_own(n)}
                if not named:
                    continue
                module = self._parsed(path, text)
                if module is None:
                    continue
                bound = self._bound_to(module, mentions, {n.decode() for n in named},
                                       wanted, holders)
                if not bound:
                    continue  # it names them, but its names come from elsewhere
                del words_of[path]
                found.append(self._read(path))
                new_names |= {f"{module.name}.{n}"
                              for n in _leading_to(module, bound)} - wanted
            wanted |= new_names
            holders |= _holders(new_names)
        return found

    def _bound_to(self, module: ModuleIndex, mentions: _Mentions, named: set[str],
                  wanted: set[str], holders: set[str]) -> set[str]:
        """The names through which `module`'s code reaches `wanted` classes and functions:
        those its imports bind to them, and those it reads as attributes of a module
        holding them or of a package above it (`torch.optim.SGD` after `import torch`)."""
        bound = set()
        for local, target in module.imports.items():
            if target in holders:
                bound.update(name for name in named if mentions.reads(local, name))
            elif target.rpartition(".")[2] in named and self._leads_to(target, wanted,
                                                                      holders):
                bound.add(local)
        for star in module.star_imports:
            bound.update(name for name in named
                         if self._leads_to(f"{star}.{name}", wanted, holders))
        return bound

    def _leads_to(self, qualname: str, wanted: set[str], holders: set[str],
                  hops: int = 0) -> bool:
        """Whether `qualname` names a `wanted` class or function: itself, or through
        the imports of the project modules on the way (a package above a wanted module
        is taken to re-export it)."""
        if qualname in wanted:
            return True
        owner, _, name = qualname.rpartition(".")
        if not owner:
            return False
        if owner in holders or hops >= _MAX_REEXPORT_HOPS:
            return True
        module = self._module_named(owner)
        if module is None or name in module.functions or name in module.top_level_classes:
            return False
        if name in module.imports:
            return self._leads_to(module.imports[name], wanted, holders, hops + 1)
        return any(self._leads_to(f"{star}.{name}", wanted, holders, hops + 1)
                   for star in module.star_imports)

    def _module_named(self, name: str) -> ModuleIndex | None:
        """A project module's index, parsed if it was not read yet (it stays pending:
        it is added to the project only when a name resolves into it)."""
        if name in self._checked:
            return self._checked[name]
        for path in self.by_module.get(name, ()):
            module = self._indexes.get(path)
            if module is None and path in self.pending:
                module = self._parsed(path)
            if module is not None:
                return module
        return None

    def _parsed(self, path: Path, raw: bytes | None = None) -> ModuleIndex | None:
        """A pending file's index, kept for when it is read (`_read`)."""
        module = self._indexes.get(path)
        if module is None:
            if raw is None and self.unsaved:
                raw = self.unsaved.get(path.absolute())
            try:
                module = load_file(path, str(path), self.max_size, raw, self.held).module
            except InputError:
                self.pending.discard(path)
                return None
            self._indexes[path] = module
        return module

    def _text(self, path: Path) -> bytes | None:
        """A pending file's bytes (None, and no longer pending, where it cannot be read)."""
        try:
            text = self.unsaved.get(path.absolute()) if self.unsaved else None
            return text if text is not None else read_regular_file(path, str(path),
                                                                   self.max_size)
        except InputError:
            self.pending.discard(path)
            return None


def _holders(names: set[str]) -> set[str]:
    """The modules holding `names` (qualified), and every package above one."""
    holders = set()
    for name in names:
        parts = name.split(".")[:-1]
        holders.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
    return holders


class _Mentions:
    """What a file's text names: the functions and classes it defines at its top level,
    and the attributes read after each name (`torch.optim.SGD`: `optim` and `SGD`
    after `torch`, read only when asked). Made for a file whose words name something
    wanted."""

    __slots__ = ("text", "defined", "_after")

    def __init__(self, text: bytes):
        self.text = text
        self.defined = frozenset(_TOP_LEVEL_DEFINITION.findall(text))
        self._after: dict[bytes, set[bytes]] | None = None

    def all_its_own(self, name: bytes) -> bool:
        """Whether the file defines `name` at its top level and reads no attribute of
        that name: every mention is then its own (transformers copies
        `eager_attention_forward` into 371 files; each of them named every other's)."""
        return name in self.defined and re.search(
            rb"\.\s*" + re.escape(name) + rb"\b", self.text) is None

    def reads(self, base: str, name: str) -> bool:
        """Whether the file reads `name` as an attribute of `base`, directly or further
        down (`torch.optim.SGD` after `import torch`)."""
        if self._after is None:
            self._after = {}
            for found, rest in _ATTRIBUTE_CHAIN.findall(self.text):
                self._after.setdefault(found, set()).update(_WORD_BYTES.findall(rest))
        return name.encode() in self._after.get(base.encode(), ())


_TOP_LEVEL_DEFINITION = re.compile(rb"^(?:async\s+def|def|class)\s+(\w+)", re.MULTILINE)
_ATTRIBUTE_CHAIN = re.compile(rb"\b([A-Za-z_]\w*)((?:\s*\.\s*[A-Za-z_]\w*)+)")
# Re-exports followed before a name is taken to lead to the checked code.
_MAX_REEXPORT_HOPS = 16
# A word as `\b` bounds one: what a name in the code can be.
_WORD_BYTES = re.compile(rb"\w+")
_WORD = re.compile(r"\w+")


def _leading_to(module: ModuleIndex, names: set[str]) -> set[str]:
    """The classes and functions of `module` through which other code reaches `names`:
    subclasses of those classes, and classes and functions whose code uses them or uses
    such a class or function of the module (a caller of such a function passes values
    on to the checked code)."""
    words: dict[int, frozenset[str] | None] = {}  # each function's, read once

    def uses(function: FunctionInfo, wanted: set[str]) -> bool:
        key = id(function)
        if key not in words:
            text = function.source_text
            words[key] = frozenset(_WORD.findall(text)) if text is not None else None
        found = words[key]
        return found is None or not wanted.isdisjoint(found)

    reached = set(names)
    while True:
        leading = {f.name for f in module.functions.values() if uses(f, reached)}
        leading.update(c.name for c in module.classes.values()
                       if any(b and (b.split(".", 1)[0] in reached
                                     or b.rsplit(".", 1)[-1] in reached)
                              for b in c.base_names)
                       or any(uses(m, reached) for m in c.methods.values()))
        if leading <= reached:
            return reached - names
        reached |= leading


def project_files_for(targets: list[Target], stdin, exclude: ExcludeMatcher,
                      root: Path | None, max_size: int,
                      unsaved: dict[Path, bytes] | None = None) -> ProjectFiles:
    anchors = [t.path for t in targets]
    if stdin is not None:
        anchors.append(Path(stdin[0]).absolute())
    if not anchors:
        return ProjectFiles([], max_size)
    marked = root is not None
    root = root or find_project_root(anchors)
    marked = marked or (root is not None and is_marked_root(root))
    # With no project marked above them (no pyproject.toml, .git or install folder), each
    # path's own package is its context, and a folder of scripts gives its own files and
    # its packages (what its scripts import), not every tree below it (a home folder,
    # /tmp: 5 s there for one file) nor everything between unrelated trees.
    folders = [root] if marked else context_folders(anchors)
    folders = [f for f in folders if not any(other in f.parents for other in folders)]
    # Most walked files are checked files named the same way; resolving (symlinks, `..`)
    # is needed only for the others.
    absolute = {a.absolute() for a in anchors}
    others = [p for folder in folders
              for p in walk_python_files(folder, exclude, packages_only=not marked
                                         and not is_package_folder(folder))
              if p.absolute() not in absolute]
    if others:
        real_anchors = {resolved(a) for a in anchors}
        others = [p for p in others if resolved(p) not in real_anchors]
    return ProjectFiles(others, max_size, resolved(root) if root is not None else None,
                        unsaved)
