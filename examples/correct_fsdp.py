"""A correct FSDP script: module first, then the optimizer over the set-up module."""

import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import FSDPStrategy


def train(fabric: Fabric) -> None:
    with fabric.init_module(empty_init=True):
        model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 64))
    model = fabric.setup_module(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    optimizer = fabric.setup_optimizers(optimizer)
    for _ in range(5):
        loss = model(torch.randn(4, 64, device=fabric.device)).sum()
        fabric.backward(loss)
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    strategy = FSDPStrategy(state_dict_type="full")
    fabric = Fabric(accelerator="cuda", devices=4, strategy=strategy, precision="bf16-mixed")
    fabric.launch(train)
