"""One pass over the script: both sides of every branch, joined; conditions a person can read.

Each test is one of the shapes that broke the path-by-path explorer (issue "One-pass flow analysis").
"""

from __future__ import annotations

import re
import textwrap
import time
from pathlib import Path

import pytest

from fabric_ls.engine import Project, analyze_source
from fabric_ls.records import get_record


def check(tmp_path: Path, source: str, name: str = "train.py"):
    script = tmp_path / name
    script.write_text(textwrap.dedent(source))
    return analyze_source(script.read_text(), str(script), project=Project([str(tmp_path)]))


def found(analysis) -> list[tuple[str, int, str, str | None]]:
    return [(f.code, f.span.start_line + 1, f.severity, f.condition) for f in analysis.findings]


def test_a_helper_result_stays_tied_to_the_argument_that_also_picks_the_strategy(tmp_path):
    # Under `tpu` the helper returns 32-true, which XLA accepts: no FAB022 on any real path.
    analysis = check(
        tmp_path,
        """\
        import lightning as L
        from lightning.fabric.strategies import XLAStrategy


        def default_precision(tpu=False):
            if tpu:
                return "32-true"
            return "bf16-mixed"


        def setup(precision=None, tpu=False):
            precision = precision or default_precision(tpu=tpu)
            fabric = L.Fabric(strategy=XLAStrategy() if tpu else "auto", precision=precision)
            fabric.launch(lambda fabric: None)
        """,
    )
    assert found(analysis) == []


def test_its_twin_that_really_gives_xla_bf16_mixed_is_warned(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import lightning as L
        from lightning.fabric.strategies import XLAStrategy


        def default_precision(tpu=False):
            if tpu:
                return "bf16-mixed"
            return "32-true"


        def setup(precision=None, tpu=False):
            precision = precision or default_precision(tpu=tpu)
            fabric = L.Fabric(strategy=XLAStrategy() if tpu else "auto", precision=precision)
            fabric.launch(lambda fabric: None)
        """,
    )
    assert found(analysis) == [
        ("FAB022", 13, "warning", "`precision` left at its default None and `tpu` is True")
    ]


FLAGS = [
    "compile",
    "resume",
    "profile",
    "ema",
    "swa",
    "log_grads",
    "val_every",
    "amp_debug",
    "freeze",
    "tf32",
]


def _many_flags_script() -> str:
    lines = [
        "import argparse",
        "import torch",
        "from lightning.fabric import Fabric",
        "",
        "parser = argparse.ArgumentParser()",
        'parser.add_argument("--strategy", default="ddp", choices=["ddp", "deepspeed", "fsdp"])',
    ]
    lines += [f'parser.add_argument("--{flag}", action="store_true")' for flag in FLAGS]
    lines += [
        "args = parser.parse_args()",
        'fabric = Fabric(accelerator="cuda", devices=2, strategy=args.strategy)',
        "fabric.launch()",
        "model = torch.nn.Linear(4, 2)",
        "optimizer = torch.optim.Adam(model.parameters())",
    ]
    for flag in FLAGS:
        lines += [f"if args.{flag}:", "    fabric.barrier()", "    fabric.print('ok')"]
    lines += [
        "if args.freeze:",
        "    model = fabric.setup_module(model)",
        "    optimizer = fabric.setup_optimizers(optimizer)",
        "else:",
        "    model, optimizer = fabric.setup(model, optimizer)",
    ]
    return "\n".join(lines) + "\n"


def test_ten_independent_flags_are_one_pass_and_the_finding_names_only_what_matters(tmp_path):
    analysis = check(tmp_path, _many_flags_script())
    assert analysis.notes == []  # every path checked
    setup_line = 14 + 4 * len(FLAGS)
    assert found(analysis) == [
        ("FAB001", setup_line, "warning", "`--strategy` is 'deepspeed' and `--freeze` given"),
    ]


def test_a_branch_that_ends_the_script_does_not_make_the_finding_conditional(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import argparse
        import sys
        import torch
        from lightning.fabric import Fabric


        def main(fabric, config_path):
            if config_path is None:
                sys.exit("usage: train.py --config CONFIG")
            model = fabric.setup_module(torch.nn.Linear(4, 2))
            optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))


        parser = argparse.ArgumentParser()
        parser.add_argument("--config")
        args = parser.parse_args()
        fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
        fabric.launch(main, args.config)
        """,
    )
    assert found(analysis) == [("FAB001", 11, "error", None)]


