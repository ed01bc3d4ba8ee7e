"""argparse as scripts use it beyond ``add_argument``: options shared through ``parents=[...]``, a
parser class of the script's own, configargparse's drop-in parser, the namespace changed after
the parse (``args.strategy = ...``, ``setattr(args, ...)``), and one built by hand
(``argparse.Namespace(strategy=...)``, ``types.SimpleNamespace``).

Each script sets up the model and the optimizer apart; under the command line that picks DeepSpeed
Lightning refuses that (FAB001). These shapes used to get nothing: the parent's options were lost,
and a write to ``args`` was ignored.
"""

from __future__ import annotations

import pytest
from command_line_support import (
    CommandLineShape,
    check_under_lightning,
    expected,
    findings,
    separate_setup,
    setup_line,
)

from fabric_ls.records import get_record

SEPARATE_SETUP = "\n" + separate_setup("args.strategy")
HEADER = """\
import argparse
import torch
from lightning.fabric import Fabric
"""

SHAPES = {
    "parents": CommandLineShape(
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
    "a parser class of the script's own": CommandLineShape(
        HEADER
        + """

class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise SystemExit(message)


parser = Parser(description="train")
parser.add_argument("--strategy", default="deepspeed")
args = parser.parse_args()
"""
        + SEPARATE_SETUP,
        (),
        ("--strategy", "ddp"),
        "`--strategy` left at its default 'deepspeed'",
    ),
    "configargparse": CommandLineShape(
        HEADER
        + """import configargparse

parser = configargparse.ArgParser(default_config_files=[])
parser.add("-c", "--config", is_config_file=True)
parser.add("--strategy", default="deepspeed")
args = parser.parse_args()
"""
        + SEPARATE_SETUP,
        (),
        ("--strategy", "ddp"),
        "`--strategy` left at its default 'deepspeed'",
    ),
    "args.strategy = ...": CommandLineShape(
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
    "args.strategy = ... on the other side": CommandLineShape(
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
    "setattr(args, ...)": CommandLineShape(
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


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_what_the_namespace_holds_reaches_the_fabric(tmp_path, shape):
    assert findings(tmp_path, SHAPES[shape].script) == expected(SHAPES[shape])


def test_the_shapes_under_lightning():
    pytest.importorskip("lightning")
    pytest.importorskip("configargparse")
    check_under_lightning(SHAPES)


NAMESPACE_BY_HAND = (
    HEADER
    + """from types import SimpleNamespace

args = argparse.Namespace(strategy="deepspeed")
hyper = SimpleNamespace(lr=0.1)
"""
    + SEPARATE_SETUP
)


def test_a_namespace_built_by_hand_holds_its_values(tmp_path):
    # A notebook's stand-in for a command line: the strategy is certain, the finding an error.
    assert findings(tmp_path, NAMESPACE_BY_HAND) == [("FAB001", setup_line(NAMESPACE_BY_HAND), "error", None)]


def test_a_namespace_built_by_hand_under_lightning():
    pytest.importorskip("lightning")
    from lightning_harness import run_many

    (outcome,) = run_many([NAMESPACE_BY_HAND], profile="gpu8")
    record = get_record("FAB001")
    assert outcome.error_class == record.error_class and record.matches(outcome.message or "")
    assert outcome.line == setup_line(NAMESPACE_BY_HAND)
