"""FAB016: mixed precision (and DeepSpeed/FSDP) need `fabric.backward(loss)`."""

import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=1, precision="16-mixed")
model = torch.nn.Linear(16, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
model, optimizer = fabric.setup(model, optimizer)

for step in range(100):
    x = torch.randn(4, 16, device=fabric.device)
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
