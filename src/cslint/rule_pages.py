"""The rule pages (`rules/CSxxx.md`): the single source of each rule's documentation."""

from __future__ import annotations

from pathlib import Path


def pages_directory() -> Path:
    """Installed wheels carry the pages as `cslint/rule_pages`; a source checkout
    (editable install) reads them from the repository's `rules/` folder."""
    from importlib import resources  # 3-6 ms of imports, for `explain` and SARIF only

    packaged = resources.files("cslint") / "rule_pages"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "rules"


def read_page(code: str) -> str | None:
    page = pages_directory() / f"{code.upper()}.md"
    try:
        return page.read_text(encoding="utf-8")
    except OSError:
        return None


def page_header(code: str) -> str:
    """The line under a page's title, generated from the rule class and the code table:
    severity, family, fixability, the runtime counterpart, the release gate."""
    from cslint.codes import CODES
    from cslint.config import format_version
    from cslint.rules import FixSafety, all_rules

    entry = CODES[code]
    if entry.runtime_only:
        return (f"Error · family `runtime` · not fixable · runtime only: "
                f"{entry.runtime_detail}; the linter has no rule for it.")
    rule = next(r for r in all_rules() if r.code == code)
    if rule.fix_safety is None:
        fix = "not fixable"
    else:
        how = "safe fix with `--fix`" if rule.fix_safety is FixSafety.SAFE else \
            "unsafe fix, with `--fix --unsafe-fixes`"
        fix = f"fixable ({how}{': ' + rule.fix_example if rule.fix_example else ''})"
    if entry.runtime:
        detail = f" ({entry.runtime_detail})" if entry.runtime_detail else ""
        runtime = f"also raised at run time by `cslint.cstorch` strict mode{detail}"
    else:
        runtime = "lint-only (not raised by `cslint.cstorch` strict mode)"
    fields = [rule.severity.value.capitalize(), f"family `{rule.family}`", fix, runtime]
    if not rule.default_on:
        fields.append("off by default")
    if rule.gate is not None:
        fields.append(f"version-gated: on only when `cstorch-version` is set below "
                      f"{format_version(rule.gate.below)} (or when selected with "
                      f"`--select {code}`)")
    if rule.release_note:
        fields.append(f"release-dependent: {rule.release_note}")
    return " · ".join(fields) + "."


def rules_table() -> list[tuple[str, str, str, str, str]]:
    """(code, name, family, default, fixable) for every registered rule."""
    from cslint.rules import all_rules

    rows = []
    for rule in all_rules():
        default = "on" if rule.default_on else "off"
        if rule.gate is not None:
            default = rule.gate.describe()
        rows.append((rule.code, rule.name, rule.family, default, "yes" if rule.fixable else "no"))
    return rows


def rules_markdown() -> str:
    """The rule table as Markdown (the README's copy: scripts/sync_rule_docs.py)."""
    lines = ["| code | name | family | default | fixable |", "|---|---|---|---|---|"]
    lines += [f"| {' | '.join(row)} |" for row in rules_table()]
    return "\n".join(lines) + "\n"
