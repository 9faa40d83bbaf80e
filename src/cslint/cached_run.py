"""A run that reuses the findings of files that did not change, nor did what they depend on.

1. Every project file's digest (re-read only when its stat changed since the last run).
2. A checked file's entry holds if its digest and the digest of every file its findings
   depended on (`cslint.dependencies`) are as recorded: its findings are taken as they
   were, and the file is not parsed.
3. The others are checked together, the project's other files read as they are needed
   (the way a run over a few changed files reads them). An edit may make a file reach
   code it did not reach before (a new caller, a new subclass): a file with a held entry
   that the batch shows to depend on a file its entry did not record is checked too,
   until no such file is left.
4. What was checked is saved with its new dependencies.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from cslint.cache import DEFAULT_DIRECTORY, Entry, FindingsCache, digest, run_key, \
    stat_signature
from cslint.dependencies import depends_on
from cslint.discovery import Target
from cslint.project_files import ProjectFiles
from cslint.source import InputError, SourceFile

if TYPE_CHECKING:
    from cslint.engine import CacheOptions, LintResult, _Run

# Rounds of step 3 before everything left is checked at once.
_MAX_ROUNDS = 4


def _key(path: Path) -> str:
    return os.path.normpath(os.path.abspath(path))


def check_with_cache(run: _Run, result: LintResult, targets: list[Target],
                     files: ProjectFiles, options: CacheOptions) -> None:
    assert files.root is not None
    directory = options.directory or files.root / DEFAULT_DIRECTORY
    cache = FindingsCache(directory, run_key(run.config, [rule.code for rule in run.rules],
                                             run.apply_noqa, run.fingerprints,
                                             str(files.root)))
    try:
        _check(run, result, targets, files, cache)
    finally:
        cache.close()


def _check(run: _Run, result: LintResult, targets: list[Target], files: ProjectFiles,
           cache: FindingsCache) -> None:
    other_paths = sorted(files.pending)
    known = cache.file_digests()
    current: dict[str, tuple[str, str]] = {}  # path -> (stat signature, digest)
    for path in [target.path for target in targets] + other_paths:
        state = _file_state(path, known.get(_key(path)))
        if state is not None:
            current[_key(path)] = state

    entries = cache.entries(_key(target.path) for target in targets)
    held = {key: entry for key, entry in entries.items() if _holds(entry, key, current)}
    pending = [target for target in targets if _key(target.path) not in held]
    saved: dict[str, Entry] = {}
    for _ in range(_MAX_ROUNDS):
        if not pending:
            break
        pending = _check_batch(run, result, pending, targets, other_paths, files.root,
                               current, held, saved)
    if pending:  # still growing: check every remaining file at once
        for target in pending:
            held.pop(_key(target.path), None)
        _check_batch(run, result, pending, targets, other_paths, files.root, current, {},
                     saved)

    for target in targets:
        entry = held.get(_key(target.path))
        if entry is not None:
            _report_entry(result, target, entry)
    cache.save({path: state for path, state in current.items() if known.get(path) != state},
               saved)


def _file_state(path: Path, known: tuple[str, str] | None) -> tuple[str, str] | None:
    """(stat signature, digest) of a file, re-read only when its stat changed."""
    try:
        signature = stat_signature(os.stat(path))
    except OSError:
        return None
    if known is not None and known[0] == signature:
        return known
    try:
        return signature, digest(path.read_bytes())
    except OSError:
        return None


def _holds(entry: Entry, key: str, current: dict[str, tuple[str, str]]) -> bool:
    recorded = dict(entry.depends)
    if recorded.get(key) != entry.digest or key not in current:
        return False
    return all(path in current and current[path][1] == file_digest
               for path, file_digest in recorded.items())


def _check_batch(run: _Run, result: LintResult, batch: list[Target], targets: list[Target],
                 other_paths: list[Path], root: Path, current: dict[str, tuple[str, str]],
                 held: dict[str, Entry], saved: dict[str, Entry]) -> list[Target]:
    """Check `batch`; record its entries; return the held targets it shows were reached
    by a change (to check next)."""
    batch_keys = {_key(target.path) for target in batch}
    others = other_paths + [target.path for target in targets
                            if _key(target.path) not in batch_keys]
    part = type(result)()
    checked = run.check(part, batch, None, ProjectFiles(others, root))
    result.findings.extend(part.findings)
    result.errors.extend(part.errors)
    result.sources.update(part.sources)
    result.files_checked += part.files_checked
    result.checked_paths.extend(part.checked_paths)

    project = run.project
    modules = project.modules if project is not None else []
    keys = [_key(module.path) for module in modules]
    depends = depends_on(modules, project.reads) if project is not None else []
    depends_of = {keys[index]: [keys[j] for j in range(len(keys)) if bits >> j & 1]
                  for index, bits in enumerate(depends)}

    by_path: dict[str, list] = {}
    for finding in part.findings:
        by_path.setdefault(finding.path, []).append(finding)
    problems_by_path: dict[str, list] = {}
    for error in part.errors:
        problems_by_path.setdefault(error.display_path, []).append(
            (error.problem, error.line, error.column))
    loaded = {_key(loaded.source.path) for loaded in checked}
    for target in batch:
        key = _key(target.path)
        if key not in current:
            continue  # gone or unreadable: reported as such, nothing to keep
        paths = depends_of.get(key, [key]) if key in loaded else [key]
        recorded = tuple((path, current[path][1]) for path in paths if path in current)
        if len(recorded) < len(paths):
            continue  # depends on a file that could not be read: check it next time too
        saved[key] = Entry(current[key][1], recorded,
                           tuple(by_path.get(target.display_path, ())),
                           tuple(problems_by_path.get(target.display_path, ())),
                           key in loaded)

    reached = []
    for target in targets:
        key = _key(target.path)
        entry = held.get(key)
        if entry is None or key not in depends_of:
            continue
        recorded = dict(entry.depends)
        if any(path not in recorded for path in depends_of[key]):
            held.pop(key)
            reached.append(target)
    return reached


def _report_entry(result: LintResult, target: Target, entry: Entry) -> None:
    shown = target.display_path
    result.files_checked += entry.parsed
    result.checked_paths.append(target.path)
    for finding in entry.findings:
        result.findings.append(type(finding)(shown, finding.location, finding.code,
                                             finding.name, finding.message,
                                             finding.severity, finding.fix,
                                             finding.fingerprint))
    for problem, line, column in entry.problems:
        result.errors.append(InputError(shown, problem, line, column))
    if entry.findings:
        # The report shows paths and lines of the files with findings.
        try:
            result.sources[shown] = SourceFile.read(target.path, shown)
        except InputError:
            pass
