"""Engine values to LSP values and back.

The engine counts columns in code points; the client counts them in the negotiated
position encoding (UTF-16 unless the client offers another). Every position the
client sends is clamped into the document, so a stale or hostile position never fails.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from lsprotocol import types
from pygls.uris import from_fs_path, to_fs_path

from fabric_ls.model import Finding, Fix, Span
from fabric_ls.suppression import is_suppressed, noqa_match

SOURCE = "fabric-ls"
FIX_ALL_KIND = "source.fixAll.fabric-ls"

Lines = Sequence[str]
# Returns the lines of another file (for related information), or None when unknown.
LinesProvider = Callable[[str], Optional[Lines]]

_SEVERITIES = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "info": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(source: str) -> list[str]:
    """Lines without their terminators, split the way both LSP and Python's tokenizer do."""
    return _LINE_BREAK.split(source)


def uri_to_path(uri: str) -> Optional[str]:
    return to_fs_path(uri)


def path_to_uri(path: str) -> str:
    return from_fs_path(path) or path


def _units(text: str, encoding: str) -> int:
    if encoding == types.PositionEncodingKind.Utf32:
        return len(text)
    if encoding == types.PositionEncodingKind.Utf8:
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def column_to_client(line: str, column: int, encoding: str) -> int:
    """A code-point column as client units, clamped to the line."""
    column = max(0, min(column, len(line)))
    if encoding == types.PositionEncodingKind.Utf32 or line.isascii():
        return column
    return _units(line[:column], encoding)


def column_from_client(line: str, units: int, encoding: str) -> int:
    """A client-unit column as a code-point column, clamped; a unit inside a character goes to its start."""
    if units <= 0:
        return 0
    if encoding == types.PositionEncodingKind.Utf32 or line.isascii():
        return min(units, len(line))
    seen = 0
    for index, char in enumerate(line):
        width = _units(char, encoding)
        if seen + width > units:
            return index
        seen += width
    return len(line)


def position_to_client(lines: Lines, line: int, column: int, encoding: str) -> types.Position:
    """An engine (line, column) as an LSP position; lines past the end clamp to the end of the document."""
    if not lines:
        return types.Position(line=0, character=0)
    if line < 0:
        return types.Position(line=0, character=0)
    if line >= len(lines):
        last = len(lines) - 1
        return types.Position(line=last, character=column_to_client(lines[last], len(lines[last]), encoding))
    return types.Position(line=line, character=column_to_client(lines[line], column, encoding))


def position_from_client(lines: Lines, position: types.Position, encoding: str) -> tuple[int, int]:
    """An LSP position as an engine (line, column), clamped into the document."""
    if not lines or position.line < 0:
        return (0, 0)
    if position.line >= len(lines):
        last = len(lines) - 1
        return (last, len(lines[last]))
    return (position.line, column_from_client(lines[position.line], position.character, encoding))


def span_to_range(span: Span, lines: Optional[Lines], encoding: str) -> types.Range:
    """An engine span as an LSP range; without the file's lines, columns pass through unchanged."""
    if lines is None:
        return types.Range(
            start=types.Position(line=max(0, span.start_line), character=max(0, span.start_col)),
            end=types.Position(line=max(0, span.end_line), character=max(0, span.end_col)),
        )
    return types.Range(
        start=position_to_client(lines, span.start_line, span.start_col, encoding),
        end=position_to_client(lines, span.end_line, span.end_col, encoding),
    )


def severity(level: str) -> Optional[types.DiagnosticSeverity]:
    """The LSP severity for a settings level; None for ``"off"`` (the diagnostic is dropped)."""
    return _SEVERITIES.get(level)


def fix_to_data(fix: Fix, lines: Lines, encoding: str, version: Optional[int]) -> dict[str, Any]:
    """The fix as JSON for ``Diagnostic.data``: edits in client units, and the version they apply to."""
    return {
        "fix": {
            "title": fix.title,
            "safe": fix.safe,
            "edits": [
                {
                    "range": _range_json(span_to_range(edit.span, lines, encoding)),
                    "newText": edit.new_text,
                }
                for edit in fix.edits
            ],
        },
        "version": version,
    }


def _range_json(range_: types.Range) -> dict[str, Any]:
    return {
        "start": {"line": range_.start.line, "character": range_.start.character},
        "end": {"line": range_.end.line, "character": range_.end.character},
    }


@dataclass(frozen=True)
class FixData:
    """A fix read back from ``Diagnostic.data``."""

    title: str
    safe: bool
    edits: tuple[types.TextEdit, ...]
    version: Optional[int]


