"""The rule pages (`rules/CSxxx.md`): the single source of each rule's documentation."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def pages_directory() -> Path:
    """Installed wheels carry the pages as `cslint/rule_pages`; a source checkout
    (editable install) reads them from the repository's `rules/` folder."""
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
