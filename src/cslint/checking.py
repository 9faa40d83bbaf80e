"""Checking one batch of files: read, parse and index them, build the project index
and the analyses the rules read, run the rules, apply the suppressions.

paths -> files -> SourceFile -> ast -> ModuleIndex -> ProjectIndex -> rules -> findings

`cslint.engine` decides what a run checks (and `cslint.cached_run` what the cache
cannot answer); this module checks it.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from cslint.codes import selected_by_any
from cslint.config import Config
from cslint.diagnostics import Finding
from cslint.discovery import Target, printable, project_path
from cslint.fingerprints import with_fingerprints
from cslint.memory import give_back_freed_memory
from cslint.project_files import HeldTrees, LoadedFile, ProjectFiles, load_file
from cslint.rules import ModuleContext, Rule
from cslint.semantic.module_index import ModuleIndex, index_data, index_from_data, \
    let_go_of_definitions_parsed_alone
from cslint.source import TOO_DEEP, InputError, SourceFile, internal_error, too_big
from cslint.suppressions import per_file_ignored_codes, scan_suppressions

if TYPE_CHECKING:
    from cslint.engine import LintResult, Run
    from cslint.semantic.analyses import Analyses
    from cslint.semantic.project import ProjectIndex

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


def check_batch(run: Run, result: LintResult, targets: list[Target],
                stdin: tuple[str, bytes] | None, files: ProjectFiles,
                context: Callable[[list[ModuleIndex]], list[ModuleIndex]] | None = None
                ) -> list[LoadedFile]:
    """Check `targets` (and stdin) into `result`, the project's other files read as
    they are needed; the files checked, as loaded. `context` gives the other files
    whose code may reach the checked ones (default: `ProjectFiles.dependents`)."""
    max_size = run.config.max_file_size
    checked: list[LoadedFile] = []
    for target, loaded in zip(targets, _load_targets(run, targets, files.held)):
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
                           load_official_api(), run.config, loader=files)
    run.project = project
    _freeze_trees(run.collecting)
    if run.progress is not None:
        run.progress("analysing", 0, len(checked))
    rules, beside = run.rules, None
    aside = _rules_aside(run, checked_modules + reaching)
    if aside:
        # The optimizer-state analysis and its rules run in a forked process while
        # this one runs the other analyses and rules (they share no facts).
        rules = [rule for rule in run.rules if rule not in aside]
        from cslint.parallel import run_beside

        beside = run_beside(lambda: _check_with(run, aside, checked, project, files))
    analyses = _analyses_for(project, rules)
    # The functions the analyses walked were parsed alone (their files' trees let
    # go): their trees go too, and a rule that needs one parses it again. On torch/
    # they are about 30 MB, which every forked worker would otherwise start with.
    let_go_of_definitions_parsed_alone()
    for loaded in checked:
        result.files_checked += 1
        result.sources[loaded.source.display_path] = loaded.source
        result.modules[loaded.source.display_path] = loaded.module
    results = _check_all(run, checked, project, analyses, files, rules)
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

def _rules_aside(run: Run, modules: list[ModuleIndex]) -> list[Rule]:
    """The rules that may run in a process of their own beside this one: those of
    the optimizer-state analysis, when the other analyses run too, processes may be
    forked and the project is large enough to pay for one (a pre-commit run over one
    file is not)."""
    if run.jobs == 1 or sum(m.text_length for m in modules) < _SOURCE_TO_ANALYSE_BESIDE:
        return []
    from cslint.semantic.optimizer_state import OptimizerStateAnalysis

    aside = [rule for rule in run.rules if rule.uses == (OptimizerStateAnalysis,)]
    if not aside or not any(rule.uses for rule in run.rules if rule not in aside):
        return []
    from cslint.parallel import can_fork

    return aside if can_fork() else []

def _check_with(run: Run, rules: list[Rule], checked: list[LoadedFile], project: ProjectIndex,
                files: ProjectFiles) -> tuple[list, list[tuple[str, str]]]:
    """Each file's findings of `rules` (or the problem that stopped its check), and the
    problems of their analyses (display path, problem), checked here."""
    analyses = _analyses_for(project, rules)
    results = [_check_one(run, loaded, project, analyses, files, rules)
               for loaded in checked]
    return results, _problems_of(analyses, checked)

def _jobs_for(run: Run, count: int) -> int:
    """The processes to share `count` files among (1: this one alone)."""
    jobs = run.jobs
    if jobs is None:
        from cslint.parallel import default_jobs

        jobs = default_jobs() if count >= _FILES_TO_SHARE_BY_DEFAULT else 1
    return jobs if count >= _FILES_PER_WORKER * 2 else 1

def _load_targets(run: Run, targets: list[Target], held: HeldTrees
                  ) -> list[LoadedFile | InputError]:
    """Each target read, parsed and indexed (or the problem that stopped it), in
    order. Shared among worker processes, each sends back the file's bytes and its
    index as plain data, its tree let go there (parsed again here when needed)."""
    max_size = run.config.max_file_size

    def load(index: int, held: HeldTrees | None) -> LoadedFile | InputError:
        target = targets[index]
        try:
            return load_file(target.path, target.display_path, max_size,
                             run.replaced.get(target.display_path), held)
        except InputError as error:
            return error

    def report(done: int) -> None:
        if run.progress is not None:
            run.progress("reading", done, len(targets))

    jobs = _jobs_for(run, len(targets))
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
        source = found.source
        packed = source.pack_text()
        # A UTF-8 text comes compressed, and stays so here until a check reads it: the
        # project's texts would be the largest thing this process holds.
        if packed is not None:
            return ("packed", packed, source.has_bom, source.text_length,
                    index_data(found.module))
        return ("raw", source.raw, index_data(found.module))

    loaded = []
    for target, data in zip(targets, map_in_workers(load_as_data, len(targets), jobs,
                                                   report)):
        if data[0] is None:
            loaded.append(InputError(*data[1:]))
            continue
        if data[0] == "packed":
            _, packed, has_bom, length, index = data
            source = SourceFile.from_packed(target.path, target.display_path, packed,
                                            has_bom, length)
        else:
            _, raw, index = data
            source = SourceFile.from_bytes(target.path, target.display_path, raw)
        module = index_from_data(index, source)
        held.indexed(module, source.text_length)
        loaded.append(LoadedFile(source, module))
    # The workers' messages and the files' bytes are gone: their pages go back before
    # the analyses, and before the checks' workers are forked from this process.
    give_back_freed_memory()
    return loaded

def _check_one(run: Run, loaded: LoadedFile, project: ProjectIndex, analyses: Analyses,
               files: ProjectFiles, rules: list[Rule]) -> tuple[list[Finding], str | None]:
    """The file's findings of `rules`, or the problem that stopped its check."""
    try:
        findings = _check_module(loaded, project, run.config, rules, analyses,
                                 run.apply_noqa)
        if findings and run.fingerprints:
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

def _check_all(run: Run, checked: list[LoadedFile], project: ProjectIndex, analyses: Analyses,
               files: ProjectFiles, rules: list[Rule]
               ) -> list[tuple[list[Finding], str | None]]:
    """Each file's findings, or the problem that stopped its check: in worker
    processes forked from this one when `jobs` allows and there is enough to share
    (they inherit the project and its analyses as they are), else here."""
    def check_one(index: int) -> tuple[list[Finding], str | None]:
        return _check_one(run, checked[index], project, analyses, files, rules)

    def report(done: int) -> None:
        if run.progress is not None:
            run.progress("checking", done, len(checked))

    jobs = _jobs_for(run, len(checked))
    if jobs > 1:
        from cslint.parallel import map_in_workers

        return map_in_workers(check_one, len(checked), jobs, report)
    results = []
    for index in range(len(checked)):
        report(index)
        results.append(check_one(index))
    return results


def _freeze_trees(collecting: bool) -> None:
    gc.freeze()
    # The analyses allocate many small short-lived objects and few cycles: collect the
    # young generation less often than the default 700 allocations.
    gc.set_threshold(50_000, 20, 20)
    if collecting:
        gc.enable()


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


