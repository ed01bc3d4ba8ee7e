"""FAB012: an optimizer built before ``setup_module`` under XLA-FSDP (or FSDP with use_orig_params=False)."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.fixes import move_optimizer_after_setup_fix
from fabric_ls.rules.common import Case, built_before_setup

RULE = "FAB012"
METHODS = ("setup_optimizers",)


def check(event: CallEvent) -> Optional[Violation]:
    strategy = event.strategy
    sharded = strategy.is_a("XLAFSDPStrategy") or (
        strategy.is_a("FSDPStrategy")
        and strategy.option("use_orig_params", True) in (False, 0, None)
        and ("use_orig_params", strategy.option("use_orig_params")) in strategy.options
    )
    if not sharded or not event.args or not all(built_before_setup(o) for o in event.args):
        return None
    return Violation(event.node, {}, move_optimizer_after_setup_fix(event, RULE))


VALID: list[str] = []
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric


def train(fabric):
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model = fabric.setup_module(model)
    optimizer = fabric.setup_optimizers(optimizer)


fabric = Fabric(accelerator="tpu", devices=8, strategy="xla_fsdp")
fabric.launch(train)
""",
        9,
        """import torch
from lightning.fabric import Fabric


def train(fabric):
    model = torch.nn.Linear(4, 2)
    model = fabric.setup_module(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    optimizer = fabric.setup_optimizers(optimizer)


fabric = Fabric(accelerator="tpu", devices=8, strategy="xla_fsdp")
fabric.launch(train)
""",
        profile="tpu8",
    ),
]
