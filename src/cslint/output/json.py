"""A JSON array: one object per finding (or per code with --statistics); no summary."""

from __future__ import annotations

import json

from cslint.codes import CODES
from cslint.diagnostics import Report


def render(report: Report, *, statistics: bool, quiet: bool, show_source: bool = False) -> str:
    if statistics:
        data = [{"code": code, "name": CODES[code].name, "count": count}
                for code, count in report.counts_by_code()]
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
            for f in report.findings
        ]
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
