"""One run of the linter: discover, read, parse once, index, check, suppress.

paths -> files -> SourceFile -> ast -> ModuleIndex -> ProjectIndex -> rules -> findings
"""

from __future__ import annotations

import gc
import re
from dataclasses import dataclass, field
from pathlib import Path

from cslint.config import Config
from cslint.diagnostics import Finding
from cslint.discovery import ExcludeMatcher, Target, display_path, find_project_root, \
    walk_python_files
from cslint.rules import ModuleContext, Rule, select_rules
from cslint.semantic.module_index import ModuleIndex, build_module_index, module_name_for
from cslint.semantic.official import load_official_api
from cslint.semantic.project import ProjectIndex
from cslint.source import InputError, SourceFile, internal_error
from cslint.suppressions import per_file_ignored_codes, scan_suppressions

STDIN = "-"


@dataclass
class LintResult:
    """One pass of the linter over the inputs."""

    findings: list[Finding] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    files_checked: int = 0
    # The checked files as read, by display path: what fixes rewrite.
    sources: dict[str, SourceFile] = field(default_factory=dict)


@dataclass
class _Loaded:
    source: SourceFile
    module: ModuleIndex


def collect_targets(paths: list[str], exclude: ExcludeMatcher, result: LintResult
                    ) -> list[Target]:
    targets: list[Target] = []
    for given in paths:
        if given == STDIN:
            continue
        path = Path(given)
        if path.is_dir():
            found = walk_python_files(path, exclude)
            if not found:
                result.notices.append(f"{given}: no Python files to check")
            for file in found:
                shown = display_path(file, str(Path(given) / file.relative_to(path)))
                targets.append(Target(file, shown))
        elif path.exists():
            targets.append(Target(path, display_path(path, given)))  # explicit: always checked
        else:
            result.errors.append(InputError(display_path(path, given), "no such file or directory"))
    return targets


def _load(path: Path, shown: str, raw: bytes | None = None) -> _Loaded:
    source = SourceFile.from_bytes(path, shown, raw) if raw is not None \
        else SourceFile.read(path, shown)
    tree = source.parse()
    try:
        module = build_module_index(tree, path, shown, source_lines=source.lines)
    except RecursionError:
        raise InputError(shown, "too deeply nested to analyse") from None
    return _Loaded(source, module)


def lint(paths: list[str], config: Config, stdin: tuple[str, bytes] | None = None,
         project_root: Path | None = None) -> LintResult:
    """Check `paths` (and stdin, given as (display name, bytes)) under `config`.
    `project_root` overrides the folder searched for context (tests pin it)."""
    collecting = gc.isenabled()
    # Every syntax tree stays alive for the run, so the cyclic collector would rescan a
    # growing heap of AST nodes again and again while they are built (measured: it
    # doubles the run's time). It pauses while they are read, and `_freeze_trees` moves
    # them out of its view once they are built, so the analyses' own garbage is still
    # collected.
    thresholds = gc.get_threshold()
    gc.disable()
    try:
        return _lint(paths, config, stdin, project_root, collecting)
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        if collecting:
            gc.enable()


def _freeze_trees(collecting: bool) -> None:
    gc.freeze()
    # The analyses allocate many small short-lived objects and few cycles: collect the
    # young generation less often than the default 700 allocations.
    gc.set_threshold(50_000, 20, 20)
    if collecting:
        gc.enable()


def _lint(paths: list[str], config: Config, stdin: tuple[str, bytes] | None,
          project_root: Path | None, collecting: bool) -> LintResult:
    result = LintResult()
    exclude = ExcludeMatcher(config.exclude, config.base_dir)
    targets = collect_targets(paths, exclude, result)

    checked: list[_Loaded] = []
    for target in targets:
        try:
            checked.append(_load(target.path, target.display_path))
        except InputError as err:
            result.errors.append(err)
    if stdin is not None:
        name, raw = stdin
        try:
            checked.append(_load(Path(name).absolute(), name, raw))
        except InputError as err:
            result.errors.append(err)

    files = _project_files(targets, stdin, exclude, project_root)
    checked_modules = [c.module for c in checked]
    project = ProjectIndex(checked_modules + files.dependents(checked_modules),
                           load_official_api(), config, loader=files)
    _freeze_trees(collecting)
    rules = select_rules(config)
    facts: dict = {}
    for loaded in checked:
        result.files_checked += 1
        result.sources[loaded.source.display_path] = loaded.source
        try:
            result.findings.extend(_check_module(loaded, project, config, rules, facts))
        except RecursionError:
            result.errors.append(InputError(loaded.source.display_path,
                                            "too deeply nested to analyse"))
        except Exception as error:  # a bug of ours must not stop the other files
            result.errors.append(InputError(loaded.source.display_path, internal_error(error)))
    checked_ids = {id(m) for m in checked_modules}
    for fact in facts.values():
        for module, problem in getattr(fact, "errors", ()):
            if id(module) in checked_ids:
                result.errors.append(InputError(module.display_path, problem))
    result.findings.sort(key=Finding.sort_key)
    result.errors = _unique_errors(result.errors)
    return result


