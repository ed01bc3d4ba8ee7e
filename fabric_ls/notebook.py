"""Jupyter notebooks as one program: the code cells in order, IPython syntax masked, fixes written back.

Pure text in, text out (no files, no analysis). A notebook is read into a ``NotebookProgram``: the
code cells' sources joined in order, with magics (``%time``, a ``%%bash`` cell) and shell lines
(``!pip install``) replaced by lines of the same count that Python parses, so every line of the
program is one line of one cell. Positions map back to (cell, line in the cell); fixes, made on
the program, are written into the cell sources of the notebook's JSON text, and nothing else of it
changes (outputs, metadata, key order, indentation and escapes stay byte for byte).

Cells are numbered 1, 2, ... over all cells of the notebook, markdown ones included, as ruff does.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Optional, Sequence

from fabric_ls.model import Finding, Origin, Span, SyntaxProblem, TextEdit

NOTEBOOK_SUFFIX = ".ipynb"
# A line IPython rewrites before Python sees it: a line magic, a shell escape, a help query.
_IPYTHON_LINE = re.compile(r"^(?P<indent>[ \t]*)(?:%|!|\?)")
# `files = !ls`, `t = %timeit -o f()`: an assignment from IPython syntax.
_IPYTHON_ASSIGNMENT = re.compile(r"^(?P<indent>[ \t]*)[\w.]+(?:\s*,\s*[\w.]+)*\s*=\s*[%!]")
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_LITERAL = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")


class NotebookError(ValueError):
    """The text is not a notebook fabric-ls can read: says why, and where (0-based line, column)."""

    def __init__(self, message: str, line: int = 0, column: int = 0) -> None:
        super().__init__(message)
        self.line = line
        self.column = column

    def problem(self) -> SyntaxProblem:
        return SyntaxProblem(str(self), Span(self.line, self.column, self.line, self.column))


@dataclass(frozen=True)
class Cell:
    """One code cell: its number (1-based, over all cells), its own text, where it sits in the program."""

    number: int
    source: str
    first_line: int
    line_count: int


@dataclass(frozen=True)
class NotebookProgram:
    """The code cells as one Python program, and where each cell's lines are in it."""

    text: str
    cells: tuple[Cell, ...]

    def locate(self, line: int) -> Optional[tuple[Cell, int]]:
        """The cell holding program line ``line`` (0-based), and the line inside the cell."""
        for cell in self.cells:
            if cell.first_line <= line < cell.first_line + cell.line_count:
                return cell, line - cell.first_line
        if self.cells and line >= self.cells[-1].first_line:
            last = self.cells[-1]
            return last, max(0, min(line - last.first_line, last.line_count - 1))
        return None

    def cell(self, number: int) -> Optional[Cell]:
        return next((cell for cell in self.cells if cell.number == number), None)

    def to_cell_span(self, span: Span) -> Optional[tuple[int, Span]]:
        """A program span as (cell number, span inside that cell); None when it crosses cells."""
        start = self.locate(span.start_line)
        end = self.locate(span.end_line)
        if start is None or end is None or start[0] is not end[0]:
            return None
        return start[0].number, Span(start[1], span.start_col, end[1], span.end_col)

    def to_program_span(self, number: int, span: Span) -> Optional[Span]:
        """A span inside cell ``number`` as a span of the program."""
        cell = self.cell(number)
        if cell is None:
            return None
        return Span(
            cell.first_line + span.start_line, span.start_col, cell.first_line + span.end_line, span.end_col
        )


def mask_ipython(source: str) -> str:
    """The cell with IPython-only lines replaced by ``pass`` (same indentation), line for line.

    A cell magic (``%%bash``) makes the whole cell another language: every line becomes blank.
    """
    lines = source.splitlines(keepends=True)
    if source.lstrip().startswith("%%"):
        return "".join(_ending(line) for line in lines)
    masked = []
    for line in lines:
        match = _IPYTHON_LINE.match(line) or _IPYTHON_ASSIGNMENT.match(line)
        if match is not None:
            line = f"{match.group('indent')}pass{_ending(line)}"
        masked.append(line)
    return "".join(masked)


def _ending(line: str) -> str:
    return line[len(line.rstrip("\r\n")) :]


