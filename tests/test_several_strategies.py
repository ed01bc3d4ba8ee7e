"""One ``Fabric(...)`` whose arguments take several values is one object with several strategies.

What is built from it (set-up models, their outputs) is built once, and each strategy keeps its
guard: a read of ``fabric.strategy`` or ``fabric.world_size`` is a value per strategy, and a
question the run needs one answer to (are parameters on the meta device? does ``launch()`` raise?)
splits the path by the answer. Each test has a correct script and a twin that Lightning rejects.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fabric_ls.engine import DEFAULT_SETTINGS, Project, Settings, analyze_source


def check(tmp_path: Path, source: str, settings: Settings = DEFAULT_SETTINGS):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source))
    return analyze_source(script.read_text(), str(script), settings, project=Project([str(tmp_path)]))


def found(analysis) -> list[tuple[str, int, str, str | None]]:
    return [(f.code, f.span.start_line + 1, f.severity, f.condition) for f in analysis.findings]


ISINSTANCE_SCRIPT = """\
import argparse

import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import DeepSpeedStrategy

parser = argparse.ArgumentParser()
parser.add_argument("--strategy", choices=["ddp", "fsdp", "deepspeed"], default="ddp")
parser.add_argument("--precision", choices=["32-true", "bf16-mixed", "16-mixed"], default="32-true")
args = parser.parse_args()
fabric = Fabric(accelerator="cuda", devices=2, strategy=args.strategy, precision=args.precision)
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
if {test}:
    model, optimizer = fabric.setup(model, optimizer)
else:
    model = fabric.setup_module(model)
    optimizer = fabric.setup_optimizers(optimizer)
"""


def test_isinstance_of_the_strategy_keeps_each_strategy_on_its_own_side(tmp_path):
    # DeepSpeed takes the joint setup; the others may set up separately: nothing raises.
    analysis = check(
        tmp_path, ISINSTANCE_SCRIPT.replace("{test}", "isinstance(fabric.strategy, DeepSpeedStrategy)")
    )
    assert analysis.notes == []
    assert found(analysis) == []


def test_the_isinstance_twin_that_sends_deepspeed_to_setup_optimizers_is_warned(tmp_path):
    analysis = check(
        tmp_path, ISINSTANCE_SCRIPT.replace("{test}", "not isinstance(fabric.strategy, DeepSpeedStrategy)")
    )
    assert found(analysis) == [("FAB001", 19, "warning", "`--strategy` is 'deepspeed'")]


META_SCRIPT = """\
import argparse

import torch
from lightning.fabric import Fabric

parser = argparse.ArgumentParser()
parser.add_argument("--strategy", choices=["ddp", "fsdp"], default="ddp")
parser.add_argument("--devices", type=int, choices=[2, 4, 8], default=2)
args = parser.parse_args()
fabric = Fabric(accelerator="cuda", devices=args.devices, strategy=args.strategy)
fabric.launch()
with fabric.init_module(empty_init=True):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
{setup}
"""
JOINT = """\
optimizer = torch.optim.Adam(model.parameters())
model, optimizer = fabric.setup(model, optimizer)
"""
MODULE_FIRST = """\
model = fabric.setup_module(model)
optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
"""


def test_meta_parameters_exist_only_under_the_strategy_that_makes_them(tmp_path):
    # Only FSDP creates the model on the meta device; setting it up first is right for every strategy.
    analysis = check(tmp_path, META_SCRIPT.replace("{setup}", MODULE_FIRST))
    assert analysis.notes == []
    assert found(analysis) == []


def test_the_joint_setup_twin_is_warned_under_fsdp_only(tmp_path):
    analysis = check(tmp_path, META_SCRIPT.replace("{setup}", JOINT))
    assert found(analysis) == [("FAB002", 15, "warning", "`--strategy` is 'fsdp'")]


WORLD_SIZE_SCRIPT = """\
import argparse

import torch
from lightning.fabric import Fabric

parser = argparse.ArgumentParser()
parser.add_argument("--devices", type=int, choices=[1, 2, 4], default=1)
args = parser.parse_args()
fabric = Fabric(accelerator="cuda", devices=args.devices)
if fabric.world_size > {limit}:
    fabric.launch()
