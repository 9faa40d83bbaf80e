"""Output formats: each module renders a `Report` as the text that goes to stdout
(problems go to stderr). A new format is one module with a `render` function and an
entry in FORMATS; formats see only `cslint.diagnostics` and `cslint.codes`."""

from __future__ import annotations

from typing import Protocol

from cslint.diagnostics import Report
from cslint.output import json, text


class Format(Protocol):
    def __call__(self, report: Report, *, statistics: bool, quiet: bool) -> str:
        """The report as printed; `statistics`: counts per code instead of the findings;
        `quiet`: no summary."""


FORMATS: dict[str, Format] = {
    "text": text.render,
    "json": json.render,
}
