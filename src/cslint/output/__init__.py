"""Output formats: each module renders a `Report` as the text that goes to stdout or to
--output-file (problems go to stderr). A new format is one module of this package with a
`render` function and its name in FORMATS; formats see only `cslint.diagnostics` and
`cslint.codes`. A run imports only the format it prints (a warm run is mostly imports)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from cslint.diagnostics import Report


class Format(Protocol):
    def __call__(self, report: Report, *, statistics: bool, quiet: bool,
                 show_source: bool = False) -> str:
        """The report as printed; `statistics`: counts per code instead of the findings
        (STATISTICS_FORMATS only); `quiet`: no summary; `show_source`: each finding's
        source under it (text only)."""


FORMATS = ("text", "json", "sarif", "github", "gitlab")


def formatter(name: str) -> Format:
    """The `render` function of the format `name` (one of FORMATS)."""
    if name == "text":
        from cslint.output import text as chosen
    elif name == "json":
        from cslint.output import json as chosen
    elif name == "sarif":
        from cslint.output import sarif as chosen
    elif name == "github":
        from cslint.output import github as chosen
    elif name == "gitlab":
        from cslint.output import gitlab as chosen
    else:
        raise ValueError(f"unknown output format {name!r}")
    return chosen.render

# The formats that can count findings per code (--statistics); the CI formats list them.
STATISTICS_FORMATS = ("text", "json")
