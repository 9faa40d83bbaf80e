"""The `cslint` command line.

Exit codes (as ruff): 0 no findings, 1 findings, 2 usage error, bad configuration,
input that could not be read or parsed (the other files are still checked), or a bug of
ours; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn

import click

from cslint import __version__
from cslint.codes import CODES, validate_selector
from cslint.config import Config, ConfigError, find_config_file, load_config_file, \
    parse_version
from cslint.discovery import file_mode
from cslint.output import FORMATS, STATISTICS_FORMATS, formatter
from cslint.rule_pages import rules_markdown, rules_table
from cslint.source import bug_summary

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # as a shell reports a command that SIGINT ended


def _split_codes(values: tuple[str, ...]) -> tuple[str, ...]:
    codes = tuple(c.strip().upper() for v in values for c in v.split(",") if c.strip())
    for code in codes:
        problem = validate_selector(code)
        if problem:
            raise click.BadParameter(problem)
    return codes


def _version_option(ctx, param, value):
    if value is None:
        return None
    try:
        return parse_version(value)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None


def _error(message: str) -> None:
    click.echo(f"cslint: error: {message}", err=True)


def _write_output(text: str | bytes, output_file: str | None) -> None:
    """Print `text` (bytes as they are), or write it to `output_file` (its folders are
    created; the file is written even when `text` is empty, so no earlier run's output is
    left there)."""
    if output_file is None:
        if isinstance(text, bytes):
            sys.stdout.buffer.write(text)
            sys.stdout.flush()
        elif text:
            click.echo(text, nl=False)
        return
    path = Path(output_file)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    except OSError as err:
        _error(f"{output_file}: cannot write: {err.strerror or err}")
        sys.exit(EXIT_ERROR)


class _Commands(click.Group):
    """The command group, with the last-resort handler around every command: a bug of
    ours is one line on stderr and exit 2 (not a traceback, nor exit 1, which means
    findings), Ctrl-C is exit 130. Click handles its own exceptions and a closed stdout
    (`cslint check | head -1`: a quiet exit)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, BrokenPipeError):
            raise
        except KeyboardInterrupt:
            sys.exit(EXIT_INTERRUPTED)
        except Exception as error:
            click.echo(f"cslint: internal error ({bug_summary(error)}); please report this",
                       err=True)
            sys.exit(EXIT_ERROR)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="cslint")
def main() -> None:
    """Lint PyTorch code for Cerebras compliance before it reaches the cluster."""


def entry() -> None:
    """The `cslint` command: `main()`, then an immediate exit. Freeing a large run's
    objects one by one as the interpreter ends took 2.9 s of an 8.8 s run over torch/
    (its syntax trees); the operating system takes the memory back at once."""
    try:
        main()
    except SystemExit as exiting:
        # Ended inside the handler: the exception's traceback holds the command's frames,
        # and they the run's result, so nothing of it is freed before the exit (freeing
        # it took 40 ms of a 0.65 s run over pytorch-optimizer).
        _exit_now(exiting.code)
    _exit_now(EXIT_CLEAN)


def _exit_now(code: object) -> NoReturn:
    if code is None:
        code = EXIT_CLEAN
    elif not isinstance(code, int):
        click.echo(code, err=True)
        code = EXIT_ERROR
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader gone (`| head -1`), a stream closed
            pass
    os._exit(code)


def resolve_config(paths: tuple[str, ...], config_path: str | None, no_config: bool) -> Config:
    if no_config:
        return Config()
    if config_path is not None:
        return load_config_file(Path(config_path))
    first = next((p for p in paths if p != "-"), ".")
    start = Path(first)
    found = find_config_file(start if file_mode(start) is not None else Path.cwd())
    return load_config_file(found) if found else Config()


@main.command()
@click.argument("paths", nargs=-1, type=str)
@click.option("--select", multiple=True, help="Codes or prefixes to check (CS1, CS101, ALL).")
@click.option("--ignore", multiple=True, help="Codes or prefixes to leave out.")
@click.option("--extend-select", multiple=True, help="Codes or prefixes to add to the selection.")
@click.option("--format", "output_format", type=click.Choice(list(FORMATS)), default="text",
              show_default=True, help="text, json, sarif (SARIF 2.1.0), github (GitHub "
              "Actions annotations) or gitlab (GitLab Code Quality).")
@click.option("--output-file", "-o", type=str, metavar="PATH",
              help="Write the output to this file instead of stdout.")
@click.option("--show-source/--no-show-source", default=None, help="Show each finding's "
              "source line, underlined (text format; default: on when stdout is a terminal, "
              "off with --quiet).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("--statistics", is_flag=True, help="Count findings per code instead of listing them.")
@click.option("--quiet", "-q", is_flag=True, help="Print findings only, no summary.")
@click.option("--config", "config_path", type=str, help="Read [tool.cslint] from this file.")
@click.option("--no-config", is_flag=True, help="Ignore configuration files.")
@click.option("--cstorch-version", callback=_version_option,
              help="The cstorch release the code targets, e.g. 2.4 or 2.10.")
@click.option("--stdin-filename", type=str, help="The name to report for code read from `-`.")
@click.option("--force-exclude", is_flag=True, help="Apply `exclude` to files named on the "
              "command line too (as pre-commit names them).")
@click.option("--fix", is_flag=True, help="Apply the safe fixes (files are rewritten; stdin: the "
              "fixed code goes to stdout).")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix or --diff, apply unsafe fixes too.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing "
              "(exit 1 when there is a diff).")
