"""No strategy in the code: `fabric run --strategy ...` decides, so the `strategy` setting is assumed."""

import torch
from lightning.fabric import Fabric

fabric = Fabric()
fabric.launch()
model = torch.nn.Linear(32, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup_module(model)
optimizer = fabric.setup_optimizers(optimizer)