model = fabric.setup(torch.nn.Linear(4, 2))
"""


def test_world_size_is_read_per_strategy(tmp_path):
    # One device is a single-device strategy, which needs no launch; more get DDP, and are launched.
    analysis = check(tmp_path, WORLD_SIZE_SCRIPT.replace("{limit}", "1"))
    assert analysis.notes == []
    assert found(analysis) == []


def test_the_world_size_twin_that_leaves_two_devices_unlaunched_is_warned(tmp_path):
    analysis = check(tmp_path, WORLD_SIZE_SCRIPT.replace("{limit}", "2"))
    assert found(analysis) == [("FAB009", 12, "warning", "`--devices` is 2")]


def test_launch_under_fabric_run_ends_only_the_paths_whose_strategy_the_cli_sets(tmp_path):
    # The declared strategy stands for `fabric run --strategy ddp`: it applies where the script
    # leaves the strategy open ("auto"), and there launch() raises (FAB017). Where the script picks
    # DeepSpeed itself, the run goes on to the separate setup_optimizers (FAB001).
    analysis = check(
        tmp_path,
        """\
        import argparse

        import torch
        from lightning.fabric import Fabric

        parser = argparse.ArgumentParser()
        parser.add_argument("--big", action="store_true")
        args = parser.parse_args()
        fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed" if args.big else "auto")
        fabric.launch()
        model = fabric.setup_module(torch.nn.Linear(4, 2))
        optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
        """,
        Settings(strategy="ddp"),
    )
    # Every path that reaches setup_optimizers has DeepSpeed (the others ended at launch()): an error.
    assert found(analysis) == [
        ("FAB017", 10, "warning", "`--big` left at its default False"),
        ("FAB001", 12, "error", None),
    ]


def _steps_after_the_fabric(tmp_path: Path, source: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """Steps the analysis spends from ``fabric.launch()`` (line 11) to the end of the script."""
    from fabric_ls.analysis.statements import StatementsMixin

    started: list[int] = []
    runs: list = []
    real = StatementsMixin._exec_statement

    def counting(self, statement, frame):
        if statement.lineno == 11 and frame.function is None:
            started.append(self.steps)
            runs.append(self)
        return real(self, statement, frame)

    monkeypatch.setattr(StatementsMixin, "_exec_statement", counting)
    check(tmp_path, source)
    (start,) = started  # one run, one pass over the launch
    return runs[0].steps - start


TRAINING_SCRIPT = """\
import argparse

import torch
from lightning.fabric import Fabric

parser = argparse.ArgumentParser()
parser.add_argument("--strategy", choices={choices}, default="ddp")
parser.add_argument("--precision", choices=["32-true", "bf16-mixed"], default="32-true")
args = parser.parse_args()
fabric = Fabric(accelerator="cuda", devices=2, strategy=args.strategy, precision=args.precision)
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = fabric.setup(model, optimizer)
loader = fabric.setup_dataloaders(torch.utils.data.DataLoader(range(8), batch_size=2))
for epoch in range(2):
    model.train()
    for batch in loader:
        loss = model(batch).sum()
        fabric.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    fabric.print(epoch, loss.item())
"""


def test_what_is_built_from_the_fabric_is_built_once_whatever_the_number_of_strategies(tmp_path, monkeypatch):
    # One Fabric with five strategies costs what one with two does: the set-up model, its
    # outputs and the loop are not evaluated once per strategy.
    two = _steps_after_the_fabric(
        tmp_path, TRAINING_SCRIPT.replace("{choices}", '["ddp", "fsdp"]'), monkeypatch
    )
    five = _steps_after_the_fabric(
        tmp_path,
        TRAINING_SCRIPT.replace("{choices}", '["ddp", "fsdp", "deepspeed", "ddp_spawn", "dp"]'),
        monkeypatch,
    )
    assert two == five


def test_a_fabric_with_more_combinations_than_one_object_holds_is_still_checked_whole(tmp_path):
    # 3 × 6 × 4 × 3 = 216 combinations of independent options, more than MAX_FABRIC_OPTIONS: the
    # statement splits on the last arguments, each part builds a smaller Fabric, no path is dropped.
    from fabric_ls.analysis.fabric_strategies import MAX_FABRIC_OPTIONS

    assert 3 * 6 * 4 * 3 > MAX_FABRIC_OPTIONS
    analysis = check(
        tmp_path,
        """\
        import argparse

        import torch
        from lightning.fabric import Fabric

        parser = argparse.ArgumentParser()
        parser.add_argument("--accelerator", choices=["cpu", "cuda", "tpu"], default="cuda")
        STRATEGIES = ["ddp", "fsdp", "deepspeed", "dp", "auto", "ddp_spawn"]
        parser.add_argument("--strategy", choices=STRATEGIES, default="ddp")
        parser.add_argument("--devices", type=int, choices=[1, 2, 4, 8], default=2)
        parser.add_argument("--precision", choices=["32-true", "16-mixed", "bf16-mixed"], default="32-true")
        args = parser.parse_args()
        fabric = Fabric(
            accelerator=args.accelerator,
            strategy=args.strategy,
            devices=args.devices,
            precision=args.precision,
        )
        fabric.launch(lambda fabric: None)
        model = fabric.setup_module(torch.nn.Linear(4, 2))
        optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
        """,
    )
    assert analysis.notes == []
    by_code = {code: (line, severity, condition) for code, line, severity, condition in found(analysis)}
    # XLA too needs the joint setup: "auto" on a TPU with more than one device is XLAStrategy.
    tpu = "`--accelerator` is 'tpu' and `--strategy` is 'deepspeed' or 'auto' and `--devices` is not 1"
    assert by_code["FAB001"] == (21, "warning", f"`--strategy` is 'deepspeed' or ({tpu})")
    # The precision is the argument left to the split: XLA refusing mixed precision is found only
    # if every part of the split was checked (the first alone is '32-true').
    mixed = "`--precision` is '16-mixed' or 'bf16-mixed'"
    xla = f"`--accelerator` is 'tpu' and `--strategy` is 'fsdp' or 'auto' and {mixed}"
    assert by_code["FAB022"] == (13, "warning", xla)


NESTED_SCRIPT = """\
import argparse

