"""FAB001: ``setup_optimizers`` under DeepSpeed or XLA, which need ``fabric.setup(model, optimizer)``."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.fixes import join_setup_fix
from fabric_ls.rules.common import Case

RULE = "FAB001"
METHODS = ("setup_optimizers",)


def check(event: CallEvent) -> Optional[Violation]:
    strategy = event.strategy
    if not (strategy.is_a("DeepSpeedStrategy") or strategy.is_a("XLAStrategy")):
        return None
    return Violation(event.node, {}, join_setup_fix(event))


VALID = [
    """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model, optimizer = fabric.setup(model, optimizer)
""",
    """import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import DeepSpeedStrategy

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
if isinstance(fabric.strategy, DeepSpeedStrategy):
    model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
else:
    model = fabric.setup_module(model)
    optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
""",
]
INVALID = [
    # ZeRO-3: at stage 1/2 DeepSpeed itself rejects the optimizer-less `setup_module` first (FAB034).
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_3")
fabric.launch()
model = torch.nn.Linear(4, 2)
model = fabric.setup_module(model)
optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
""",
        8,
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_3")
fabric.launch()
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
""",
    ),
    Case(
        """import torch
from lightning.fabric import Fabric


def train(fabric):
    model = torch.nn.Linear(4, 2)
    model = fabric.setup_module(model)
    optimizer = fabric.setup_optimizers(torch.optim.SGD(model.parameters(), lr=0.1))


fabric = Fabric(accelerator="tpu", devices=8, strategy="xla")
fabric.launch(train)
""",
        8,
        """import torch
from lightning.fabric import Fabric


def train(fabric):
    model = torch.nn.Linear(4, 2)
    model, optimizer = fabric.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))


fabric = Fabric(accelerator="tpu", devices=8, strategy="xla")
fabric.launch(train)
""",
        profile="tpu8",
    ),
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup(model)
optimizer = fabric.setup_optimizers(optimizer)
""",
        9,
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model, optimizer = fabric.setup(model, optimizer)
""",
    ),
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
model = fabric.setup_module(model)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
optimizer = fabric.setup_optimizers(optimizer)
""",
        9,
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
model, optimizer = fabric.setup(model, optimizer)
""",
    ),
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup_module(model)
if fabric.world_size > 1:
    optimizer = fabric.setup_optimizers(optimizer)
""",
        10,
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
if fabric.world_size > 1:
    model, optimizer = fabric.setup(model, optimizer)
else:
    model = fabric.setup_module(model)
""",
    ),
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup_module(model)
step, optimizer = 0, fabric.setup_optimizers(optimizer)
""",
        9,
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
step = 0
model, optimizer = fabric.setup(model, optimizer)
""",
    ),
]
