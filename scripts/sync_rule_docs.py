"""Rewrite what the rule documentation derives from the rule classes and the code
table: the header line of every rule page (`rules/CSxxx.md`, under the title) and the
rule table in README.md. Tests fail while either is out of date.

    python scripts/sync_rule_docs.py
"""

from __future__ import annotations

from pathlib import Path

from cslint.codes import CODES
from cslint.rule_pages import page_header, rules_markdown

REPO = Path(__file__).resolve().parents[1]
TABLE_START, TABLE_END = "<!-- rules-table:start -->\n", "<!-- rules-table:end -->"


def main() -> None:
    for code in sorted(CODES):
        page = REPO / "rules" / f"{code}.md"
        lines = page.read_text(encoding="utf-8").split("\n")
        if lines[2] != page_header(code):
            lines[2] = page_header(code)
            page.write_text("\n".join(lines), encoding="utf-8")
            print(f"updated {page.relative_to(REPO)}")
    readme = REPO / "README.md"
    text = readme.read_text(encoding="utf-8")
    start = text.index(TABLE_START) + len(TABLE_START)
    end = text.index(TABLE_END)
    if text[start:end] != rules_markdown():
        readme.write_text(text[:start] + rules_markdown() + text[end:], encoding="utf-8")
        print("updated README.md")


if __name__ == "__main__":
    main()
