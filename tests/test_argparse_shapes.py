"""argparse as scripts use it beyond ``add_argument``: options shared through ``parents=[...]``, and
the namespace changed after the parse (``args.strategy = ...``, ``setattr(args, ...)``).

Each script sets up the model and the optimizer apart; under the command line that picks DeepSpeed
Lightning refuses that (FAB001). These shapes used to get nothing: the parent's options were lost,
and a write to ``args`` was ignored.
"""

from __future__ import annotations

import pytest

from fabric_ls.engine import Project, analyze_source
from fabric_ls.records import get_record

SEPARATE_SETUP = """
fabric = Fabric(accelerator="cuda", devices=2, strategy=args.strategy)
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup_module(model)
optimizer = fabric.setup_optimizers(optimizer)
"""
HEADER = """\
import argparse
import torch
from lightning.fabric import Fabric
"""

# name → (script, a command line that picks DeepSpeed, one that does not, the condition printed)
SHAPES = {
    "parents": (
        HEADER
        + """
common = argparse.ArgumentParser(add_help=False)
common.add_argument("--strategy", default="deepspeed")
parser = argparse.ArgumentParser(parents=[common])
parser.add_argument("--lr", type=float, default=0.1)
args = parser.parse_args()
"""
        + SEPARATE_SETUP,
        (),
        ("--strategy", "ddp"),
        "`--strategy` left at its default 'deepspeed'",
    ),
    "args.strategy = ...": (
        HEADER
        + """
parser = argparse.ArgumentParser()
parser.add_argument("--big", action="store_true")
parser.add_argument("--strategy", default="ddp")
args = parser.parse_args()
if args.big:
    args.strategy = "deepspeed"
"""
        + SEPARATE_SETUP,
        ("--big",),
        (),
        "`--big` given",
    ),
    "args.strategy = ... on the other side": (
        HEADER
        + """
parser = argparse.ArgumentParser()
parser.add_argument("--small", action="store_true")
parser.add_argument("--strategy", default="deepspeed")
args = parser.parse_args()
if args.small:
    args.strategy = "ddp"
"""
        + SEPARATE_SETUP,
        (),
        ("--small",),
        # Where the branch does not run, `args.strategy` is still what the parse gave it.
        "`--small` left at its default False and `--strategy` left at its default 'deepspeed'",
    ),
    "setattr(args, ...)": (
        HEADER
        + """
parser = argparse.ArgumentParser()
parser.add_argument("--zero", type=int, default=0)
args = parser.parse_args()
setattr(args, "strategy", "ddp")
if args.zero:
    setattr(args, "strategy", "deepspeed")
"""
        + SEPARATE_SETUP,
        ("--zero", "2"),
        ("--zero", "0"),
        # One phrase for both decisions: that the flag was given, and the truth of what it was given.
        "`--zero` given a true value",
    ),
}


def _setup_line(script: str) -> int:
    return script.splitlines().index("optimizer = fabric.setup_optimizers(optimizer)") + 1


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_what_the_namespace_holds_reaches_the_fabric(tmp_path, shape):
    script, _, _, condition = SHAPES[shape]
    path = tmp_path / "train.py"
    path.write_text(script)
    analysis = analyze_source(script, str(path), project=Project([str(tmp_path)]))
    assert [(f.code, f.span.start_line + 1, f.severity, f.condition) for f in analysis.findings] == [
        ("FAB001", _setup_line(script), "warning", condition)
    ]


def test_the_shapes_under_lightning():
    pytest.importorskip("lightning")
    from lightning_harness import Script, run_many

    record = get_record("FAB001")
    shapes = sorted(SHAPES)
    scripts = [Script(SHAPES[shape][0], argv=argv) for shape in shapes for argv in SHAPES[shape][1:3]]
    outcomes = iter(run_many(scripts, profile="gpu8"))
    for shape in shapes:
        deepspeed, other = next(outcomes), next(outcomes)
        assert deepspeed.error_class == record.error_class and deepspeed.raised_by_lightning, (
            shape,
            deepspeed.message,
        )
        assert record.matches(deepspeed.message or "") and deepspeed.line == _setup_line(SHAPES[shape][0])
        assert other.error_class is None, (shape, other.message)
