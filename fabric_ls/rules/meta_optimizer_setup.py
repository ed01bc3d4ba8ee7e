"""FAB010: ``setup_optimizers`` with an optimizer over meta-device parameters."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.fixes import move_optimizer_after_setup_fix
from fabric_ls.rules.common import Case, has_meta_params

RULE = "FAB010"
METHODS = ("setup_optimizers",)


def check(event: CallEvent) -> Optional[Violation]:
    if not event.args or not any(has_meta_params(o) for o in event.args):
        return None
    return Violation(event.node, {}, move_optimizer_after_setup_fix(event, RULE))


VALID: list[str] = []
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
fabric.launch()
with fabric.init_module(empty_init=True):
    model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup_module(model)
optimizer = fabric.setup_optimizers(optimizer)
""",
        10,
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
fabric.launch()
with fabric.init_module(empty_init=True):
    model = torch.nn.Linear(4, 2)
model = fabric.setup_module(model)
optimizer = torch.optim.Adam(model.parameters())
optimizer = fabric.setup_optimizers(optimizer)
""",
    ),
]
