"""`# noqa`, `# cslint: skip-file` and per-file-ignores.

Comments come from `tokenize`, so a `# noqa` inside a string literal does not count.
"""

from __future__ import annotations

import fnmatch
import io
import re
import tokenize
from pathlib import Path

from cslint.codes import selected_by_any
from cslint.config import Config
from cslint.discovery import resolved

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?",
                   re.IGNORECASE)
_SKIP_FILE = re.compile(r"#\s*cslint:\s*skip-file\b")
_CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)


_SKIP_FILE_LINE = re.compile(r"^[ \t]*#\s*cslint:\s*skip-file\b", re.MULTILINE)


class Suppressions:
    """The suppression comments of one file, read lazily: a file is tokenized only when a
    finding starts on a line that mentions `noqa`, or a line looks like a skip-file comment
    (tokenize is slow; most files need neither)."""

    def __init__(self, text: str, lines: list[str]):
        self.text = text
        self._lines = lines  # as Python numbers them (the SourceFile's)
        self._noqa: dict[int, frozenset[str] | None] | None = None
        self._skip_file: bool | None = None

    @property
    def skip_file(self) -> bool:
        if self._skip_file is None:
            # The substring test first: the line-anchored regex is slow on large files.
            self._skip_file = "skip-file" in self.text and \
                bool(_SKIP_FILE_LINE.search(self.text)) and self._scan()[1]
        return self._skip_file

    def suppresses(self, line: int, code: str) -> bool:
        if not 0 < line <= len(self._lines) or "noqa" not in self._lines[line - 1].lower():
            return False
        noqa = self._scan()[0]
        if line not in noqa:
            return False
        codes = noqa[line]
        return codes is None or selected_by_any(codes, code)

    def _scan(self) -> tuple[dict[int, frozenset[str] | None], bool]:
        if self._noqa is None:
            self._noqa, self._skip_file = _scan_comments(self.text)
        return self._noqa, bool(self._skip_file)


def scan_suppressions(text: str, lines: list[str]) -> Suppressions:
    return Suppressions(text, lines)


def _scan_comments(text: str) -> tuple[dict[int, frozenset[str] | None], bool]:
    """(line -> codes a `# noqa` there suppresses, None for all; whether a comment skips
    the file). Comments come from tokenize, so `# noqa` inside a string does not count."""
    noqa: dict[int, frozenset[str] | None] = {}
    skip_file = False
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return noqa, skip_file
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        if _SKIP_FILE.search(token.string):
            skip_file = True
        match = _NOQA.search(token.string)
        if match:
            codes = match.group("codes")
            line = token.start[0]
            if codes:
                found = frozenset(c.upper() for c in _CODE.findall(codes))
                previous = noqa.get(line, frozenset())
                noqa[line] = None if previous is None else previous | found
            else:
                noqa[line] = None
    return noqa, skip_file


def per_file_ignored_codes(config: Config, path: Path) -> tuple[str, ...]:
    """Codes (or prefixes) the config's per-file-ignores turn off for `path`."""
    if not config.per_file_ignores:
        return ()
    candidates = [path.name, path.as_posix()]
    if config.base_dir is not None:
        try:
            candidates.append(resolved(path).relative_to(resolved(config.base_dir)).as_posix())
        except ValueError:
            pass
    ignored: list[str] = []
    for glob, codes in config.per_file_ignores:
        if any(fnmatch.fnmatchcase(c, glob) for c in candidates):
            ignored.extend(codes)
    return tuple(ignored)
