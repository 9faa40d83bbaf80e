"""Output formats. stdout carries only the chosen format; problems go to stderr."""

from __future__ import annotations

import json
from collections import Counter
from typing import Callable

from cslint.codes import CODES
from cslint.engine import RunResult


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def summary_line(result: RunResult) -> str:
    fixed = getattr(result, "fixed", 0)
    if fixed:
        return (f"Found {_plural(len(result.findings) + fixed, 'problem')} "
                f"({fixed} fixed, {len(result.findings)} remaining) in "
                f"{_plural(result.files_checked, 'file')}.")
    return (f"Found {_plural(len(result.findings), 'problem')} in "
            f"{_plural(result.files_checked, 'file')}.")


def statistics(result: RunResult) -> list[tuple[str, int]]:
    counts = Counter(f.code for f in result.findings)
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def format_text(result: RunResult, show_statistics: bool, quiet: bool) -> str:
    lines = []
    if show_statistics:
        for code, count in statistics(result):
            lines.append(f"{count:>5}  {code}  {CODES[code].name}")
    else:
        for f in result.findings:
            loc = f.location
            fixable = " [*]" if f.fixable else ""
            lines.append(f"{f.path}:{loc.line}:{loc.column}: {f.code}{fixable} {f.message}")
    if not quiet:
        lines.append(summary_line(result))
    return "\n".join(lines) + ("\n" if lines else "")


def format_json(result: RunResult, show_statistics: bool, quiet: bool) -> str:
    if show_statistics:
        data = [{"code": code, "name": CODES[code].name, "count": count}
                for code, count in statistics(result)]
    else:
        data = [
            {
                "path": f.path,
                "line": f.location.line,
                "column": f.location.column,
                "end_line": f.location.end_line,
                "end_column": f.location.end_column,
                "code": f.code,
                "name": f.name,
                "message": f.message,
                "severity": f.severity.value,
                "fixable": f.fixable,
            }
            for f in result.findings
        ]
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


FORMATS: dict[str, Callable[[RunResult, bool, bool], str]] = {
    "text": format_text,
    "json": format_json,
}
