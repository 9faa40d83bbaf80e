"""Output formats: each module renders a `Report` as the text that goes to stdout or to
--output-file (problems go to stderr). A new format is one module with a `render`
function and an entry in FORMATS; formats see only `cslint.diagnostics` and
`cslint.codes`."""

from __future__ import annotations

from typing import Protocol

from cslint.diagnostics import Report
from cslint.output import github, gitlab, json, sarif, text


class Format(Protocol):
    def __call__(self, report: Report, *, statistics: bool, quiet: bool,
                 show_source: bool = False) -> str:
        """The report as printed; `statistics`: counts per code instead of the findings
        (STATISTICS_FORMATS only); `quiet`: no summary; `show_source`: each finding's
        source under it (text only)."""


FORMATS: dict[str, Format] = {
    "text": text.render,
    "json": json.render,
    "sarif": sarif.render,
    "github": github.render,
    "gitlab": gitlab.render,
}

# The formats that can count findings per code (--statistics); the CI formats list them.
STATISTICS_FORMATS = ("text", "json")
