"""A run that reuses the findings of files that did not change, nor did what they depend on.

1. Every project file's digest (re-read only when its stat changed since the last run).
2. A checked file's entry holds if its digest is as recorded and none of the files its
   findings depended on (`cslint.dependencies`) changed or went since the entry was
   made (the files table records the generation in which each file last changed): its
   findings are taken as they were, and the file is not parsed. A run that changed
   nothing reads no entry's list of files.
3. The others are checked together (a batch), with the files whose code may reach them:
   those that used their classes and functions last time (each entry records its
   file's users), and every file changed since the oldest held entry was made with the
   users of those (an edit may make a file reach code it did not reach before: a new
   caller, a new subclass); for a file with no entry, the files that name its classes
   and functions (`ProjectFiles.dependents`). What they read is read as their names
   resolve. A held entry that a changed (or new) file of a batch now uses, directly or
   through others, without its entry recording that file, is checked in the next
   batch, until none is left.
4. What was checked is saved with its new dependencies; the entries that held are
   marked as having seen every change up to this run.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING

from cslint.cache import DEFAULT_DIRECTORY, Entry, FileState, FindingsCache, digest, \
    run_key, stat_signature
from cslint.dependencies import depends_on, used_by, users_of
from cslint.discovery import Target
from cslint.project_files import ProjectFiles
from cslint.source import InputError, SourceFile, read_regular_file

if TYPE_CHECKING:
    from cslint.engine import CacheOptions, LintResult, Run
    from cslint.semantic.module_index import ModuleIndex

# Rounds of step 3 before everything left is checked at once.
_MAX_ROUNDS = 4


def _key(path: Path) -> str:
    """The absolute path as text SQLite can hold (bytes of a name that are not UTF-8
    written as \\xff escapes)."""
    absolute = os.path.normpath(os.path.abspath(path))
    return absolute.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def check_with_cache(run: Run, result: LintResult, targets: list[Target],
                     files: ProjectFiles, options: CacheOptions) -> None:
    assert files.root is not None
    directory = options.directory or files.root / DEFAULT_DIRECTORY
    cache = FindingsCache(directory, run_key(run.config, run.codes,
                                             run.apply_noqa, run.fingerprints,
                                             str(files.root)))
    try:
        _CachedRun(run, result, targets, files, cache, options.read_reported).check()
    finally:
        cache.close()


class _CachedRun:
    def __init__(self, run: Run, result: LintResult, targets: list[Target],
                 files: ProjectFiles, cache: FindingsCache, read_reported: bool = True):
        self.run = run
        # Each path's key, made once a run (a path's is asked for about five times).
        self.key = functools.lru_cache(maxsize=None)(_key)
        self.read_reported = read_reported
        self.result = result
        self.targets = targets
        self.root = files.root
        self.max_size = files.max_size
        self.cache = cache
        self.other_paths = sorted(files.pending)
        # Every change the database records up to this generation is known to this run.
        self.seen_generation = cache.generation()
        self.known = cache.file_states()
        self.current: dict[str, FileState] = {}
        for path in [target.path for target in targets] + self.other_paths:
            state = self._file_state(path)
            if state is not None:
                self.current[self.key(path)] = state
        self.entries = cache.entries(self.key(target.path) for target in targets)
        self._changed_ids_by_generation: dict[int, frozenset[int]] = {}
        self.held = {key: entry for key, entry in self.entries.items() if self._holds(key, entry)}
        self.saved: dict[str, Entry] = {}
        # Files whose code is analysed with every batch, since they may reach a held
        # entry: those changed since the oldest held entry was made, then each batch's.
        oldest = min((entry.generation for entry in self.held.values()), default=None)
        self.context = self._changed_since(oldest) if oldest is not None else set()
        self.changed_since_oldest = set(self.context)

    def _changed_since(self, generation: int) -> set[str]:
        return {path for path, state in self.current.items()
                if state.generation is None or state.generation > generation}

    def _file_state(self, path: Path) -> FileState | None:
        """The file as it is now (re-read only when its stat changed); None for what
        cannot be read (reported when checked, left out when read for context)."""
        try:
            signature = stat_signature(os.stat(path))
        except OSError:
            return None
        known = self.known.get(self.key(path))
        if known is not None and known.signature == signature:
            return known
        try:
            now = digest(read_regular_file(path, str(path), self.max_size))
        except InputError:
            return None
        unchanged = known is not None and known.digest == now
        return FileState(signature, now, known.generation if unchanged else None,
                         known.id if known is not None else None)

    def _holds(self, key: str, entry: Entry) -> bool:
        state = self.current.get(key)
        if state is None or state.digest != entry.digest:
            return False
        changed = self._changed_ids_since(entry.generation)
        if not changed:
            return True
        depends = self.cache.depends_ids(entry)
        return depends is not None and depends.isdisjoint(changed)

    def _changed_ids_since(self, generation: int) -> frozenset[int]:
        """The ids of the known files changed since `generation`, or gone."""
        found = self._changed_ids_by_generation.get(generation)
        if found is None:
            changed = self._changed_since(generation)
            found = self._changed_ids_by_generation[generation] = frozenset(
                state.id for path, state in self.known.items()
                if state.id is not None and (path in changed or path not in self.current))
        return found

    def _file_id(self, path: str) -> int | None:
        known = self.known.get(path)
        return known.id if known is not None else None

    def check(self) -> None:
        pending = [t for t in self.targets if self.key(t.path) not in self.held]
        rounds = 0
        # A batch with no files still runs when changed files may reach held ones.
        while pending or (rounds == 0 and self.context and self.held):
            rounds += 1
            if rounds > _MAX_ROUNDS:  # still growing: check every remaining file
                pending += [t for t in self.targets if self.key(t.path) in self.held]
                self.held.clear()
            pending = self._check_batch(pending)
        for target in self.targets:
            entry = self.held.get(self.key(target.path))
            if entry is not None:
                self._report(target, entry)
        changed = {path: state for path, state in self.current.items()
                   if self.known.get(path) != state}
        # The held entries have now seen every change, those this run records too (the
        # next run need not read their lists of files). A run that changed nothing and
        # holds only entries that had seen every change writes nothing.
        confirmed = sorted(key for key, entry in self.held.items()
                           if changed or self.saved or entry.generation < self.seen_generation)
        self.cache.save(changed, self.saved, confirmed, self.seen_generation)

    def _check_batch(self, batch: list[Target]) -> list[Target]:
        """Check `batch`; record its entries; return the held targets it shows were
        reached by a change (to check next)."""
        batch_keys = {self.key(target.path) for target in batch}
        others = self.other_paths + [target.path for target in self.targets
                                     if self.key(target.path) not in batch_keys]
        files = ProjectFiles(others, self.max_size, self.root)
        context = set(self.context)

        def reaching(checked: list[ModuleIndex]) -> list[ModuleIndex]:
            """The files whose code may reach the batch: those that used its files'
            classes and functions last time (their entries' users), and the files
            changed since with those that used theirs (a changed file may now call
            into the batch). What the batch reads is read as its names resolve. For a
            file with no entry: the files that name its classes and functions
            (`ProjectFiles.dependents`), and so for a changed file whose users are not
            known (new, or one that did not parse)."""
            changed = set(context)
            users: set[str] = set()
            unknown = []
            for module in checked:
                entry = self.entries.get(self.key(module.path))
                recorded = self.cache.users_paths(entry) if entry is not None else None
                if recorded is None:
                    unknown.append(module)
                else:
                    users.update(recorded)
                    changed |= self._changed_since(entry.generation)
            others_changed = changed - batch_keys
            without_users = set(others_changed)
            for key, entry in self.cache.entries(others_changed).items():
                recorded = self.cache.users_paths(entry)
                if recorded is not None:
                    users.update(recorded)
                    without_users.discard(key)
            paths = sorted((p for p in others if self.key(p) in changed | users), key=_key)
            loaded = files.read_paths(paths)
            unknown += [module for module in loaded if self.key(module.path) in without_users]
            return loaded + files.dependents(unknown)

        part = type(self.result)()
        checked = self.run.check(part, batch, None, files, reaching)
        self.context |= batch_keys
        result = self.result
        result.findings.extend(part.findings)
        result.errors.extend(part.errors)
        result.sources.update(part.sources)
        result.modules.update(part.modules)
        result.files_checked += part.files_checked
        result.checked_paths.extend(part.checked_paths)

        project = self.run.project
        assert project is not None
        keys = [self.key(module.path) for module in project.modules]
        depends = depends_on(project.modules, project.reads, project.symbol_reads)
        users = users_of(project.modules, project.symbol_reads)
        # Read out only for the files whose entries are made here.
        depends_of = {keys[index]: ([keys[j] for j in _members(bits)],
                                    [keys[j] for j in _members(users[index])])
                      for index, bits in enumerate(depends) if keys[index] in batch_keys}
        self._save_batch(batch, part, {self.key(loaded.source.path) for loaded in checked},
                         depends_of)
        return self._reached(keys, used_by(
            project.modules, project.symbol_reads,
            [index for index, key in enumerate(keys) if key in self.changed_since_oldest
             or key not in self.known]))

    def _reached(self, keys: list[str], uses: dict[int, int]) -> list[Target]:
        """The held targets a changed (or new) file of the last batch's project now uses
        (its code may run into theirs, directly or through others), where their entry
        did not record that file: they are checked next. (What else their findings now
        depend on is not news: an entry made by a run over a few files records fewer of
        the files its names passed through.)"""
        position = {key: index for index, key in enumerate(keys)}
        reached = []
        for target in self.targets:
            key = self.key(target.path)
            entry = self.held.get(key)
            if entry is None or key not in position:
                continue
            users = [keys[start] for start, bits in uses.items()
                     if start != position[key] and bits >> position[key] & 1]
            if not users:
                continue
            changed = self._changed_ids_since(entry.generation)
            recorded = self.cache.depends_ids(entry)
            if recorded is None or any(
                    file_id is None or (file_id in changed and file_id not in recorded)
                    for file_id in map(self._file_id, users)):
                del self.held[key]
                reached.append(target)
        return reached

    def _save_batch(self, batch: list[Target], part: LintResult, parsed: set[str],
                    depends_of: dict[str, tuple[list[str], list[str]]]) -> None:
        findings: dict[str, list] = {}
        for finding in part.findings:
            findings.setdefault(finding.path, []).append(finding)
        problems: dict[str, list] = {}
        for error in part.errors:
            problems.setdefault(error.display_path, []).append(
                (error.problem, error.line, error.column))
        for target in batch:
            key = self.key(target.path)
            if key not in self.current:
                continue  # gone or unreadable: reported as such, nothing to keep
            # A file not parsed (a syntax error) has no users known: once it changes,
            # those that name its classes and functions are read with it.
            paths, users = depends_of.get(key, ([key], None)) if key in parsed \
                else ([key], None)
            if any(path not in self.current for path in (*paths, *(users or ()))):
                continue  # depends on a file that could not be read: check it next time
            self.saved[key] = Entry(self.current[key].digest, tuple(paths),
                                    tuple(findings.get(target.display_path, ())),
                                    tuple(problems.get(target.display_path, ())),
                                    key in parsed,
                                    users=tuple(users) if users is not None else None)

    def _report(self, target: Target, entry: Entry) -> None:
        shown = target.display_path
        result = self.result
        result.files_checked += entry.parsed
        result.checked_paths.append(target.path)
        for finding in entry.findings:
            result.findings.append(type(finding)(shown, finding.location, finding.code,
                                                 finding.name, finding.message,
                                                 finding.severity, finding.fix,
                                                 finding.fingerprint))
        for problem, line, column in entry.problems:
            result.errors.append(InputError(shown, problem, line, column))
        if entry.findings and self.read_reported:
            # The report shows the lines of the files with findings (--show-source) or
            # their fixes as edits; their paths come from the inputs.
            try:
                result.sources[shown] = SourceFile.read(target.path, shown, self.max_size)
            except InputError:
                pass


def _members(bits: int):
    """The positions of the bits set in `bits`, lowest first."""
    while bits:
        lowest = bits & -bits
        yield lowest.bit_length() - 1
        bits ^= lowest
