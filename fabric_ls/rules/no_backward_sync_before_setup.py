"""FAB024: ``no_backward_sync`` given a model that was not set up."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.rules.common import Case, is_raw_module

RULE = "FAB024"
METHODS = ("no_backward_sync",)


def check(event: CallEvent) -> Optional[Violation]:
    module = event.args[0] if event.args else event.keywords.get("module")
    if module is not None and is_raw_module(module):
        return Violation(event.node)
    return None


VALID: list[str] = []
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
model = torch.nn.Linear(4, 2)
fabric_model = fabric.setup(model)
with fabric.no_backward_sync(model):
    pass
""",
        7,
        profile="cpu",
    ),
    # A ``torch.nn`` module, set up only after the ``with``.
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
with fabric.no_backward_sync(model):
    pass
model, optimizer = fabric.setup(model, optimizer)
""",
        7,
        profile="cpu",
    ),
]