def test_an_early_return_in_a_helper_keeps_the_rest_conditional(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import argparse
        import torch
        from lightning.fabric import Fabric


        def maybe_optimizer(fabric, model, frozen):
            if frozen:
                return None
            return fabric.setup_optimizers(torch.optim.Adam(model.parameters()))


        def main(fabric, frozen):
            model = fabric.setup_module(torch.nn.Linear(4, 2))
            optimizer = maybe_optimizer(fabric, model, frozen)


        parser = argparse.ArgumentParser()
        parser.add_argument("--frozen", action="store_true")
        fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
        fabric.launch(main, parser.parse_args().frozen)
        """,
    )
    assert found(analysis) == [("FAB001", 9, "warning", "`--frozen` left at its default False")]


def test_a_name_bound_on_both_sides_is_joined_not_forked(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric

        fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
        fabric.launch()
        if torch.cuda.is_bf16_supported():
            model = torch.nn.Linear(4, 2).bfloat16()
        else:
            model = torch.nn.Linear(4, 2)
        model = fabric.setup_module(model)
        optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
        """,
    )
    assert found(analysis) == [("FAB001", 11, "error", None)]


PRETRAIN = """\
import argparse
import lightning as L
import torch
from lightning.fabric.strategies import FSDPStrategy, XLAStrategy
from utils import get_default_supported_precision


def setup(devices=8, tpu=False, precision=None, resume=False, compile=False):
    precision = precision or get_default_supported_precision(training=True, tpu=tpu)
    if devices > 1:
        if tpu:
            devices = "auto"
            strategy = XLAStrategy(sync_module_states=False)
        else:
            strategy = FSDPStrategy(state_dict_type="full", limit_all_gathers=True)
    else:
        strategy = "auto"
    fabric = L.Fabric(devices=devices, strategy=strategy, precision=precision)
    fabric.launch(main, resume, compile)


def main(fabric, resume, compile):
    model = torch.nn.Linear(4, 2)
    if compile:
        model = torch.compile(model)
    model = fabric.setup_module(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    optimizer = fabric.setup_optimizers(optimizer)
    if resume:
        fabric.load("ckpt.pth", {"model": model, "optimizer": optimizer})
"""


def _clauses(condition: str) -> list[str]:
    return re.split(r"\) or \(|^\(|\)$", condition)


def test_conditions_are_short_and_name_each_decision_once_per_clause(tmp_path):
    (tmp_path / "utils.py").write_text("def get_default_supported_precision(training, tpu=False):\n    ...\n")
    analysis = check(tmp_path, PRETRAIN)
    conditions = [f.condition for f in analysis.findings if f.condition]
    assert [f.code for f in analysis.findings] == ["FAB001"]
    for condition in conditions:
        assert len(condition) <= 200, condition
        for clause in _clauses(condition):
            subjects = re.findall(r"`([^`]+)`", clause)
            assert len(subjects) == len(set(subjects)), condition
    assert conditions == ["`tpu` is True and (`devices > 1` or `devices` left at its default 8)"]


def test_the_answer_does_not_depend_on_the_clock(tmp_path, monkeypatch):
    # A machine so slow that every clock read is an hour later: a wall-clock budget would give up at
    # once, and the error would become a warning with a "some paths were not checked" note.
    (tmp_path / "utils.py").write_text("def get_default_supported_precision(training, tpu=False):\n    ...\n")
    scripts = {"flags.py": _many_flags_script(), "pretrain.py": PRETRAIN, "plain.py": PLAIN_DEEPSPEED}

    def answers():
        result = {}
        for name, script in scripts.items():
            analysis = check(tmp_path, script, name)
            result[name] = (found(analysis), analysis.notes)
        return result

    before = answers()
    assert before["plain.py"] == ([("FAB001", 6, "error", None)], [])
    start = time.monotonic()
    ticks = iter(range(10**9))
    monkeypatch.setattr(time, "monotonic", lambda: start + 3600.0 * next(ticks))
    monkeypatch.setattr(time, "perf_counter", lambda: start + 3600.0 * next(ticks))
    monkeypatch.setattr(time, "time", lambda: start + 3600.0 * next(ticks))
    assert answers() == before


