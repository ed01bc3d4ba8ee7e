"""FAB011: joint ``setup(model, optimizer)`` under XLA-FSDP, which needs the separate order."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.fixes import split_setup_fix
from fabric_ls.rules.common import Case, optimizers_of

RULE = "FAB011"
METHODS = ("setup",)


def check(event: CallEvent) -> Optional[Violation]:
    if not event.strategy.is_a("XLAFSDPStrategy") or not optimizers_of(event):
        return None
    return Violation(event.node, {}, split_setup_fix(event, RULE))


VALID: list[str] = []
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric


def train(fabric):
    model = torch.nn.Linear(4, 2)
    model, optimizer = fabric.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))


fabric = Fabric(accelerator="tpu", devices=8, strategy="xla_fsdp")
fabric.launch(train)
""",
        7,
        """import torch
from lightning.fabric import Fabric


def train(fabric):
    model = torch.nn.Linear(4, 2)
    model = fabric.setup_module(model)
    optimizer = fabric.setup_optimizers(torch.optim.SGD(model.parameters(), lr=0.1))


fabric = Fabric(accelerator="tpu", devices=8, strategy="xla_fsdp")
fabric.launch(train)
""",
        profile="tpu8",
    ),
]
