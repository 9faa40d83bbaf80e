"""The default format: one line per finding (or per code with --statistics), then a
summary line."""

from __future__ import annotations

from cslint.codes import CODES
from cslint.diagnostics import Report


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def summary_line(report: Report) -> str:
    remaining = len(report.findings)
    if report.fixed:
        return (f"Found {_plural(remaining + report.fixed, 'problem')} "
                f"({report.fixed} fixed, {remaining} remaining) in "
                f"{_plural(report.files_checked, 'file')}.")
    return (f"Found {_plural(remaining, 'problem')} in "
            f"{_plural(report.files_checked, 'file')}.")


def render(report: Report, *, statistics: bool, quiet: bool) -> str:
    lines = []
    if statistics:
        for code, count in report.counts_by_code():
            lines.append(f"{count:>5}  {code}  {CODES[code].name}")
    else:
        for f in report.findings:
            loc = f.location
            fixable = " [*]" if f.fixable else ""
            lines.append(f"{f.path}:{loc.line}:{loc.column}: {f.code}{fixable} {f.message}")
    if not quiet:
        lines.append(summary_line(report))
    return "\n".join(lines) + ("\n" if lines else "")
