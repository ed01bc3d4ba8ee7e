"""The strategy comes from helpers.py: editing that file changes what this script gets."""

import torch
from helpers import STRATEGY
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy=STRATEGY)
fabric.launch()
model = torch.nn.Linear(32, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup_module(model)
optimizer = fabric.setup_optimizers(optimizer)
