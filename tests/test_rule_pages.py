"""Every rule has its page; the page's bad example is flagged and its good example is clean."""

from __future__ import annotations

import re

import pytest

from cslint.codes import CODES
from cslint.config import format_version
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


def header_fields(code: str) -> list[str]:
    """The line under the title: `Severity · family `f` · fixability · runtime · [gate]`."""
    return (RULE_PAGES / f"{code}.md").read_text(encoding="utf-8").splitlines()[2].split(" · ")


@pytest.mark.parametrize("code", sorted(CODES))
def test_page_header_agrees_with_the_code_table(code):
    """Whether the runtime raises it (every code but the runtime ones is lint-only)."""
    header = " · ".join(header_fields(code))
    assert ("lint-only" in header) == (not CODES[code].runtime), header
    if CODES[code].runtime:
        assert "run time" in header or "runtime only" in header, header
    assert ("runtime only" in header) == CODES[code].runtime_only, header


@pytest.mark.parametrize("code", LINT_CODES)
def test_page_header_agrees_with_the_rule_class(code):
    """Severity, family, fixability and release gate as the rule class declares them."""
    rule = RULES[code]
    severity, family, fixability, *rest = header_fields(code)
    assert severity == rule.severity.value.capitalize(), (code, severity)
    assert family == f"family `{rule.family}`", (code, family)
    assert fixability.startswith("fixable" if rule.fixable else "not fixable"), (code, fixability)
    gates = [field for field in rest if field.startswith("version-gated")]
    if rule.gate is None:
        assert gates == [], (code, gates)
    else:
        assert gates == [f"version-gated: on only when `cstorch-version` is set below "
                         f"{format_version(rule.gate.below)} (or when selected with "
                         f"`--select {code}`)."], (code, gates)
    if not rule.default_on:
        assert "off by default" in " · ".join(rest), code


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
