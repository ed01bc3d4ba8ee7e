"""FAB002: FSDP joint setup with an optimizer built over meta-device parameters."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.fixes import split_setup_fix
from fabric_ls.rules.common import Case, has_meta_params, optimizers_of

RULE = "FAB002"
METHODS = ("setup",)


def check(event: CallEvent) -> Optional[Violation]:
    if not event.strategy.is_a("FSDPStrategy"):
        return None
    if not any(has_meta_params(o) for o in optimizers_of(event)):
        return None
    return Violation(event.node, {}, split_setup_fix(event, RULE))


VALID = [
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
    """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
fabric.launch()
with fabric.init_module():
    model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model, optimizer = fabric.setup(model, optimizer)
""",
]
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
fabric.launch()
with fabric.init_module(empty_init=True):
    model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model, optimizer = fabric.setup(model, optimizer)
""",
        9,
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