def program_from_cells(sources: Iterable[tuple[int, str]]) -> NotebookProgram:
    """The program of code cells given as (number, source), in order."""
    parts: list[str] = []
    cells: list[Cell] = []
    line = 0
    for number, source in sources:
        masked = mask_ipython(source)
        if masked and not masked.endswith(("\n", "\r")):
            masked += "\n"
        count = max(1, masked.count("\n") + masked.count("\r") - masked.count("\r\n"))
        if not masked:
            masked = "\n"
        cells.append(Cell(number, source, line, count))
        parts.append(masked)
        line += count
    return NotebookProgram("".join(parts), tuple(cells))


def _cell_text(source: object) -> str:
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(part, str) for part in source):
        return "".join(source)
    raise NotebookError("a cell's `source` is neither text nor a list of text")


def read_notebook(text: str) -> NotebookProgram:
    """The program of a notebook's JSON text; ``NotebookError`` when it is no notebook."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise NotebookError(
            f"not a valid notebook: {error.msg} (the file is not JSON)", error.lineno - 1, error.colno - 1
        ) from None
    if not isinstance(document, dict) or not isinstance(document.get("cells"), list):
        raise NotebookError("not a valid notebook: no `cells` list (fabric-ls reads nbformat 4)")
    language = _language(document)
    if language is not None and language != "python":
        raise NotebookError(f"not a Python notebook (its language is {language!r}); not checked")
    code = []
    for number, cell in enumerate(document["cells"], start=1):
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            code.append((number, _cell_text(cell.get("source", ""))))
    return program_from_cells(code)


def _language(document: dict) -> Optional[str]:
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        return None
    for key in ("language_info", "kernelspec"):
        section = metadata.get(key)
        name = (
            section.get("name" if key == "language_info" else "language")
            if isinstance(section, dict)
            else None
        )
        if isinstance(name, str):
            return name.lower()
    return None


def to_cells(findings: Sequence[Finding], path: str, program: NotebookProgram) -> list[Finding]:
    """The findings on the notebook with cell-relative positions and their ``cell``; a fix whose
    edits leave the finding's cell is dropped (it cannot be written into one cell)."""
    placed = []
    for finding in findings:
        if finding.path != path:
            placed.append(finding)
            continue
        where = program.to_cell_span(finding.span)
        if where is None:
            continue
        number, span = where
        fix = finding.fix
        if fix is not None:
            edits = [_edit_in_cell(edit, number, program) for edit in fix.edits]
            fix = replace(fix, edits=tuple(edits)) if all(e is not None for e in edits) else None  # type: ignore[arg-type]
        related = tuple(_origin_in_cell(origin, path, program) for origin in finding.related)
        via = _origin_in_cell(finding.via, path, program) if finding.via is not None else None
        message = cell_line_references(finding.message, program)
        placed.append(
            replace(finding, span=span, cell=number, fix=fix, related=related, via=via, message=message)
        )
    return placed


# The engine's own words for a place in the same file: "(Fabric at line 4)", "the call at line 9".
_LINE_REFERENCE = re.compile(r"(?P<lead>\bFabric at|\bcall at) line (?P<line>\d+)\b")


def cell_line_references(
    text: str, program: NotebookProgram, cell_name: Optional[Callable[[Cell], str]] = None
) -> str:
    """A message's references to program lines, as cell and line (``cell_name`` names the cell:
    ``cell 3`` by default)."""

    def in_cell(match: re.Match[str]) -> str:
        where = program.locate(int(match.group("line")) - 1)
        if where is None:
            return match.group(0)
        name = cell_name(where[0]) if cell_name is not None else f"cell {where[0].number}"
        return f"{match.group('lead')} {name}, line {where[1] + 1}"

    return _LINE_REFERENCE.sub(in_cell, text)


def _edit_in_cell(edit: TextEdit, number: int, program: NotebookProgram) -> Optional[TextEdit]:
    where = program.to_cell_span(edit.span)
    if where is None or where[0] != number:
        return None
    return TextEdit(where[1], edit.new_text)


def _origin_in_cell(origin: Origin, path: str, program: NotebookProgram) -> Origin:
    where = program.to_cell_span(origin.span) if origin.path == path else None
    if where is None:
        return origin
    return replace(origin, span=where[1], cell=where[0], note=cell_line_references(origin.note, program))


def problem_in_cell(problem: SyntaxProblem, program: NotebookProgram) -> SyntaxProblem:
    where = program.to_cell_span(problem.span)
    if where is None:
        return problem
    return replace(problem, span=where[1], cell=where[0])


