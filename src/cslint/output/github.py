"""GitHub Actions workflow commands: one annotation per finding (`::error`, `::warning`
or `::notice` by severity) on the line and span it flags, titled with its code and name;
each file that could not be checked is an `::error` too. Values are escaped as GitHub's
runner unescapes them."""

from __future__ import annotations

import os

from cslint.diagnostics import Report, Severity

COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def escape_data(text: str) -> str:
    """A command's message: `%`, CR and LF are percent-encoded."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value: as a message, and `:` and `,`, which end a value."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, properties: dict[str, object], message: str) -> str:
    listed = ",".join(f"{key}={escape_property(str(value))}"
                      for key, value in properties.items())
    return f"::{name} {listed}::{escape_data(message)}"


def _repository_path(shown: str) -> str:
    return shown.replace(os.sep, "/")  # GitHub matches file= against repository paths


def render(report: Report, *, statistics: bool, quiet: bool, show_source: bool = False) -> str:
    lines = []
    for f in report.findings:
        loc = f.location
        lines.append(command(COMMANDS[f.severity], {
            "file": _repository_path(f.path), "line": loc.line, "col": loc.column,
            "endLine": loc.end_line, "endColumn": loc.end_column,
            "title": f"{f.code} {f.name}"}, f.message))
    for error in report.errors:
        where: dict[str, object] = {"file": _repository_path(error.path)}
        if error.line is not None:
            where["line"] = error.line
            if error.column is not None:
                where["col"] = error.column
        where["title"] = "cslint: file not checked"
        lines.append(command("error", where, error.problem))
    return "".join(line + "\n" for line in lines)
