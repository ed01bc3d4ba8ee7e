"""Shapes found in public training scripts nobody here wrote, each reduced to a few lines and run under
the real Lightning: what fabric-ls reports must be what Lightning (or Python, first) does.

Found by running ``fabric-ls check`` over public files that use Fabric and triaging every finding.
The rule samples of FAB015 (a dataset given to ``setup_dataloaders``) and FAB024 (a ``torch.nn``
module given to ``no_backward_sync``) came from the same hunt; they live with their rules.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple, Optional

import pytest

from fabric_ls.engine import analyze_source


class Shape(NamedTuple):
    script: str
    profile: str
    # What fabric-ls reports: (rule, line) each.
    findings: tuple[tuple[str, int], ...]
    # How the script ends under Lightning: the error class and whether Lightning raised it, at the line.
    error: Optional[tuple[str, bool, int]]


SHAPES = {
    # ``empty_init`` that may be None (an environment variable, a parameter): only ``False`` is
    # refused under ZeRO-3 (deepspeed.py ``empty_init is False``), so no FAB003 for a falsy unknown.
    "empty_init from the environment": Shape(
        """import os
import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import DeepSpeedStrategy

fabric = Fabric(accelerator="cuda", devices=2, strategy=DeepSpeedStrategy(stage=3))
fabric.launch()
with fabric.init_module(empty_init=os.environ.get("EMPTY_INIT")):
    model = torch.nn.Linear(4, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = fabric.setup(model, optimizer)
""",
        "gpu8",
        (),
        None,
    ),
    # A name assigned in the function is local to all of it: reading it first raises
    # UnboundLocalError (the global is not read), before any Fabric exists.
    "a local read before it is assigned": Shape(
        """import torch
import lightning as L
from lightning.fabric.strategies import FSDPStrategy

precision = None


def setup():
    precision = precision or "32-true"
    fabric = L.Fabric(accelerator="cuda", devices=2, strategy=FSDPStrategy(), precision=precision)
    model = fabric.setup_module(torch.nn.Linear(4, 4))


setup()
""",
        "gpu8",
        (),
        ("UnboundLocalError", False, 9),
    ),
    # ... but a name a skipped loop binds (nothing Fabric-related in it) is bound: the path goes on.
    "a local bound in a loop with nothing Fabric-related": Shape(
        """import torch
from lightning.fabric import Fabric


def train():
    fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
    fabric.launch()
    for epoch in range(3):
        last = epoch * 2
    print(last)
    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model = fabric.setup_module(model)
    optimizer = fabric.setup_optimizers(optimizer)


train()
""",
        "gpu8",
        (("FAB001", 14),),
        ("RuntimeError", True, 14),
    ),
    # ... but in a loop an earlier iteration binds it: the setup after it is still checked.
    "a local bound by an earlier iteration": Shape(
        """import torch
import lightning as L

previous = None


def train():
    fabric = L.Fabric(accelerator="cuda", devices=2, strategy="ddp")
    model = torch.nn.Linear(4, 4)
    for step in range(2):
        if step:
            print(previous)
        previous = step
    model = fabric.setup_module(model)


train()
""",
        "gpu8",
        (("FAB009", 14),),
        ("RuntimeError", True, 14),
    ),
    # ``launch(partial(train, cfg))`` runs ``train(cfg, fabric)``: its setup is checked with that Fabric.
    "launch of a partial": Shape(
        """from functools import partial

import torch
import lightning as L
from lightning.fabric.strategies import XLAFSDPStrategy


def train(flags, fabric):
    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = fabric.setup(model, optimizer)


fabric = L.Fabric(accelerator="tpu", devices=8, strategy=XLAFSDPStrategy())
fabric.launch(partial(train, {"lr": 0.1}))
""",
        "tpu8",
        (("FAB011", 11),),
        ("NotImplementedError", True, 11),
    ),
    # Lightning's own tests mark a Fabric launched by hand (another one launched the processes).
    "launched by hand": Shape(
        """import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import FSDPStrategy

fabric = Fabric(accelerator="cuda", devices=2, strategy=FSDPStrategy())
fabric._launched = True
model = fabric.setup_module(torch.nn.Linear(4, 4))
optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
""",
        "gpu8",
        (),
        None,
    ),
    # Models set up in a comprehension are set up (it was "No models were set up for backward").
    "set up in a comprehension": Shape(
        """import torch
import lightning as L

fabric = L.Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
nets = [torch.nn.Linear(4, 4)]
pairs = [fabric.setup(m, torch.optim.AdamW(m.parameters())) for m in nets]
model, optimizer = pairs[0]
fabric.backward(model(torch.randn(2, 4, device=fabric.device)).sum())
""",
        "gpu8",
        (),
        None,
    ),
    # ... once per item of a known list: two DeepSpeed models, so backward needs ``model=``.
    "two models set up in a comprehension": Shape(
        """import torch
import lightning as L

fabric = L.Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
nets = [torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)]
pairs = [fabric.setup(m, torch.optim.AdamW(m.parameters())) for m in nets]
model, optimizer = pairs[0]
fabric.backward(model(torch.randn(2, 4, device=fabric.device)).sum())
""",
        "gpu8",
        (("FAB005", 9),),
        ("ValueError", True, 9),
    ),
    # sheeprl's ``if not _is_using_cli(): fabric.launch()``: run with python, it launches.
    "launch unless under fabric run": Shape(
        """import torch
