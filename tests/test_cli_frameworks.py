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
from command_line_support import CommandLineShape, check_under_lightning, expected, findings, separate_setup

SEPARATE_SETUP = separate_setup("strategy", indent="    ")

HEADER = """\
import argparse
import click
import torch
import typer
from lightning.fabric import Fabric
"""

SHAPES = {
    "click command": CommandLineShape(
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
    "click group": CommandLineShape(
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
    "typer": CommandLineShape(
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
    "tyro": CommandLineShape(
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
    "argparse in a helper": CommandLineShape(
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


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_framework_s_default_is_the_parameter_s_value(tmp_path, shape):
    assert findings(tmp_path, SHAPES[shape].script) == expected(SHAPES[shape])


def test_the_frameworks_under_lightning():
    # Run as a person runs them: the default raises FAB001's error at the setup line, the flag
    # that picks DDP runs clean.
    pytest.importorskip("lightning")
    for framework in ("click", "typer", "tyro"):
        pytest.importorskip(framework)
    check_under_lightning(SHAPES)


JSONARGPARSE_DATACLASS = """\
from dataclasses import dataclass

import torch
import lightning as L


@dataclass
class TrainArgs:
    devices: int = 2
    strategy: str = "deepspeed"


def setup(train: TrainArgs = TrainArgs(), seed: int = 1) -> None:
    fabric = L.Fabric(accelerator="cuda", devices=train.devices, strategy=train.strategy)
    fabric.launch()
    model = fabric.setup_module(torch.nn.Linear(4, 4))
    optimizer = fabric.setup_optimizers(torch.optim.SGD(model.parameters(), lr=0.1))


if __name__ == "__main__":
    from jsonargparse import CLI

    CLI(setup)
"""


def test_a_dataclass_parameter_of_a_jsonargparse_cli_has_its_fields_as_options(tmp_path):
    """litgpt's ``def setup(train: TrainArgs = TrainArgs())`` under ``CLI(setup)``: jsonargparse makes
    each field an option (``--train.strategy``), so the default's DeepSpeed is a warning, named."""
    from lightning_harness import run_with_lightning

    from fabric_ls.engine import analyze_source

    path = tmp_path / "train.py"
    path.write_text(JSONARGPARSE_DATACLASS)
    [finding] = analyze_source(JSONARGPARSE_DATACLASS, str(path)).findings
    assert (finding.code, finding.span.start_line + 1, finding.severity) == ("FAB001", 17, "warning")
    assert finding.condition == "`train.strategy` left at its default 'deepspeed'"
    # jsonargparse is not installed here: the defaults run as `setup()` does with no flags.
    defaults = JSONARGPARSE_DATACLASS.replace(
        "    from jsonargparse import CLI\n\n    CLI(setup)", "    setup()"
    )
    outcome = run_with_lightning(defaults, profile="gpu8")
    assert (outcome.error_class, outcome.raised_by_lightning, outcome.line) == ("RuntimeError", True, 17)