PLAIN_DEEPSPEED = """\
import torch
from lightning.fabric import Fabric
fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = fabric.setup_module(torch.nn.Linear(4, 2))
optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
"""


@pytest.mark.parametrize("order", [("a.py", "b.py"), ("b.py", "a.py")])
def test_the_answer_does_not_depend_on_what_was_checked_before(tmp_path, order):
    sources = {"a.py": _many_flags_script(), "b.py": PRETRAIN.replace("from utils import", "from os import")}
    results = {name: found(check(tmp_path, sources[name], name)) for name in order}
    alone = {name: found(check(tmp_path, sources[name], name)) for name in sources}
    assert results == alone


def test_a_parameter_compared_with_a_constant_is_named_once(tmp_path):
    # litgpt's LLM.distribute: "`generate_strategy` is 'tensor_parallel'" says it was given a value; the
    # condition does not say that again.
    analysis = check(
        tmp_path,
        """\
        import lightning as L


        def distribute(generate_strategy=None):
            if generate_strategy == "tensor_parallel":
                fabric = L.Fabric(accelerator="cuda", devices=2, strategy="ddp")
                fabric.barrier()
        """,
    )
    assert [(f.code, f.span.start_line + 1, f.condition) for f in analysis.findings] == [
        ("FAB009", 7, "`generate_strategy` is 'tensor_parallel'")
    ]


def test_a_split_statement_keeps_the_paths_a_helper_raised_on_before_the_split(tmp_path):
    # `load_config` raises on some paths before `fabric.world_size > 1` splits the `with`
    # statement; the split must still cover every path that entered it, or the deepspeed
    # paths vanish (this FAB001 was missed) and other findings' conditions name the raise.
    analysis = check(
        tmp_path,
        """\
        import argparse
        from pathlib import Path

        import torch
        import lightning as L


        def load_config(directory):
            if not directory.exists():
                raise FileNotFoundError(directory)
            return {"width": 32}


        def main(fabric, args):
            with fabric.init_module(empty_init=(fabric.world_size > 1)):
                config = load_config(args.checkpoint_dir)
                model = torch.nn.Linear(config["width"], 2)
            model = fabric.setup_module(model)
            optimizer = fabric.setup_optimizers(torch.optim.SGD(model.parameters(), lr=0.1))


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--strategy", choices=["ddp", "deepspeed"], default="ddp")
            parser.add_argument("--devices", type=int, default=1)
            parser.add_argument("--checkpoint-dir", type=Path, default=Path("checkpoints"))
            args = parser.parse_args()
            fabric = L.Fabric(strategy=args.strategy, devices=args.devices)
            fabric.launch(main, args)
        """,
    )
    assert found(analysis) == [("FAB001", 19, "warning", "`--strategy` is 'deepspeed'")]


PROPERTY_SCRIPT = """\
import argparse

import torch
import lightning as L
from lightning.fabric.strategies import DeepSpeedStrategy, FSDPStrategy


class Trainer:
    def __init__(self, fabric):
        self.fabric = fabric

    @property
    def sharded(self):
        strategy = self.fabric.strategy
        if isinstance(strategy, FSDPStrategy):
            return True
        return {tail}

    def configure_model(self):
        with self.fabric.init_module(empty_init=self.sharded):
            return torch.nn.Linear(4, 2)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--strategy", choices=["ddp", "fsdp", "deepspeed_stage_3"], default="ddp")
    args = parser.parse_args()
    fabric = L.Fabric(strategy=args.strategy)
    fabric.launch()
    Trainer(fabric).configure_model()
"""


def test_a_property_runs_its_getter_and_reads_the_deepspeed_stage(tmp_path):
    # `self.sharded` is the getter's result; `strategy.zero_stage_3` is the configured stage
    # (deepspeed.py zero_stage_3), so stage 3 gets empty_init=True: no FAB003.
    tail = "isinstance(strategy, DeepSpeedStrategy) and strategy.zero_stage_3"
    assert found(check(tmp_path, PROPERTY_SCRIPT.replace("{tail}", tail))) == []


