"""Which files a run checks, and which it reads only for context."""

from __future__ import annotations

import fnmatch
import os
import stat
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PYTHON_SUFFIXES = (".py", ".pyi")
SKIPPED_DIRECTORIES = frozenset({
    ".git", ".hg", ".svn", "__pycache__", ".tox", ".nox", ".venv", "venv", "env",
    "build", "dist", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    ".eggs", "site-packages",
})


INSTALL_DIRECTORIES = frozenset({"site-packages", "dist-packages"})


def file_mode(path: Path) -> int | None:
    """The mode of what `path` leads to (symlinks followed); None when nothing can be
    reached there: missing, a dangling or looping symlink, a path over PATH_MAX, a
    folder that may not be searched. (`Path.is_file` and `is_dir` raise on the last
    two.)"""
    try:
        return os.stat(path).st_mode
    except (OSError, ValueError):  # ValueError: a NUL byte in the path
        return None


def is_regular_file(path: Path) -> bool:
    mode = file_mode(path)
    return mode is not None and stat.S_ISREG(mode)


def is_folder(path: Path) -> bool:
    mode = file_mode(path)
    return mode is not None and stat.S_ISDIR(mode)


def resolved(path: Path) -> Path:
    """`path` absolute with its symlinks and `..` resolved, as far as they lead.
    (`Path.resolve` raises RuntimeError on a symlink loop before Python 3.13.)"""
    return Path(os.path.realpath(path))


@lru_cache(maxsize=4096)
def is_package_folder(folder: Path) -> bool:
    return is_regular_file(folder / "__init__.py") or is_regular_file(folder / "__init__.pyi")


@lru_cache(maxsize=65536)
def module_name_for(path: Path) -> tuple[str, bool]:
    """Dotted module name from the `__init__.py` chain, and whether it is a package
    (memoised: the engine asks for every file twice). The chain is read where the path
    names the file, as Python's imports do, not where symlinks lead."""
    path = Path(os.path.abspath(path))
    is_package = path.stem == "__init__"
    parts: list[str] = [] if is_package else [path.stem]
    folder = path.parent
    while is_package_folder(folder):
        parts.insert(0, folder.name)
        if folder.parent == folder:
            break
        folder = folder.parent
    return ".".join(parts) or path.stem, is_package


def package_top(folder: Path) -> Path:
    """The topmost folder of the package chain (folders holding `__init__.py`) that
    `folder` lies in; `folder` itself when it is no package or its parent is none."""
    while is_package_folder(folder) and folder.parent != folder \
            and is_package_folder(folder.parent):
        folder = folder.parent
    return folder


@dataclass(frozen=True)
class Target:
    path: Path
    display_path: str


class ExcludeMatcher:
    """`exclude` globs, matched against paths relative to the config's folder and names."""

    def __init__(self, globs: tuple[str, ...], base_dir: Path | None):
        self.globs = globs
        self.base_dir = resolved(base_dir) if base_dir else None

    def excludes(self, path: Path) -> bool:
        if not self.globs:
            return False
        candidates = [path.name]
        if self.base_dir is not None:
            try:
                relative = resolved(path).relative_to(self.base_dir).as_posix()
            except ValueError:
                relative = None
            if relative is not None:
                candidates.append(relative)
                candidates.append(relative + "/")
        return any(
            fnmatch.fnmatchcase(candidate, glob.rstrip("/"))
            or (glob.endswith("/**") and candidate.startswith(glob[:-2]))
            for glob in self.globs
            for candidate in candidates
        )


def is_virtualenv(directory: Path) -> bool:
    return is_regular_file(directory / "pyvenv.cfg")


def walk_python_files(root: Path, exclude: ExcludeMatcher, packages_only: bool = False
                      ) -> list[Path]:
    """The Python files under `root`; with `packages_only`, its own files and the
    packages in it (what a script there can import), not its other folders."""
    found: list[Path] = []
    for folder, subfolders, files in os.walk(root):
        here = Path(folder)
        subfolders[:] = sorted(
            name for name in subfolders
            if name not in SKIPPED_DIRECTORIES
            and not name.endswith(".egg-info")
            and not is_virtualenv(here / name)
            and not exclude.excludes(here / name)
            and not (packages_only and not is_package_folder(here / name))
        )
        for name in sorted(files):
            if name.endswith(PYTHON_SUFFIXES):
                path = here / name
                if not exclude.excludes(path):
                    found.append(path)
    return found


def display_path(path: Path, given: str) -> str:
    """Paths are reported as the user passed them: relative stays relative."""
    return printable(os.path.normpath(given) if given else str(path))


# A name's bytes that are not UTF-8 (Python keeps them as surrogate escapes, which no
# UTF-8 output can encode), and control characters (a line break would split a line).
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def printable(name: str) -> str:
    """A file name as cslint shows it: each byte that is not UTF-8 as `\\xff`, each
    control character as `\\x0a`; a strict UTF-8 stdout and JSON take it."""
    return _UNPRINTABLE.sub(_escaped, name)


def _escaped(match: re.Match) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # the surrogate escape of byte code - 0xDC00
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def project_path(path: Path, root: Path | None) -> str:
    """`path` as a path in the project: relative to its root (resolved, as
    `find_project_root` gives it) with `/` separators; absolute outside the project."""
    real = resolved(path)
    if root is not None:
        try:
            return real.relative_to(root).as_posix()
        except ValueError:
            pass
    return real.as_posix()


def is_marked_root(folder: Path) -> bool:
    """Whether `folder` is a project's root by a mark of its own: it holds a
    pyproject.toml or .git, or is an install folder (whose packages are the project) or
    an installed package's top-level folder."""
    return folder.name in INSTALL_DIRECTORIES or folder.parent.name in INSTALL_DIRECTORIES \
        or is_regular_file(folder / "pyproject.toml") or file_mode(folder / ".git") is not None


def find_project_root(paths: list[Path]) -> Path | None:
    """The folder holding the nearest pyproject.toml or .git above the first path;
    without one, the common folder of the paths given, each widened to the top of the
    package it lies in: a file checked alone then gets the context that a run over its
    package gives it (the files that import it and those it imports). None when that
    common folder is the whole disk or holds the home folder (unrelated trees: see
    `context_folders`)."""
    first = resolved(paths[0])
    start = first if is_folder(first) else first.parent
    too_wide = {Path(start.anchor), resolved(Path.home())}
    for candidate in (start, *start.parents):
        if candidate in too_wide:
            break
        if is_marked_root(candidate):
            return candidate
    common = Path(os.path.commonpath([str(f) for f in context_folders(paths)]))
    home = resolved(Path.home())
    if common == Path(common.anchor) or common == home or common in home.parents:
        return None
    return common


def context_folders(paths: list[Path]) -> list[Path]:
    """Each path widened to the top of the package it lies in (a folder for itself)."""
    return sorted({package_top(p if is_folder(p) else p.parent) for p in map(resolved, paths)})
