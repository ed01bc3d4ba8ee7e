"""No strategy in the code: `fabric run --strategy ...` decides, so the `strategy` setting is assumed.

No `fabric.launch()` either: under `fabric run` it raises (the processes exist already).
"""

import torch
from lightning.fabric import Fabric

fabric = Fabric()
model = torch.nn.Linear(32, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup_module(model)
optimizer = fabric.setup_optimizers(optimizer)
