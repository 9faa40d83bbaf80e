"""`cslint server`: a Language Server (LSP over stdio) for editors.

It lints the text in the editor, not the file on disk: each document goes through
`cslint.app.run` as code read from stdin, named by its path, so `[tool.cslint]`, the
project's other files and per-file-ignores apply as they do to `cslint check`.
pygls comes with the `cslint[lsp]` extra; only `cslint server` imports this module.
"""

from __future__ import annotations

import asyncio
import io
import re
import tokenize
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import unquote

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from cslint import __version__
from cslint.app import STDIN, FixMode, ReportDetail, RunResult, run
from cslint.config import Config, ConfigError, find_config_file, load_config_file
from cslint.diagnostics import Finding, Location, Report, Severity
from cslint.discovery import ExcludeMatcher
from cslint.rule_pages import pages_directory, read_page

SOURCE = "cslint"
FIX_ALL = types.CodeActionKind.SourceFixAll + ".cslint"  # source.fixAll.cslint
# Typing pauses shorter than this lint once, at the end.
CHANGE_DELAY_S = 0.3

_SEVERITIES = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
}
_NOQA = re.compile(r"#\s*noqa:\s*[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*", re.IGNORECASE)


def rule_page_uri(code: str) -> str:
    """The rule's page as a file URI: the page shipped with this cslint, so it matches the
    rules that ran (and works offline)."""
    return (pages_directory() / f"{code}.md").resolve().as_uri()


def config_for(path: Path) -> Config:
    """The `[tool.cslint]` of the nearest pyproject.toml, read on every lint so edits to
    it apply at once."""
    found = find_config_file(path.parent)
    return load_config_file(found) if found else Config()


def lint_document(path: Path, text: str, *, fix_mode: FixMode = FixMode.CHECK,
                  fix_edits: bool = False) -> RunResult | None:
    """`text` linted as the file at `path` (None: `exclude` leaves the file out)."""
    config = config_for(path)
    if ExcludeMatcher(config.exclude, config.base_dir).excludes(path):
        return None
    return run([STDIN], config, stdin=(str(path), encode(text)), fix_mode=fix_mode,
               detail=ReportDetail(fix_edits=fix_edits))


def encode(text: str) -> bytes:
    """The editor's text as the bytes the file would hold: in its declared encoding."""
    raw = text.encode("utf-8")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        return text.encode(encoding)
    except (SyntaxError, LookupError, UnicodeEncodeError):
        return raw  # the engine reports the problem


class CslintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("cslint", __version__)
        # Linting runs in one thread: the editor stays responsive, and runs do not overlap
        # (the engine pauses and tunes the garbage collector, a process-wide setting).
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cslint")
        self.pending: dict[str, asyncio.Task] = {}
        # The last report published for each document, for hovers.
        self.reports: dict[str, Report] = {}

    def schedule(self, uri: str, delay: float = 0.0) -> None:
        """Lint `uri` after `delay`, replacing a lint not yet done."""
        previous = self.pending.pop(uri, None)
        if previous is not None:
            previous.cancel()
        self.pending[uri] = asyncio.get_running_loop().create_task(self._lint_later(uri, delay))

    def forget(self, uri: str) -> None:
        task = self.pending.pop(uri, None)
        if task is not None:
            task.cancel()
        self.reports.pop(uri, None)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    async def _lint_later(self, uri: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        # pygls keys open documents by the unquoted URI; the client's spelling is kept.
        document = self.workspace.text_documents.get(unquote(uri))
        if document is None or not _is_python(document):
            return
        version, text = document.version, document.source
        result = await self.in_worker(lint_document, Path(document.path), text)
        if result is None:
            diagnostics = []
            self.reports.pop(uri, None)
        else:
            self.reports[uri] = result.report
            diagnostics = self.diagnostics(result.report)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=document.uri, diagnostics=diagnostics,
                                           version=version))
        if self.pending.get(uri) is asyncio.current_task():
            del self.pending[uri]

    async def in_worker(self, function, *args, **kwargs):
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self.executor, lambda: function(*args, **kwargs))
        except ConfigError as error:
            self.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Error, message=f"cslint: {error}"))
            return None

    def position(self, lines: Sequence[str], line: int, column: int) -> types.Position:
        """cslint's 1-based line and character column, as an LSP position in the client's
        units (UTF-16 unless negotiated otherwise)."""
        return self.workspace.position_codec.position_to_client_units(
            lines, types.Position(line=line - 1, character=column - 1))

    def range(self, lines: Sequence[str], location: Location) -> types.Range:
        return types.Range(start=self.position(lines, location.line, location.column),
                           end=self.position(lines, location.end_line, location.end_column))

    def diagnostic(self, finding: Finding, lines: Sequence[str]) -> types.Diagnostic:
        return types.Diagnostic(
            range=self.range(lines, finding.location),
            message=finding.message,
            severity=_SEVERITIES[finding.severity],
            code=finding.code,
            code_description=types.CodeDescription(href=rule_page_uri(finding.code)),
            source=SOURCE,
        )

    def diagnostics(self, report: Report) -> list[types.Diagnostic]:
        result = []
        for finding in report.findings:
            result.append(self.diagnostic(finding, report.source_lines[finding.path]))
        for error in report.errors:  # a syntax error: the file could not be checked
            lines = report.source_lines.get(error.path, ())
            start = self.position(lines, error.line or 1, error.column or 1)
            result.append(types.Diagnostic(range=types.Range(start=start, end=start),
                                           message=error.problem,
                                           severity=types.DiagnosticSeverity.Error,
                                           source=SOURCE))
        return result


