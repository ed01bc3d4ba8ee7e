"""FAB004: ``fabric.backward`` under DeepSpeed before any model was set up."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.rules.common import Case

RULE = "FAB004"
METHODS = ("backward",)


def check(event: CallEvent) -> Optional[Violation]:
    if not event.strategy.is_a("DeepSpeedStrategy") or "model" in event.keywords:
        return None
    if event.fabric.escaped:
        return None  # models may have been set up where we cannot see
    if event.fabric.models_setup != 0:
        return None
    return Violation(event.node)


VALID = [
    """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
fabric.backward(model(torch.randn(2, 4)).sum())
""",
]
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
fabric.backward(model(torch.randn(2, 4)).sum())
""",
        7,
    ),
]