def test_the_property_twin_that_leaves_stage_3_on_the_cpu_is_warned(tmp_path):
    analysis = check(tmp_path, PROPERTY_SCRIPT.replace("{tail}", "False"))
    assert found(analysis) == [("FAB003", 20, "warning", "`--strategy` is 'deepspeed_stage_3'")]


@pytest.mark.parametrize("name", ["realistic_train_300.py", "realistic_train_3000.py"])
def test_every_path_of_a_realistic_script_ends_somewhere(name, monkeypatch):
    # Each root's runs, with the paths that end the script, cover every combination of decisions:
    # a path dropped on the way would silently narrow every later finding's condition.
    import fabric_ls.engine as engine
    from fabric_ls.analysis.guards import TRUE

    explorations = []
    real_explore = engine.explore

    def observed(*args, **kwargs):
        explorations.append(real_explore(*args, **kwargs))
        return explorations[-1]

    monkeypatch.setattr(engine, "explore", observed)
    script = Path(__file__).parent.parent / "bench" / "scripts" / name
    analysis = analyze_source(script.read_text(), str(script))
    assert analysis.notes == []
    (exploration,) = explorations
    uncovered = [index for index, root in enumerate(exploration.roots) if root.covered != TRUE]
    assert len(exploration.roots) > 0 and uncovered == []


TWO_FABRICS_SCRIPT = """\
import argparse

import torch
from lightning.fabric import Fabric

parser = argparse.ArgumentParser()
parser.add_argument("--cpu", action="store_true")
args = parser.parse_args()
if args.cpu:
    fabric = Fabric(accelerator="cpu", devices=2, strategy="ddp")
else:
    fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = fabric.setup(model, optimizer)
{tail}
"""


def test_unpacking_what_one_of_two_fabrics_set_up_keeps_the_set_up_model(tmp_path):
    # `model, optimizer = ...` on a value joined from two paths unpacks each path's tuple: the model
    # is still the set-up one, so setting it up again is the error Lightning raises (FAB007).
    analysis = check(tmp_path, TWO_FABRICS_SCRIPT.replace("{tail}", "model = fabric.setup(model)"))
    assert found(analysis) == [("FAB007", 17, "error", None)]


def test_the_unpacking_twin_that_sets_up_once_is_silent(tmp_path):
    analysis = check(tmp_path, TWO_FABRICS_SCRIPT.replace("{tail}", "optimizer.step()"))
    assert analysis.notes == [] and found(analysis) == []


def test_entry_functions_share_the_definitions_but_not_what_another_one_did_to_them(tmp_path):
    # Each command runs in its own process: `cmd_eval` sets up the module's raw model, whatever
    # `cmd_train` (analysed before it, on the same definitions) stored in STATE. Its twin sets the
    # model up twice within one command, which Lightning refuses: FAB007 there, and there only.
    correct = """\
        import torch
        from lightning.fabric import Fabric

        STATE = {"model": torch.nn.Linear(4, 2)}

        def cmd_train(args):
            fabric = Fabric(accelerator="cpu")
            STATE["model"] = fabric.setup(STATE["model"])

        def cmd_eval(args):
            fabric = Fabric(accelerator="cpu")
            STATE["model"] = fabric.setup(STATE["model"])
        """
    assert found(check(tmp_path, correct)) == []
    twice = correct.rstrip(" ") + "            STATE['model'] = fabric.setup(STATE['model'])\n"
    assert [(code, line) for code, line, *_ in found(check(tmp_path, twice))] == [("FAB007", 13)]


def test_a_helper_module_imported_inside_entry_functions_is_theirs_each(tmp_path):
    # Both commands import the helper lazily: the module's top level (its STRATEGY) must still be
    # there for the second, after the first one's writes were undone.
    (tmp_path / "helpers.py").write_text(
        textwrap.dedent(
            """\
            from lightning.fabric import Fabric

            STRATEGY = "deepspeed"

            def make_fabric():
                return Fabric(accelerator="cuda", devices=2, strategy=STRATEGY)
            """
        )
    )
    command = """
        def cmd_{name}(args):
            from helpers import make_fabric

            fabric = make_fabric()
            fabric.launch()
            model = torch.nn.Linear(4, 2)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model = fabric.setup(model)
            optimizer = fabric.setup_optimizers(optimizer)
        """
    source = "import torch\n" + "".join(textwrap.dedent(command).format(name=name) for name in "ab")
    assert [(code, line) for code, line, *_ in found(check(tmp_path, source))] == [
        ("FAB001", 11),
        ("FAB001", 21),
    ]