def fix_from_data(data: Any) -> Optional[FixData]:
    """Read a fix from ``Diagnostic.data``; anything malformed (the client may send anything) gives None."""
    if not isinstance(data, Mapping) or not isinstance(data.get("fix"), Mapping):
        return None
    fix = data["fix"]
    try:
        edits = tuple(
            types.TextEdit(
                range=types.Range(
                    start=types.Position(
                        line=int(edit["range"]["start"]["line"]),
                        character=int(edit["range"]["start"]["character"]),
                    ),
                    end=types.Position(
                        line=int(edit["range"]["end"]["line"]),
                        character=int(edit["range"]["end"]["character"]),
                    ),
                ),
                new_text=str(edit["newText"]),
            )
            for edit in fix["edits"]
        )
        version = data.get("version")
        return FixData(
            title=str(fix["title"]),
            safe=bool(fix["safe"]),
            edits=edits,
            version=int(version) if isinstance(version, int) else None,
        )
    except (KeyError, TypeError, ValueError):
        return None


def fix_edits(fix: Fix, lines: Lines, encoding: str) -> list[types.TextEdit]:
    return [
        types.TextEdit(range=span_to_range(edit.span, lines, encoding), new_text=edit.new_text)
        for edit in fix.edits
    ]


def to_diagnostic(
    finding: Finding,
    lines: Lines,
    encoding: str,
    level: str,
    version: Optional[int],
    docs_url: Optional[str] = None,
    related_lines: Optional[LinesProvider] = None,
) -> Optional[types.Diagnostic]:
    """The diagnostic for a finding at severity ``level``; None when the level is ``"off"``."""
    lsp_severity = severity(level)
    if lsp_severity is None:
        return None
    related = []
    for origin in finding.related:
        if origin.path == finding.path:
            origin_lines: Optional[Lines] = lines
        else:
            origin_lines = related_lines(origin.path) if related_lines else None
        related.append(
            types.DiagnosticRelatedInformation(
                location=types.Location(
                    uri=path_to_uri(origin.path), range=span_to_range(origin.span, origin_lines, encoding)
                ),
                message=origin.note,
            )
        )
    data: dict[str, Any] = {"version": version}
    if finding.fix is not None:
        data = fix_to_data(finding.fix, lines, encoding, version)
    return types.Diagnostic(
        range=span_to_range(finding.span, lines, encoding),
        message=finding.message,
        severity=lsp_severity,
        code=finding.code,
        code_description=types.CodeDescription(href=docs_url) if docs_url else None,
        source=SOURCE,
        related_information=related or None,
        data=data,
    )


def diagnostics_result_id(diagnostics: Iterable[types.Diagnostic], converter: Any) -> str:
    """A stable id for a diagnostics list, so a pull can be answered with "unchanged"."""
    payload = json.dumps(converter.unstructure(list(diagnostics)), sort_keys=True)
    return hashlib.sha1(payload.encode("utf-8")).hexdigest()[:16]


def ignore_edit(lines: Lines, line_number: int, code: str, encoding: str) -> Optional[types.TextEdit]:
    """The one insertion that makes ``# noqa`` on a line cover ``code``; None when it already does."""
    if not 0 <= line_number < len(lines):
        return None
    line = lines[line_number]
    if is_suppressed(line, code):
        return None
    match = noqa_match(line)
    if match is not None and match.group("codes"):
        # Add to the existing list right after its last code.
        column = match.end("codes")
        new_text = f", {code}"
    else:
        column = len(line.rstrip())
        new_text = f"  # noqa: {code}"
    position = position_to_client(lines, line_number, column, encoding)
    end = position_to_client(lines, line_number, len(line), encoding) if match is None else position
    # Trailing whitespace after the code is replaced rather than kept before the comment.
    return types.TextEdit(range=types.Range(start=position, end=end), new_text=new_text)


def workspace_edit(
    uri: str, version: Optional[int], edits: Sequence[types.TextEdit], document_changes: bool
) -> types.WorkspaceEdit:
    """Edits to one document, versioned when the client supports ``documentChanges``."""
    if document_changes:
        return types.WorkspaceEdit(
            document_changes=[
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                    edits=list(edits),
                )
            ]
        )
    return types.WorkspaceEdit(changes={uri: list(edits)})


def edits_overlap(first: types.TextEdit, second: types.TextEdit) -> bool:
    a, b = first.range, second.range
    a_start, a_end = (a.start.line, a.start.character), (a.end.line, a.end.character)
    b_start, b_end = (b.start.line, b.start.character), (b.end.line, b.end.character)
    if a_start == a_end == b_start == b_end:
        return True
    return a_start < b_end and b_start < a_end
