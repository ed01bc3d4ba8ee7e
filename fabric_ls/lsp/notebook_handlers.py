"""The LSP features on notebook cells: sync (``notebookDocument/did*``), diagnostics per cell
(pushed, or pulled per cell URI), hover and code actions. Each feature on a cell runs the
document's own handler on the notebook's program (fabric_ls.lsp.notebooks maps the positions)."""

from __future__ import annotations

from typing import Any, Optional
from urllib.parse import unquote

from lsprotocol import types
from lsprotocol.converters import get_converter

from fabric_ls.lsp import convert
from fabric_ls.lsp.notebooks import (
    OpenNotebook,
    cell_edits,
    diagnostics_by_cell,
    read_open_notebook,
    to_cell_range,
    to_program_range,
)
from fabric_ls.lsp.server import FabricLanguageServer


def _cell_document(ls: FabricLanguageServer, cell_uri: str) -> Optional[Any]:
    """pygls keeps a cell's text under its unquoted URI (VS Code's cell URIs carry %-escapes)."""
    return ls.workspace.text_documents.get(unquote(cell_uri))


def _refresh_notebook(ls: FabricLanguageServer, notebook_uri: str) -> None:
    notebook = ls.workspace.get_notebook_document(notebook_uri=notebook_uri)
    if notebook is None:
        return
    texts = {}
    for cell in notebook.cells:
        document = _cell_document(ls, cell.document)
        if document is not None and document.language_id in ("python", ""):
            texts[cell.document] = document.source
    opened = read_open_notebook(notebook, texts)
    ls.notebooks.put(opened)
    if ls.track(notebook_uri, notebook.version, opened.program.text, "python") is not None:
        ls.schedule(notebook_uri)
        if ls.pull_mode:
            # An edit to one cell can change what every other cell shows: the client pulls them again
            # (each pull waits for the notebook's new analysis).
            ls.request_refreshes(diagnostics=True)


def on_notebook_did_open(ls: FabricLanguageServer, params: types.DidOpenNotebookDocumentParams) -> None:
    _refresh_notebook(ls, params.notebook_document.uri)


def on_notebook_did_change(ls: FabricLanguageServer, params: types.DidChangeNotebookDocumentParams) -> None:
    # pygls has applied the change to the workspace (cells, their order and their texts).
    _refresh_notebook(ls, params.notebook_document.uri)


def on_notebook_did_close(ls: FabricLanguageServer, params: types.DidCloseNotebookDocumentParams) -> None:
    uri = params.notebook_document.uri
    closed = ls.notebooks.remove(uri)
    ls.untrack(uri)
    if closed is not None and not ls.pull_mode:
        for cell_uri in closed.cell_uris.values():
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell_uri, diagnostics=[]))


def publish_cells(
    ls: FabricLanguageServer, notebook: OpenNotebook, path: str, diagnostics: list[types.Diagnostic]
) -> None:
    """(Push mode.) The notebook's diagnostics, each under its cell's URI."""
    for cell_uri, found in diagnostics_by_cell(notebook, diagnostics, path).items():
        version = _cell_document(ls, cell_uri)
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=cell_uri, version=getattr(version, "version", None), diagnostics=found
            )
        )


async def cell_diagnostic(
    ls: FabricLanguageServer, params: types.DocumentDiagnosticParams, notebook: OpenNotebook
) -> types.DocumentDiagnosticReport:
    """``textDocument/diagnostic`` for one cell: the notebook's analysis, this cell's part."""
    await ls.wait_for_config()
    outcome = await ls.outcome_for(notebook.uri)
    if outcome is None:
        return types.RelatedFullDocumentDiagnosticReport(items=[])
    _, diagnostics, _ = ls.view(notebook.uri)
    found = diagnostics_by_cell(notebook, diagnostics, outcome.document.path).get(
        params.text_document.uri, []
    )
    result_id = convert.diagnostics_result_id(found, get_converter())
    ls.served[params.text_document.uri] = result_id  # this client pulls cells: no more pushes for them
    if params.previous_result_id == result_id:
        return types.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
    return types.RelatedFullDocumentDiagnosticReport(items=found, result_id=result_id)


async def cell_hover(
    ls: FabricLanguageServer, params: types.HoverParams, hover: Any
) -> Optional[types.Hover]:
    """Hover on a cell: ``hover`` (the document handler) on the notebook's program."""
    place = ls.notebooks.place(params.text_document.uri)
    if place is None:
        return None
    notebook, cell = place
    position = types.Position(
        line=params.position.line + cell.first_line, character=params.position.character
    )
    found = await hover(ls, types.HoverParams(types.TextDocumentIdentifier(notebook.uri), position))
    if found is not None and found.range is not None:
        found.range = to_cell_range(found.range, cell)
    return found


async def cell_code_actions(
    ls: FabricLanguageServer, params: types.CodeActionParams, code_actions: Any
) -> Optional[list[types.CodeAction]]:
    """Code actions on a cell: ``code_actions`` (the document handler) on the notebook's program,
    their edits moved into the cells they change (an action whose edits leave the cells is dropped)."""
    place = ls.notebooks.place(params.text_document.uri)
    if place is None:
        return []
    notebook, cell = place
    originals = {}
    shifted = []
    for diagnostic in params.context.diagnostics:
        moved = types.Diagnostic(
            range=to_program_range(diagnostic.range, cell),
            message=diagnostic.message,
            severity=diagnostic.severity,
            code=diagnostic.code,
            source=diagnostic.source,
        )
        originals[id(moved)] = diagnostic
        shifted.append(moved)
    context = types.CodeActionContext(diagnostics=shifted, only=params.context.only)
    program_params = types.CodeActionParams(
        types.TextDocumentIdentifier(notebook.uri), to_program_range(params.range, cell), context
    )
    actions = await code_actions(ls, program_params) or []
    in_cells = []
    for action in actions:
        edit = _edit_in_cells(ls, notebook, action.edit)
        if edit is None:
            continue
        action.edit = edit
        action.diagnostics = [originals.get(id(d), d) for d in action.diagnostics or ()] or None
        in_cells.append(action)
    return in_cells


def _edit_in_cells(
    ls: FabricLanguageServer, notebook: OpenNotebook, edit: Optional[types.WorkspaceEdit]
) -> Optional[types.WorkspaceEdit]:
    if edit is None:
        return None
    program_edits: list[types.TextEdit] = []
    for change in edit.document_changes or ():
        program_edits.extend(e for e in change.edits if isinstance(e, types.TextEdit))  # type: ignore[union-attr]
    for edits in (edit.changes or {}).values():
        program_edits.extend(edits)
    by_cell: dict[str, list[types.TextEdit]] = {}
    for program_edit in program_edits:
        where = notebook.program.locate(program_edit.range.start.line)
        moved = cell_edits([program_edit], where[0]) if where is not None else None
        if where is None or moved is None:
            return None
        by_cell.setdefault(notebook.cell_uris[where[0].number], []).extend(moved)
    if ls.client_can("workspace.workspace_edit.document_changes"):
        changes = []
        for cell_uri, edits in by_cell.items():
            document = _cell_document(ls, cell_uri)
            identifier = types.OptionalVersionedTextDocumentIdentifier(
                uri=cell_uri, version=getattr(document, "version", None)
            )
            changes.append(types.TextDocumentEdit(text_document=identifier, edits=edits))
        return types.WorkspaceEdit(document_changes=changes)
    return types.WorkspaceEdit(changes=by_cell)