from lightning.fabric import Fabric
from lightning.fabric.fabric import _is_using_cli

fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
if not _is_using_cli():
    fabric.launch()
model = fabric.setup_module(torch.nn.Linear(4, 4))
""",
        "gpu8",
        (),
        None,
    ),
    # Models kept in a dict, replaced by their wrappers in a loop: which item is which is not known.
    "models in a dict set up in a loop": Shape(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch()
nets = {"g": torch.nn.Linear(4, 4), "d": torch.nn.Linear(4, 4)}
for key in nets:
    nets[key] = fabric.setup(nets[key])
with fabric.no_backward_sync(nets["g"]):
    fabric.backward(nets["g"](torch.randn(2, 4, device=fabric.device)).sum())
""",
        "gpu8",
        (),
        None,
    ),
    # Lightning's own tests give ``setup_dataloaders`` a range (test_fabric.py).
    "a range given to setup_dataloaders": Shape(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
loader = fabric.setup_dataloaders(range(8))
""",
        "cpu",
        (("FAB015", 4),),
        ("TypeError", True, 4),
    ),
    # A function defined inside another reads its names when it runs: here the enclosing ``fabric``.
    "a nested function using the enclosing fabric": Shape(
        """import torch
from lightning.fabric import Fabric


def run():
    fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
    fabric.launch()

    def setup_all(model):
        model = fabric.setup_module(model)
        optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
        return model, optimizer

    model, optimizer = setup_all(torch.nn.Linear(4, 4))


run()
""",
        "gpu8",
        (("FAB001", 11),),
        ("RuntimeError", True, 11),
    ),
    # A loop that sets a model up per item of a short known range runs per item: two DeepSpeed
    # engines, so ``backward`` needs ``model=`` (as an ensemble of critics does).
    "models set up in a loop": Shape(
        """import torch
import lightning as L

fabric = L.Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
ensemble = []
for _ in range(2):
    net = torch.nn.Linear(4, 4)
    ensemble.append(fabric.setup(net, torch.optim.AdamW(net.parameters())))
model, optimizer = ensemble[0]
fabric.backward(model(torch.randn(2, 4, device=fabric.device)).sum())
""",
        "gpu8",
        (("FAB005", 11),),
        ("ValueError", True, 11),
    ),
    # ... and one model: no FAB005.
    "one model set up in a loop": Shape(
        """import torch
import lightning as L

fabric = L.Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
ensemble = []
for _ in range(1):
    net = torch.nn.Linear(4, 4)
    ensemble.append(fabric.setup(net, torch.optim.AdamW(net.parameters())))
model, optimizer = ensemble[0]
fabric.backward(model(torch.randn(2, 4, device=fabric.device)).sum())
""",
        "gpu8",
        (),
        None,
    ),
    # An optimizer over an item of a ``ModuleList`` built on the meta device: meta parameters too.
    "an optimizer over a meta submodule's item": Shape(
        """import torch
from lightning.fabric import Fabric


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)])


fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
fabric.launch()
with fabric.init_module(empty_init=True):
    model = Net()
