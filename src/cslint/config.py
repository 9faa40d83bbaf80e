"""`[tool.cslint]` configuration: loading, validation, command-line overrides."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cslint.codes import validate_selector
from cslint.discovery import is_folder, is_regular_file

class ConfigError(Exception):
    """A configuration problem; the message names the file and the key."""


Version = tuple[int, ...]
# ASCII digits only: `int` would also read '２' and Arabic-Indic digits.
_RELEASE_NUMBER = re.compile(r"[0-9]+(\.[0-9]+)*")
_ECHO_LIMIT = 20


def cut_short(text: str) -> str:
    """A value from the user as an error line shows it: cut short when long (a
    5,000-digit version would otherwise fill the screen)."""
    return text if len(text) <= _ECHO_LIMIT else text[:_ECHO_LIMIT] + "…"


def echoed(text: str) -> str:
    return repr(cut_short(text))

# Files larger than this are not read (generated tables, vendored blobs): they would
# cost the run more than their findings are worth.
DEFAULT_MAX_FILE_SIZE = 10_000_000


def parse_version(text: str) -> Version:
    """'2.4' -> (2, 4); compared numerically, so '2.10' > '2.5'."""
    stripped = str(text).strip()
    try:
        if not _RELEASE_NUMBER.fullmatch(stripped):
            raise ValueError
        return tuple(int(part) for part in stripped.split("."))
    except ValueError:  # also: a number too long to convert
        raise ValueError(f"not a release number like '2.4': {echoed(str(text))}") from None


def format_version(version: Version) -> str:
    return ".".join(str(n) for n in version)


@dataclass(frozen=True)
class Config:
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    cstorch_version: Version | None = None
    optimizer_bases: tuple[str, ...] = ()
    scheduler_bases: tuple[str, ...] = ()
    traced_decorators: tuple[str, ...] = ()
    traced_functions: tuple[str, ...] = ()
    tensor_hyperparameters: tuple[str, ...] = ("lr",)
    max_file_size: int = DEFAULT_MAX_FILE_SIZE  # bytes
    # `exclude` applies to files named on the command line too (--force-exclude), as it
    # does to the files of a folder walk: a hook that passes every staged file then
    # reports what a run over the whole tree reports.
    force_exclude: bool = False
    # The baseline file (`cslint.baseline`) whose findings are not reported.
    baseline: Path | None = None
    # The findings cache's folder (`cslint.cache`; default `.cslint_cache` in the project).
    cache_dir: Path | None = None
    # Where the settings came from (None: defaults); relative globs resolve against its folder.
    source: Path | None = field(default=None, compare=False)

    @property
    def base_dir(self) -> Path | None:
        return self.source.parent if self.source else None

    def with_overrides(self, **overrides: Any) -> "Config":
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


def _string_list(key: str, value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list) or not all(
        isinstance(v, str) for v in value
    ):
        raise ConfigError(f"{where}: `{key}` must be a list of strings")
    return tuple(value)


def _codes(key: str, value: Any, where: str) -> tuple[str, ...]:
    codes = _string_list(key, value, where)
    for code in codes:
        problem = validate_selector(code)
        if problem:
            raise ConfigError(f"{where}: `{key}`: {problem}")
    return codes


def glob_problem(glob: str) -> str | None:
    """What makes a glob malformed as `fnmatch` reads it, else None: a `[` without its
    `]` (fnmatch quietly matches it as a literal `[`), or a set with a reversed range
    such as `[z-a]` (fnmatch quietly drops it; a set of only such ranges matches nothing).
    The set is scanned as `fnmatch.translate` scans it."""
    i, n = 0, len(glob)
    while i < n:
        if glob[i] != "[":
            i += 1
            continue
        start = i + 1
        j = start
        if j < n and glob[j] == "!":
            j += 1
        if j < n and glob[j] == "]":  # a `]` first in the set is a member
            j += 1
        while j < n and glob[j] != "]":
            j += 1
        if j >= n:
            return f"an unclosed `[` at character {i + 1}"
        members = glob[start + 1 if glob[start] == "!" else start:j]
        # Ranges as fnmatch finds them: each `-` after the first member, not last.
        k = 1
        while (k := members.find("-", k)) > 0 and k < len(members) - 1:
            low, high = members[k - 1], members[k + 1]
            if low > high:
                return f"a reversed range `{low}-{high}`"
            k += 3
        i = j + 1
    return None


def _globs(key: str, value: Any, where: str) -> tuple[str, ...]:
    globs = _string_list(key, value, where)
    for glob in globs:
        _check_glob(key, glob, where)
    return globs


def _check_glob(key: str, glob: str, where: str) -> None:
    problem = glob_problem(glob)
    if problem:
        raise ConfigError(f"{where}: `{key}`: glob {echoed(glob)} has {problem}")


def _per_file_ignores(key: str, value: Any, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: `{key}` must be a table of glob = [codes]")
    for glob in value:
        _check_glob(key, glob, where)
    return tuple((glob, _codes(f"{key}.{glob}", codes, where)) for glob, codes in value.items())


def _version(key: str, value: Any, where: str) -> Version:
    if not isinstance(value, str):
        # A TOML number would lose a release: 2.10 reads as the float 2.1.
        raise ConfigError(f"{where}: `{key}` must be a string like \"2.10\"")
    try:
        return parse_version(value)
    except ValueError as err:
        raise ConfigError(f"{where}: `{key}`: {err}") from None


def _identifiers(key: str, value: Any, where: str) -> tuple[str, ...]:
    names = _string_list(key, value, where)
    for name in names:
        if not all(part.isidentifier() for part in name.split(".")):
            raise ConfigError(f"{where}: `{key}`: {echoed(name)} is not a dotted Python name")
    return names


_SIZE = re.compile(r"(\d+)\s*(KB|MB|GB)?", re.IGNORECASE)
_SIZE_UNITS = {None: 1, "KB": 10**3, "MB": 10**6, "GB": 10**9}


def _byte_size(key: str, value: Any, where: str) -> int:
    """A number of bytes, or a string in decimal units: "512KB", "10MB" (1 MB = 10**6)."""
    match = _SIZE.fullmatch(value.strip()) if isinstance(value, str) else None
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    elif match:
        size = int(match[1]) * _SIZE_UNITS[match[2] and match[2].upper()]
    else:
        raise ConfigError(f"{where}: `{key}` must be a number of bytes or a size like "
                          f"\"512KB\" or \"10MB\"")
    if size <= 0:
        raise ConfigError(f"{where}: `{key}` must be more than 0 bytes")
    return size


def _file_path(key: str, value: Any, where: str) -> Path:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: `{key}` must be a file path (a string)")
    return Path(value)


# Key in the TOML table -> (field name, validator).
_KEYS = {
    "select": ("select", _codes),
    "ignore": ("ignore", _codes),
    "extend-select": ("extend_select", _codes),
    "exclude": ("exclude", _globs),
    "per-file-ignores": ("per_file_ignores", _per_file_ignores),
    "cstorch-version": ("cstorch_version", _version),
    "optimizer-bases": ("optimizer_bases", _identifiers),
    "scheduler-bases": ("scheduler_bases", _identifiers),
    "traced-decorators": ("traced_decorators", _identifiers),
    "traced-functions": ("traced_functions", _identifiers),
    "tensor-hyperparameters": ("tensor_hyperparameters", _string_list),
    "baseline": ("baseline", _file_path),
    "cache-dir": ("cache_dir", _file_path),
    "max-file-size": ("max_file_size", _byte_size),
}


def config_from_table(table: dict[str, Any], source: Path | None) -> Config:
    where = str(source) if source else "configuration"
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in _KEYS:
            known = ", ".join(sorted(_KEYS))
            raise ConfigError(f"{where}: unknown key `{cut_short(key)}` in [tool.cslint] "
                              f"(known: {known})")
        field_name, validate = _KEYS[key]
        values[field_name] = validate(key, value, where)
    for relative in ("baseline", "cache_dir"):
        if relative in values and source is not None:
            # Relative to the configuration file, wherever cslint runs.
            values[relative] = source.parent / values[relative]
    return Config(source=source, **values)


def load_config_file(path: Path) -> Config:
    # Imported with the first file read: a run with --no-config reads none.
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib

    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise ConfigError(f"{path}: not valid UTF-8 (byte 0x{raw[err.start]:02x} on line "
                          f"{line}), as TOML must be") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: arrays or tables nested too deeply") \
            from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: `tool` must be a table (holding [tool.cslint])")
    table = tool.get("cslint", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: `tool.cslint` must be a table ([tool.cslint])")
    return config_from_table(table, path)


def find_config_file(start: Path) -> Path | None:
    """The nearest pyproject.toml with a [tool.cslint] table, at or above `start`."""
    # Absolute: the parents of a relative `.` are none, so a run inside a subfolder of
    # the project would miss its pyproject.toml.
    folder = (start if is_folder(start) else start.parent).absolute()
    for candidate in (folder, *folder.parents):
        pyproject = candidate / "pyproject.toml"
        if is_regular_file(pyproject):
            try:
                if "[tool.cslint" in pyproject.read_text(encoding="utf-8", errors="replace"):
                    return pyproject
            except OSError:
                continue
    return None


def parse_test_options(line: str) -> dict[str, Any]:
    """Options declared by a rule page or fixture: `# cslint-test: cstorch-version=2.4`."""
    options: dict[str, Any] = {}
    for item in line.split(":", 1)[1].split():
        key, _, value = item.partition("=")
        options[key] = [v for v in value.split(",") if v] if key in _LIST_KEYS else value
    return options


_LIST_KEYS = {k for k, (_, v) in _KEYS.items() if v not in (_version, _file_path, _byte_size)}
