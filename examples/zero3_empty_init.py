"""FAB003: DeepSpeed ZeRO stage 3 refuses `init_module(empty_init=False)`."""

import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import DeepSpeedStrategy

strategy = DeepSpeedStrategy(stage=3, offload_optimizer=True)
fabric = Fabric(accelerator="cuda", devices=8, strategy=strategy, precision="bf16-mixed")
fabric.launch()

with fabric.init_module(empty_init=False):
    model = torch.nn.Linear(1024, 1024)

optimizer = torch.optim.Adam(model.parameters())
model, optimizer = fabric.setup(model, optimizer)