class ProjectFiles:
    """The project's other Python files: read when a name resolves into them, or when
    they may depend on a checked file (so one changed file gets the findings a run over
    the whole tree would give it)."""

    def __init__(self, files: list[Path]):
        self.by_module: dict[str, list[Path]] = {}
        for path in files:
            self.by_module.setdefault(module_name_for(path)[0], []).append(path)
        self.pending = set(files)

    def _read(self, path: Path) -> ModuleIndex | None:
        self.pending.discard(path)
        try:
            return _load(path, str(path)).module
        except InputError:
            return None  # a broken file elsewhere is reported when it is itself checked

    def load_module(self, name: str) -> list[ModuleIndex]:
        paths = [p for p in self.by_module.get(name, ()) if p in self.pending]
        return [m for m in map(self._read, paths) if m is not None]

    def dependents(self, checked: list[ModuleIndex]) -> list[ModuleIndex]:
        """Files that name a class or function of the checked files, transitively
        through the classes deriving from those: a text pre-filter, then a parse."""
        names = {n for m in checked for n in (*m.top_level_classes, *m.functions)}
        found: list[ModuleIndex] = []
        new_names = set(names)
        while new_names and self.pending:
            words = [n.encode() for n in sorted(new_names)]
            pattern = re.compile(rb"\b(?:" + b"|".join(map(re.escape, words)) + rb")\b")
            new_names = set()
            for path in sorted(self.pending):
                try:
                    text = path.read_bytes()
                except OSError:
                    self.pending.discard(path)
                    continue
                # Substring search first (fast); the word-boundary regex confirms.
                if not any(word in text for word in words) or not pattern.search(text):
                    continue
                module = self._read(path)
                if module is None:
                    continue
                found.append(module)
                for info in module.classes.values():
                    if info.name not in names and any(
                            b and b.rsplit(".", 1)[-1] in names for b in info.base_names):
                        new_names.add(info.name)
            names |= new_names
        return found


def _project_files(targets: list[Target], stdin, exclude: ExcludeMatcher,
                   root: Path | None) -> ProjectFiles:
    anchors = [t.path for t in targets]
    if stdin is not None:
        anchors.append(Path(stdin[0]).absolute())
    if not anchors:
        return ProjectFiles([])
    root = root or find_project_root(anchors)
    # Most walked files are checked files named the same way; resolving (symlinks, `..`)
    # is needed only for the others.
    absolute = {a.absolute() for a in anchors}
    others = [p for p in walk_python_files(root, exclude) if p.absolute() not in absolute]
    if others:
        resolved = {a.resolve() for a in anchors}
        others = [p for p in others if p.resolve() not in resolved]
    return ProjectFiles(others)


def _check_module(loaded: _Loaded, project: ProjectIndex, config: Config, rules: list[Rule],
                  facts: dict) -> list[Finding]:
    suppressions = scan_suppressions(loaded.source.text, loaded.source.lines)
    if suppressions.skip_file:
        return []
    ignored = per_file_ignored_codes(config, loaded.source.path)
    context = ModuleContext(loaded.source, loaded.module, project, config, facts)
    findings = []
    for rule in rules:
        if any(rule.code.startswith(prefix) or prefix == "ALL" for prefix in ignored):
            continue
        for finding in rule.check(context):
            if not suppressions.suppresses(finding.location.line, finding.code):
                findings.append(finding)
    return findings


def _unique_errors(errors: list[InputError]) -> list[InputError]:
    seen: set[str] = set()
    unique = []
    for error in errors:
        if error.render() not in seen:
            seen.add(error.render())
            unique.append(error)
    return unique