def _is_python(document: TextDocument) -> bool:
    return document.language_id == "python" or document.uri.endswith((".py", ".pyi"))


def _lines(text: str) -> list[str]:
    # Python's (and LSP's) line ends only; str.splitlines also splits on \f and others.
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z", text) or [""]


server = CslintServer()


@server.feature(types.INITIALIZED)
def initialized(ls: CslintServer, params: types.InitializedParams) -> None:
    # Ask to hear of pyproject.toml changes made outside the editor too (git checkout, ...).
    watched = ls.client_capabilities.workspace and \
        ls.client_capabilities.workspace.did_change_watched_files
    if watched and watched.dynamic_registration:
        ls.client_register_capability(types.RegistrationParams(registrations=[
            types.Registration(
                id="cslint-pyproject", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=[
                    types.FileSystemWatcher(glob_pattern="**/pyproject.toml")]))]))


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: CslintServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: CslintServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri, CHANGE_DELAY_S)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: CslintServer, params: types.DidSaveTextDocumentParams) -> None:
    saved = params.text_document.uri
    ls.schedule(saved)
    # Other open files read the saved one from disk (its classes, its imports), and a
    # saved pyproject.toml may change the configuration: lint them again.
    for document in ls.workspace.text_documents.values():
        if document.uri != saved:
            ls.schedule(document.uri)


@server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def did_change_watched_files(ls: CslintServer,
                             params: types.DidChangeWatchedFilesParams) -> None:
    if any(change.uri.endswith("pyproject.toml") for change in params.changes):
        for document in ls.workspace.text_documents.values():
            ls.schedule(document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: CslintServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.forget(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(ls: CslintServer, params: types.HoverParams) -> types.Hover | None:
    report = ls.reports.get(params.text_document.uri)
    if report is None:
        return None
    pages = []
    for finding in report.findings:
        where = ls.range(report.source_lines[finding.path], finding.location)
        if _contains(where, params.position) and finding.code not in pages:
            pages.append(finding.code)
    texts = [page for page in map(read_page, pages) if page is not None]
    if not texts:
        return None
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown,
                                                    value="\n---\n\n".join(texts)))


@server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
    code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL]))
