"""Shared test helpers: lint source text or files with options as fixtures declare them."""

from __future__ import annotations

import re
from pathlib import Path

from cslint.config import Config, config_from_table, parse_test_options
from cslint.engine import LintResult, lint

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
RULE_PAGES = REPO / "rules"
EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>CS\d{3}(?:\s*,\s*CS\d{3})*)")
OPTIONS_MARK = "# cslint-test:"


def options_in(text: str) -> dict:
    for line in text.splitlines():
        if line.strip().startswith(OPTIONS_MARK):
            return parse_test_options(line.strip())
    return {}


def config_for(options: dict) -> Config:
    return config_from_table(options, None)


def lint_files(paths: list[Path], options: dict | None = None,
               root: Path | None = None) -> LintResult:
    return lint([str(p) for p in paths], config_for(options or {}), project_root=root)


def lint_source(text: str, tmp_path: Path, name: str = "example.py",
                options: dict | None = None) -> LintResult:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return lint([str(path)], config_for(options if options is not None else options_in(text)),
                project_root=tmp_path)


def expected_findings(path: Path) -> set[tuple[int, str]]:
    found = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            for code in re.split(r"\s*,\s*", match.group("codes")):
                found.add((number, code))
    return found


def codes(result: LintResult) -> list[str]:
    return [f.code for f in result.findings]
