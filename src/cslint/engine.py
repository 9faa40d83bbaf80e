"""One run of the linter: discover, read, parse once, index, check, suppress.

paths -> files -> SourceFile -> ast -> ModuleIndex -> ProjectIndex -> rules -> findings
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from pathlib import Path

from cslint.codes import selected_by_any
from cslint.config import Config
from cslint.deep_stack import with_deep_stack
from cslint.diagnostics import Finding
from cslint.discovery import ExcludeMatcher, Target, display_path, printable, project_path, \
    walk_python_files
from cslint.fingerprints import with_fingerprints
from cslint.project_files import LoadedFile, load_file, project_files_for
from cslint.rules import ModuleContext, Rule, select_rules
from cslint.semantic.analyses import Analyses
from cslint.semantic.official import load_official_api
from cslint.semantic.project import ProjectIndex
from cslint.source import TOO_DEEP, InputError, SourceFile, internal_error
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
    # Every input's path, by display path: those not read too (a display path escapes
    # what a name cannot show, so it does not lead back to the file).
    input_paths: dict[str, Path] = field(default_factory=dict)
    # The rules that ran.
    rules: list[Rule] = field(default_factory=list)
    # The project's folder, resolved (None without inputs): paths in the project are
    # relative to it (`cslint.discovery.project_path`).
    project_root: Path | None = None


def collect_targets(paths: list[str], exclude: ExcludeMatcher, result: LintResult,
                    force_exclude: bool = False) -> list[Target]:
    targets: list[Target] = []
    for given in paths:
        if given == STDIN:
            continue
        path = Path(given)
        if path.is_dir():
            found = walk_python_files(path, exclude)
            if not found:
                result.notices.append(f"{printable(given)}: no Python files to check")
            for file in found:
                shown = display_path(file, str(Path(given) / file.relative_to(path)))
                targets.append(Target(file, shown))
        elif path.exists():
            # A file named explicitly is checked even when excluded, unless forced out.
            if force_exclude and exclude.excludes(path):
                continue
            targets.append(Target(path, display_path(path, given)))
        else:
            shown = display_path(path, given)
            result.input_paths[shown] = path
            result.errors.append(InputError(shown, "no such file or directory"))
    result.input_paths.update((target.display_path, target.path) for target in targets)
    return targets


@with_deep_stack
def lint(paths: list[str], config: Config, stdin: tuple[str, bytes] | None = None,
         project_root: Path | None = None, *, apply_noqa: bool = True,
         fingerprints: bool = False) -> LintResult:
    """Check `paths` (and stdin, given as (display name, bytes)) under `config`.
    `project_root` overrides the folder searched for context (tests pin it).
    `apply_noqa=False` keeps the findings that `# noqa` comments suppress, for a caller
    that applies its own (flake8 does, and honours its --disable-noqa).
    `fingerprints=True` gives each finding its fingerprint (`cslint.fingerprints`), for
    the callers that read it: SARIF, GitLab, a baseline."""
    collecting = gc.isenabled()
    # Every syntax tree stays alive for the run, so the cyclic collector would rescan a
    # growing heap of AST nodes again and again while they are built (measured: it
    # doubles the run's time). It pauses while they are read, and `_freeze_trees` moves
    # them out of its view once they are built, so the analyses' own garbage is still
    # collected.
    thresholds = gc.get_threshold()
    gc.disable()
    try:
        return _lint(paths, config, stdin, project_root, collecting, apply_noqa, fingerprints)
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
          project_root: Path | None, collecting: bool, apply_noqa: bool,
          fingerprints: bool) -> LintResult:
    result = LintResult()
    exclude = ExcludeMatcher(config.exclude, config.base_dir)
    targets = collect_targets(paths, exclude, result, config.force_exclude)

    checked: list[LoadedFile] = []
    for target in targets:
        try:
            checked.append(load_file(target.path, target.display_path))
        except InputError as err:
            result.errors.append(err)
    if stdin is not None:
        name, raw = stdin
        shown = printable(name)
        result.input_paths[shown] = Path(name).absolute()
        try:
            checked.append(load_file(result.input_paths[shown], shown, raw))
        except InputError as err:
            result.errors.append(err)

    files = project_files_for(targets, stdin, exclude, project_root)
    checked_modules = [c.module for c in checked]
    project = ProjectIndex(checked_modules + files.dependents(checked_modules),
                           load_official_api(), config, loader=files)
    _freeze_trees(collecting)
    rules = select_rules(config)
    result.rules = rules
    result.project_root = files.root
    analyses = Analyses(project, {analysis for rule in rules for analysis in rule.uses})
    for loaded in checked:
        result.files_checked += 1
        result.sources[loaded.source.display_path] = loaded.source
        try:
            findings = _check_module(loaded, project, config, rules, analyses, apply_noqa)
            if findings and not fingerprints:
                result.findings.extend(findings)
            elif findings:
                result.findings.extend(with_fingerprints(
                    findings, project_path(loaded.source.path, files.root),
                    loaded.source.lines, loaded.module.tree))
        except RecursionError:
            result.errors.append(InputError(loaded.source.display_path,
                                            TOO_DEEP))
        except Exception as error:  # a bug of ours must not stop the other files
            result.errors.append(InputError(loaded.source.display_path, internal_error(error)))
    checked_ids = {id(m) for m in checked_modules}
    for error in analyses.errors:
        if id(error.module) in checked_ids:
            result.errors.append(InputError(error.module.display_path, error.problem))
    result.findings.sort(key=Finding.sort_key)
    result.errors = _unique_errors(result.errors)
    return result


def _check_module(loaded: LoadedFile, project: ProjectIndex, config: Config, rules: list[Rule],
                  analyses: Analyses, apply_noqa: bool) -> list[Finding]:
    suppressions = scan_suppressions(loaded.source.text, loaded.source.lines)
    if suppressions.skip_file:
        return []
    ignored = per_file_ignored_codes(config, loaded.source.path)
    context = ModuleContext(loaded.source, loaded.module, project, config, analyses)
    findings = []
    for rule in rules:
        if selected_by_any(ignored, rule.code):
            continue
        # A rule's findings at one place (its `place`) are one: the first found.
        places: set[tuple] = set()
        for finding in rule.check(context):
            place = rule.place(finding)
            if place is not None:
                if place in places:
                    continue
                places.add(place)
            if not apply_noqa or not suppressions.suppresses(finding.location.line,
                                                             finding.code):
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