def _raises_fab001(outcome, line: int) -> bool:
    """Lightning ended the script with FAB001's error (its record's class and message) at ``line``."""
    record = get_record("FAB001")
    return (
        outcome.error_class == record.error_class
        and outcome.raised_by_lightning
        and outcome.line == line
        and record.matches(outcome.message or "")
    )


# What Lightning refuses under DeepSpeed (FAB001): the model and the optimizer set up separately.
SEPARATE_SETUP = """\
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup_module(model)
optimizer = fabric.setup_optimizers(optimizer)
"""


def test_an_option_added_on_one_path_is_read_per_path(tmp_path):
    # `--strategy` exists only when `big` is True: `args.strategy` is its default there. Lightning
    # then builds a DeepSpeedStrategy and refuses the separate setup (FAB001, under that condition);
    # this shape used to crash the analysis.
    analysis = check(
        tmp_path,
        """\
        import argparse
        import torch
        from lightning.fabric import Fabric

        def main(big=False):
            parser = argparse.ArgumentParser()
            if big:
                fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
                parser.add_argument("--strategy", default="deepspeed")
            args = parser.parse_args()
            fabric = Fabric(accelerator="cuda", devices=2, strategy=args.strategy)
            {SEPARATE_SETUP_IN_A_FUNCTION}
        """.format(SEPARATE_SETUP_IN_A_FUNCTION=SEPARATE_SETUP.replace("\n", "\n            ")),
    )
    assert found(analysis) == [
        ("FAB001", 16, "warning", "`big` is True and `--strategy` left at its default 'deepspeed'")
    ]


def test_an_option_added_in_a_branch_is_not_skipped_with_it(tmp_path):
    # The branch only adds an option, yet which default `--strategy` has depends on it: with `X`
    # set, Lightning builds a DeepSpeedStrategy and refuses the separate setup.
    analysis = check(
        tmp_path,
        """\
        import argparse
        import os
        import torch
        from lightning.fabric import Fabric

        parser = argparse.ArgumentParser()
        if os.environ.get("X"):
            parser.add_argument("--strategy", default="deepspeed")
        else:
            parser.add_argument("--strategy", default="ddp")
        args = parser.parse_args()
        fabric = Fabric(accelerator="cuda", devices=2, strategy=args.strategy)
        {SEPARATE_SETUP}
        """.format(SEPARATE_SETUP=SEPARATE_SETUP.replace("\n", "\n        ")),
    )
    assert found(analysis) == [
        ("FAB001", 17, "warning", "`os.environ.get(\"X\")` and `--strategy` left at its default 'deepspeed'")
    ]


TWEAKS = {
    "item, **config": (
        'config = {"strategy": "ddp"}',
        'config["strategy"] = "deepspeed"',
        "Fabric(**config, {})",
    ),
    "item, config[...]": (
        'config = {"strategy": "ddp"}',
        'config["strategy"] = "deepspeed"',
        'Fabric(strategy=config["strategy"], {})',
    ),
    "update()": (
        'config = {"strategy": "ddp"}',
        'config.update(strategy="deepspeed")',
        "Fabric(**config, {})",
    ),
    "attribute": (
        "config = Config()",
        'config.strategy = "deepspeed"',
        "Fabric(strategy=config.strategy, {})",
    ),
    "dict(), item": (
        'config = dict(strategy="ddp")',
        'config["strategy"] = "deepspeed"',
        "Fabric(**config, {})",
    ),
    "setattr()": (
        "config = Config()",
        'setattr(config, "strategy", "deepspeed")',
        "Fabric(strategy=config.strategy, {})",
    ),
}


def _tweaked(shape: str) -> str:
    setup, tweak, fabric = TWEAKS[shape]
    return (
        textwrap.dedent(
            f"""\
        import os
        from dataclasses import dataclass
        import torch
        from lightning.fabric import Fabric

        @dataclass
        class Config:
            strategy: str = "ddp"

        {setup}
        if os.environ.get("BIG"):
            {tweak}
        fabric = {fabric.format('accelerator="cuda", devices=2')}
        """
        )
        + SEPARATE_SETUP
    )


