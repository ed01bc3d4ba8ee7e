"""Over LSP: a line typed where nothing reads it is answered from the last result, moved, and the
diagnostics of every version are the engine's for that text."""

from __future__ import annotations

import pathlib

from conftest import Session

from fabric_ls.analysis.project import Project
from fabric_ls.engine import analyze_source

# FAB007 (a model set up twice: no fix) below the helper being edited; the Fabric above it.
SCRIPT = """\
import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")


def log_stats(loss):
    print("loss", loss)


def main():
    fabric.launch()
    model = fabric.setup(torch.nn.Linear(4, 2))
    model = fabric.setup(model)


main()
"""
ANCHOR = '    print("loss", loss)\n'
TYPED = "scaled = loss * 2.0"


def _lines(diagnostics) -> list[tuple[int, str]]:  # type: ignore[no-untyped-def]
    return sorted((d.range.start.line, str(d.code)) for d in diagnostics)


async def test_typing_a_line_nothing_reads_moves_the_last_result(
    session: Session, tmp_path: pathlib.Path
) -> None:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT, encoding="utf-8")
    uri = session.open(path)
    first = _lines(await session.diagnostics(uri))
    assert first == [(13, "FAB007")]
    at = SCRIPT.index(ANCHOR) + len(ANCHOR)
    for typed in range(1, len(TYPED) + 1):
        text = SCRIPT[:at] + "    " + TYPED[:typed] + "\n" + SCRIPT[at:]
        session.replace(uri, text)
        shown = _lines(await session.diagnostics(uri))
        fresh = analyze_source(text, str(path), project=Project([str(tmp_path)]))
        assert shown == sorted((f.span.start_line, f.code) for f in fresh.findings), TYPED[:typed]
        assert shown == [(14, "FAB007")]
    status = await session.status()
    # Every keystroke was answered without running the script again (the open was analysed).
    assert status["worker"]["reused"] >= len(TYPED)
