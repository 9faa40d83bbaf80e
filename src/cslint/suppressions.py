"""`# noqa`, `# cslint: skip-file` and per-file-ignores.

Comments come from `tokenize`, so a `# noqa` inside a string literal does not count.
"""

from __future__ import annotations

import fnmatch
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from cslint.config import Config

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?",
                   re.IGNORECASE)
_SKIP_FILE = re.compile(r"#\s*cslint:\s*skip-file\b")
_CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)


@dataclass
class Suppressions:
    skip_file: bool = False
    # line -> codes suppressed there; None means every code (a bare `# noqa`).
    noqa: dict[int, frozenset[str] | None] = field(default_factory=dict)

    def suppresses(self, line: int, code: str) -> bool:
        if line not in self.noqa:
            return False
        codes = self.noqa[line]
        return codes is None or any(code.startswith(c) for c in codes)


def scan_suppressions(text: str) -> Suppressions:
    result = Suppressions()
    lowered = text.lower()
    if "noqa" not in lowered and "cslint" not in lowered:
        return result  # the common case: no tokenizing at all
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return result
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        if _SKIP_FILE.search(token.string):
            result.skip_file = True
        match = _NOQA.search(token.string)
        if match:
            codes = match.group("codes")
            line = token.start[0]
            if codes:
                found = frozenset(c.upper() for c in _CODE.findall(codes))
                previous = result.noqa.get(line, frozenset())
                result.noqa[line] = None if previous is None else previous | found
            else:
                result.noqa[line] = None
    return result


def per_file_ignored_codes(config: Config, path: Path) -> tuple[str, ...]:
    """Codes (or prefixes) the config's per-file-ignores turn off for `path`."""
    if not config.per_file_ignores:
        return ()
    candidates = [path.name, path.as_posix()]
    if config.base_dir is not None:
        try:
            candidates.append(path.resolve().relative_to(config.base_dir.resolve()).as_posix())
        except ValueError:
            pass
    ignored: list[str] = []
    for glob, codes in config.per_file_ignores:
        if any(fnmatch.fnmatchcase(c, glob) for c in candidates):
            ignored.extend(codes)
    return tuple(ignored)
