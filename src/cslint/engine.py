"""One run of the linter: discover, read, parse once, index, check, suppress.

paths -> files -> SourceFile -> ast -> ModuleIndex -> ProjectIndex -> rules -> findings
"""

from __future__ import annotations

import gc
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from cslint.codes import selected_by_any
from cslint.config import Config
from cslint.deep_stack import with_deep_stack
from cslint.diagnostics import Finding
from cslint.discovery import ExcludeMatcher, Target, display_path, is_package_folder, \
    printable, project_path, walk_python_files
from cslint.fingerprints import with_fingerprints
from cslint.memory import give_back_freed_memory
from cslint.project_files import HeldTrees, LoadedFile, ProjectFiles, load_file, \
    project_files_for
from cslint.rules import ModuleContext, Rule, rules_for, select_codes
from cslint.semantic.module_index import ModuleIndex, index_data, index_from_data, \
    let_go_of_definitions_parsed_alone, module_name_for
from cslint.source import TOO_DEEP, InputError, SourceFile, internal_error, stat_mode, \
    too_big
from cslint.suppressions import per_file_ignored_codes, scan_suppressions

if TYPE_CHECKING:
    # Imported where a batch is checked: a run whose every file the cache holds (and
    # the rules, `_Run.rules`) never loads the analyses.
    from cslint.semantic.analyses import Analyses
    from cslint.semantic.project import ProjectIndex

STDIN = "-"
# Fewer files a worker than this, and forking costs more than it saves.
_FILES_PER_WORKER = 16
# Source (characters) of the checked files and their context from which the
# optimizer-state analysis and its rules run in a process of their own: on
# pytorch-optimizer (1.4 MB) the run goes from 0.74 to 0.65 s (its 0.13 s beside the
# tensor values' 0.19 s); a pre-commit run over one file forks nothing.
_SOURCE_TO_ANALYSE_BESIDE = 500_000
# With no number of jobs asked for, the files a run needs before it shares its checks
# at all: on 2 CPUs two workers made a run 6% slower on 151 files (pytorch-optimizer)
# and 2-5% slower on 2,300-2,900 (torch/, transformers), the forked workers'
# copy-on-write faults on the big heap costing more than half the check phase.
_FILES_TO_SHARE_BY_DEFAULT = 512


@dataclass(frozen=True)
class CacheOptions:
    """Where the findings cache lives: `directory`, or `.cslint_cache` in the project's
    folder when None. `read_reported`: whether the report needs the text of the files
    whose findings it takes from the cache (their lines under --show-source, their fixes
    as edits); reading them was 9 ms of a 0.13 s warm run over pytorch-optimizer."""

    directory: Path | None = None
    read_reported: bool = True


@dataclass
class LintResult:
    """One pass of the linter over the inputs."""

    findings: list[Finding] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    files_checked: int = 0
    # The checked files as read, by display path: what fixes rewrite. (With a cache, only
    # those with findings: the others were not read.)
    sources: dict[str, SourceFile] = field(default_factory=dict)
    # Every file checked (parsed or not), as given.
    checked_paths: list[Path] = field(default_factory=list)
    # The indexes of the files checked and read, by display path (`ModuleIndex.tree`
    # gives a file's syntax tree, parsed again if it was let go).
    modules: dict[str, ModuleIndex] = field(default_factory=dict)
    # Every input's path, by display path: those not read too (a display path escapes
    # what a name cannot show, so it does not lead back to the file).
    input_paths: dict[str, Path] = field(default_factory=dict)
    # The codes of the rules that ran (`cslint.rules.rules_for` gives the rules).
    codes: list[str] = field(default_factory=list)
    # The project's folder, resolved (None without inputs): paths in the project are
    # relative to it (`cslint.discovery.project_path`).
    project_root: Path | None = None
    # The project index of the last batch checked: what the rules knew of its classes
    # (`cslint.port` reads which classes are optimizers).
    project: ProjectIndex | None = None


def collect_targets(paths: list[str], exclude: ExcludeMatcher, result: LintResult,
                    force_exclude: bool = False) -> list[Target]:
    """The files to check: those named, and the Python files of the folders named.
    A named path that leads nowhere (missing, a broken or looping symlink) is reported
    here; a file that cannot be read (a FIFO, a device, unreadable), when it is read."""
    targets: list[Target] = []
    for given in paths:
        if given == STDIN:
            continue
        path = Path(given)
        shown = display_path(path, given)
        try:
            mode = stat_mode(path, shown)
        except InputError as error:
            result.input_paths[shown] = path
            result.errors.append(error)
            continue
        if stat.S_ISDIR(mode):
            found = walk_python_files(path, exclude)
            if not found:
                result.notices.append(f"{printable(given)}: no Python files to check")
            for file in found:
                shown = display_path(file, str(path / file.relative_to(path)))
                targets.append(Target(file, shown))
        # A file named explicitly is checked even when excluded, unless forced out.
        elif not (force_exclude and exclude.excludes(path)):
            targets.append(Target(path, shown))
    result.input_paths.update((target.display_path, target.path) for target in targets)
    return targets