@click.option("--baseline", "baseline_path", type=str, metavar="FILE", help="Report only the "
              "findings this baseline does not record (default: `baseline` in [tool.cslint]).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, metavar="N",
              help="Processes to share the per-file checks (default: the CPUs, for a "
              "run of enough files to pay for them; 1: no other process).")
@click.option("--no-cache", is_flag=True, help="Check every file again, and keep no findings "
              "cache.")
@click.option("--cache-dir", type=str, metavar="DIR", help="The findings cache's folder "
              "(default: `cache-dir` in [tool.cslint], else .cslint_cache in the project).")
@click.option("--write-baseline", type=str, metavar="FILE", help="Record the current findings "
              "in FILE (replacing it) and exit 0.")
def check(paths, select, ignore, extend_select, output_format, output_file, show_source,
          exit_zero, statistics, quiet, config_path, no_config, cstorch_version, stdin_filename,
          force_exclude=False, fix=False, unsafe_fixes=False, diff=False, baseline_path=None,
          jobs=None, no_cache=False, cache_dir=None, write_baseline=None):
    """Check PATHS (files or folders; default `.`; `-` reads stdin)."""
    from cslint.app import STDIN, FixMode, ReportDetail, run
    from cslint.engine import CacheOptions
    from cslint.progress import terminal_progress

    if write_baseline is not None and (fix or diff):
        raise click.UsageError("--write-baseline records the findings as they are; run "
                               "--fix or --diff on their own")
    if statistics and output_format not in STATISTICS_FORMATS:
        raise click.UsageError(f"--statistics counts findings per code, which --format "
                               f"{output_format} cannot show; use --format text or json")
    if show_source is None:
        show_source = output_format == "text" and not quiet and output_file is None \
            and sys.stdout.isatty()
    paths = paths or (".",)
    try:
        config = resolve_config(paths, config_path, no_config)
    except ConfigError as err:
        _error(str(err))
        sys.exit(EXIT_ERROR)
    select_codes = _split_codes(select)
    config = config.with_overrides(
        select=select_codes or None,
        ignore=config.ignore + _split_codes(ignore),
        extend_select=config.extend_select + _split_codes(extend_select),
        cstorch_version=cstorch_version,
        force_exclude=force_exclude or None,
    )
    if write_baseline is not None:
        _write_baseline(Path(write_baseline), paths, config, stdin_filename, quiet)
    baseline = None
    baseline_file = Path(baseline_path) if baseline_path is not None else config.baseline
    if baseline_file is not None:
        from cslint.baseline import BaselineError, load_baseline

        try:
            baseline = load_baseline(baseline_file)
        except BaselineError as err:
            _error(str(err))
            sys.exit(EXIT_ERROR)
    stdin = None
    if STDIN in paths:
        stdin = (stdin_filename or "<stdin>", sys.stdin.buffer.read())
    fix_mode = FixMode.DIFF if diff else FixMode.FIX if fix else FixMode.CHECK
    sarif = output_format == "sarif"  # the rules and the fixes as edits are SARIF's
    progress = terminal_progress(quiet)
    try:
        result = run(paths, config, stdin=stdin, fix_mode=fix_mode, unsafe_fixes=unsafe_fixes,
                     detail=ReportDetail(rules=sarif, fix_edits=sarif,
                                         fingerprints=output_format in ("sarif", "gitlab")),
                     baseline=baseline,
                     cache=None if no_cache else CacheOptions(
                         Path(cache_dir) if cache_dir is not None else config.cache_dir,
                         read_reported=show_source or sarif),
                     progress=progress, jobs=jobs)
    finally:
        if progress is not None:
            progress.close()
    report = result.report

    for message in result.fix_messages:
        click.echo(f"cslint: {message}", err=True)
    if result.diff is not None:
        for error in report.errors:
            _error(error)
        _write_output(result.diff.patch, output_file)
        if not quiet:
            click.echo(f"Would fix {result.diff.fixes} problem(s) in {result.diff.files} "
                       f"file(s).", err=True)
        sys.exit(EXIT_ERROR if report.errors else EXIT_FINDINGS if result.diff.patch
                 else EXIT_CLEAN)
    if result.stdin_output is not None:
        # The fixed code takes stdout's place: no report there.
        sys.stdout.buffer.write(result.stdin_output)
        sys.stdout.flush()
    for error in report.errors:
        _error(error)
    for notice in result.notices:
        click.echo(f"cslint: {notice}", err=True)
    if result.stdin_output is None or output_file is not None:
        _write_output(formatter(output_format)(report, statistics=statistics, quiet=quiet,
                                                 show_source=show_source), output_file)
    if report.errors:
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDINGS if report.findings and not exit_zero else EXIT_CLEAN)