async def code_action(ls: CslintServer, params: types.CodeActionParams
                      ) -> list[types.CodeAction] | None:
    document = ls.workspace.get_text_document(params.text_document.uri)
    if not _is_python(document):
        return None
    path, text, version = Path(document.path), document.source, document.version
    wanted = params.context.only

    def asked(kind: str) -> bool:
        return not wanted or any(kind == only or kind.startswith(only + ".") for only in wanted)

    actions: list[types.CodeAction] = []
    identifier = types.OptionalVersionedTextDocumentIdentifier(uri=document.uri, version=version)
    lines = _lines(text)
    if asked(types.CodeActionKind.QuickFix):
        result = await ls.in_worker(lint_document, path, text, fix_edits=True)
        report = result.report if result is not None else None
        for finding in report.findings if report is not None else ():
            where = ls.range(lines, finding.location)
            if not _overlaps(where, params.range):
                continue
            diagnostic = ls.diagnostic(finding, lines)
            edits = report.fix_edits.get(finding)
            if edits:
                title = f"Fix {finding.code}: {finding.fix.description}"
                actions.append(types.CodeAction(
                    title=title if finding.fix.safe else f"{title} (unsafe)",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    is_preferred=finding.fix.safe,
                    edit=_edit(identifier, [
                        types.TextEdit(range=ls.range(lines, edit.location), new_text=edit.text)
                        for edit in edits])))
            noqa = _noqa_edit(lines, finding, ls)
            if noqa is not None:
                actions.append(types.CodeAction(
                    title=f"Suppress {finding.code} on this line (# noqa)",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    edit=_edit(identifier, [noqa])))
    if asked(FIX_ALL):
        fixed = await ls.in_worker(lint_document, path, text, fix_mode=FixMode.FIX)
        if fixed is not None and fixed.report.fixed and fixed.stdin_output is not None:
            new_text = fixed.stdin_output.decode(_encoding(fixed.stdin_output))
            if new_text != text:
                end = ls.position(lines, len(lines), len(lines[-1]) + 1)
                if lines[-1].endswith(("\n", "\r")):
                    end = types.Position(line=len(lines), character=0)
                actions.append(types.CodeAction(
                    title="Fix all safely fixable cslint problems", kind=FIX_ALL,
                    edit=_edit(identifier, [types.TextEdit(
                        range=types.Range(start=types.Position(line=0, character=0), end=end),
                        new_text=new_text)])))
    return actions


def _encoding(raw: bytes) -> str:
    try:
        return tokenize.detect_encoding(io.BytesIO(raw).readline)[0]
    except SyntaxError:
        return "utf-8"


def _edit(document: types.OptionalVersionedTextDocumentIdentifier,
          edits: list[types.TextEdit]) -> types.WorkspaceEdit:
    return types.WorkspaceEdit(
        document_changes=[types.TextDocumentEdit(text_document=document, edits=edits)])


def _noqa_edit(lines: Sequence[str], finding: Finding, ls: CslintServer
               ) -> types.TextEdit | None:
    """`# noqa: CSxxx` at the end of the finding's first line (the line `# noqa` is read
    on), or the code added to the `# noqa:` already there. None where the line ends inside
    a string, which a comment cannot follow."""
    number = finding.location.line
    if number > len(lines):
        return None
    line = lines[number - 1]
    body = line.rstrip("\r\n")
    comment = _line_comment(lines, number)
    if comment is None:
        return None
    if comment >= 0:
        existing = _NOQA.search(body, comment)
        if existing is not None:
            at = existing.end()
            insertion = ls.position(lines, number, at + 1)
            return types.TextEdit(range=types.Range(start=insertion, end=insertion),
                                  new_text=f", {finding.code}")
    at = len(body.rstrip())
    return types.TextEdit(range=types.Range(start=ls.position(lines, number, at + 1),
                                            end=ls.position(lines, number, len(body) + 1)),
                          new_text=f"  # noqa: {finding.code}")


def _line_comment(lines: Sequence[str], number: int) -> int | None:
    """Where line `number`'s comment starts (-1: it has none); None when a comment cannot
    end the line: it ends inside a string or with a backslash, or the file does not
    tokenize."""
    if lines[number - 1].rstrip().endswith("\\"):
        return None
    comment = -1
    try:
        for token in tokenize.generate_tokens(io.StringIO("".join(lines)).readline):
            if token.start[0] > number:
                break
            if token.start[0] <= number < token.end[0]:
                return None  # a string running past the line's end
            if token.type == tokenize.COMMENT and token.start[0] == number:
                comment = token.start[1]
    except (tokenize.TokenError, SyntaxError):
        return None
    return comment


def _contains(where: types.Range, position: types.Position) -> bool:
    start, end = (where.start.line, where.start.character), (where.end.line, where.end.character)
    return start <= (position.line, position.character) <= end


def _overlaps(a: types.Range, b: types.Range) -> bool:
    return _contains(a, b.start) or _contains(a, b.end) or _contains(b, a.start)


def serve() -> None:
    server.start_io()
