"""The flake8 plugin (entry point `CS`): `flake8 --select CS` reports what `cslint check`
reports, at the same lines and columns.

flake8 calls the plugin once per file, in several processes when it runs in parallel.
Each call lints that file as `cslint check FILE` would: the text flake8 read, the project
around the file for context (the files it depends on and those that depend on it), and
the `[tool.cslint]` table found from the file, rule selection included. flake8 then
decides what to show: its --select, --ignore and per-file-ignores filter these findings,
and it applies `# noqa` comments itself, so the plugin leaves them in (flake8's
--disable-noqa then shows them, as it does for its own checks).

Importing this module never imports torch or libcst: flake8 imports every installed
plugin on each run.
"""

from __future__ import annotations

import ast
import io
import os
import sys
import tokenize
from pathlib import Path
from typing import Iterator

from cslint import __version__
from cslint.config import Config, find_config_file, load_config_file
from cslint.discovery import file_mode
from cslint.engine import lint


class CslintChecker:
    """A flake8 tree plugin: flake8 instantiates it per file and iterates `run()`."""

    name = "cslint"
    version = __version__

    def __init__(self, tree: ast.AST, filename: str, lines: list[str]):
        # flake8 runs a plugin once per file only when it takes `tree`; cslint parses the
        # text itself (its project index keeps its own trees), so the tree goes unused.
        del tree
        self.filename = os.path.normpath(filename)  # as cslint shows a path given to it
        self.lines = lines
        # Read here, not in run(): flake8 reports an exception raised here as this
        # plugin's failure on this file, one from run() as its own crash.
        self.config = _config_for(filename)

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        result = lint([], self.config,
                      stdin=(self.filename, _source_bytes("".join(self.lines))),
                      apply_noqa=False)
        # flake8 reports files it cannot parse (E999) and never hands them to plugins;
        # what cslint alone cannot check (nesting too deep to analyse) goes to stderr, as
        # `cslint check` prints it, and the other files are still checked.
        for error in result.errors:
            print(f"cslint: error: {error.render()}", file=sys.stderr)
        for finding in result.findings:
            # Plugins give 0-based column offsets and flake8 prints them plus one, so
            # the printed column is cslint's 1-based character column.
            yield (finding.location.line, finding.location.column - 1,
                   f"{finding.code} {finding.message}", type(self))


def _config_for(filename: str) -> Config:
    """The `[tool.cslint]` table `cslint check FILE` reads: the nearest one at or above
    the file (code from stdin: above the current folder). A bad table raises ConfigError:
    flake8 stops and names the file, the key and the problem (cslint check exits 2), rather
    than passing code it checked without the configuration."""
    path = Path(filename)
    found = find_config_file(path if file_mode(path) is not None else Path.cwd())
    return load_config_file(found) if found is not None else Config()


def _source_bytes(text: str) -> bytes:
    """flake8's decoded text (BOM stripped) as bytes that cslint decodes back to the same
    text: encoded as its coding cookie declares, else as UTF-8."""
    raw = text.encode("utf-8")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError:
        return raw  # a bad cookie: cslint reports it
    if encoding in ("utf-8", "utf-8-sig"):
        return raw
    try:
        return text.encode(encoding)
    except (LookupError, UnicodeError):
        return raw
