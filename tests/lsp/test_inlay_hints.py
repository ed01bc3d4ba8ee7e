"""An inlay hint after each Fabric(...) names its strategy; clients without inlay hints get a code lens."""

from __future__ import annotations

import pathlib

from conftest import Session, copy_scripts
from lsprotocol import types

WHOLE_FILE = types.Range(
    start=types.Position(line=0, character=0), end=types.Position(line=1000, character=0)
)


async def _open(session: Session, tmp_path: pathlib.Path) -> str:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")
    await session.diagnostics(uri)
    return uri


async def test_inlay_hint_after_fabric_names_the_strategy(session: Session, tmp_path: pathlib.Path) -> None:
    uri = await _open(session, tmp_path)

    hints = await session.client.text_document_inlay_hint_async(
        types.InlayHintParams(text_document=types.TextDocumentIdentifier(uri=uri), range=WHOLE_FILE)
    )

    [hint] = hints or []
    assert hint.label == "DeepSpeedStrategy · ZeRO-2"
    # Right after the closing parenthesis of Fabric(...).
    line = session.texts[uri].splitlines()[5]
    assert hint.position == types.Position(line=5, character=len(line))
    assert hint.padding_left
    assert isinstance(hint.tooltip, types.MarkupContent) and "'deepspeed'" in hint.tooltip.value


async def test_inlay_hints_outside_the_requested_range_are_left_out(
    session: Session, tmp_path: pathlib.Path
) -> None:
    uri = await _open(session, tmp_path)
    elsewhere = types.Range(
        start=types.Position(line=10, character=0), end=types.Position(line=20, character=0)
    )

    hints = await session.client.text_document_inlay_hint_async(
        types.InlayHintParams(text_document=types.TextDocumentIdentifier(uri=uri), range=elsewhere)
    )

    assert not hints


async def test_code_lens_only_for_clients_without_inlay_hints(
    session: Session, tmp_path: pathlib.Path
) -> None:
    uri = await _open(session, tmp_path)
    assert session.initialize_result is not None
    advertised = session.initialize_result.capabilities.code_lens_provider is not None

    lenses = await session.client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )

    if session.profile == "visual-studio-code":  # VS Code 1.65 declares no inlay hints
        assert advertised
        [lens] = lenses or []
        assert lens.command is not None and lens.command.title == "DeepSpeedStrategy · ZeRO-2"
        assert lens.range.start.line == 5
        summary = await session.execute(lens.command.command, *(lens.command.arguments or []))
        assert summary.startswith("Fabric strategy: DeepSpeedStrategy · ZeRO-2")
        assert session.client.messages and "DeepSpeedStrategy" in session.client.messages[-1].message
    else:
        assert not advertised
        assert not lenses


async def test_label_follows_an_edit_of_the_strategy(session: Session, tmp_path: pathlib.Path) -> None:
    uri = await _open(session, tmp_path)
    session.replace(uri, session.texts[uri].replace('strategy="deepspeed"', 'strategy="deepspeed_stage_3"'))
    await session.diagnostics(uri)

    hints = await session.client.text_document_inlay_hint_async(
        types.InlayHintParams(text_document=types.TextDocumentIdentifier(uri=uri), range=WHOLE_FILE)
    )

    assert [hint.label for hint in hints or []] == ["DeepSpeedStrategy · ZeRO-3"]
