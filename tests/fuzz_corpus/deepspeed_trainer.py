"""A trainer class around Fabric with a DeepSpeed config; set up in two steps (a mistake with DeepSpeed)."""

from __future__ import annotations

import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import DeepSpeedStrategy

DEEPSPEED_CONFIG = {
    "zero_optimization": {"stage": 2, "overlap_comm": True},
    "train_micro_batch_size_per_gpu": 8,
}


class Trainer:
    def __init__(self, devices: int = 4, precision: str = "16-mixed") -> None:
        strategy = DeepSpeedStrategy(config=DEEPSPEED_CONFIG)
        self.fabric = Fabric(accelerator="cuda", devices=devices, strategy=strategy, precision=precision)
        self.global_step = 0

    def fit(self, model: torch.nn.Module, loader: torch.utils.data.DataLoader, epochs: int = 1) -> None:
        self.fabric.launch()
        model = self.fabric.setup_module(model)
        optimizer = self.fabric.setup_optimizers(torch.optim.Adam(model.parameters(), lr=1e-4))
        loader = self.fabric.setup_dataloaders(loader)
        for _ in range(epochs):
            for inputs, targets in loader:
                loss = torch.nn.functional.mse_loss(model(inputs), targets)
                self.fabric.backward(loss, model=model)
                optimizer.step()
                optimizer.zero_grad()
                self.global_step += 1


if __name__ == "__main__":
    data = torch.utils.data.TensorDataset(torch.randn(64, 32), torch.randn(64, 1))
    Trainer().fit(torch.nn.Linear(32, 1), torch.utils.data.DataLoader(data, batch_size=8))