import torch
from lightning.fabric import Fabric


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(4, 4)
        self.head = torch.nn.Linear(4, 2)


parser = argparse.ArgumentParser()
parser.add_argument("--strategy", choices={choices}, default={default})
args = parser.parse_args()
fabric = Fabric(accelerator="cuda", devices=2, strategy=args.strategy)
fabric.launch()
with fabric.init_module(empty_init=True):
    model = Net()
optimizer = torch.optim.Adam(model.head.parameters())
model, optimizer = fabric.setup(model, optimizer)
"""


@pytest.mark.parametrize("choices", [["ddp", "fsdp"], ["fsdp", "ddp"]])
def test_the_layers_a_module_builds_under_init_module_are_meta_under_fsdp_only(tmp_path, choices):
    # `Net()` splits on whether FSDP puts it on the meta device; its layers, built in its
    # `__init__` on that side, follow: the optimizer over `model.head` is on meta under FSDP alone.
    source = NESTED_SCRIPT.replace("{choices}", repr(choices)).replace("{default}", repr(choices[0]))
    (finding,) = found(check(tmp_path, source))
    default = " (the default)" if choices[0] == "fsdp" else ""
    assert finding == ("FAB002", 22, "warning", f"`--strategy` is 'fsdp'{default}")


BACKWARD_SCRIPT = """\
import argparse

import torch
from lightning.fabric import Fabric

parser = argparse.ArgumentParser()
parser.add_argument("--strategy", choices=["ddp", "deepspeed", "fsdp", "ddp_spawn"], default="ddp")
parser.add_argument("--precision", choices=["32-true", "16-mixed", "bf16-mixed"], default="32-true")
args = parser.parse_args()
fabric = Fabric(accelerator="cuda", devices=2, strategy=args.strategy, precision=args.precision)
fabric.launch(lambda fabric: None)
fabric.barrier()
model, optimizer = fabric.setup(torch.nn.Linear(4, 2), torch.optim.SGD([torch.zeros(1)], lr=0.1))
loss = model(torch.randn(2, 4)).sum()
loss.backward()
"""


def test_a_rule_that_reads_the_precision_tells_each_precision_apart(tmp_path):
    # FAB016 reads the class and the precision: DeepSpeed and FSDP always need fabric.backward,
    # DDP (the other two choices) only under mixed precision.
    (finding,) = [f for f in found(check(tmp_path, BACKWARD_SCRIPT)) if f[0] == "FAB016"]
    mixed = "`--precision` is '16-mixed' or 'bf16-mixed'"
    assert finding == ("FAB016", 15, "warning", f"`--strategy` is 'deepspeed' or 'fsdp' or {mixed}")


def test_the_rules_run_once_per_value_of_what_they_read(tmp_path, monkeypatch):
    # 4 strategies × 3 precisions: the rules on `fabric.setup(...)` read the strategy's class (and
    # DeepSpeed's stage), never the precision, so they run once per class (ddp and ddp_spawn are
    # both DDPStrategy), not once per combination (12). Those on `fabric.barrier()` outside a rank
    # test read nothing of the strategy (FAB033 looks at the strategy only under one): once.
    import fabric_ls.engine as engine

    runs: list[str] = []
    real = engine._RuleChecker.__call__

    def counting(self, event):
        runs.append(event.method)
        return real(self, event)

    monkeypatch.setattr(engine._RuleChecker, "__call__", counting)
    check(tmp_path, BACKWARD_SCRIPT)
    assert runs.count("setup") == 3
    assert runs.count("barrier") == 1


def test_an_argument_the_script_tested_is_the_constant_it_equals_on_that_side(tmp_path):
    # `args.devices == 1` held: Fabric gets devices=1 there, and "auto" on one TPU core is
    # SingleDeviceXLAStrategy (not the multi-device XLAStrategy an unknown count would give).
    analysis = check(
        tmp_path,
        """\
        import argparse

        from lightning.fabric import Fabric

        parser = argparse.ArgumentParser()
        parser.add_argument("--devices", type=int, default=8)
        args = parser.parse_args()
        strategy = "auto" if args.devices == 1 else "xla"
        fabric = Fabric(accelerator="tpu", devices=args.devices, strategy=strategy)
        """,
    )
    (site,) = analysis.fabric_sites
    candidates = {candidate.class_name: candidate.condition for candidate in site.candidates}
    assert candidates == {
        "XLAStrategy": "`--devices` is not 1 or `--devices` left at its default 8",
        "SingleDeviceXLAStrategy": "`--devices` is 1",
    }
