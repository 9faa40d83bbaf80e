"""GitLab's Code Quality report: a JSON array with one issue per finding.

Severities: error -> `critical` (the code fails on the system, after its compile),
warning -> `major`, info -> `info`; GitLab's `minor` and `blocker` are unused.
"""

from __future__ import annotations

import json
import os

from cslint.diagnostics import Report, Severity

SEVERITIES = {Severity.ERROR: "critical", Severity.WARNING: "major", Severity.INFO: "info"}


def render(report: Report, *, statistics: bool, quiet: bool, show_source: bool = False) -> str:
    issues = [
        {
            "description": f"{f.code} {f.message}",
            "check_name": f"{f.code} {f.name}",
            "fingerprint": f.fingerprint,
            "severity": SEVERITIES[f.severity],
            # Relative to the folder cslint ran in: the repository's, in a GitLab job.
            "location": {"path": f.path.replace(os.sep, "/"),
                         "lines": {"begin": f.location.line}},
        }
        for f in report.findings
    ]
    return json.dumps(issues, indent=2, ensure_ascii=False) + "\n"