optimizer = torch.optim.AdamW(model.layers[-1].parameters(), lr=1e-3)
model, optimizer = fabric.setup(model, optimizer)
""",
        "gpu8",
        (("FAB002", 16),),
        ("RuntimeError", True, 16),
    ),
    # The strategy's class name tested instead of ``isinstance``: the branch is decided.
    "the strategy's class name": Shape(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 4)
optimizer = torch.optim.Adam(model.parameters())
if fabric.strategy.__class__.__name__ == "DeepSpeedStrategy":
    model, optimizer = fabric.setup(model, optimizer)
else:
    model = fabric.setup_module(model)
    optimizer = fabric.setup_optimizers(optimizer)
""",
        "gpu8",
        (),
        None,
    ),
    # ``pytest.raises`` (or ``contextlib.suppress``) swallows the error it expects: the next is reached.
    "an error expected by pytest.raises": Shape(
        """import pytest
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
with pytest.raises(ValueError, match="requires at least one dataloader"):
    fabric.setup_dataloaders()
fabric.setup_dataloaders(range(2))
""",
        "cpu",
        (("FAB015", 6), ("FAB015", 7)),
        ("TypeError", True, 7),
    ),
    # A Fabric handed to a workspace class's ``__init__`` is followed there: it is not launched.
    "a Fabric passed to a class that does not launch it": Shape(
        """import torch
import lightning as L


class Monitor:
    def __init__(self, fabric, window_size=2):
        self.window_size = window_size


fabric = L.Fabric(accelerator="cuda", devices=8, strategy="fsdp")
monitor = Monitor(fabric, window_size=2)
model = fabric.setup_module(torch.nn.Linear(4, 4))
""",
        "gpu8",
        (("FAB009", 12),),
        ("RuntimeError", True, 12),
    ),
    # litgpt's XLA helper starts with ``assert isinstance(fabric.strategy, XLAFSDPStrategy)``: under
    # another strategy the script's AssertionError comes first.
    "an assert on the strategy": Shape(
        """import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import DeepSpeedStrategy, XLAFSDPStrategy


def build(fabric):
    assert isinstance(fabric.strategy, XLAFSDPStrategy)
    with fabric.init_module(empty_init=False):
        return torch.nn.Linear(4, 4)


fabric = Fabric(accelerator="cuda", devices=2, strategy=DeepSpeedStrategy(stage=3))
fabric.launch()
model = build(fabric)
""",
        "gpu8",
        (),
        ("AssertionError", False, 7),
    ),
    # Models built by a comprehension over a short range, then set up one by one.
    "models built by a comprehension": Shape(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
nets = [torch.nn.Linear(4, 4) for _ in range(2)]
pairs = [fabric.setup(m, torch.optim.Adam(m.parameters())) for m in nets]
model, optimizer = pairs[0]
fabric.backward(model(torch.randn(2, 4, device=fabric.device)).sum())
""",
        "gpu8",
        (("FAB005", 9),),
        ("ValueError", True, 9),
    ),
    # An error the script catches does not end it: the same rule's next mistake is reached and reported.
    "an error caught, then another": Shape(
        """import torch
from torch.utils.data import TensorDataset
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
try:
    fabric.setup_dataloaders()
except ValueError:
    pass
loader = fabric.setup_dataloaders(TensorDataset(torch.arange(4.0)))
""",
        "cpu",
        (("FAB015", 7), ("FAB015", 10)),
        ("TypeError", True, 10),
    ),
    # A Fabric built by a ``functools.partial`` of its class: the strategy is the partial's.
    "Fabric built by functools.partial": Shape(
        """import functools
import torch
from lightning.fabric import Fabric

make = functools.partial(Fabric, accelerator="cuda", devices=2, strategy="deepspeed")
fabric = make()
fabric.launch()
model = fabric.setup_module(torch.nn.Linear(4, 4))
optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
""",
        "gpu8",
        (("FAB001", 9),),
        ("RuntimeError", True, 9),
    ),
    # ... whose call's keywords win over the partial's, as Python's do.
    "Fabric built by functools.partial, strategy given at the call": Shape(
        """import functools
import torch
from lightning.fabric import Fabric

make = functools.partial(Fabric, accelerator="cuda", devices=2, strategy="deepspeed")
fabric = make(strategy="ddp")
fabric.launch()
model = fabric.setup_module(torch.nn.Linear(4, 4))
optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
""",
        "gpu8",
        (),
        None,
    ),
    # A Fabric method fetched with ``getattr`` and a constant name (Lightning's own tests:
    # ``setup = getattr(fabric, setup_method)``) is that method.
    "a Fabric method fetched by getattr": Shape(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_2")
fabric.launch()
model = fabric.setup_module(torch.nn.Linear(4, 4))
setup_optimizers = getattr(fabric, "setup_optimizers")
optimizer = setup_optimizers(torch.optim.Adam(model.parameters()))
""",
        "gpu8",
        (("FAB001", 8),),
        ("RuntimeError", True, 8),
    ),
    "a Fabric method fetched by getattr, the joint setup": Shape(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_2")
fabric.launch()
model = torch.nn.Linear(4, 4)
setup = getattr(fabric, "setup")
model, optimizer = setup(model, torch.optim.Adam(model.parameters()))
fabric.backward(model(torch.randn(2, 4, device=fabric.device)).sum())
""",
        "gpu8",
        (),
        None,
    ),
    # A dataclass of Fabric's arguments spread with ``dataclasses.asdict``.
    "Fabric(**dataclasses.asdict(config))": Shape(
        """import dataclasses
import torch
from lightning.fabric import Fabric


@dataclasses.dataclass
class FabricConfig:
    accelerator: str = "cuda"
    devices: int = 2
    strategy: str = "ddp"


config = FabricConfig(**{"strategy": "deepspeed"})
fabric = Fabric(**dataclasses.asdict(config))
fabric.launch()
model = fabric.setup_module(torch.nn.Linear(4, 4))
optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
""",
        "gpu8",
        (("FAB001", 17),),
        ("RuntimeError", True, 17),
    ),
    # A module-level list written with its items is never empty: ``not DATA or len(DATA) < 1`` is
    # false, so the helper never returns None (Pints-AI/1.5-Pints pretrain/main.py).
    "a non-empty list constant tested": Shape(
        """import torch
from torch.utils.data import DataLoader, TensorDataset
import lightning as L

DATA_CONFIG = ["dataset-a"]


def create_dataloader():
    if not DATA_CONFIG or len(DATA_CONFIG) < 1:
        return None
    return DataLoader(TensorDataset(torch.randn(4, 2)))


fabric = L.Fabric(accelerator="cpu", devices=1)
loader = fabric.setup_dataloaders(create_dataloader())
""",
        "cpu",
        (),
        None,
    ),
}
# Each quiet shape above has a twin one change away that Lightning rejects, and fabric-ls reports it:
# the silence comes from reading the shape, not from not reaching it.
_TYPE_TEST = (
    SHAPES["the strategy's class name"]
    .script.replace(
        'fabric.strategy.__class__.__name__ == "DeepSpeedStrategy"', "type(fabric.strategy) is TEST"
    )
    .replace(
        "from lightning.fabric import Fabric\n",
        "from lightning.fabric import Fabric\nfrom lightning.fabric.strategies import DeepSpeedStrategy\n",
    )
)
SHAPES["the strategy's class by type()"] = Shape(
    _TYPE_TEST.replace("is TEST", "is DeepSpeedStrategy"), "gpu8", (), None
)
SHAPES["the strategy's class by type(), the other way round"] = Shape(
    _TYPE_TEST.replace("is TEST", "is not DeepSpeedStrategy"),
    "gpu8",
    (("FAB001", 13),),
    ("RuntimeError", True, 13),
)
# Each quiet shape above has a twin one change away that Lightning rejects, and fabric-ls reports it:
# the silence comes from reading the shape, not from not reaching it.
# (twin, of the shape, text replaced, by, rule and line, what Lightning raises there)
_TWINS = (
    (
        "empty_init from the environment, compared",
        "empty_init from the environment",
        'os.environ.get("EMPTY_INIT")',
        'os.environ.get("EMPTY_INIT") == "1"',
        ("FAB003", 8),
        "NotImplementedError",
    ),
    (
        "launched by hand, then not",
        "launched by hand",
        "_launched = True",
        "_launched = False",
        ("FAB009", 7),
        "RuntimeError",
    ),
    (
        "launch only under fabric run",
        "launch unless under fabric run",
        "if not _is_using_cli()",
        "if _is_using_cli()",
        ("FAB009", 8),
        "RuntimeError",
    ),
    (
        "models in a dict, the other one set up in a loop",
        "models in a dict set up in a loop",
        "for key in nets:",
        'for key in ["d"]:',
        ("FAB024", 9),
        "TypeError",
    ),
    (
        "one model set up in a loop, separately",
        "one model set up in a loop",
        "ensemble.append(fabric.setup(net, torch.optim.AdamW(net.parameters())))",
        "net = fabric.setup_module(net)\n"
        "    ensemble.append((net, fabric.setup_optimizers(torch.optim.AdamW(net.parameters()))))",
        ("FAB001", 10),
        "RuntimeError",
    ),
    (
        "the strategy's class name, the other way round",
        "the strategy's class name",
        '== "DeepSpeedStrategy"',
        '!= "DeepSpeedStrategy"',
        ("FAB001", 12),
        "RuntimeError",
    ),
    (
        "an empty list constant tested",
        "a non-empty list constant tested",
        '["dataset-a"]',
        "[]",
        ("FAB015", 15),
        "TypeError",
    ),
    (
        "an assert on the strategy that holds",
        "an assert on the strategy",
        "isinstance(fabric.strategy, XLAFSDPStrategy)",
        "isinstance(fabric.strategy, DeepSpeedStrategy)",
        ("FAB003", 8),
        "NotImplementedError",
    ),
)
for _twin, _shape, _old, _new, _finding, _error in _TWINS:
    _of = SHAPES[_shape]
    assert _old in _of.script, _twin
    SHAPES[f"twin: {_twin}"] = Shape(
        _of.script.replace(_old, _new), _of.profile, (_finding,), (_error, True, _finding[1])
    )


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_fabric_ls(name: str, tmp_path: Path) -> None:
    shape = SHAPES[name]
    path = tmp_path / "train.py"
    path.write_text(shape.script)
    found = [(f.code, f.span.start_line + 1) for f in analyze_source(shape.script, str(path)).findings]
    assert found == list(shape.findings)


def test_under_lightning() -> None:
    from lightning_harness import Script, run_many

    names = sorted(SHAPES)
    for profile in sorted({shape.profile for shape in SHAPES.values()}):
        chosen = [name for name in names if SHAPES[name].profile == profile]
        outcomes = run_many([Script(SHAPES[name].script) for name in chosen], profile=profile)
        for name, outcome in zip(chosen, outcomes):
            error = SHAPES[name].error
            if error is None:
                assert outcome.ok, (name, outcome.error_class, outcome.message, outcome.stderr_tail)
                continue
            found = (outcome.error_class, outcome.raised_by_lightning, outcome.line)
            assert found == error, (name, outcome.message, outcome.stderr_tail)


# litgpt's ``LLM.distribute`` (api.py): ``isinstance(devices, int)`` is tested in the function and
# again in the helper it calls on that branch, so the helper's ``else 0`` never reaches
# ``Fabric(devices=...)``. The twin tests the opposite in the function: there the 0 does.
_DEVICES_TESTED_TWICE = """import lightning as L


def count(devices):
    return devices if isinstance(devices, int) else len(devices) if isinstance(devices, list) else 0


def run(devices="auto"):
    if devices == "auto":
        total = 1
    elif {test} and devices != 3:
        total = count(devices)
    else:
        raise ValueError("unsupported devices")
    fabric = L.Fabric(accelerator="cuda", devices=total, strategy="ddp")
"""


def test_one_value_tested_twice_is_one_decision(tmp_path: Path) -> None:
    from lightning_harness import Script, run_many

    correlated = _DEVICES_TESTED_TWICE.format(test="isinstance(devices, int)")
    opposite = _DEVICES_TESTED_TWICE.format(test="not isinstance(devices, int)")
    path = tmp_path / "train.py"
    found = {
        name: [(f.code, f.span.start_line + 1, f.condition) for f in analyze_source(text, str(path)).findings]
        for name, text in (("correlated", correlated), ("opposite", opposite))
    }
    assert found["correlated"] == []
    assert [(code, line) for code, line, _ in found["opposite"]] == [("FAB038", 15)]
    assert "not `isinstance(devices, list)`" in (found["opposite"][0][2] or "")
    # Called with each kind of value, the correlated script never gives Fabric a 0 (a list ends at its
    # own ``raise``); the twin does.
    calls = [(correlated, "2"), (correlated, "[0, 1]"), (opposite, '"x"')]
    outcomes = run_many([Script(text + f"\n\nrun({value})\n") for text, value in calls], profile="gpu8")
    ends = [(o.error_class, o.line, o.raised_by_lightning) for o in outcomes]
    assert ends == [(None, None, False), ("ValueError", 14, False), ("ValueError", 15, True)], [
        o.message for o in outcomes
    ]


# One flag picks both the strategy and the setup style: every test of it is one decision, so the
# separate setup never meets DeepSpeed (the condition was "`use_ds` and not `use_ds`"). The flag
# comes from the environment, a conversion of it, or a comparison of that.
ONE_FLAG_TWO_TESTS = {
    "a bound comparison": (
        'use_ds = os.environ.get("USE_DS") == "1"\nstrategy = "deepspeed" if use_ds else "ddp"\n',
        "use_ds",
        {"USE_DS": "1"},
    ),
    "a conversion": (
        'use_ds = bool(os.environ.get("USE_DS"))\nstrategy = "deepspeed" if use_ds else "ddp"\n',
        "use_ds",
        {"USE_DS": "1"},
    ),
    "a threshold": (
        'ngpu = int(os.environ.get("NGPU", "1"))\nstrategy = "deepspeed" if ngpu > 1 else "ddp"\n',
        "ngpu > 1",
        {"NGPU": "2"},
    ),
}
_ONE_FLAG_SCRIPT = """import os

import torch
from lightning.fabric import Fabric

{flag}fabric = Fabric(accelerator="cuda", devices=2, strategy=strategy)
fabric.launch()
model = torch.nn.Linear(4, 4)
if {test}:
    model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
else:
    model = fabric.setup_module(model)
    optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
"""


@pytest.mark.parametrize("name", sorted(ONE_FLAG_TWO_TESTS))
def test_one_flag_tested_twice(name: str, tmp_path: Path) -> None:
    from lightning_harness import Script, run_many

    flag, test, environment = ONE_FLAG_TWO_TESTS[name]
    script = _ONE_FLAG_SCRIPT.format(flag=flag, test=test)
    # The twin sets up apart exactly where the flag picks DeepSpeed: FAB001, under the flag's condition
    # (so the silence above is the two tests being one decision, not the strategy left unknown).
    twin = _ONE_FLAG_SCRIPT.format(flag=flag, test=f"not ({test})")
    line = next(n for n, text in enumerate(twin.splitlines(), 1) if "fabric.setup_optimizers(" in text)
    path = tmp_path / "train.py"
    assert analyze_source(script, str(path)).findings == []
    (finding,) = analyze_source(twin, str(path)).findings
    assert (finding.code, finding.span.start_line + 1, finding.severity) == ("FAB001", line, "warning")
    outcomes = run_many(
        [Script(script), Script(script, env=environment), Script(twin, env=environment)], profile="gpu8"
    )
    assert [o.error_class for o in outcomes[:2]] == [None, None], [o.message for o in outcomes]
    ends = (outcomes[2].error_class, outcomes[2].line, outcomes[2].raised_by_lightning)
    assert ends == ("RuntimeError", line, True), outcomes[2].message


def test_a_helper_in_another_module_is_named_by_its_call(tmp_path: Path) -> None:
    """A helper summed up by what it returns is named by the call in the script, not by the text at
    the same place in the helper's file."""
    from lightning_harness import Script, run_many

    helpers = (
        "# the helpers of the training script\nimport os\n\n\ndef pick_strategy():\n"
        '    if os.environ.get("BIG_MODEL"):\n        return "deepspeed"\n    return "ddp"\n'
    )
    script = (
        "import torch\nfrom lightning.fabric import Fabric\nfrom helpers import pick_strategy\n\n"
        'fabric = Fabric(accelerator="cuda", devices=2, strategy=pick_strategy())\nfabric.launch()\n'
        "model = torch.nn.Linear(4, 4)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model = fabric.setup_module(model)\noptimizer = fabric.setup_optimizers(optimizer)\n"
    )
    (tmp_path / "helpers.py").write_text(helpers)
    path = tmp_path / "train.py"
    path.write_text(script)
    findings = analyze_source(script, str(path)).findings
    assert [(f.code, f.span.start_line + 1, f.condition) for f in findings] == [
        ("FAB001", 10, "`pick_strategy()` returns 'deepspeed'")
    ]
    files = {"helpers.py": helpers}
    big, small = run_many(
        [Script(script, files=files, env={"BIG_MODEL": "1"}), Script(script, files=files)], profile="gpu8"
    )
    assert (big.error_class, big.line, big.raised_by_lightning) == ("RuntimeError", 10, True)
    assert small.ok, (small.error_class, small.message)
