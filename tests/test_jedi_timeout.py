"""jedi hanging must not hang the analysis: after its time limit the import path is used, with a note."""

from __future__ import annotations

import textwrap
import threading
import time
from pathlib import Path

import jedi
import pytest

from fabric_ls.analysis import jedi_bridge
from fabric_ls.engine import Project, analyze_source
from fabric_ls.settings import Settings

SCRIPT = textwrap.dedent("""\
    import torch
    from lightning.fabric import Fabric
    from somewhere_only_jedi_knows import WIDTH
    from cfg import STRATEGY
    fabric = Fabric(accelerator="cuda", devices=2, strategy=STRATEGY)
    fabric.launch()
    model = fabric.setup_module(torch.nn.Linear(WIDTH, 2))
    optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
""")


@pytest.fixture
def hanging_jedi(monkeypatch: pytest.MonkeyPatch):
    """jedi.Script.goto blocks (as on a pathological environment) until the test ends."""
    release = threading.Event()
    calls: list[tuple[object, ...]] = []

    def goto(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args)
        release.wait(60)
        return []

    monkeypatch.setattr(jedi.Script, "goto", goto)
    yield calls
    release.set()


def test_a_hanging_jedi_is_abandoned_for_the_import_path(tmp_path: Path, hanging_jedi) -> None:
    (tmp_path / "cfg.py").write_text('STRATEGY = "deepspeed"\n', encoding="utf-8")
    script = str(tmp_path / "train.py")

    started = time.monotonic()
    analysis = analyze_source(SCRIPT, script, Settings(), Project([str(tmp_path)]))
    elapsed = time.monotonic() - started

    assert hanging_jedi, "jedi was not asked: the test does not exercise the time limit"
    assert elapsed < jedi_bridge.JEDI_TIMEOUT_S + 1.0
    # The helper next to the script is still found by its import path: its strategy gives FAB001.
    assert [(f.code, f.span.start_line + 1) for f in analysis.findings] == [("FAB001", 8)]
    assert any("jedi took over" in note and "somewhere_only_jedi_knows" in note for note in analysis.notes)


def test_after_one_hang_jedi_is_not_asked_again_in_that_project(tmp_path: Path, hanging_jedi) -> None:
    (tmp_path / "cfg.py").write_text('STRATEGY = "deepspeed"\n', encoding="utf-8")
    project = Project([str(tmp_path)])
    script = str(tmp_path / "train.py")
    analyze_source(SCRIPT, script, Settings(), project)
    asked = len(hanging_jedi)

    started = time.monotonic()
    again = analyze_source(
        SCRIPT.replace("somewhere_only_jedi_knows", "another_unknown_module"), script, Settings(), project
    )

    assert time.monotonic() - started < 1.0
    assert len(hanging_jedi) == asked
    assert [f.code for f in again.findings] == ["FAB001"]
