"""FAB007: a model that `fabric.setup` already returned is set up again."""

import torch
from lightning.fabric import Fabric


def build(fabric):
    model = torch.nn.Linear(8, 8)
    return fabric.setup(model)


fabric = Fabric(accelerator="cpu", devices=1)
model = build(fabric)
model = fabric.setup(model)
