"""Every rule has its page; the page's bad example is flagged and its good example is clean."""

from __future__ import annotations

import re

import pytest

from cslint.codes import CODES
from cslint.rules import all_rules
from helpers import RULE_PAGES, lint_source, options_in

SECTION = re.compile(r"^## (?P<title>.+?)\s*$", re.MULTILINE)
CODE_BLOCK = re.compile(r"```python\n(?P<code>.*?)```", re.DOTALL)
REQUIRED_SECTIONS = ("What it flags", "Why on Cerebras", "Bad", "Good", "How to fix",
                     "Runtime counterpart")


def sections(page: str) -> dict[str, str]:
    parts = SECTION.split(page)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def example(page: str, title: str) -> str:
    block = CODE_BLOCK.search(sections(page)[title])
    assert block, f"no python block under '## {title}'"
    return block.group("code")


LINT_CODES = sorted(rule.code for rule in all_rules())


@pytest.mark.parametrize("code", sorted(CODES))
def test_page_exists_with_sections(code):
    page = (RULE_PAGES / f"{code}.md").read_text(encoding="utf-8")
    assert page.startswith(f"# {code} {CODES[code].name}\n")
    missing = [s for s in REQUIRED_SECTIONS if s not in sections(page)]
    assert not missing, f"{code}.md lacks sections {missing}"


@pytest.mark.parametrize("code", sorted(CODES))
def test_page_header_agrees_with_the_registry(code):
    """The line under the title says whether the rule is fixable and whether the runtime
    raises it (every code but the runtime ones is lint-only)."""
    header = (RULE_PAGES / f"{code}.md").read_text(encoding="utf-8").splitlines()[2]
    rules = {rule.code: rule for rule in all_rules()}
    if code in rules:
        assert ("not fixable" not in header) == rules[code].fixable, header
    assert ("lint-only" in header) == (not CODES[code].runtime), header
    if CODES[code].runtime:
        assert "run time" in header or "runtime only" in header, header


@pytest.mark.parametrize("code", LINT_CODES)
def test_bad_example_is_flagged(code, tmp_path):
    page = (RULE_PAGES / f"{code}.md").read_text(encoding="utf-8")
    source = example(page, "Bad")
    result = lint_source(source, tmp_path, options=options_in(page))
    assert not result.errors, [e.render() for e in result.errors]
    assert code in [f.code for f in result.findings], source


@pytest.mark.parametrize("code", LINT_CODES)
def test_good_example_is_clean(code, tmp_path):
    page = (RULE_PAGES / f"{code}.md").read_text(encoding="utf-8")
    source = example(page, "Good")
    result = lint_source(source, tmp_path, options=options_in(page))
    assert not result.errors, [e.render() for e in result.errors]
    assert result.findings == [], [f"{f.code} {f.message}" for f in result.findings]


def test_every_registered_rule_is_in_the_code_table():
    assert set(LINT_CODES) <= set(CODES)
