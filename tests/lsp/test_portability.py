"""Strategy portability in the Fabric(...) hover: which rules would fire under each strategy, and where."""

from __future__ import annotations

import pathlib

from conftest import Session, copy_scripts
from lsprotocol import types


async def test_fabric_hover_lists_the_findings_each_strategy_would_get(
    session: Session, tmp_path: pathlib.Path
) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")
    await session.diagnostics(uri)

    hover = await session.hover(uri, 5, 12)

    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    text = hover.contents.value
    assert "**Strategy portability**" in text
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


async def test_portability_is_computed_once_per_version(session: Session, tmp_path: pathlib.Path) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")
    await session.diagnostics(uri)

    await session.hover(uri, 5, 12)
    await session.hover(uri, 5, 20)

    assert (await session.status())["worker"]["portability_runs"] == 1
