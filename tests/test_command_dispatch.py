"""Sub-commands: the command line picks one function, through a table, ``set_defaults(func=...)`` or
``add_subparsers(dest=...)``, and ``sys.exit(main())`` runs it.

Each shape below runs ``cmd_train`` for ``python train.py train`` and ``cmd_eval`` for ``eval``;
``cmd_train`` sets up the model and the optimizer apart under the ``--strategy`` default
``deepspeed``, which Lightning refuses (FAB001). These shapes used to get nothing: ``sys.exit(main())``
never ran ``main``, a table entry picked by the command was unknown, and ``args.func`` was too.
"""

from __future__ import annotations

import pytest
from command_line_support import separate_setup, setup_line

from fabric_ls.engine import Project, analyze_source
from fabric_ls.records import get_record

COMMANDS = (
    """\
import argparse
import sys
import torch
from lightning.fabric import Fabric


def cmd_train(args):
"""
    + separate_setup("args.strategy", indent="    ")
    + """    return 0


def cmd_eval(args):
    print("evaluating")
    return 0
"""
)
# The line of `fabric.setup_optimizers(optimizer)` above: where Lightning raises.
RAISES_AT = setup_line(COMMANDS)

# main() for each way of choosing the command; `--strategy` defaults to deepspeed for `train`.
MAINS = {
    "table, choices": """
TABLE = {"train": cmd_train, "eval": cmd_eval}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=sorted(TABLE))
    parser.add_argument("--strategy", default="deepspeed")
    args = parser.parse_args()
    return TABLE[args.command](args)
""",
    "table, sub-commands": """
TABLE = {"train": cmd_train, "eval": cmd_eval}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--strategy", default="deepspeed")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("train")
    commands.add_parser("eval")
    args = parser.parse_args()
    handler = TABLE.get(args.command)
    try:
        return handler(args)
    except KeyboardInterrupt:
        return 130
""",
    "set_defaults(func=...)": """
def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(required=True)
    train = commands.add_parser("train")
    train.add_argument("--strategy", default="deepspeed")
    train.set_defaults(func=cmd_train)
    evaluate = commands.add_parser("eval")
    evaluate.set_defaults(func=cmd_eval)
    args = parser.parse_args()
    return args.func(args)
""",
    "if on the command": """
def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train")
    train.add_argument("--strategy", default="deepspeed")
    commands.add_parser("eval")
    args = parser.parse_args()
    if args.command == "train":
        return cmd_train(args)
    return cmd_eval(args)
""",
}
ENTRY = """

if __name__ == "__main__":
    sys.exit(main())
"""


def _script(shape: str) -> str:
    return COMMANDS + MAINS[shape] + ENTRY


def _analyse(tmp_path, source: str):
    script = tmp_path / "train.py"
    script.write_text(source)
    return analyze_source(source, str(script), project=Project([str(tmp_path)]))


@pytest.mark.parametrize("shape", sorted(MAINS))
def test_the_command_a_script_dispatches_to_is_followed(tmp_path, shape):
    analysis = _analyse(tmp_path, _script(shape))
    findings = [(f.code, f.span.start_line + 1, f.severity) for f in analysis.findings]
    assert findings == [("FAB001", RAISES_AT, "warning")], shape
    condition = analysis.findings[0].condition or ""
    # Both decisions named, each once: which command, and the default left alone.
    assert "'train'" in condition and "'eval'" not in condition, condition
    assert "`--strategy` left at its default 'deepspeed'" in condition, condition
    assert not analysis.notes, analysis.notes


def test_the_sub_command_s_own_default_is_read_where_it_runs(tmp_path):
    # Only `train` has `--strategy`; `eval` reads none, and the run of `eval` is not given one.
    analysis = _analyse(tmp_path, _script("set_defaults(func=...)"))
    assert analysis.findings[0].condition == (
        "the sub-command is 'train' and `--strategy` left at its default 'deepspeed'"
    )


# `eval` ends the script with `sys.exit(0)` inside `try: ... except KeyboardInterrupt:`. Only a
# handler that caught that exit would let `eval` go on past the `try`, to a setup Lightning refuses
# (in `main` itself: a function no run reaches is checked on its own, as an entry point).
ENDS_INSIDE_THE_TRY = (
    COMMANDS.replace('    print("evaluating")\n', '    print("evaluating")\n    sys.exit(0)\n')
    + """

TABLE = {"train": cmd_train, "eval": cmd_eval}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--strategy", default="ddp")
    parser.add_argument("command", choices=sorted(TABLE))
    args = parser.parse_args()
    try:
        TABLE[args.command](args)
    except KeyboardInterrupt:
        return 130
    if args.command == "eval":
"""
    + separate_setup('"deepspeed"', indent="        ")
    + """    return 0
"""
    + ENTRY
)


def test_a_try_that_catches_only_keyboard_interrupt_lets_the_script_end(tmp_path):
    # `except KeyboardInterrupt` catches no `sys.exit` of the script: `eval` ends inside the `try`,
    # and nothing after it runs for `eval` (were the exit caught, the setup there would get FAB001).
    analysis = _analyse(tmp_path, ENDS_INSIDE_THE_TRY)
    assert analysis.findings == []
    assert not analysis.notes


def test_a_try_that_catches_only_keyboard_interrupt_under_lightning():
    # Run with Lightning: `eval` exits cleanly, the setup after the `try` never runs.
    pytest.importorskip("lightning")
    from lightning_harness import Script, run_many

    (evaluate,) = run_many([Script(ENDS_INSIDE_THE_TRY, argv=("eval",))], profile="gpu8")
    assert evaluate.error_class is None, (evaluate.message, evaluate.stderr_tail)


def test_raise_system_exit_of_main_runs_main(tmp_path):
    # `raise SystemExit(main())`, like `sys.exit(main())`: the expression runs before the raise.
    source = _script("table, choices").replace("    sys.exit(main())", "    raise SystemExit(main())")
    findings = [(f.code, f.span.start_line + 1) for f in _analyse(tmp_path, source).findings]
    assert findings == [("FAB001", RAISES_AT)]


def test_the_commands_under_lightning():
    # Each shape, run with the real Lightning: `train` raises FAB001's error at that line, `eval`
    # and `train --strategy ddp` run clean.
    pytest.importorskip("lightning")
    from lightning_harness import Script, run_many

    record = get_record("FAB001")
    shapes = sorted(MAINS)

    def command_lines(shape: str) -> list[tuple[str, ...]]:
        # An option of the main parser comes before the sub-command.
        ddp = (
            ("--strategy", "ddp", "train")
            if shape == "table, sub-commands"
            else ("train", "--strategy", "ddp")
        )
        return [("train",), ("eval",), ddp]

    scripts = [Script(_script(shape), argv=argv) for shape in shapes for argv in command_lines(shape)]
    outcomes = iter(run_many(scripts, profile="gpu8"))
    for shape in shapes:
        train, evaluate, ddp = next(outcomes), next(outcomes), next(outcomes)
        assert train.error_class == record.error_class and train.raised_by_lightning, (shape, train.message)
        assert train.line == RAISES_AT and record.matches(train.message or ""), (shape, train.message)
        assert evaluate.error_class is None, (shape, evaluate.message)
        assert ddp.error_class is None, (shape, ddp.message)
