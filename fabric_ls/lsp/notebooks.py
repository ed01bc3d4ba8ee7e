"""Notebooks in the server (LSP 3.17 notebook sync): the Python cells of an open notebook are
analysed as one document under the notebook's URI (its program, fabric_ls.notebook), and what the
client sees of it is cut back into the cells: diagnostics per cell URI, hover and code actions on a
cell mapped to the program's lines and back. Columns need no mapping: a cell line is a program line.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import partial
from typing import Optional, Sequence

from lsprotocol import types

from fabric_ls.lsp import convert
from fabric_ls.notebook import Cell, NotebookProgram, cell_line_references, program_from_cells

# Python cells of any notebook type (VS Code's Jupyter notebooks, JupyterLab's LSP extension, ...).
# The notebook is named ("*"): a cells-only selector does not parse in lsprotocol-based clients.
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[
        types.NotebookDocumentFilterWithNotebook(notebook="*", cells=[types.NotebookCellLanguage("python")])
    ],
    save=False,
)


@dataclass(frozen=True)
class OpenNotebook:
    """One version of an open notebook: its program and the URI of each cell in it."""

    uri: str
    version: int
    program: NotebookProgram
    cell_uris: dict[int, str]  # cell number -> cell URI

    def cell_of(self, cell_uri: str) -> Optional[Cell]:
        for number, uri in self.cell_uris.items():
            if uri == cell_uri:
                return self.program.cell(number)
        return None


def read_open_notebook(notebook: types.NotebookDocument, cell_texts: dict[str, str]) -> OpenNotebook:
    """The program of the notebook's Python code cells, in order (cell numbers count every cell)."""
    code: list[tuple[int, str]] = []
    uris: dict[int, str] = {}
    for number, cell in enumerate(notebook.cells, start=1):
        if cell.kind != types.NotebookCellKind.Code or cell.document not in cell_texts:
            continue
        code.append((number, cell_texts[cell.document]))
        uris[number] = cell.document
    return OpenNotebook(notebook.uri, notebook.version, program_from_cells(code), uris)


class NotebookViews:
    """The open notebooks, by notebook URI, and which notebook each cell belongs to."""

    def __init__(self) -> None:
        self.notebooks: dict[str, OpenNotebook] = {}
        self.cell_in: dict[str, str] = {}

    def put(self, notebook: OpenNotebook) -> None:
        self.remove(notebook.uri)
        self.notebooks[notebook.uri] = notebook
        for cell_uri in notebook.cell_uris.values():
            self.cell_in[cell_uri] = notebook.uri

    def remove(self, notebook_uri: str) -> Optional[OpenNotebook]:
        old = self.notebooks.pop(notebook_uri, None)
        for cell_uri in old.cell_uris.values() if old is not None else ():
            self.cell_in.pop(cell_uri, None)
        return old

    def place(self, cell_uri: str) -> Optional[tuple[OpenNotebook, Cell]]:
        """The notebook a cell URI belongs to, and the cell."""
        notebook = self.notebooks.get(self.cell_in.get(cell_uri, ""))
        cell = notebook.cell_of(cell_uri) if notebook is not None else None
        return (notebook, cell) if notebook is not None and cell is not None else None


def _shift_range(range_: types.Range, lines: int) -> types.Range:
    return types.Range(
        start=types.Position(line=range_.start.line + lines, character=range_.start.character),
        end=types.Position(line=range_.end.line + lines, character=range_.end.character),
    )


def to_program_range(range_: types.Range, cell: Cell) -> types.Range:
    return _shift_range(range_, cell.first_line)


def to_cell_range(range_: types.Range, cell: Cell) -> types.Range:
    """A program range inside ``cell`` as a range of the cell (clamped to the cell's last line)."""
    shifted = _shift_range(range_, -cell.first_line)
    if shifted.end.line >= cell.line_count:
        shifted.end = types.Position(line=cell.line_count, character=0)
    return shifted


def diagnostics_by_cell(
    notebook: OpenNotebook, diagnostics: Sequence[types.Diagnostic], path: str
) -> dict[str, list[types.Diagnostic]]:
    """The notebook's diagnostics under their cells' URIs (every cell present, so a fixed one is
    cleared); ``path`` is the notebook's file, which related information names."""
    notebook_uri_of_path = convert.path_to_uri(path)
    by_cell: dict[str, list[types.Diagnostic]] = {uri: [] for uri in notebook.cell_uris.values()}
    for diagnostic in diagnostics:
        where = notebook.program.locate(diagnostic.range.start.line)
        if where is None:
            continue
        cell = where[0]
        related = [
            _related_in_cell(notebook, info, notebook_uri_of_path)
            for info in diagnostic.related_information or ()
        ]
        in_cell = copy.copy(diagnostic)
        in_cell.range = to_cell_range(diagnostic.range, cell)
        in_cell.related_information = related or None
        # The client syncs Python cells only: their numbers are not the notebook's, so say where instead.
        in_cell.message = cell_line_references(
            diagnostic.message, notebook.program, partial(_relative_name, here=cell)
        )
        in_cell.data = None  # the fix data holds program positions; code actions read the analysis
        by_cell[notebook.cell_uris[cell.number]].append(in_cell)
    return by_cell


def _relative_name(other: Cell, here: Cell) -> str:
    if other.number == here.number:
        return "this cell"
    return "an earlier cell" if other.number < here.number else "a later cell"


def _related_in_cell(
    notebook: OpenNotebook, info: types.DiagnosticRelatedInformation, notebook_uri_of_path: str
) -> types.DiagnosticRelatedInformation:
    if info.location.uri != notebook_uri_of_path:
        return info
    where = notebook.program.locate(info.location.range.start.line)
    if where is None:
        return info
    location = types.Location(
        uri=notebook.cell_uris[where[0].number], range=to_cell_range(info.location.range, where[0])
    )
    return types.DiagnosticRelatedInformation(location=location, message=info.message)


def cell_edits(edits: Sequence[types.TextEdit], cell: Cell) -> Optional[list[types.TextEdit]]:
    """Program edits as edits of ``cell``; None when one of them lies outside the cell."""
    moved = []
    for edit in edits:
        start = edit.range.start.line - cell.first_line
        end = edit.range.end.line - cell.first_line
        if start < 0 or end > cell.line_count or (end == cell.line_count and edit.range.end.character):
            return None
        moved.append(types.TextEdit(range=_shift_range(edit.range, -cell.first_line), new_text=edit.new_text))
    return moved
