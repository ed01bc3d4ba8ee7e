"""Hover: the strategy a Fabric gets and why, what each Fabric call does under it, and the rule docs."""

from __future__ import annotations

import pathlib

from conftest import Session, copy_scripts
from lsprotocol import types


async def _open(session: Session, tmp_path: pathlib.Path) -> str:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")
    await session.diagnostics(uri)
    return uri


def _text(hover: types.Hover | None) -> str:
    assert hover is not None
    assert isinstance(hover.contents, types.MarkupContent)
    assert hover.contents.kind == types.MarkupKind.Markdown
    return hover.contents.value


async def test_hover_on_fabric_shows_the_strategy_where_it_came_from_and_the_order_it_needs(
    session: Session, tmp_path: pathlib.Path
) -> None:
    uri = await _open(session, tmp_path)

    # fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
    hover = await session.hover(uri, 5, 12)

    text = _text(hover)
    assert "DeepSpeedStrategy · ZeRO-2" in text
    assert "'deepspeed'" in text  # the provenance: the literal it came from
    assert "Order `DeepSpeedStrategy` requires" in text
    assert "`model, optimizer = fabric.setup(model, optimizer)`" in text
    assert hover is not None and hover.range is not None and hover.range.start.line == 5


async def test_hover_on_a_setup_call_says_what_it_does_under_the_strategy(
    session: Session, tmp_path: pathlib.Path
) -> None:
    uri = await _open(session, tmp_path)

    # model = fabric.setup_module(model)
    text = _text(await session.hover(uri, 9, 16))

    assert "fabric.setup_module" in text
    assert "Under `DeepSpeedStrategy · ZeRO-2`" in text
    assert "inference" in text


async def test_hover_on_a_finding_shows_the_record_documentation_and_example_fix(
    session: Session, tmp_path: pathlib.Path
) -> None:
    uri = await _open(session, tmp_path)

    # optimizer = fabric.setup_optimizers(optimizer)
    text = _text(await session.hover(uri, 10, 20))

    assert "Not supported: raises RuntimeError" in text  # what setup_optimizers does under DeepSpeed
    assert "**FAB001**" in text
    assert "_validate_setup_optimizers" in text  # from the record's documentation
    assert "**After**" in text and "fabric.setup(model, optimizer)" in text
    assert "FAB001.md" in text


async def test_hover_on_backward_and_launch(session: Session, tmp_path: pathlib.Path) -> None:
    uri = await _open(session, tmp_path)

    launch = _text(await session.hover(uri, 6, 9))
    backward = _text(await session.hover(uri, 14, 12))

    assert "subprocess launcher" in launch
    assert "DeepSpeed engine's backward" in backward


async def test_no_hover_away_from_fabric_code(session: Session, tmp_path: pathlib.Path) -> None:
    uri = await _open(session, tmp_path)

    assert await session.hover(uri, 2, 3) is None  # import torch


async def test_hover_positions_past_the_end_are_clamped(session: Session, tmp_path: pathlib.Path) -> None:
    uri = await _open(session, tmp_path)

    await session.hover(uri, 10, 10_000)
    await session.hover(uri, 10_000, 3)

    assert (await session.status())["worker"]["failures"] == 0


async def test_hover_on_a_document_never_opened_is_empty(session: Session, tmp_path: pathlib.Path) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    never_opened = (tmp_path / "deepspeed_separate_setup.py").as_uri()

    assert await session.hover(never_opened, 5, 12) is None
    assert await session.code_actions(never_opened, []) == []


async def test_a_client_that_reads_plaintext_gets_hover_text_without_markup(
    bare_client, tmp_path: pathlib.Path
) -> None:
    from conftest import initialize_params

    params = initialize_params(bare_client.profile, tmp_path)
    assert params.capabilities.text_document is not None
    params.capabilities.text_document.hover = types.HoverClientCapabilities(
        content_format=[types.MarkupKind.PlainText]
    )
    await bare_client.initialize_session(params)
    session = Session(client=bare_client, profile=bare_client.profile, root=tmp_path)
    uri = await _open(session, tmp_path)

    for line, character in ((5, 12), (9, 16), (10, 20)):  # Fabric(...), setup_module, the FAB001 call
        hover = await session.hover(uri, line, character)
        assert hover is not None and isinstance(hover.contents, types.MarkupContent)
        assert hover.contents.kind == types.MarkupKind.PlainText
        text = hover.contents.value
        assert "DeepSpeedStrategy" in text
        for markup in ("`", "**", "](", "```"):
            assert markup not in text, (markup, text)
