"""FAB003: ``init_module(empty_init=False)`` under DeepSpeed ZeRO stage 3."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.values import Const
from fabric_ls.fixes import keyword_fix
from fabric_ls.rules.common import Case

RULE = "FAB003"
METHODS = ("init_module",)


def check(event: CallEvent) -> Optional[Violation]:
    strategy = event.strategy
    if not strategy.is_a("DeepSpeedStrategy") or strategy.zero_stage != 3:
        return None
    empty_init = event.keywords.get("empty_init")
    # Only a literal False: None (the default) and True are accepted (deepspeed.py:378).
    if not (isinstance(empty_init, Const) and empty_init.value is False and _written_false(event)):
        return None
    return Violation(event.node, {}, keyword_fix(RULE, event.parsed, event.node, "empty_init", "True", 0))


def _written_false(event: CallEvent) -> bool:
    """The call passes False (not a value the interpreter assumed at a fork)."""
    return bool(event.node.args) or any(k.arg == "empty_init" for k in event.node.keywords)


VALID = [
    """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_3")
fabric.launch()
with fabric.init_module(empty_init=True):
    model = torch.nn.Linear(4, 2)
""",
    """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_2")
fabric.launch()
with fabric.init_module(empty_init=False):
    model = torch.nn.Linear(4, 2)
""",
]
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import DeepSpeedStrategy

fabric = Fabric(accelerator="cuda", devices=2, strategy=DeepSpeedStrategy(stage=3))
fabric.launch()
with fabric.init_module(empty_init=False):
    model = torch.nn.Linear(4, 2)
""",
        7,
        """import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import DeepSpeedStrategy

fabric = Fabric(accelerator="cuda", devices=2, strategy=DeepSpeedStrategy(stage=3))
fabric.launch()
with fabric.init_module(empty_init=True):
    model = torch.nn.Linear(4, 2)
""",
    ),
]
