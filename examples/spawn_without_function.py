"""FAB006: `ddp_spawn` starts new processes, so `launch()` needs the function to run in them."""

import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")
fabric.launch()
model = fabric.setup(torch.nn.Linear(4, 2))
