"""click and typer hand a function its arguments from the command line: their defaults are read.

``@click.option("--strategy", default="deepspeed")`` on ``def main(strategy)``, called as ``main()``;
a click group's sub-command; ``typer.Option("deepspeed")``; ``tyro.cli(Args)`` of a dataclass; and
argparse behind a helper,
``main(parse_args())``. Each picks DeepSpeed unless the flag says otherwise, and the script then
sets up the model and the optimizer apart, which Lightning refuses (FAB001). The click and tyro
shapes used to get nothing: the parameters were unknown.
"""

from __future__ import annotations

import pytest

from fabric_ls.engine import Project, analyze_source
from fabric_ls.records import get_record

SEPARATE_SETUP = """\
    fabric = Fabric(accelerator="cuda", devices=2, strategy=strategy)
    fabric.launch()
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.Adam(model.parameters())
    model = fabric.setup_module(model)
    optimizer = fabric.setup_optimizers(optimizer)
"""

HEADER = """\
import argparse
import click
import torch
import typer
from lightning.fabric import Fabric
"""

# name → (script, the command line that picks DeepSpeed, one that picks DDP, the condition printed)
SHAPES = {
    "click command": (
        HEADER
        + """

@click.command()
@click.option("--strategy", default="deepspeed", help="the Fabric strategy")
@click.option("--compile/--no-compile", default=False)
def main(strategy, compile):
"""
        + SEPARATE_SETUP
        + """

if __name__ == "__main__":
    main()
""",
        (),
        ("--strategy", "ddp"),
        "`--strategy` left at its default 'deepspeed'",
    ),
    "click group": (
        HEADER
        + """

@click.group()
def cli():
    pass


@cli.command()
@click.option("-s", "--strategy", type=click.Choice(["ddp", "deepspeed"]), default="deepspeed")
def train(strategy):
"""
        + SEPARATE_SETUP
        + """

@cli.command()
def evaluate():
    print("evaluating")


if __name__ == "__main__":
    cli()
""",
        ("train",),
        ("train", "--strategy", "ddp"),
        "`--strategy` is 'deepspeed' (the default)",
    ),
    "typer": (
        HEADER
        + """
app = typer.Typer()


@app.command()
def train(strategy: str = typer.Option("deepspeed", help="the Fabric strategy")):
"""
        + SEPARATE_SETUP
        + """

if __name__ == "__main__":
    app()
""",
        (),
        ("--strategy", "ddp"),
        "`strategy` left at its default 'deepspeed'",
    ),
    "tyro": (
        HEADER
        + """from dataclasses import dataclass
from typing import Literal

import tyro


@dataclass
class Args:
    strategy: Literal["ddp", "deepspeed"] = "deepspeed"
    num_nodes: int = 1


def main(args):
    strategy = args.strategy
"""
        + SEPARATE_SETUP
        + """

if __name__ == "__main__":
    main(tyro.cli(Args))
""",
        (),
        ("--strategy", "ddp"),
        "`--strategy` is 'deepspeed' (the default)",
    ),
    "argparse in a helper": (
        HEADER
        + """

def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--strategy", default="deepspeed")
    return parser.parse_args()


def main(args):
    strategy = args.strategy
"""
        + SEPARATE_SETUP
        + """

if __name__ == "__main__":
    main(parse_args())
""",
        (),
        ("--strategy", "ddp"),
        "`--strategy` left at its default 'deepspeed'",
    ),
}


def _setup_line(script: str) -> int:
    return script.splitlines().index("    optimizer = fabric.setup_optimizers(optimizer)") + 1


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_framework_s_default_is_the_parameter_s_value(tmp_path, shape):
    script, _, _, condition = SHAPES[shape]
    path = tmp_path / "train.py"
    path.write_text(script)
    analysis = analyze_source(script, str(path), project=Project([str(tmp_path)]))
    assert [(f.code, f.span.start_line + 1, f.severity, f.condition) for f in analysis.findings] == [
        ("FAB001", _setup_line(script), "warning", condition)
    ]


def test_the_frameworks_under_lightning():
    # Run as a person runs them: the default raises FAB001's error at the setup line, the flag
    # that picks DDP runs clean.
    pytest.importorskip("lightning")
    pytest.importorskip("click")
    pytest.importorskip("typer")
    pytest.importorskip("tyro")
    from lightning_harness import Script, run_many

    record = get_record("FAB001")
    shapes = sorted(SHAPES)
    scripts = [
        Script(SHAPES[shape][0], argv=argv, env={"TERM": "dumb", "_TYPER_STANDARD_TRACEBACK": "1"})
        for shape in shapes
        for argv in SHAPES[shape][1:3]
    ]
    outcomes = iter(run_many(scripts, profile="gpu8"))
    for shape in shapes:
        deepspeed, ddp = next(outcomes), next(outcomes)
        assert deepspeed.error_class == record.error_class, (shape, deepspeed.message, deepspeed.stderr_tail)
        assert deepspeed.raised_by_lightning and record.matches(deepspeed.message or ""), shape
        assert deepspeed.line == _setup_line(SHAPES[shape][0]), shape
        assert ddp.error_class is None, (shape, ddp.message, ddp.stderr_tail)
