"""Baselines: the findings a legacy project already has, recorded so that only new ones
are reported.

An entry is a finding's path in the project, its code and its fingerprint's hash
(`cslint.fingerprints.finding_key`: the flagged text and the function around it, no line
number), with a count: identical findings in one function share a key, so an entry with
count k absorbs up to k of them, the first k in position order.

The file is JSON with one entry per line, sorted by path, code and key, so that
rewriting it shows in a review as the lines of the findings that came or went.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Collection, Iterable, Mapping

from cslint.diagnostics import Finding

# Bumped when the meaning of an entry changes (a new fingerprint, say): an old file is
# then refused rather than silently matching nothing.
FORMAT_VERSION = 1

EntryKey = tuple[str, str, str]  # (path in the project, code, fingerprint hash)


class BaselineError(Exception):
    """A baseline file that cannot be read or is not one; the message is one line."""


@dataclass(frozen=True)
class Baseline:
    entries: Mapping[EntryKey, int]  # key -> how many findings it absorbs


@dataclass(frozen=True)
class BaselineMatch:
    new: tuple[Finding, ...]  # the findings the baseline does not hold: reported
    baselined: int  # findings it absorbed
    stale: int  # recorded findings no longer found


def entry_key(finding: Finding, project_path: str) -> EntryKey:
    return (project_path, finding.code, finding.fingerprint.partition(":")[0])


def load_baseline(path: Path) -> Baseline:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise BaselineError(f"{path}: cannot read baseline: {err.strerror or err}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BaselineError(f"{path}: not a cslint baseline: invalid JSON: {err}") from None
    if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION:
        raise BaselineError(f"{path}: not a cslint baseline: expected an object with "
                            f'"version": {FORMAT_VERSION} (write one with --write-baseline)')
    entries = data.get("entries")
    if not isinstance(entries, list):
        raise BaselineError(f'{path}: not a cslint baseline: "entries" must be a list')
    counts: Counter[EntryKey] = Counter()
    for number, entry in enumerate(entries, 1):
        if not (isinstance(entry, dict)
                and all(isinstance(entry.get(name), str) for name in ("path", "code", "key"))
                and type(entry.get("count")) is int and entry["count"] > 0):
            raise BaselineError(f"{path}: not a cslint baseline: entry {number} needs "
                                f'"path", "code", "key" (strings) and "count" (a positive '
                                f"integer)")
        counts[(entry["path"], entry["code"], entry["key"])] += entry["count"]
    return Baseline(dict(counts))


def match_baseline(baseline: Baseline, findings: Iterable[Finding],
                   project_paths: Mapping[str, str], checked: Collection[str],
                   project_root: Path | None) -> BaselineMatch:
    """Split `findings` (in position order) into those the baseline absorbs and the new
    ones. `project_paths` maps each finding's shown path to its path in the project;
    stale entries are counted only for the files `checked` (paths in the project) and for
    files that no longer exist, so a run over some files says nothing of the others."""
    left = Counter(baseline.entries)
    new = []
    absorbed = 0
    for finding in findings:
        key = entry_key(finding, project_paths[finding.path])
        if left[key] > 0:
            left[key] -= 1
            absorbed += 1
        else:
            new.append(finding)
    stale = sum(count for (path, _, _), count in left.items()
                if count > 0 and (path in checked or not _exists(path, project_root)))
    return BaselineMatch(tuple(new), absorbed, stale)


def _exists(path: str, project_root: Path | None) -> bool:
    file = Path(path)
    if not file.is_absolute() and project_root is not None:
        file = project_root / file
    return file.exists()


def baseline_text(findings: Iterable[Finding], project_paths: Mapping[str, str]) -> str:
    """The baseline file recording `findings`: stable, sorted JSON, one entry a line."""
    counts = Counter(entry_key(finding, project_paths[finding.path]) for finding in findings)
    lines = [json.dumps({"path": path, "code": code, "key": key, "count": count},
                        ensure_ascii=False)
             for (path, code, key), count in sorted(counts.items())]
    body = ",\n".join(f"    {line}" for line in lines)
    entries = f"[\n{body}\n  ]" if lines else "[]"
    return f'{{\n  "version": {FORMAT_VERSION},\n  "entries": {entries}\n}}\n'


def write_baseline(path: Path, findings: Iterable[Finding],
                   project_paths: Mapping[str, str]) -> int:
    """Write the baseline of `findings` to `path` (replacing it); the number of entries."""
    findings = list(findings)
    text = baseline_text(findings, project_paths)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # A path that is not UTF-8 keeps its bytes as surrogate escapes: backslashreplace
        # writes each as `\udcff`, which JSON reads back as that same escape.
        path.write_text(text, encoding="utf-8", errors="backslashreplace", newline="\n")
    except OSError as err:
        raise BaselineError(f"{path}: cannot write baseline: {err.strerror or err}") from None
    return len({entry_key(f, project_paths[f.path]) for f in findings})
