"""FAB001: DeepSpeed needs the model and optimizer set up together."""

import torch
from lightning.fabric import Fabric


def main() -> None:
    fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
    fabric.launch()

    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
    model = fabric.setup_module(model)
    optimizer = fabric.setup_optimizers(torch.optim.AdamW(model.parameters(), lr=1e-3))

    for _ in range(10):
        optimizer.zero_grad()
        loss = model(torch.randn(8, 32, device=fabric.device)).sum()
        fabric.backward(loss)
        optimizer.step()


if __name__ == "__main__":
    main()
