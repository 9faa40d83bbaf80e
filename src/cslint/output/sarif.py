"""SARIF 2.1.0, for GitHub code scanning and other SARIF consumers.

One run: the driver describes cslint and every rule that ran (its page as help); each
finding is a result at one physical location, relative to the project's folder
(`%SRCROOT%`), with its fingerprint and, where the rule has one, its fix as replacements.
Files that could not be checked are tool execution notifications, and make the
invocation unsuccessful. Columns are characters (`columnKind: unicodeCodePoints`), end
columns exclusive, as SARIF's regions count them.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath, PureWindowsPath
from urllib.parse import quote

from cslint.codes import CODES
from cslint.diagnostics import Finding, Location, Replacement, Report, RuleDescription, \
    Severity

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://pypi.org/project/cslint/"
SOURCE_ROOT = "%SRCROOT%"
# partialFingerprints key: a hierarchical name with a version, as SARIF asks.
FINGERPRINT_KEY = "cslintFindingHash/v1"
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def render(report: Report, *, statistics: bool, quiet: bool, show_source: bool = False) -> str:
    rules = list(report.rules)
    known = {rule.code for rule in rules}
    for finding in report.findings:  # a report that does not list a rule it reports
        if finding.code not in known:
            known.add(finding.code)
            rules.append(RuleDescription(finding.code, finding.name, "", finding.severity,
                                         CODES[finding.code].summary, finding.fixable))
    rule_index = {rule.code: index for index, rule in enumerate(rules)}
    driver: dict = {"name": "cslint"}
    if report.linter_version:
        driver["version"] = report.linter_version
    driver["informationUri"] = INFORMATION_URI
    driver["rules"] = [_rule(rule) for rule in rules]

    invocation: dict = {"executionSuccessful": not report.errors}
    if report.errors:
        invocation["toolExecutionNotifications"] = [
            {
                "level": "error",
                "message": {"text": str(error)},
                "locations": [_location(report, error.path, _point(error.line, error.column))],
            }
            for error in report.errors
        ]
    run: dict = {"tool": {"driver": driver}, "invocations": [invocation]}
    if report.project_root is not None:
        root = _file_uri(report.project_root)
        run["originalUriBaseIds"] = {SOURCE_ROOT: {
            "uri": root if root.endswith("/") else root + "/"}}
    run["columnKind"] = "unicodeCodePoints"
    run["results"] = [_result(report, finding, rule_index[finding.code])
                      for finding in report.findings]
    log = {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _rule(rule: RuleDescription) -> dict:
    described: dict = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
    }
    full = _what_it_flags(rule.page) if rule.page else None
    described["fullDescription"] = {"text": full, "markdown": full} if full \
        else {"text": rule.summary}
    if rule.page:
        described["help"] = {"text": rule.page, "markdown": rule.page}
    described["defaultConfiguration"] = {"level": LEVELS[rule.severity]}
    if rule.family:
        described["properties"] = {"tags": [rule.family]}
    return described


def _what_it_flags(page: str) -> str | None:
    """The opening of a page's "What it flags" section: its first paragraph, with the
    list that follows when the paragraph leads into one (ends with a colon)."""
    lines = page.splitlines()
    try:
        start = lines.index("## What it flags") + 1
    except ValueError:
        return None
    blocks: list[list[str]] = [[]]
    for line in lines[start:]:
        if line.startswith("#"):
            break
        if line.strip():
            blocks[-1].append(line)
        elif blocks[-1]:
            if not blocks[-1][-1].endswith(":") or len(blocks) > 1:
                break
            blocks.append([])
    text = "\n\n".join("\n".join(block) for block in blocks if block)
    return text or None


def _result(report: Report, finding: Finding, rule_index: int) -> dict:
    result: dict = {
        "ruleId": finding.code,
        "ruleIndex": rule_index,
        "level": LEVELS[finding.severity],
        "message": {"text": finding.message},
        "locations": [_location(report, finding.path, _region(finding.location))],
    }
    if finding.fingerprint:
        result["partialFingerprints"] = {FINGERPRINT_KEY: finding.fingerprint}
    edits = report.fix_edits.get(finding)
    if edits and finding.fix is not None:
        safety = "" if finding.fix.safe else " (unsafe: applied by --fix --unsafe-fixes)"
        result["fixes"] = [{
            "description": {"text": finding.fix.description + safety},
            "artifactChanges": [{
                "artifactLocation": _artifact(report, finding.path),
                "replacements": [_replacement(edit) for edit in edits],
            }],
        }]
    return result


def _replacement(edit: Replacement) -> dict:
    return {"deletedRegion": _region(edit.location), "insertedContent": {"text": edit.text}}


def _region(location: Location) -> dict:
    return {"startLine": location.line, "startColumn": location.column,
            "endLine": location.end_line, "endColumn": location.end_column}


def _point(line: int | None, column: int | None) -> dict | None:
    if line is None:
        return None
    region = {"startLine": line}
    if column is not None:
        region["startColumn"] = column
    return region


def _location(report: Report, shown: str, region: dict | None) -> dict:
    physical: dict = {"artifactLocation": _artifact(report, shown)}
    if region is not None:
        physical["region"] = region
    return {"physicalLocation": physical}


def _artifact(report: Report, shown: str) -> dict:
    """The file's URI: relative to %SRCROOT% in the project, absolute outside it."""
    path = report.project_paths.get(shown, shown.replace("\\", "/"))
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).drive:
        return {"uri": _file_uri(path)}
    # A name that is not UTF-8 keeps its bytes (surrogate escapes): percent-encoded.
    return {"uri": quote(path, errors="surrogateescape"), "uriBaseId": SOURCE_ROOT}


def _file_uri(path: str) -> str:
    windows = PureWindowsPath(path)
    return (windows if windows.drive else PurePosixPath(path)).as_uri()
