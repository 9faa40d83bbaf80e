"""The default format: one line per finding (or per code with --statistics), then a
summary line. With `show_source`, each finding is followed by the source it flags and a
caret underline of its span (and its fix, when it has one) as ruff's full output shows
them."""

from __future__ import annotations

import unicodedata
from typing import Sequence

from cslint.codes import CODES
from cslint.diagnostics import Finding, Report

TAB_WIDTH = 4  # a tab in a shown line (ruff shows tabs as four spaces)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def summary_line(report: Report) -> str:
    remaining = len(report.findings)
    baselined = f" ({report.baselined} baselined)" if report.baselined else ""
    if report.fixed:
        return (f"Found {_plural(remaining + report.fixed, 'problem')} "
                f"({report.fixed} fixed, {remaining} remaining) in "
                f"{_plural(report.files_checked, 'file')}{baselined}.")
    return (f"Found {_plural(remaining, 'problem')} in "
            f"{_plural(report.files_checked, 'file')}{baselined}.")


def render(report: Report, *, statistics: bool, quiet: bool, show_source: bool = False) -> str:
    lines = []
    if statistics:
        for code, count in report.counts_by_code():
            lines.append(f"{count:>5}  {code}  {CODES[code].name}")
        if report.stale_baseline_entries is not None:
            # Recorded findings that are gone: --write-baseline drops them.
            stale = report.stale_baseline_entries
            lines.append(f"{stale} stale baseline {'entry' if stale == 1 else 'entries'}")
    else:
        for f in report.findings:
            loc = f.location
            fixable = " [*]" if f.fixable else ""
            lines.append(f"{f.path}:{loc.line}:{loc.column}: {f.code}{fixable} {f.message}")
            if show_source:
                lines += source_snippet(f, report.source_lines.get(f.path, ()))
    if not quiet:
        lines.append(summary_line(report))
    return "\n".join(lines) + ("\n" if lines else "")


def source_snippet(finding: Finding, source: Sequence[str]) -> list[str]:
    """The lines of the finding's span under a numbered gutter, each underlined with
    carets where the span covers it, then a blank line:

          |
       17 |                     state["m"] = torch.zeros_like(p)
          |                     ^^^^^^^^^^ CS101
          |
    """
    loc = finding.location
    numbers = [n for n in range(loc.line, loc.end_line + 1) if 0 < n <= len(source)]
    if not numbers:
        return []
    width = len(str(numbers[-1]))
    gutter = " " * (width + 1) + "|"
    out = [gutter]
    for number in numbers:
        text = source[number - 1]
        start = loc.column - 1 if number == loc.line else _indent_length(text)
        end = loc.end_column - 1 if number == loc.end_line else len(text.rstrip())
        shown = _expand_tabs(text)
        out.append(f"{number:>{width}} | {shown}".rstrip())
        pad = _display_width(_expand_tabs(text[:start]))
        carets = max(1, _display_width(_expand_tabs(text[:end])) - pad)
        label = f" {finding.code}" if number == numbers[-1] else ""
        out.append(f"{gutter} {' ' * pad}{'^' * carets}{label}")
    out.append(gutter)
    if finding.fix is not None:
        out.append(f"{' ' * (width + 1)}= help: {finding.fix.description}")
    out.append("")
    return out


def _indent_length(text: str) -> int:
    return len(text) - len(text.lstrip())


def _expand_tabs(text: str) -> str:
    return text.replace("\t", " " * TAB_WIDTH)


def _display_width(text: str) -> int:
    """Terminal columns: wide East Asian characters take two, combining marks none."""
    return sum(0 if unicodedata.combining(c) else
               2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text)