@with_deep_stack
def lint(paths: list[str], config: Config, stdin: tuple[str, bytes] | None = None,
         project_root: Path | None = None, *, apply_noqa: bool = True,
         fingerprints: bool = False, cache: CacheOptions | None = None,
         progress: Callable[[str, int, int], None] | None = None, jobs: int | None = 1,
         replaced: dict[str, bytes] | None = None,
         unsaved: dict[Path, bytes] | None = None) -> LintResult:
    """Check `paths` (and stdin, given as (display name, bytes)) under `config`.
    `project_root` overrides the folder searched for context (tests pin it).
    `apply_noqa=False` keeps the findings that `# noqa` comments suppress, for a caller
    that applies its own (flake8 does, and honours its --disable-noqa).
    `fingerprints=True` gives each finding its fingerprint (`cslint.fingerprints`), for
    the callers that read it: SARIF, GitLab, a baseline.
    `cache` reuses the findings of files unchanged since an earlier run, and of what they
    depend on (`cslint.cached_run`); stdin is never cached. `progress` is told how the
    run goes (`cslint.progress`). `jobs` > 1 shares the per-file checks among that many
    processes (`cslint.parallel`); None: the CPUs, when the run has enough files to pay
    for them. The output is the same for any number.
    `replaced` gives the content of checked files (by display path) in place of what is
    on disk: the fixed code, checked again before (or without) writing it; `unsaved`
    that of the project's other files (by absolute path), read for context."""
    # Package folders and module names are memoised within a run; a process that lints
    # again (the language server, flake8) must see an `__init__.py` created meanwhile.
    is_package_folder.cache_clear()
    module_name_for.cache_clear()
    collecting = gc.isenabled()
    # Every syntax tree stays alive for the run, so the cyclic collector would rescan a
    # growing heap of AST nodes again and again while they are built (measured: it
    # doubles the run's time). It pauses while they are read, and `_freeze_trees` moves
    # them out of its view once they are built, so the analyses' own garbage is still
    # collected.
    thresholds = gc.get_threshold()
    gc.disable()
    try:
        return _lint(paths, config, stdin, project_root, collecting, apply_noqa, fingerprints,
                     cache, progress, jobs, replaced or {}, unsaved or {})
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
          fingerprints: bool, cache: CacheOptions | None,
          progress: Callable[[str, int, int], None] | None, jobs: int | None,
          replaced: dict[str, bytes], unsaved: dict[Path, bytes]) -> LintResult:
    result = LintResult()
    exclude = ExcludeMatcher(config.exclude, config.base_dir)
    targets = collect_targets(paths, exclude, result, config.force_exclude)
    files = project_files_for(targets, stdin, exclude, project_root, config.max_file_size,
                              unsaved)
    codes = select_codes(config)
    result.codes = codes
    result.project_root = files.root
    run = _Run(config, codes, apply_noqa, fingerprints, collecting, progress=progress,
               jobs=jobs, replaced=replaced)
    if cache is None or stdin is not None or files.root is None or replaced or unsaved:
        run.check(result, targets, stdin, files)
    else:
        from cslint.cached_run import check_with_cache

        check_with_cache(run, result, targets, files, cache)
    result.project = run.project
    result.findings.sort(key=Finding.sort_key)
    result.errors = _unique_errors(result.errors)
    return result


