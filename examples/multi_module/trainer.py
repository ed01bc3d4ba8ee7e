"""A trainer class keeps the Fabric in `self.fabric`; the strategy comes from config.py."""

import torch
from lightning.fabric import Fabric

from config import DEVICES, STRATEGY


class Trainer:
    def __init__(self, precision: str = "bf16-mixed") -> None:
        self.fabric = Fabric(accelerator="cuda", devices=DEVICES, strategy=STRATEGY, precision=precision)

    def fit(self, model: torch.nn.Module) -> None:
        self.fabric.launch()
        with self.fabric.init_module(empty_init=False):
            head = torch.nn.Linear(16, 16)
        model = self.fabric.setup_module(torch.nn.Sequential(model, head))
        optimizer = self.fabric.setup_optimizers(torch.optim.Adam(model.parameters()))


if __name__ == "__main__":
    Trainer().fit(torch.nn.Linear(16, 16))
