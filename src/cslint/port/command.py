"""What `cslint port` does with its files: port each, show or write the result, verify
when asked, and report each optimizer class. Printing is the caller's (`cslint.cli`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from cslint.config import Config
from cslint.fixes.apply import unified_diff
from cslint.port.rewrite import PortedFile, PortError, port_file, with_reached_findings


@dataclass(frozen=True)
class ClassReport:
    path: str
    name: str
    remaining: tuple[str, ...]  # the codes the linter still finds in the ported class
    # With --verify (else None): the numbers equal, strict mode clean, and why it could
    # not run.
    numbers_equal: bool | None = None
    strict_clean: bool | None = None
    problem: str | None = None

    @property
    def ported(self) -> bool:
        return not self.remaining

    def fully_ported(self, verified: bool) -> bool:
        return self.ported and (not verified or (self.numbers_equal is True
                                                 and self.strict_clean is True))

    def as_json(self, verified: bool) -> dict:
        entry = {"path": self.path, "class": self.name, "ported": self.ported,
                 "numbers_equal": self.numbers_equal, "strict_clean": self.strict_clean,
                 "remaining": list(self.remaining)}
        if verified and self.problem:
            entry["problem"] = self.problem
        return entry

    def as_text(self, verified: bool) -> str:
        parts = [f"{self.path}: {self.name}: " + ("ported" if self.ported else "not ported")]
        if verified:
            parts.append("numbers " + _verdict(self.numbers_equal, "equal", "differ"))
            parts.append("strict " + _verdict(self.strict_clean, "clean", "fails"))
        if self.remaining:
            parts.append("remaining " + " ".join(self.remaining))
        line = ", ".join(parts)
        return line + (f" ({self.problem})" if verified and self.problem else "")


def _verdict(value: bool | None, yes: str, no: str) -> str:
    return yes if value else no if value is False else "not run"


@dataclass
class PortRun:
    ported: list[PortedFile] = field(default_factory=list)
    classes: list[ClassReport] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line each

    @property
    def diff(self) -> bytes:
        return b"".join(unified_diff(file.path, file.original, file.ported)
                        for file in self.ported if file.changed)


def python_files(paths: list[str], problems: list[str]) -> list[str]:
    """The files named and the Python files under the folders named."""
    files = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files.extend(str(p) for p in sorted(path.rglob("*.py")))
        elif path.exists():
            files.append(given)
        else:
            problems.append(f"{given}: no such file or folder")
    return files


# Passes over the files at most, each seeing the others' ports of the pass before.
MAX_PASSES = 4


def run_port(paths: list[str], config: Config, *, write: bool, verify: bool,
             runtime_reference: bool) -> PortRun:
    run = PortRun()
    files = python_files(paths, run.problems)
    # Each file is ported from its original, seeing the other files' ports of the pass
    # before, until no port changes: a helper's file is ported for what its callers
    # pass once they are ported (a step count made a tensor reaches `math.pow` in a
    # shared `debias`).
    ports: dict[str, PortedFile] = {}
    for _ in range(MAX_PASSES):
        others = {Path(file.path).absolute(): file.ported for file in ports.values()
                  if file.changed}
        changed = False
        for path in list(files):
            context = {p: code for p, code in others.items() if p != Path(path).absolute()}
            try:
                ported = port_file(path, config, runtime_reference, context)
            except PortError as error:
                run.problems.append(str(error))
                files.remove(path)
                continue
            before = ports.get(path)
            changed = changed or before is None or before.ported != ported.ported
            ports[path] = ported
        if not changed or len(files) < 2:
            break
    # What is left in the functions of other files the classes call is left in them.
    run.ported = with_reached_findings([ports[path] for path in files], config)
    # Verified before anything is written: the original is still at its path.
    verified = [{} for _ in run.ported]
    if verify:
        from cslint.port.verify import verify_ports

        verified = verify_ports([(file.path, file.ported, [c.name for c in file.classes])
                                 for file in run.ported])
    if write:
        from cslint.fixes.write import WriteError, write_fixed

        for file in run.ported:
            if file.changed:
                try:
                    write_fixed(file.source, file.ported)
                except WriteError as error:
                    run.problems.append(f"{file.path}: {error}")
    for file, results in zip(run.ported, verified):
        for found in file.classes:
            result = results.get(found.name)
            run.classes.append(ClassReport(
                file.path, found.name, found.remaining,
                result.numbers_equal if result else None,
                result.strict_clean if result else None,
                result.problem if result else None))
    return run


def render_json(run: PortRun, verified: bool) -> str:
    return json.dumps([c.as_json(verified) for c in run.classes], indent=2) + "\n"
