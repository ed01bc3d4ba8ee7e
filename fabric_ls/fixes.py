"""Apply text edits to a source string."""

from __future__ import annotations

from typing import Sequence

from fabric_ls.model import TextEdit


def _offset(lines: list[str], line: int, col: int) -> int:
    return sum(len(text) for text in lines[:line]) + col


def apply_edits(source: str, edits: Sequence[TextEdit]) -> str:
    """Apply non-overlapping edits (positions in code points), last first."""
    lines = source.splitlines(keepends=True) or [""]
    ordered = sorted(edits, key=lambda e: (e.span.start_line, e.span.start_col), reverse=True)
    result = source
    for edit in ordered:
        start = _offset(lines, edit.span.start_line, edit.span.start_col)
        end = _offset(lines, edit.span.end_line, edit.span.end_col)
        result = result[:start] + edit.new_text + result[end:]
    return result