def _write_baseline(path: Path, paths: tuple[str, ...], config: Config,
                    stdin_filename: str | None, quiet: bool) -> None:
    """--write-baseline: record every current finding (whatever baseline is in use) and
    exit: 0, or 2 when an input could not be checked (its findings are then missing)."""
    from cslint.app import STDIN, ReportDetail, run
    from cslint.baseline import BaselineError, write_baseline

    stdin = (stdin_filename or "<stdin>", sys.stdin.buffer.read()) if STDIN in paths else None
    report = run(paths, config, stdin=stdin, detail=ReportDetail(fingerprints=True)).report
    for error in report.errors:
        _error(error)
    try:
        entries = write_baseline(path, report.findings, report.project_paths)
    except BaselineError as err:
        _error(str(err))
        sys.exit(EXIT_ERROR)
    if not quiet:
        click.echo(f"cslint: wrote {path}: {len(report.findings)} finding(s) in "
                   f"{entries} entr{'y' if entries == 1 else 'ies'}.", err=True)
    sys.exit(EXIT_ERROR if report.errors else EXIT_CLEAN)


@main.command("port")
@click.argument("paths", nargs=-1, required=True, type=str)
@click.option("--diff", "show_diff", is_flag=True, help="Print the port as a unified diff "
              "(the default); write nothing.")
@click.option("--write", is_flag=True, help="Rewrite the files with their port.")
@click.option("--verify", is_flag=True, help="Run each class and its port side by side "
              "(needs torch) and report whether the numbers are equal and strict mode clean.")
@click.option("--runtime-reference", is_flag=True, help="Import `cslint.cstorch as cstorch` "
              "instead of `cerebras.pytorch`.")
@click.option("--cstorch-version", callback=_version_option,
              help="Target cstorch release (before 2.5: state_names_to_sparsify() is added).")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text",
              help="text: the diff, then one line per class on stderr; json: an array of "
                   "the classes on stdout (no diff).")
def port(paths, show_diff, write, verify, runtime_reference, cstorch_version, output_format):
    """Rewrite the torch-style optimizers of PATHS into cstorch ones (a diff by default).

    Exit 0 when every optimizer class is fully ported (and, with --verify, its numbers
    equal and strict mode clean), 1 otherwise, 2 on input that cannot be read."""
    from cslint.port.command import render_json, run_port

    if show_diff and write:
        raise click.UsageError("--diff and --write exclude each other")
    try:
        config = resolve_config(paths, None, False)
    except ConfigError as err:
        _error(str(err))
        sys.exit(EXIT_ERROR)
    config = config.with_overrides(cstorch_version=cstorch_version)
    result = run_port(list(paths), config, write=write, verify=verify,
                      runtime_reference=runtime_reference)
    if output_format == "json":
        _write_output(render_json(result, verify), None)
    else:
        if not write:
            _write_output(result.diff, None)
        for entry in result.classes:
            click.echo(entry.as_text(verify), err=True)
        for ported in result.ported:
            for finding in ported.findings:
                where = finding.location
                click.echo(f"{finding.path}:{where.line}:{where.column}: {finding.code} "
                           f"{finding.message}", err=True)
    for problem in result.problems:
        _error(problem)
    if result.problems:
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_CLEAN if all(c.fully_ported(verify) for c in result.classes)
             else EXIT_FINDINGS)


@main.command("rules")
@click.option("--markdown", is_flag=True, help="Print the table as Markdown.")
def rules_command(markdown: bool):
    """List every rule: code, name, family, default state, fixable."""
    if markdown:
        click.echo(rules_markdown(), nl=False)
        return
    rows = [("code", "name", "family", "default", "fixable"), *rules_table()]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    runtime_only = [c for c in CODES.values() if c.runtime_only]
    if runtime_only:
        click.echo("\nruntime-only (raised by cslint.cstorch, no lint rule): "
                   + ", ".join(f"{c.code} {c.name}" for c in runtime_only))


@main.command()
@click.argument("code")
def explain(code: str):
    """Print the documentation page of a rule (e.g. `cslint explain CS101`)."""
    from cslint.rule_pages import read_page

    code = code.upper()
    if code not in CODES:
        _error(f"unknown rule code `{code}`; `cslint rules` lists them")
        sys.exit(EXIT_ERROR)
    page = read_page(code)
    if page is None:
        _error(f"no documentation page for {code}")
        sys.exit(EXIT_ERROR)
    click.echo(page, nl=not page.endswith("\n"))


@main.command()
def server():
    """Run the language server for editors (LSP over stdio; needs `cslint[lsp]`)."""
    try:
        from cslint.server import serve
    except ModuleNotFoundError as error:
        if error.name is None or error.name.split(".")[0] not in ("pygls", "lsprotocol"):
            raise
        _error("`cslint server` needs pygls: pip install 'cslint[lsp]'")
        sys.exit(EXIT_ERROR)
    serve()
