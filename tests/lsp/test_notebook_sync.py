"""Notebooks over LSP 3.17 notebook sync: the Python cells are analysed together, in order, and each
diagnostic, hover and code action lands on the right cell."""

from __future__ import annotations

import pathlib

import pytest
import pytest_lsp
from conftest import (
    PROFILES,
    Session,
    edits_of,
    end_session,
    eventually,
    initialize_params,
    server_config,
    uri_of,
)
from lsprotocol import types
from pytest_lsp import LanguageClient

CELLS = [
    (
        types.NotebookCellKind.Code,
        "python",
        "%pip install -q lightning\nimport torch\nfrom lightning.fabric import Fabric\n",
    ),
    (types.NotebookCellKind.Markup, "markdown", "# Train in mixed precision\n"),
    (
        types.NotebookCellKind.Code,
        "python",
        'fabric = Fabric(accelerator="cuda", devices=1, precision="16-mixed")\n'
        "model = torch.nn.Linear(4, 2)\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model, optimizer = fabric.setup(model, optimizer)\n",
    ),
    (types.NotebookCellKind.Code, "python", "loss = model(torch.randn(2, 4)).sum()\nloss.backward()\n"),
]


@pytest_lsp.fixture(config=server_config(), params=PROFILES)
async def client(lsp_client: LanguageClient, request: pytest.FixtureRequest, tmp_path: pathlib.Path):
    """A client of either profile that also declares notebook sync (as VS Code does since 1.68)."""
    params = initialize_params(request.param, tmp_path)
    params.capabilities.notebook_document = types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities()
    )
    result = await lsp_client.initialize_session(params)
    lsp_client.session = Session(lsp_client, request.param, tmp_path, result)  # type: ignore[attr-defined]
    yield
    await end_session(lsp_client)


class Notebook:
    """A notebook the test client opens and edits, cell by cell."""

    def __init__(self, session: Session, path: pathlib.Path) -> None:
        self.session = session
        self.uri = uri_of(path)
        self.version = 1
        # As VS Code writes them: the fragment is %-escaped base64.
        self.cell_uris = [f"vscode-notebook-cell:{path}#W{index}sZmlsZQ%3D%3D" for index in range(len(CELLS))]
        self.cell_versions = [1] * len(CELLS)
        session.client.notebook_document_did_open(
            types.DidOpenNotebookDocumentParams(
                notebook_document=types.NotebookDocument(
                    uri=self.uri,
                    notebook_type="jupyter-notebook",
                    version=1,
                    cells=[types.NotebookCell(kind, uri) for (kind, _, _), uri in zip(CELLS, self.cell_uris)],
                ),
                cell_text_documents=[
                    types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)
                    for (_, language, text), uri in zip(CELLS, self.cell_uris)
                ],
            )
        )

    def edit_cell(self, index: int, text: str) -> None:
        self.version += 1
        self.cell_versions[index] += 1
        self.session.client.notebook_document_did_change(
            types.DidChangeNotebookDocumentParams(
                notebook_document=types.VersionedNotebookDocumentIdentifier(
                    version=self.version, uri=self.uri
                ),
                change=types.NotebookDocumentChangeEvent(
                    cells=types.NotebookDocumentCellChanges(
                        text_content=[
                            types.NotebookDocumentCellContentChanges(
                                document=types.VersionedTextDocumentIdentifier(
                                    uri=self.cell_uris[index], version=self.cell_versions[index]
                                ),
                                changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
                            )
                        ]
                    )
                ),
            )
        )

    async def diagnostics(self, index: int, until=None) -> list[types.Diagnostic]:  # type: ignore[no-untyped-def]
        """The cell's diagnostics: pulled for the cell URI, or the last ones pushed for it."""
        uri = self.cell_uris[index]

        async def fetch():  # type: ignore[no-untyped-def]
            if self.session.pulls:
                report = await self.session.client.text_document_diagnostic_async(
                    types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))
                )
                return list(report.items)
            published = self.session.published_for(uri)
            return list(published[-1].diagnostics) if published else None

        return await eventually(fetch, lambda found: found is not None and (until is None or until(found)))


