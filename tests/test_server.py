"""`cslint server`, driven end to end by a real LSP client (pytest-lsp)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

try:
    import pytest_lsp
    from lsprotocol import types
    from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
except ImportError:  # a laptop without the lsp extras; CI must have them
    if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
        raise
    pytest.skip("needs pytest-lsp and pygls (pip install -e '.[test]')",
                allow_module_level=True)

VIOLATING = """\
import torch

import cerebras.pytorch as cstorch


def build(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)
"""
FIXED = VIOLATING.replace("torch.optim.SGD", "cstorch.optim.SGD")
# CS104, whose fix is safe: `torch.full_like` becomes `cstorch.full_like`.
SAFELY_FIXABLE = """\
import torch

import cerebras.pytorch as cstorch


class Adagrad(cstorch.optim.Optimizer):
    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["sum"] = torch.full_like(p, 0.1)
"""
# A non-BMP character before the finding: LSP counts it as 2 UTF-16 units.
WIDE = VIOLATING.replace("    return torch", "    x = '\N{GRINNING FACE}'; return torch")


@pytest_lsp.fixture(config=ClientServerConfig(
    server_command=[sys.executable, "-m", "cslint", "server"]), scope="function")
async def client(lsp_client: LanguageClient, tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("[tool.cslint]\n", encoding="utf-8")

    lsp_client.registered = []  # the methods the server registered for

    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register_capability(params: types.RegistrationParams) -> None:
        # As VS Code does: the server asks to watch pyproject.toml.
        lsp_client.registered.extend(registration.method for registration in params.registrations)

    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=tmp_path.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=tmp_path.as_uri(), name="project")]))
    yield
    await lsp_client.shutdown_session()


async def _open(client: LanguageClient, path: Path, text: str, on_disk: str = "") -> str:
    # The text is the editor's; the file on disk holds `on_disk` (empty: unlike the editor).
    path.write_text(on_disk, encoding="utf-8")
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return uri


async def _published(client: LanguageClient, uri: str) -> None:
    """Until `uri` has diagnostics."""
    while not client.diagnostics.get(uri):
        await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)


def _apply(text: str, edits: list[types.TextEdit]) -> str:
    lines = text.splitlines(keepends=True)

    def offset(position: types.Position) -> int:
        return sum(len(line) for line in lines[:position.line]) + position.character

    for edit in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


@pytest.mark.asyncio
async def test_diagnostics_follow_the_edits_and_the_fix_applies(client: LanguageClient,
                                                                tmp_path: Path):
    uri = await _open(client, tmp_path / "train.py", VIOLATING)
    [diagnostic] = client.diagnostics[uri]
    assert diagnostic.code == "CS401"
    assert diagnostic.source == "cslint"
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    # cslint's 7:12 (1-based) is LSP's 6:11 (0-based), to the end of the call.
    assert diagnostic.range == types.Range(start=types.Position(line=6, character=11),
                                           end=types.Position(line=6, character=54))
    href = diagnostic.code_description.href
    assert href.startswith("file:///") and href.endswith("/CS401.md")
    assert Path(unquote(urlparse(href).path)).is_file()

    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=diagnostic.range,
        context=types.CodeActionContext(diagnostics=[diagnostic])))
    [fix] = [a for a in actions if a.title.startswith("Fix CS401")]
    assert fix.kind == types.CodeActionKind.QuickFix and fix.title.endswith("(unsafe)")
    [change] = fix.edit.document_changes
    assert _apply(VIOLATING, change.edits) == FIXED
    [noqa] = [a for a in actions if "noqa" in a.title]
    [change] = noqa.edit.document_changes
    assert _apply(VIOLATING, change.edits) == VIOLATING.replace(
        "lr=0.1)\n", "lr=0.1)  # noqa: CS401\n")
    # An unsafe fix is not part of "fix all".
    assert not [a for a in actions if a.kind == "source.fixAll.cslint"]

    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        [types.TextDocumentContentChangeWholeDocument(text=FIXED)]))
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert not client.diagnostics[uri]


@pytest.mark.asyncio
async def test_columns_are_utf16_and_hover_shows_the_rule_page(client: LanguageClient,
                                                               tmp_path: Path):
    uri = await _open(client, tmp_path / "wide.py", WIDE)
    [diagnostic] = client.diagnostics[uri]
    # 4 spaces, `x = '`, the emoji as 2 units, `'; return ` → the call starts at 21.
    assert diagnostic.range.start == types.Position(line=6, character=21)
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=6, character=22)))
    assert hover.contents.value.startswith("# CS401 vanilla-torch-optimizer")
    outside = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=0, character=0)))
    assert outside is None


@pytest.mark.asyncio
async def test_workspace_configuration_applies(client: LanguageClient, tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.cslint]\nignore = ["CS401"]\n',
                                             encoding="utf-8")
    uri = await _open(client, tmp_path / "train.py", VIOLATING)
    assert not client.diagnostics[uri]

    assert types.WORKSPACE_DID_CHANGE_WATCHED_FILES in client.registered
    # pyproject.toml edited: the open files are linted again under the new configuration.
    (tmp_path / "pyproject.toml").write_text("[tool.cslint]\n", encoding="utf-8")
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
        types.FileEvent(uri=(tmp_path / "pyproject.toml").as_uri(),
                        type=types.FileChangeType.Changed)]))
    await asyncio.wait_for(_published(client, uri), timeout=10)
    assert [d.code for d in client.diagnostics[uri]] == ["CS401"]


@pytest.mark.asyncio
async def test_fix_all_applies_the_safe_fixes(client: LanguageClient, tmp_path: Path):
    uri = await _open(client, tmp_path / "adagrad.py", SAFELY_FIXABLE)
    # Also CS103 (no step()), which has no fix.
    [diagnostic] = [d for d in client.diagnostics[uri] if d.code == "CS104"]
    assert diagnostic.severity == types.DiagnosticSeverity.Information
    whole = types.Range(start=types.Position(line=0, character=0),
                        end=types.Position(line=11, character=0))
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=whole,
        context=types.CodeActionContext(diagnostics=[], only=["source.fixAll"])))
    [fix_all] = actions
    assert fix_all.kind == "source.fixAll.cslint"
    [change] = fix_all.edit.document_changes
    assert _apply(SAFELY_FIXABLE, change.edits) == SAFELY_FIXABLE.replace(
        "torch.full_like", "cstorch.full_like")


BASE = """\
import cerebras.pytorch as cstorch


class Base(cstorch.optim.Optimizer):
    def preinitialize(self):
        pass

    def step(self, closure=None):
        pass
"""
SUBCLASS = "from base import Base\n\n\nclass Mine(Base):\n    pass\n"


@pytest.mark.asyncio
async def test_saving_a_file_refreshes_the_open_files_that_use_it(client: LanguageClient,
                                                                  tmp_path: Path):
    base = await _open(client, tmp_path / "base.py", BASE, on_disk=BASE)
    mine = await _open(client, tmp_path / "train.py", SUBCLASS, on_disk=SUBCLASS)
    assert not client.diagnostics[mine]  # Mine inherits Base.step()

    without_step = BASE.replace("def step(self, closure=None)", "def other(self)")
    (tmp_path / "base.py").write_text(without_step, encoding="utf-8")
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=base, version=2),
        [types.TextDocumentContentChangeWholeDocument(text=without_step)]))
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=base)))
    await asyncio.wait_for(_published(client, mine), timeout=10)
    assert [d.code for d in client.diagnostics[mine]] == ["CS103"]
