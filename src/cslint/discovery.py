"""Which files a run checks, and which it reads only for context."""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from pathlib import Path

PYTHON_SUFFIXES = (".py", ".pyi")
SKIPPED_DIRECTORIES = frozenset({
    ".git", ".hg", ".svn", "__pycache__", ".tox", ".nox", ".venv", "venv", "env",
    "build", "dist", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    ".eggs", "site-packages",
})


INSTALL_DIRECTORIES = frozenset({"site-packages", "dist-packages"})


@dataclass(frozen=True)
class Target:
    path: Path
    display_path: str


class ExcludeMatcher:
    """`exclude` globs, matched against paths relative to the config's folder and names."""

    def __init__(self, globs: tuple[str, ...], base_dir: Path | None):
        self.globs = globs
        self.base_dir = base_dir.resolve() if base_dir else None

    def excludes(self, path: Path) -> bool:
        if not self.globs:
            return False
        candidates = [path.name]
        resolved = path.resolve()
        if self.base_dir is not None:
            try:
                relative = resolved.relative_to(self.base_dir).as_posix()
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
    return (directory / "pyvenv.cfg").is_file()


def walk_python_files(root: Path, exclude: ExcludeMatcher) -> list[Path]:
    found: list[Path] = []
    for folder, subfolders, files in os.walk(root):
        here = Path(folder)
        subfolders[:] = sorted(
            name for name in subfolders
            if name not in SKIPPED_DIRECTORIES
            and not name.endswith(".egg-info")
            and not is_virtualenv(here / name)
            and not exclude.excludes(here / name)
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
    resolved = path.resolve()
    if root is not None:
        try:
            return resolved.relative_to(root).as_posix()
        except ValueError:
            pass
    return resolved.as_posix()


def find_project_root(paths: list[Path]) -> Path:
    """The folder holding the nearest pyproject.toml or .git above the first path;
    without one, the common folder of the paths given."""
    first = paths[0].resolve()
    start = first if first.is_dir() else first.parent
    too_wide = {Path(start.anchor), Path.home().resolve()}
    for candidate in (start, *start.parents):
        if candidate in too_wide:
            break
        if candidate.name in INSTALL_DIRECTORIES:
            return candidate  # the install folder itself: its packages are the project
        if candidate.parent.name in INSTALL_DIRECTORIES:
            return candidate  # an installed package: its top-level folder is the project
        if (candidate / "pyproject.toml").is_file() or (candidate / ".git").exists():
            return candidate
    folders = [p.resolve() if p.is_dir() else p.resolve().parent for p in paths]
    return Path(os.path.commonpath([str(f) for f in folders]))