@dataclass
class _Run:
    """How the files of one run are checked: the settings every batch shares."""

    config: Config
    codes: list[str]
    apply_noqa: bool
    fingerprints: bool
    collecting: bool
    # The project index of the last batch checked (what its name resolution read).
    project: ProjectIndex | None = None
    # Told (what is being done, files done, files in all) as the run goes.
    progress: Callable[[str, int, int], None] | None = None
    # Processes the per-file checks may be shared among (None: decided by the run's size).
    jobs: int | None = 1
    # The content of checked files (by display path) in place of what is on disk.
    replaced: dict[str, bytes] = field(default_factory=dict)

    @cached_property
    def rules(self) -> list[Rule]:
        return rules_for(self.codes)

    def check(self, result: LintResult, targets: list[Target],
              stdin: tuple[str, bytes] | None, files: ProjectFiles,
              context: Callable[[list[ModuleIndex]], list[ModuleIndex]] | None = None
              ) -> list[LoadedFile]:
        """Check `targets` (and stdin) into `result`, the project's other files read as
        they are needed; the files checked, as loaded. `context` gives the other files
        whose code may reach the checked ones (default: `ProjectFiles.dependents`)."""
        max_size = self.config.max_file_size
        checked: list[LoadedFile] = []
        for target, loaded in zip(targets, self._load_targets(targets, files.held)):
            result.checked_paths.append(target.path)
            if isinstance(loaded, InputError):
                result.errors.append(loaded)
            else:
                checked.append(loaded)
        if stdin is not None:
            name, raw = stdin
            result.input_paths[printable(name)] = Path(name).absolute()
            name = printable(name)
            result.checked_paths.append(Path(name).absolute())
            try:
                if len(raw) > max_size:  # as the same code in a file would be
                    raise too_big(name, len(raw), max_size)
                checked.append(load_file(Path(name).absolute(), name, max_size, raw,
                                         files.held))
            except InputError as err:
                result.errors.append(err)
        # The analyses find facts in the order they meet the files: one canonical order
        # makes the output the same for any order of the same paths.
        checked.sort(key=lambda loaded: str(loaded.source.path.absolute()))
        from cslint.semantic.official import load_official_api
        from cslint.semantic.project import ProjectIndex

        checked_modules = [c.module for c in checked]
        reaching = (context or files.dependents)(checked_modules)
        project = ProjectIndex(checked_modules + reaching,
                               load_official_api(), self.config, loader=files)
        self.project = project
        _freeze_trees(self.collecting)
        if self.progress is not None:
            self.progress("analysing", 0, len(checked))
        rules, beside = self.rules, None
        aside = self._rules_aside(checked_modules + reaching)
        if aside:
            # The optimizer-state analysis and its rules run in a forked process while
            # this one runs the other analyses and rules (they share no facts).
            rules = [rule for rule in self.rules if rule not in aside]
            from cslint.parallel import run_beside

            beside = run_beside(lambda: self._check_with(aside, checked, project, files))
        analyses = _analyses_for(project, rules)
        # The functions the analyses walked were parsed alone (their files' trees let
        # go): their trees go too, and a rule that needs one parses it again. On torch/
        # they are about 30 MB, which every forked worker would otherwise start with.
        let_go_of_definitions_parsed_alone()
        for loaded in checked:
            result.files_checked += 1
            result.sources[loaded.source.display_path] = loaded.source
            result.modules[loaded.source.display_path] = loaded.module
        results = self._check_all(checked, project, analyses, files, rules)
        errors = _problems_of(analyses, checked)
        if beside is not None:
            results_beside, errors_beside = beside()
            results = [(found + found_beside, problem or problem_beside)
                       for (found, problem), (found_beside, problem_beside)
                       in zip(results, results_beside)]
            errors += errors_beside
        for loaded, (findings, problem) in zip(checked, results):
            result.findings.extend(findings)
            if problem is not None:
                result.errors.append(InputError(loaded.source.display_path, problem))
        result.errors.extend(InputError(shown, problem) for shown, problem in errors)
        return checked

    def _rules_aside(self, modules: list[ModuleIndex]) -> list[Rule]:
        """The rules that may run in a process of their own beside this one: those of
        the optimizer-state analysis, when the other analyses run too, processes may be
        forked and the project is large enough to pay for one (a pre-commit run over one
        file is not)."""
        if self.jobs == 1 or sum(len(m.source_text) for m in modules) < _SOURCE_TO_ANALYSE_BESIDE:
            return []
        from cslint.semantic.optimizer_state import OptimizerStateAnalysis

        aside = [rule for rule in self.rules if rule.uses == (OptimizerStateAnalysis,)]
        if not aside or not any(rule.uses for rule in self.rules if rule not in aside):
            return []
        from cslint.parallel import can_fork

        return aside if can_fork() else []

    def _check_with(self, rules: list[Rule], checked: list[LoadedFile], project: ProjectIndex,
                    files: ProjectFiles) -> tuple[list, list[tuple[str, str]]]:
        """Each file's findings of `rules` (or the problem that stopped its check), and the
        problems of their analyses (display path, problem), checked here."""
        analyses = _analyses_for(project, rules)
        results = [self._check_one(loaded, project, analyses, files, rules)
                   for loaded in checked]
        return results, _problems_of(analyses, checked)

    def _jobs_for(self, count: int) -> int:
        """The processes to share `count` files among (1: this one alone)."""
        jobs = self.jobs
        if jobs is None:
            from cslint.parallel import default_jobs

            jobs = default_jobs() if count >= _FILES_TO_SHARE_BY_DEFAULT else 1
        return jobs if count >= _FILES_PER_WORKER * 2 else 1

    def _load_targets(self, targets: list[Target], held: HeldTrees
                      ) -> list[LoadedFile | InputError]:
        """Each target read, parsed and indexed (or the problem that stopped it), in
        order. Shared among worker processes, each sends back the file's bytes and its
        index as plain data, its tree let go there (parsed again here when needed)."""
        max_size = self.config.max_file_size

        def load(index: int, held: HeldTrees | None) -> LoadedFile | InputError:
            target = targets[index]
            try:
                return load_file(target.path, target.display_path, max_size,
                                 self.replaced.get(target.display_path), held)
            except InputError as error:
                return error

        def report(done: int) -> None:
            if self.progress is not None:
                self.progress("reading", done, len(targets))

        jobs = self._jobs_for(len(targets))
        if jobs == 1:
            loaded = []
            for index in range(len(targets)):
                report(index)
                loaded.append(load(index, held))
            return loaded
        from cslint.parallel import map_in_workers

        def load_as_data(index: int) -> tuple:
            found = load(index, None)  # (its tree goes with it)
            if isinstance(found, InputError):
                return (None, found.display_path, found.problem, found.line, found.column)
            return (found.source.raw, index_data(found.module))

        loaded = []
        for target, data in zip(targets, map_in_workers(load_as_data, len(targets), jobs,
                                                       report)):
            if data[0] is None:
                loaded.append(InputError(*data[1:]))
                continue
            raw, index = data
            source = SourceFile.from_bytes(target.path, target.display_path, raw)
            module = index_from_data(index, source.text)
            held.indexed(module, len(raw))
            loaded.append(LoadedFile(source, module))
        # The workers' messages and the files' bytes are gone: their pages go back before
        # the analyses, and before the checks' workers are forked from this process.
        give_back_freed_memory()
        return loaded

    def _check_one(self, loaded: LoadedFile, project: ProjectIndex, analyses: Analyses,
                   files: ProjectFiles, rules: list[Rule]) -> tuple[list[Finding], str | None]:
        """The file's findings of `rules`, or the problem that stopped its check."""
        try:
            findings = _check_module(loaded, project, self.config, rules, analyses,
                                     self.apply_noqa)
            if findings and self.fingerprints:
                findings = with_fingerprints(
                    findings, project_path(loaded.source.path, files.root),
                    loaded.source.lines, loaded.module.tree)
            return findings, None
        except RecursionError:
            return [], TOO_DEEP
        except Exception as error:  # a bug of ours must not stop the other files
            return [], internal_error(error)
        finally:
            files.held.checked(loaded)

    def _check_all(self, checked: list[LoadedFile], project: ProjectIndex, analyses: Analyses,
                   files: ProjectFiles, rules: list[Rule]
                   ) -> list[tuple[list[Finding], str | None]]:
        """Each file's findings, or the problem that stopped its check: in worker
        processes forked from this one when `jobs` allows and there is enough to share
        (they inherit the project and its analyses as they are), else here."""
        def check_one(index: int) -> tuple[list[Finding], str | None]:
            return self._check_one(checked[index], project, analyses, files, rules)

        def report(done: int) -> None:
            if self.progress is not None:
                self.progress("checking", done, len(checked))

        jobs = self._jobs_for(len(checked))
        if jobs > 1:
            from cslint.parallel import map_in_workers

            return map_in_workers(check_one, len(checked), jobs, report)
        results = []
        for index in range(len(checked)):
            report(index)
            results.append(check_one(index))
        return results


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


def _analyses_for(project: ProjectIndex, rules: list[Rule]) -> Analyses:
    """The analyses `rules` read, run over the project."""
    from cslint.semantic.analyses import Analyses

    return Analyses(project, {analysis for rule in rules for analysis in rule.uses})


def _problems_of(analyses: Analyses, checked: list[LoadedFile]) -> list[tuple[str, str]]:
    """(display path, problem) of what the analyses could not analyse in checked files."""
    checked_ids = {id(loaded.module) for loaded in checked}
    return [(error.module.display_path, error.problem) for error in analyses.errors
            if id(error.module) in checked_ids]


def _unique_errors(errors: list[InputError]) -> list[InputError]:
    seen: set[str] = set()
    unique = []
    for error in errors:
        if error.render() not in seen:
            seen.add(error.render())
            unique.append(error)
    return unique
