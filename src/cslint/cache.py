"""The findings cache: what each file gave last time, and what it depended on.

One SQLite database per run key (the cslint build, the configuration, what the report
needs) under the cache folder (`.cslint_cache/` in the project by default). It holds
plain data only: JSON text in SQLite rows, read back field by field into findings; nothing
in it is ever executed, so a planted file can do no more than make a run slower.

- `files`: each project file's id, stat signature and content digest, so an unchanged
  file is not read again to learn that it is unchanged, and the generation (a counter of
  the runs that saved) in which it last changed or appeared.
- `entries`: each checked file's digest, the ids of the files its findings depend on
  (`cslint.dependencies`) and of those whose code may run into its own (its users, read
  with it when it is checked again), its findings and input problems, and the generation
  it has seen: every change recorded up to it was taken into account, so the entry holds while
  none of those files changed in a later generation (their digests are the files
  table's). On transformers the files depend on 900 others each, 2.6 million in all:
  ids, read only when a file changed, keep them small.

The cache is an optimisation and never an error: a corrupt, foreign or locked database
is set aside and the run goes on without it (rebuilding it when it can). Two processes
writing at once are serialised by SQLite; a writer that cannot get the lock in time
skips saving.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

try:  # blake2b alone: importing hashlib loads OpenSSL, 3 ms of a 0.09 s warm run
    from _blake2 import blake2b
except ImportError:  # an interpreter that builds it into hashlib only
    from hashlib import blake2b

from cslint import __version__
from cslint.diagnostics import Finding, Location, Severity

DEFAULT_DIRECTORY = ".cslint_cache"
# Bumped when what the database holds changes shape.
_SCHEMA = 4
_STALE_AFTER_SECONDS = 30 * 24 * 3600
_LOCK_TIMEOUT_SECONDS = 2.0


def _build_signature() -> str:
    """The cslint that runs: its version and the stat of each of its modules (a cache
    written by other code, an edited checkout included, is never read)."""
    package = Path(__file__).parent
    parts = [__version__, str(_SCHEMA)]
    for root, folders, files in os.walk(package):
        folders[:] = sorted(f for f in folders if f not in ("__pycache__", "cstorch"))
        for name in sorted(files):
            if name.endswith((".py", ".json")):
                stat = os.stat(os.path.join(root, name))
                parts.append(f"{name}:{stat.st_size}:{stat.st_mtime_ns}")
    return blake2b("\n".join(parts).encode(), digest_size=16).hexdigest()


def run_key(*parts: object) -> str:
    """The key of a run's cache: the cslint build and everything given that shapes the
    findings (configuration, selected rules, what the report carries)."""
    text = "\n".join([_build_signature(), *map(repr, parts)])
    return blake2b(text.encode(), digest_size=16).hexdigest()


def digest(raw: bytes) -> str:
    return blake2b(raw, digest_size=20).hexdigest()


def stat_signature(stat: os.stat_result) -> str:
    return f"{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ino}:{stat.st_ctime_ns}"


@dataclass(frozen=True)
class Entry:
    """What a checked file gave: its digest when checked, the files (absolute paths) its
    findings depend on, its findings (paths left out) and its input problems."""

    digest: str
    # The files the findings depend on, the file itself included. An entry read from the
    # database has them as `stored_depends` (its JSON array of file ids), decoded only
    # when asked (`FindingsCache.depends_ids`).
    depends: tuple[str, ...]
    findings: tuple[Finding, ...]
    problems: tuple[tuple[str, int | None, int | None], ...]
    # Whether the file was read and parsed (a file with a syntax error is not counted
    # among the files checked).
    parsed: bool
    # The files table's generation up to which every change was taken into account.
    generation: int = 0
    stored_depends: str = ""
    # The files whose code may run into the file's (`cslint.dependencies.users_of`),
    # stored as file ids like `depends` (`FindingsCache.users_paths`); None: not known
    # (a file with a syntax error).
    users: tuple[str, ...] | None = ()
    stored_users: str = ""


@dataclass(frozen=True)
class FileState:
    signature: str
    digest: str
    # The generation in which the file last changed (None: not saved yet).
    generation: int | None = None
    # Its id in the files table (None: not saved yet).
    id: int | None = None


class FindingsCache:
    """One run key's database. Every method swallows SQLite's errors: the cache then
    acts empty and saves nothing."""

    def __init__(self, directory: Path, key: str):
        self.directory = directory
        self.path = directory / f"cslint-{key}.sqlite"
        self._connection: sqlite3.Connection | None = None
        self.usable = True
        self._paths_by_id: dict[int, str] = {}

    def _connect(self) -> sqlite3.Connection | None:
        if self._connection is not None or not self.usable:
            return self._connection
        try:
            _prepare_directory(self.directory)
            connection = sqlite3.connect(self.path, timeout=_LOCK_TIMEOUT_SECONDS,
                                         isolation_level=None)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, "
                               "value INTEGER)")
            connection.execute("CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, "
                               "id INTEGER UNIQUE, signature TEXT, digest TEXT, "
                               "generation INTEGER)")
            connection.execute("CREATE TABLE IF NOT EXISTS entries (path TEXT PRIMARY KEY, "
                               "digest TEXT, depends TEXT, users TEXT, result TEXT, "
                               "generation INTEGER)")
            self._connection = connection
        except (sqlite3.Error, OSError):
            self._set_aside()
        return self._connection

    def _set_aside(self) -> None:
        """A database that cannot be read: removed (a corrupt file would fail every run)
        where possible, unused for the rest of this run."""
        self.usable = False
        self.close()
        for suffix in ("", "-wal", "-shm"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except OSError:
                pass

    def generation(self) -> int:
        """The last generation saved (0: none)."""
        connection = self._connect()
        if connection is None:
            return 0
        try:
            row = connection.execute("SELECT value FROM meta WHERE key = 'generation'"
                                     ).fetchone()
        except sqlite3.Error:
            self._set_aside()
            return 0
        return row[0] if row is not None and type(row[0]) is int else 0

    def file_states(self) -> dict[str, FileState]:
        """Each file as last seen."""
        connection = self._connect()
        if connection is None:
            return {}
        try:
            states = {path: FileState(signature, digest, generation, file_id)
                      for path, file_id, signature, digest, generation in connection.execute(
                          "SELECT path, id, signature, digest, generation FROM files")
                      if isinstance(path, str) and type(file_id) is int
                      and isinstance(signature, str) and isinstance(digest, str)
                      and type(generation) is int}
        except sqlite3.Error:
            self._set_aside()
            return {}
        self._paths_by_id = {state.id: path for path, state in states.items()}
        return states

    def depends_ids(self, entry: Entry) -> frozenset[int] | None:
        """The ids of the files a stored entry depends on; None where its row holds no
        list of ids (written by something else: the entry is then checked again)."""
        return _ids(entry.stored_depends)

    def users_paths(self, entry: Entry) -> list[str] | None:
        """The paths of the files whose code may run into a stored entry's file; None
        as for `depends_ids`, or where an id names no file the files table holds."""
        ids = _ids(entry.stored_users)
        if ids is None or not all(i in self._paths_by_id for i in ids):
            return None
        return sorted(self._paths_by_id[i] for i in ids)

    def entries(self, paths: Iterable[str]) -> dict[str, Entry]:
        connection = self._connect()
        if connection is None:
            return {}
        wanted = set(paths)
        found: dict[str, Entry] = {}
        try:
            rows = connection.execute(
                "SELECT path, digest, depends, users, result, generation FROM entries")
            for path, file_digest, depends, users, result, generation in rows:
                if path in wanted:
                    entry = _entry_from_row(file_digest, depends, users, result,
                                            generation)
                    if entry is not None:
                        found[path] = entry
        except sqlite3.Error:
            self._set_aside()
            return {}
        return found

    def save(self, files: dict[str, FileState], entries: dict[str, Entry],
             confirmed: list[str], seen_generation: int) -> None:
        """Record `files` (a changed digest starts a new generation), the `entries` made
        and the held entries `confirmed` by a run that started at `seen_generation`."""
        connection = self._connect()
        if connection is None or (not files and not entries and not confirmed):
            return
        try:
            connection.execute("BEGIN IMMEDIATE")
            row = connection.execute("SELECT value FROM meta WHERE key = 'generation'"
                                     ).fetchone()
            last = row[0] if row is not None and type(row[0]) is int else 0
            generation = last + 1
            # The run saw every change up to its start, and the changes it records now;
            # not those another cslint recorded meanwhile, if any.
            seen = generation if last == seen_generation else seen_generation
            connection.execute("INSERT OR REPLACE INTO meta (key, value) "
                               "VALUES ('generation', ?)", (generation,))
            # A file keeps its id; a new one gets the next.
            ids = {path: file_id for path, file_id in
                   connection.execute("SELECT path, id FROM files")}
            next_id = max((i for i in ids.values() if type(i) is int), default=0) + 1
            updated, added = [], []
            for path, state in files.items():
                changed_in = generation if state.generation is None else state.generation
                if path in ids:
                    updated.append((state.signature, state.digest, changed_in, path))
                else:
                    ids[path] = next_id
                    added.append((path, next_id, state.signature, state.digest, changed_in))
                    next_id += 1
            connection.executemany("UPDATE files SET signature = ?, digest = ?, "
                                   "generation = ? WHERE path = ?", updated)
            connection.executemany("INSERT INTO files (path, id, signature, digest, "
                                   "generation) VALUES (?, ?, ?, ?, ?)", added)
            connection.executemany(
                "INSERT OR REPLACE INTO entries (path, digest, depends, users, result, "
                "generation) VALUES (?, ?, ?, ?, ?, ?)",
                [(path, entry.digest, json.dumps([ids[p] for p in entry.depends]),
                  json.dumps([ids[p] for p in entry.users] if entry.users is not None
                             else None), _result_json(entry), seen)
                 for path, entry in entries.items()
                 if all(p in ids for p in (*entry.depends, *(entry.users or ())))])
            connection.executemany("UPDATE entries SET generation = ? WHERE path = ?",
                                   [(seen, path) for path in confirmed])
            connection.execute("COMMIT")
        except sqlite3.OperationalError:
            # Locked by another cslint for longer than we wait: its results stand.
            try:
                connection.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        except sqlite3.Error:
            self._set_aside()

    def close(self) -> None:
        if self._connection is not None:
            try:
                self._connection.close()
            except sqlite3.Error:
                pass
            self._connection = None


def _prepare_directory(directory: Path) -> None:
    """The cache folder, ignored by git, with databases unused for a month removed."""
    fresh = not directory.is_dir()
    directory.mkdir(parents=True, exist_ok=True)
    ignore = directory / ".gitignore"
    if fresh or not ignore.exists():
        ignore.write_text("# Written by cslint: the whole folder is a cache.\n*\n")
        return
    now = time.time()
    for old in directory.glob("cslint-*.sqlite*"):
        try:
            if now - old.stat().st_mtime > _STALE_AFTER_SECONDS:
                old.unlink()
        except OSError:
            pass


# ---- findings as plain data -----------------------------------------------------------

def _result_json(entry: Entry) -> str:
    return json.dumps({
        "findings": [_finding_data(finding) for finding in entry.findings],
        "problems": [list(problem) for problem in entry.problems],
        "parsed": entry.parsed,
    })


def _finding_data(finding: Finding) -> dict:
    loc = finding.location
    data = {"location": [loc.line, loc.column, loc.end_line, loc.end_column],
            "code": finding.code, "name": finding.name, "message": finding.message,
            "severity": finding.severity.value, "fingerprint": finding.fingerprint}
    if finding.fix is not None:
        from cslint.fixes.kinds import FIX_KINDS  # only with a fix: 3-8 ms of imports

        kind = type(finding.fix).__name__
        if FIX_KINDS.get(kind) is not type(finding.fix):
            raise TypeError(f"fix kind {kind} is not registered in FIX_KINDS")
        data["fix"] = {"kind": kind, **{name: value for name, value
                                        in vars(finding.fix).items()}}
    return data


def _ids(stored: str) -> frozenset[int] | None:
    """A stored JSON array of file ids (None for anything else)."""
    try:
        ids = json.loads(stored)
    except ValueError:
        return None
    if not isinstance(ids, list) or not all(type(i) is int for i in ids):
        return None
    return frozenset(ids)


def _entry_from_row(file_digest: object, depends: object, users: object, result: object,
                    generation: object) -> Entry | None:
    """The entry a row holds; None for a row of the wrong shape (written by something
    else): it is then checked again."""
    try:
        if not isinstance(file_digest, str) or not isinstance(depends, str) \
                or not isinstance(users, str) or not isinstance(result, str) \
                or type(generation) is not int:
            return None
        data = json.loads(result)
        findings = tuple(_finding_from_data(item) for item in data["findings"])
        problems = tuple((str(problem), _optional_int(line), _optional_int(column))
                         for problem, line, column in data["problems"])
        parsed = data["parsed"]
        if not isinstance(parsed, bool):
            return None
        return Entry(file_digest, (), findings, problems, parsed, generation, depends,
                     stored_users=users)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def _optional_int(value: object) -> int | None:
    if value is None:
        return None
    if type(value) is not int:
        raise TypeError("not an integer")
    return value


def _finding_from_data(data: dict) -> Finding:
    line, column, end_line, end_column = (int(n) for n in data["location"])
    fix = None
    if "fix" in data:
        from cslint.fixes.kinds import FIX_KINDS  # only with a fix: 3-8 ms of imports

        fields = dict(data["fix"])
        kind = FIX_KINDS[fields.pop("kind")]
        fix = kind(**{name: _tuples(value) for name, value in fields.items()})
    return Finding("", Location(line, column, end_line, end_column), str(data["code"]),
                   str(data["name"]), str(data["message"]), Severity(data["severity"]), fix,
                   str(data["fingerprint"]))


def _tuples(value: object) -> object:
    """JSON arrays back into the tuples the fix kinds hold."""
    if isinstance(value, list):
        return tuple(_tuples(item) for item in value)
    return value
