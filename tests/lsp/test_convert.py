"""Unit tests of the engine ↔ LSP conversions (no server): positions, fixes in Diagnostic.data, noqa edits."""

from __future__ import annotations

from lsprotocol import types

from fabric_ls import suppression
from fabric_ls.lsp import convert as lsp_convert
from fabric_ls.model import Finding, Fix, Origin, Span, TextEdit

UTF8, UTF16, UTF32 = (
    types.PositionEncodingKind.Utf8,
    types.PositionEncodingKind.Utf16,
    types.PositionEncodingKind.Utf32,
)
LINE = "größe, 𝛉 = fabric.setup(model)"  # ö, ß: 2 UTF-8 bytes; 𝛉: 4 UTF-8 bytes, 2 UTF-16 units
FABRIC = LINE.index("fabric")  # 11 code points


def test_columns_in_each_encoding() -> None:
    assert lsp_convert.column_to_client(LINE, FABRIC, UTF32) == 11
    assert lsp_convert.column_to_client(LINE, FABRIC, UTF16) == 12
    assert lsp_convert.column_to_client(LINE, FABRIC, UTF8) == 16
    for encoding in (UTF8, UTF16, UTF32):
        units = lsp_convert.column_to_client(LINE, FABRIC, encoding)
        assert lsp_convert.column_from_client(LINE, units, encoding) == FABRIC


def test_a_column_inside_a_character_goes_to_its_start_and_past_the_end_clamps() -> None:
    theta = LINE.index("𝛉")
    assert (
        lsp_convert.column_from_client(LINE, lsp_convert.column_to_client(LINE, theta, UTF16) + 1, UTF16)
        == theta
    )
    assert lsp_convert.column_from_client(LINE, 10_000, UTF16) == len(LINE)
    assert lsp_convert.column_from_client(LINE, -3, UTF8) == 0


def test_positions_clamp_into_the_document() -> None:
    lines = ["a = 1", "bb"]
    assert lsp_convert.position_from_client(lines, types.Position(line=9, character=0), UTF16) == (1, 2)
    assert lsp_convert.position_to_client(lines, 7, 0, UTF16) == types.Position(line=1, character=2)
    assert lsp_convert.position_from_client([], types.Position(line=3, character=3), UTF16) == (0, 0)


def test_split_lines_matches_python_and_lsp_line_breaks() -> None:
    assert lsp_convert.split_lines("a\r\nb\rc\nd\x0ce") == ["a", "b", "c", "d\x0ce"]


def _finding(fix: Fix | None = None, related: tuple[Origin, ...] = ()) -> Finding:
    return Finding(
        code="FAB001",
        path="/w/train.py",
        span=Span(1, 11, 1, 29),
        severity="error",
        message="joint setup required",
        strategy="DeepSpeedStrategy",
        related=related,
        fix=fix,
    )


def test_fix_travels_in_diagnostic_data_in_client_units() -> None:
    lines = ["import torch", LINE]
    fix = Fix("Join", (TextEdit(Span(1, FABRIC, 1, len(LINE)), "fabric.setup(model, opt)"),), safe=True)

    diagnostic = lsp_convert.to_diagnostic(
        _finding(fix), lines, UTF16, "error", 4, docs_url="https://d/FAB001.md"
    )
    assert diagnostic is not None
    data = lsp_convert.fix_from_data(diagnostic.data)

    assert data is not None and data.safe and data.version == 4 and data.title == "Join"
    [edit] = data.edits
    assert edit.range.start == types.Position(line=1, character=12)
    assert edit.new_text == "fabric.setup(model, opt)"
    assert diagnostic.code_description == types.CodeDescription(href="https://d/FAB001.md")
    assert diagnostic.source == "fabric-ls"


def test_malformed_data_from_a_client_is_ignored() -> None:
    for data in (None, 3, {"fix": "x"}, {"fix": {"title": "t", "safe": True, "edits": [{"range": 1}]}}):
        assert lsp_convert.fix_from_data(data) is None


def test_severity_off_drops_the_diagnostic_and_levels_map() -> None:
    assert lsp_convert.to_diagnostic(_finding(), ["", LINE], UTF16, "off", 1) is None
    hint = lsp_convert.to_diagnostic(_finding(), ["", LINE], UTF16, "hint", 1)
    assert hint is not None and hint.severity == types.DiagnosticSeverity.Hint


def test_related_information_in_another_file_uses_that_files_lines() -> None:
    origin = Origin("/w/helpers.py", Span(0, 4, 0, 6), "strategy set here")
    finding = _finding(related=(origin,))

    diagnostic = lsp_convert.to_diagnostic(
        finding, ["", LINE], UTF8, "error", 1, related_lines=lambda path: ["𝛉 = 'deepspeed'"]
    )

    assert diagnostic is not None
    [info] = diagnostic.related_information or []
    assert info.location.uri == "file:///w/helpers.py"
    assert info.location.range.start == types.Position(line=0, character=7)  # 𝛉 is 4 bytes
    assert info.message == "strategy set here"


def test_suppression_grammar() -> None:
    assert suppression.suppressed_codes("x = 1") is None
    assert suppression.suppressed_codes("x = 1  # noqa") == frozenset()
    assert suppression.suppressed_codes("x = 1  # noqa: E501,fab001  FAB002") == {"E501", "FAB001", "FAB002"}
    assert suppression.suppressed_codes("x  # fabric-ls: ignore[FAB009, FAB001]") == {"FAB001", "FAB009"}
    assert suppression.suppressed_codes("x  # fabric-ls: ignore") == frozenset()
    assert suppression.is_suppressed("x  # noqa", "FAB001")
    # Exact codes, as ruff matches them: a partial code hides nothing.
    assert not suppression.is_suppressed("x  # noqa: FAB0", "FAB001")
    assert not suppression.is_suppressed("x  # noqa: E501", "FAB001")


def test_ignore_edit_is_one_insertion() -> None:
    plain = lsp_convert.ignore_edit(["call()   "], 0, "FAB001", UTF16)
    assert plain is not None
    assert plain.new_text == "  # noqa: FAB001"
    assert plain.range == types.Range(
        start=types.Position(line=0, character=6), end=types.Position(line=0, character=9)
    )

    listed = lsp_convert.ignore_edit(["call()  # noqa: E501  # why"], 0, "FAB001", UTF16)
    assert listed is not None and listed.new_text == ", FAB001"
    assert listed.range.start == listed.range.end == types.Position(line=0, character=20)

    assert lsp_convert.ignore_edit(["call()  # noqa"], 0, "FAB001", UTF16) is None
    assert lsp_convert.ignore_edit(["call()"], 5, "FAB001", UTF16) is None


def test_workspace_edit_shapes() -> None:
    edit = types.TextEdit(
        range=types.Range(start=types.Position(0, 0), end=types.Position(0, 1)), new_text="x"
    )
    versioned = lsp_convert.workspace_edit("file:///a.py", 3, [edit], document_changes=True)
    assert versioned.document_changes is not None
    plain = lsp_convert.workspace_edit("file:///a.py", 3, [edit], document_changes=False)
    assert plain.changes == {"file:///a.py": [edit]}
