"""Strategy portability in the Fabric(...) hover: which rules would fire under each strategy, and where.

It costs one analysis per strategy, so the server computes it in the background: the first hover
says so, and the next one shows the table.
"""

from __future__ import annotations

import pathlib

from conftest import Session, copy_scripts, eventually
from lsprotocol import types


async def _portability_hover(session: Session, uri: str) -> str:
    async def hover_text() -> str:
        hover = await session.hover(uri, 5, 12)
        assert hover is not None and isinstance(hover.contents, types.MarkupContent)
        return hover.contents.value

    return await eventually(
        hover_text, lambda text: "**Strategy portability**" in text and "updating" not in text
    )


async def test_fabric_hover_lists_the_findings_each_strategy_would_get(
    session: Session, tmp_path: pathlib.Path
) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")
    await session.diagnostics(uri)

    text = await _portability_hover(session, uri)

    rows = {
        line.split("|")[1].strip(): line.split("|")[2].strip()
        for line in text.splitlines()
        if line.startswith("| `")
    }
    # setup_optimizers is line 11: DeepSpeed and XLA need joint setup, DDP and FSDP accept separate calls.
    assert rows["`deepspeed`"] == "FAB001 (line 11)"
    assert rows["`ddp`"] == "nothing"
    assert rows["`fsdp`"] == "nothing"
    assert "FAB001 (line 11)" in rows["`xla`"]


async def test_the_first_hover_does_not_wait_for_portability(
    session: Session, tmp_path: pathlib.Path
) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")
    await session.diagnostics(uri)

    hover = await session.hover(uri, 5, 12)

    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    text = hover.contents.value
    assert "DeepSpeedStrategy · ZeRO-2" in text
    assert "being computed" in text or "**Strategy portability**" in text


async def test_after_an_edit_the_previous_table_is_shown_until_the_new_one_is_ready(
    session: Session, tmp_path: pathlib.Path
) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")
    await session.diagnostics(uri)
    await _portability_hover(session, uri)

    session.replace(uri, session.texts[uri] + "# edited\n")
    await session.diagnostics(uri)
    hover = await session.hover(uri, 5, 12)

    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert "**Strategy portability**" in hover.contents.value
    await _portability_hover(session, uri)


async def test_portability_is_computed_once_per_version(session: Session, tmp_path: pathlib.Path) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")
    await session.diagnostics(uri)
    await _portability_hover(session, uri)

    await session.hover(uri, 5, 12)
    await session.hover(uri, 5, 20)

    assert (await session.status())["worker"]["portability_runs"] == 1