@pytest.mark.parametrize("shape", sorted(TWEAKS))
def test_a_branch_that_only_changes_what_a_fabric_call_reads_is_run(tmp_path, shape):
    # The branch binds no name and calls nothing Fabric-related, yet it picks the strategy:
    # with BIG set, Lightning builds a DeepSpeedStrategy and refuses the separate setup.
    analysis = check(tmp_path, _tweaked(shape))
    assert found(analysis) == [("FAB001", 18, "warning", '`os.environ.get("BIG")`')]


def test_the_branch_tweaks_under_lightning():
    # The warning's condition, proven: with BIG set Lightning raises FAB001's error at that line;
    # without it the script runs clean.
    pytest.importorskip("lightning")
    from lightning_harness import Script, run_many

    shapes = sorted(TWEAKS)
    scripts = [Script(_tweaked(shape), env=env) for shape in shapes for env in ({"BIG": "1"}, {})]
    outcomes = run_many(scripts, profile="gpu8")
    for index, shape in enumerate(shapes):
        raised, clean = outcomes[2 * index], outcomes[2 * index + 1]
        assert _raises_fab001(raised, 18), (shape, raised.message)
        assert clean.error_class is None, (shape, clean.message)


def test_an_attribute_set_in_a_branch_reaches_a_fabric_built_in_a_helper_module(tmp_path):
    # Nothing in train.py reads `cfg.strategy`: `make_fabric` in helpers.py does.
    (tmp_path / "helpers.py").write_text(
        textwrap.dedent(
            """\
            from dataclasses import dataclass
            from lightning.fabric import Fabric

            @dataclass
            class Config:
                strategy: str = "ddp"

            def make_fabric(cfg):
                return Fabric(accelerator="cuda", devices=2, strategy=cfg.strategy)
            """
        )
    )
    analysis = check(
        tmp_path,
        """\
        import os
        import torch
        from helpers import Config, make_fabric

        cfg = Config()
        if os.environ.get("DS"):
            cfg.strategy = "deepspeed"
        fabric = make_fabric(cfg)
        {SEPARATE_SETUP}
        """.format(SEPARATE_SETUP=SEPARATE_SETUP.replace("\n", "\n        ")),
    )
    assert found(analysis) == [("FAB001", 13, "warning", '`os.environ.get("DS")`')]


ENVIRONMENT_DEFAULT = (
    """\
import os
import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy=os.environ.get("STRATEGY", "deepspeed"))
"""
    + SEPARATE_SETUP
)


def test_an_environment_variable_with_a_default_is_its_default_unless_set(tmp_path):
    # Lightning raises FAB001's error with STRATEGY unset and runs clean with STRATEGY=ddp.
    analysis = check(tmp_path, ENVIRONMENT_DEFAULT)
    assert found(analysis) == [("FAB001", 10, "warning", "`STRATEGY` not set in the environment")]
    pytest.importorskip("lightning")
    from lightning_harness import Script, run_many

    unset, ddp = run_many([Script(ENVIRONMENT_DEFAULT), Script(ENVIRONMENT_DEFAULT, env={"STRATEGY": "ddp"})])
    assert _raises_fab001(unset, 10), unset.message
    assert ddp.error_class is None, ddp.message


def test_two_reads_of_one_environment_variable_are_one_decision(tmp_path):
    # Both reads see the same environment, whatever default each gives: the condition names the
    # variable once, and says nothing of one read's default.
    source = (
        "import os\n"
        "import torch\n"
        "from lightning.fabric import Fabric\n\n"
        'devices = 4 if os.environ.get("STRATEGY", "ddp") == "ddp" else 2\n'
        'strategy = os.environ.get("STRATEGY", "deepspeed")\n'
        'fabric = Fabric(accelerator="cuda", devices=devices, strategy=strategy)\n'
    ) + SEPARATE_SETUP
    assert found(check(tmp_path, source)) == [
        ("FAB001", 12, "warning", "`STRATEGY` not set in the environment")
    ]
