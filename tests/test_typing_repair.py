"""The call being typed on the last lines of a file: its brackets are closed for the analysis, so a
DeepSpeed user typing ``fabric.setup_optimizers(optimizer`` sees FAB001 on that call right away.

The document itself is never changed: spans cover only the text typed so far, and every other
line and column stays where it is.
"""

from __future__ import annotations

import pytest

from fabric_ls.analysis.source import parse_source
from fabric_ls.engine import analyze_source
from fabric_ls.model import Analysis

PATH = "/nonexistent/fabric_ls_typing/train.py"

DEEPSPEED = """\
import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
model = fabric.setup_module(model)
optimizer = torch.optim.Adam(model.parameters())
"""
LAST = 8  # 0-based line of whatever is appended to DEEPSPEED

TRAINING_LOOP = """\
for step in range(10):
    loss = model(torch.randn(2, 4)).sum()
    fabric.backward(loss)
    optimizer.step()
"""


def findings(source: str) -> list[tuple[str, int, str]]:
    """Each finding as (rule, 0-based line, the document text its span covers)."""
    analysis: Analysis = analyze_source(source, PATH)
    lines = source.splitlines()
    return [
        (f.code, f.span.start_line, lines[f.span.start_line][f.span.start_col : f.span.end_col])
        for f in analysis.findings
        if f.span.start_line == f.span.end_line
    ]


@pytest.mark.parametrize(
    "typed",
    [
        "optimizer = fabric.setup_optimizers(optimizer",
        "optimizer = fabric.setup_optimizers(optimizer\n",
        "optimizer = fabric.setup_optimizers(optimizer,",
        "optimizer = fabric.setup_optimizers(optimizer  # still typing\n",
        "optimizer = fabric.setup_optimizers(optimizer\nfor x in range(",
        "optimizer = fabric.setup_optimizers(optimizer\nfor x in range(\n",
        "optimizer = fabric.setup_optimizers(optimizer\n\nfor x in range(len(",
        "optimizer = fabric.setup_optimizers(optimizer\n" + TRAINING_LOOP,
    ],
)
def test_the_call_being_typed_gets_fab001(typed):
    call = typed.split("\n")[0].split("  #")[0].removeprefix("optimizer = ")
    assert findings(DEEPSPEED + typed) == [("FAB001", LAST, call)]


def test_an_argument_still_open_inside_the_call():
    source = DEEPSPEED.replace("optimizer = torch.optim.Adam(model.parameters())\n", "") + (
        "optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()"
    )
    assert findings(source) == [("FAB001", 7, "fabric.setup_optimizers(torch.optim.Adam(model.parameters()")]


def test_a_half_typed_joint_setup_is_judged_on_what_it_already_says():
    # The model was set up by setup_module above: setting it up again is FAB007, whatever follows.
    source = DEEPSPEED + "model, optimizer = fabric.setup(model,"
    assert findings(source) == [("FAB007", LAST, "fabric.setup(model,")]


def test_a_half_typed_joint_setup_that_will_be_right_gets_nothing():
    source = (
        DEEPSPEED.replace("model = fabric.setup_module(model)\n", "")
        + "model, optimizer = fabric.setup(model, "
    )
    assert findings(source) == []


@pytest.mark.parametrize(
    "typed",
    [
        "loader = fabric.setup_dataloaders(",
        "fabric.clip_gradients(model, optimizer,",
        "fabric.clip_gradients(model, optimizer, max_norm=1.0",
    ],
)
def test_no_finding_about_arguments_not_typed_yet(typed):
    source = DEEPSPEED.replace('strategy="deepspeed"', 'strategy="ddp"') + typed
    assert findings(source) == []


def test_the_same_calls_closed_are_still_reported():
    source = (
        DEEPSPEED.replace('strategy="deepspeed"', 'strategy="ddp"') + "loader = fabric.setup_dataloaders()\n"
    )
    assert [code for code, _, _ in findings(source)] == ["FAB015"]


def test_a_multi_line_call_closed_at_column_0_above_is_left_alone():
    source = DEEPSPEED.replace(
        "model = torch.nn.Linear(4, 2)\n", "model = torch.nn.Linear(\n    4,\n    2,\n)\n"
    ) + ("optimizer = fabric.setup_optimizers(optimizer")
    assert findings(source) == [("FAB001", LAST + 3, "fabric.setup_optimizers(optimizer")]


def test_the_repair_changes_no_text_and_no_position():
    source = DEEPSPEED + "optimizer = fabric.setup_optimizers(optimizer  # café\nfor x in range("
    parsed = parse_source(source, PATH)
    assert parsed.text == source
    assert "".join(parsed.lines) == source
    assert parsed.syntax_error is not None
    (assign,) = [s for s in parsed.tree.body if getattr(s, "lineno", 0) == LAST + 1]
    assert parsed.segment(assign.value) == "fabric.setup_optimizers(optimizer"
    assert parsed.unfinished(assign.value)
    assert not parsed.unfinished(assign.value.func)


def test_brackets_that_do_not_match_are_not_guessed_at():
    source = DEEPSPEED + "optimizer = fabric.setup_optimizers(optimizer]\n"
    assert findings(source) == []
