"""DeepSpeed with separate setup calls: Lightning raises at `setup_optimizers` (FAB001)."""

import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(32, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup_module(model)
optimizer = fabric.setup_optimizers(optimizer)

for _ in range(3):
    loss = model(torch.randn(8, 32)).sum()
    fabric.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
