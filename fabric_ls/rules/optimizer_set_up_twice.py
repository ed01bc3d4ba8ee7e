"""FAB008: an optimizer that is already set up passed to ``setup``/``setup_optimizers`` again."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.values import SetupOptimizer
from fabric_ls.rules.common import Case, optimizers_of

RULE = "FAB008"
METHODS = ("setup", "setup_optimizers")
# Raised whatever the strategy: the message is not tagged with it.
NAMES_STRATEGY = False


def check(event: CallEvent) -> Optional[Violation]:
    if event.method == "setup_optimizers" and not event.args:
        return None
    if not any(isinstance(o, SetupOptimizer) for o in optimizers_of(event)):
        return None
    return Violation(event.node, {"method": event.method})


VALID: list[str] = []
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
optimizer = fabric.setup_optimizers(optimizer)
""",
        7,
        profile="cpu",
    ),
]
