"""One run of the linter: the files to check, and whether the cache or a check answers
for them (`cslint.cached_run`, `cslint.checking`); its result, in one order.
"""

from __future__ import annotations

import gc
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from cslint.config import Config
from cslint.deep_stack import with_deep_stack
from cslint.diagnostics import Finding
from cslint.discovery import ExcludeMatcher, Target, display_path, is_package_folder, \
    module_name_for, printable, walk_python_files
from cslint.project_files import ProjectFiles, project_files_for
from cslint.rules import Rule, rules_for, select_codes
from cslint.source import InputError, SourceFile, stat_mode

if TYPE_CHECKING:
    # Imported where a batch is checked (`cslint.checking`): a run whose every file the
    # cache holds never loads the analyses, nor the rules (`Run.rules`).
    from cslint.project_files import LoadedFile
    from cslint.semantic.module_index import ModuleIndex
    from cslint.semantic.project import ProjectIndex

STDIN = "-"


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
    run = Run(config, codes, apply_noqa, fingerprints, collecting, progress=progress,
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
class Run:
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
        """Check `targets` (and stdin) into `result` (`cslint.checking.check_batch`)."""
        # The checks, the analyses and the rules load only here: a run whose every file
        # the cache holds never imports them.
        from cslint.checking import check_batch

        return check_batch(self, result, targets, stdin, files, context)


def _unique_errors(errors: list[InputError]) -> list[InputError]:
    seen: set[str] = set()
    unique = []
    for error in errors:
        if error.render() not in seen:
            seen.add(error.render())
            unique.append(error)
    return unique
