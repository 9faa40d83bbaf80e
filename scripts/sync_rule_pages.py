"""Rewrite the header line of every rule page (`rules/CSxxx.md`, the line under the
title) from the rule classes and the code table (`cslint.rule_pages.page_header`).

    python scripts/sync_rule_pages.py
"""

from __future__ import annotations

from pathlib import Path

from cslint.codes import CODES
from cslint.rule_pages import page_header

PAGES = Path(__file__).resolve().parents[1] / "rules"


def main() -> None:
    for code in sorted(CODES):
        page = PAGES / f"{code}.md"
        lines = page.read_text(encoding="utf-8").split("\n")
        if lines[2] != page_header(code):
            lines[2] = page_header(code)
            page.write_text("\n".join(lines), encoding="utf-8")
            print(f"updated {page.name}")


if __name__ == "__main__":
    main()