async def test_the_finding_is_on_its_cell_and_line(session: Session, tmp_path: pathlib.Path) -> None:
    notebook = Notebook(session, tmp_path / "train.ipynb")

    [diagnostic] = await notebook.diagnostics(3, until=bool)

    assert diagnostic.code == "FAB016"
    assert diagnostic.range == types.Range(start=types.Position(1, 0), end=types.Position(1, 15))
    assert "(Fabric at an earlier cell, line 1)" in diagnostic.message
    assert session.initialize_result is not None
    sync = session.initialize_result.capabilities.notebook_document_sync
    assert sync is not None and sync.notebook_selector[0].cells[0].language == "python"  # type: ignore[union-attr]
    # The Fabric(...) this is about is in cell 3 (the third cell, index 2), first line.
    related = diagnostic.related_information or []
    assert any(
        info.location.uri == notebook.cell_uris[2] and info.location.range.start.line == 0 for info in related
    )
    assert await notebook.diagnostics(0) == []
    assert await notebook.diagnostics(2) == []


async def test_editing_one_cell_re_analyses_the_notebook(session: Session, tmp_path: pathlib.Path) -> None:
    notebook = Notebook(session, tmp_path / "train.ipynb")
    await notebook.diagnostics(3, until=bool)

    # The strategy changes in cell 3: the notebook gets FAB030 there (ddp cannot run in a notebook).
    script_like = 'devices=2, strategy="ddp")\nfabric.launch('
    notebook.edit_cell(2, CELLS[2][2].replace('devices=1, precision="16-mixed"', script_like))
    [interactive] = await notebook.diagnostics(2, until=bool)
    assert interactive.code == "FAB030"
    assert interactive.range.start.line == 0
    assert '`Fabric(strategy="ddp")` is not compatible with an interactive environment' in interactive.message
    # ... and the backward in cell 4 is fine under DDP in full precision.
    assert await notebook.diagnostics(3, until=lambda found: found == []) == []


async def test_hover_and_quick_fix_on_a_cell(session: Session, tmp_path: pathlib.Path) -> None:
    notebook = Notebook(session, tmp_path / "train.ipynb")
    [diagnostic] = await notebook.diagnostics(3, until=bool)

    hover = await session.hover(notebook.cell_uris[2], 0, 10)
    assert hover is not None and "SingleDeviceStrategy" in hover.contents.value  # type: ignore[union-attr]
    assert hover.range is not None and hover.range.start.line == 0

    actions = await session.code_actions(notebook.cell_uris[3], [diagnostic])
    [fix] = [action for action in actions if action.is_preferred]
    assert edits_of(fix, notebook.cell_uris[3]) == [
        types.TextEdit(
            range=types.Range(start=types.Position(1, 0), end=types.Position(1, 15)),
            new_text="fabric.backward(loss)",
        )
    ]
    assert list(fix.diagnostics or ()) == [diagnostic]


async def test_cells_are_pushed_to_a_client_that_does_not_pull_them(
    session: Session, tmp_path: pathlib.Path
) -> None:
    # VS Code pulls diagnostics for scripts but not for notebook cells: until a cell is pulled, the
    # notebook's diagnostics are published per cell, in either diagnostic mode.
    notebook = Notebook(session, tmp_path / "train.ipynb")

    async def pushed() -> list[types.Diagnostic]:
        published = session.published_for(notebook.cell_uris[3])
        return list(published[-1].diagnostics) if published else []

    [diagnostic] = await eventually(pushed, bool)
    assert diagnostic.code == "FAB016"
    assert list(session.published_for(notebook.cell_uris[0])[-1].diagnostics) == []
