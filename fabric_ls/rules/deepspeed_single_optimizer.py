"""FAB014: DeepSpeed joint setup with more than one optimizer."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.rules.common import Case, optimizers_of

RULE = "FAB014"
METHODS = ("setup",)


def check(event: CallEvent) -> Optional[Violation]:
    count = len(optimizers_of(event))
    if not event.strategy.is_a("DeepSpeedStrategy") or count <= 1:
        return None
    return Violation(event.node, {"count": count})


VALID: list[str] = []
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
first = torch.optim.Adam(model.parameters())
second = torch.optim.SGD(model.parameters(), lr=0.1)
model, first, second = fabric.setup(model, first, second)
""",
        9,
    ),
]