def write_cell_sources(notebook_text: str, new_sources: dict[int, str]) -> str:
    """The notebook's JSON text with the ``source`` of each cell numbered in ``new_sources`` replaced.

    Only those values change: a list keeps its layout (the indentation of its items, the text of
    each unchanged line as it was written, escapes included); a string stays a string.
    """
    spans = _SourceSpans(notebook_text).find()
    result = notebook_text
    for number in sorted(new_sources, reverse=True):
        if number not in spans:
            raise NotebookError(f"cell {number} has no `source` to write")
        start, end, items = spans[number]
        encoded = _encode_source(notebook_text, start, end, items, new_sources[number])
        result = result[:start] + encoded + result[end:]
    return result


def apply_cell_edits(notebook_text: str, program: NotebookProgram, edits: dict[int, list[TextEdit]]) -> str:
    """Apply edits (positions inside their cell) to the cells' sources, and write them into the JSON."""
    from fabric_ls.fixes import apply_edits

    new_sources = {}
    for number, cell_edits in edits.items():
        cell = program.cell(number)
        if cell is not None and cell_edits:
            new_sources[number] = apply_edits(cell.source, cell_edits)
    return write_cell_sources(notebook_text, new_sources)


def _encode_source(text: str, start: int, end: int, items: list[tuple[int, int]], source: str) -> str:
    # A notebook written with ASCII escapes (`\u00e9`) gets them in new text too.
    ascii_only = text.isascii()
    if text[start] == '"':
        return json.dumps(source, ensure_ascii=ascii_only)
    written = {json.loads(text[a:b]): text[a:b] for a, b in items}
    lines = [
        written.get(line) or json.dumps(line, ensure_ascii=ascii_only) for line in source.splitlines(True)
    ]
    if not lines:
        return "[]"
    if items:
        before = text[start + 1 : items[0][0]]
        after = text[items[-1][1] : end - 1]
    else:
        line_start = text.rfind("\n", 0, start) + 1
        indent = len(text[line_start:start]) - len(text[line_start:start].lstrip())
        before, after = "\n" + " " * (indent + 1), "\n" + " " * indent
    return "[" + before + ("," + before).join(lines) + after + "]"


class _SourceSpans:
    """Where each cell's ``source`` value is in the JSON text: (start, end, item spans), by cell number."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.found: dict[int, tuple[int, int, list[tuple[int, int]]]] = {}

    def find(self) -> dict[int, tuple[int, int, list[tuple[int, int]]]]:
        self._value(self._skip(0), ())
        return self.found

    def _skip(self, index: int) -> int:
        return _WHITESPACE.match(self.text, index).end()  # type: ignore[union-attr]

    def _value(self, index: int, path: tuple) -> tuple[int, list[tuple[int, int]]]:
        """Scan the value at ``index``; its end, and the spans of its items if it is a list."""
        char = self.text[index]
        items: list[tuple[int, int]] = []
        if char == '"':
            end = json.decoder.scanstring(self.text, index + 1)[1]  # type: ignore[attr-defined]
        elif char in "[{":
            end = self._container(index, path, items)
        else:
            match = _LITERAL.match(self.text, index)
            if match is None:
                raise NotebookError("not a valid notebook: unexpected text in the JSON")
            end = match.end()
        if len(path) == 3 and path[0] == "cells" and path[2] == "source":
            self.found[path[1] + 1] = (index, end, items)
        return end, items

    def _container(self, index: int, path: tuple, items: list[tuple[int, int]]) -> int:
        closing = "]" if self.text[index] == "[" else "}"
        position = self._skip(index + 1)
        count = 0
        while self.text[position] != closing:
            if closing == "}":
                key, position = json.decoder.scanstring(self.text, position + 1)  # type: ignore[attr-defined]
                position = self._skip(self._skip(position) + 1)  # past the colon
                child = (*path, key)
            else:
                child = (*path, count)
            start = position
            position, _ = self._value(position, child)
            items.append((start, position))
            count += 1
            position = self._skip(position)
            if self.text[position] == ",":
                position = self._skip(position + 1)
        return position + 1


def fix_notebook(notebook_text: str, findings: Sequence[Finding]) -> str:
    """The notebook's JSON text with the fixes of ``findings`` (cell-relative edits) applied."""
    program = read_notebook(notebook_text)
    edits: dict[int, list[TextEdit]] = {}
    for finding in findings:
        if finding.fix is not None and finding.cell is not None:
            edits.setdefault(finding.cell, []).extend(finding.fix.edits)
    # An edit two findings share (one fix for two of them) is made once.
    unique = {cell: list(dict.fromkeys(cell_edits)) for cell, cell_edits in edits.items()}
    return apply_cell_edits(notebook_text, program, unique)
