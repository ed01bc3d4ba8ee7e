"""Non-ASCII text before the offending call: its column differs in UTF-8, UTF-16 and code points."""

import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(32, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup_module(model)
größe, 𝛉 = 1, fabric.setup_optimizers(optimizer)
