"""Every rule has its page; the page's bad example is flagged and its good example is clean."""

from __future__ import annotations

import re

import pytest

from cslint.codes import CODES
from cslint.rule_pages import page_header
from cslint.rules import FixSafety, all_rules
from helpers import FIXTURES, RULE_PAGES, lint_files, lint_source, options_in

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


RULES = {rule.code: rule for rule in all_rules()}
LINT_CODES = sorted(RULES)


@pytest.mark.parametrize("code", sorted(CODES))
def test_page_exists_with_sections(code):
    page = (RULE_PAGES / f"{code}.md").read_text(encoding="utf-8")
    assert page.startswith(f"# {code} {CODES[code].name}\n")
    missing = [s for s in REQUIRED_SECTIONS if s not in sections(page)]
    assert not missing, f"{code}.md lacks sections {missing}"


def test_linter_rules_are_exactly_the_codes_that_are_not_runtime_only():
    """Each code is either linted (one registered rule) or runtime only (none): a code added
    to the table without its rule, or a rule for a runtime-only code, fails here."""
    registered = set(LINT_CODES)
    linted = {code for code, info in CODES.items() if not info.runtime_only}
    assert sorted(linted - registered) == [], "codes without a registered rule"
    assert sorted(registered - linted) == [], "runtime-only codes with a registered rule"


@pytest.mark.parametrize("code", sorted(CODES))
def test_page_header_is_generated_from_the_rule_class(code):
    """The line under the title (severity, family, fixability, runtime counterpart, release
    gate) is what the rule class and the code table declare; after changing either, run
    `python scripts/sync_rule_docs.py`."""
    header = (RULE_PAGES / f"{code}.md").read_text(encoding="utf-8").splitlines()[2]
    assert header == page_header(code)


def test_fixes_have_the_safety_their_rule_declares():
    """A rule's declared fix safety (the page header, `cslint rules`) is the safety of
    the fixes it reports: every fix the fixtures produce is checked."""
    result = lint_files([FIXTURES], {"select": ["ALL"]}, root=FIXTURES)
    fixed = [f for f in result.findings if f.fix is not None]
    assert {f.code for f in fixed} == {code for code, rule in RULES.items() if rule.fixable}
    for finding in fixed:
        expected = RULES[finding.code].fix_safety is FixSafety.SAFE
        assert finding.fix.safe == expected, (finding.code, finding.path, finding.location)


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
