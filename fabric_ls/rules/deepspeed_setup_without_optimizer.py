"""FAB034: a model set up without an optimizer under DeepSpeed ZeRO stage 1 or 2 (a frozen VAE or
text encoder): DeepSpeed asserts that the ZeRO optimizer needs one."""

from __future__ import annotations

import ast
from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.values import Obj
from fabric_ls.fixes import make_fix
from fabric_ls.model import Fix, TextEdit
from fabric_ls.rules.common import Case

RULE = "FAB034"
METHODS = ("setup", "setup_module")
JUDGES_MISSING_ARGUMENTS = True  # `fabric.setup(model, ` may be getting its optimizer


def _config_brings_an_optimizer(event: CallEvent) -> bool:
    """A DeepSpeed config with an ``optimizer`` section (DeepSpeed builds that one), or one we cannot read."""
    config = event.strategy.option("config")
    if config is None:
        return False
    return not isinstance(config, dict) or "optimizer" in config


def _meant_to_be_trained(event: CallEvent) -> bool:
    """The script builds an optimizer over the model (``model.parameters()`` anywhere in the files on
    the way here) or sets optimizers up on their own: not a frozen helper. FAB001 reports a split
    setup, and its fix (``fabric.setup(model, optimizer)``) removes this error too."""
    names = {arg.id for arg in event.node.args if isinstance(arg, ast.Name)}
    statement = event.place.statement if event.place is not None else None
    if isinstance(statement, ast.Assign) and statement.value is event.node:
        names |= {t.id for target in statement.targets for t in ast.walk(target) if isinstance(t, ast.Name)}
    files = {id(event.parsed): event.parsed, **{id(parsed): parsed for parsed, _ in event.callers}}
    for parsed in files.values():
        for node in ast.walk(parsed.tree):
            if not isinstance(node, ast.Attribute):
                continue
            if node.attr == "setup_optimizers":
                return True
            if node.attr in ("parameters", "named_parameters") and getattr(node.value, "id", None) in names:
                return True
    return False


def _another_model_is_trained(event: CallEvent) -> bool:
    """A ``setup(model, optimizer, ...)`` elsewhere in the files on the way here: this one is a helper
    next to the trained model (a frozen VAE, a teacher), not a script still being written."""
    files = {id(event.parsed): event.parsed, **{id(parsed): parsed for parsed, _ in event.callers}}
    return any(
        isinstance(node, ast.Call)
        and node is not event.node
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "setup"
        and len(node.args) >= 2
        for parsed in files.values()
        for node in ast.walk(parsed.tree)
    )


def check(event: CallEvent) -> Optional[Violation]:
    strategy = event.strategy
    if not strategy.is_a("DeepSpeedStrategy") or strategy.zero_stage not in (1, 2):
        return None
    if event.method == "setup" and len(event.args) != 1:
        return None  # optimizers given (or ``*objects``): a training engine
    if len(event.node.args) != 1 or any(k.arg is None for k in event.node.keywords):
        return None
    if not isinstance(event.args[0], Obj):
        return None  # not a module built in the script (what came back from `to_device`, a parameter)
    if _config_brings_an_optimizer(event) or _meant_to_be_trained(event):
        return None
    if not _another_model_is_trained(event):
        return None
    model = event.parsed.segment(event.node.args[0])
    return Violation(event.node, {"model": model, "stage": strategy.zero_stage}, _to_device_fix(event))


def _to_device_fix(event: CallEvent) -> Optional[Fix]:
    """``vae = fabric.setup(vae)`` → ``vae = fabric.to_device(vae)``: no engine, the module on the device.

    Unsafe: the module is no longer converted to the strategy's precision, and Fabric no longer
    counts it as set up.
    """
    func = event.node.func
    if event.node.keywords or not isinstance(func, ast.Attribute):
        return None
    receiver = event.parsed.segment(func.value)
    return make_fix(RULE, [TextEdit(event.parsed.span(func), f"{receiver}.to_device")])


_HEAD = """import torch
from lightning.fabric import Fabric

"""
_TRAINED = """model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model, optimizer = fabric.setup(model, optimizer)
vae = torch.nn.Linear(4, 4).requires_grad_(False)
"""

VALID = [
    # ZeRO-3 builds an engine without an optimizer (DeepSpeedZeRoOffload).
    _HEAD
    + """fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_3")
fabric.launch()
vae = fabric.setup(torch.nn.Linear(4, 4).requires_grad_(False))
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model, optimizer = fabric.setup(model, optimizer)
""",
    _HEAD
    + """fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
"""
    + _TRAINED
    + """vae = fabric.to_device(vae)
""",
]
INVALID = [
    Case(
        _HEAD
        + """fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
"""
        + _TRAINED
        + """vae = fabric.setup(vae)
""",
        10,
        _HEAD
        + """fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
"""
        + _TRAINED
        + """vae = fabric.to_device(vae)
""",
    ),
    Case(
        """import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import DeepSpeedStrategy

fabric = Fabric(accelerator="cuda", devices=2, strategy=DeepSpeedStrategy(stage=1))
fabric.launch()
text_encoder = fabric.setup_module(torch.nn.Embedding(10, 4))
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
""",
        7,
    ),
]
