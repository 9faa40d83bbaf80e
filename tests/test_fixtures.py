"""Each fixture is linted and its findings compared exactly with the `# expect:` marks.

A fixture is one file in fixtures/<family>/, or a folder there holding several modules
that are linted together (cross-file cases). Options: a `# cslint-test:` line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import FIXTURES, expected_findings, lint_files, options_in


def fixture_units() -> list[Path]:
    units = []
    for family in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        for entry in sorted(family.iterdir()):
            if entry.suffix == ".py" and not entry.name.endswith((".in.py", ".out.py")):
                units.append(entry)
            elif entry.is_dir() and not entry.name.startswith(("_", ".")):
                units.append(entry)
    return units


def _files(unit: Path) -> list[Path]:
    return sorted(unit.rglob("*.py")) if unit.is_dir() else [unit]


@pytest.mark.parametrize("unit", fixture_units(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture(unit: Path):
    files = _files(unit)
    options = {}
    for file in files:
        options.update(options_in(file.read_text(encoding="utf-8")))
    result = lint_files([unit], options, root=unit)
    assert not result.errors, [e.render() for e in result.errors]
    actual = {(Path(f.path).resolve(), f.location.line, f.code) for f in result.findings}
    expected = {(file.resolve(), line, code) for file in files
                for line, code in expected_findings(file)}
    missing = sorted(expected - actual)
    unexpected = sorted(actual - expected)
    messages = {(Path(f.path).resolve(), f.location.line, f.code): f.message
                for f in result.findings}
    assert not missing and not unexpected, (
        "missing: " + "; ".join(f"{p.name}:{l} {c}" for p, l, c in missing)
        + " | unexpected: " + "; ".join(f"{p.name}:{l} {c} ({messages[(p, l, c)]})"
                                        for p, l, c in unexpected))


def test_every_rule_has_a_fixture_violation():
    from cslint.rules import all_rules

    marked = {code for unit in fixture_units() for file in _files(unit)
              for _, code in expected_findings(file)}
    missing = [rule.code for rule in all_rules() if rule.code not in marked]
    assert not missing, f"rules without a fixture violation: {missing}"
