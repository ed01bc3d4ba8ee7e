"""K-fold cross-validation; the script calls its function instead of passing it to `launch`."""

import os

import torch
from lightning.fabric import Fabric
from torch.utils.data import DataLoader, Subset, TensorDataset

FOLDS = 5


def validate(fabric: Fabric, model: torch.nn.Module, loader: DataLoader) -> float:
    model.eval()
    total = torch.tensor(0.0, device=fabric.device)
    with torch.no_grad():
        for inputs, targets in loader:
            total += torch.nn.functional.mse_loss(model(inputs), targets)
    model.train()
    return fabric.all_reduce(total, reduce_op="mean").item()


def main(fabric: Fabric) -> None:
    dataset = TensorDataset(torch.randn(500, 8), torch.randn(500, 1))
    indices = list(range(len(dataset)))
    scores = []
    for fold in range(FOLDS):
        val_idx = indices[fold::FOLDS]
        train_idx = [i for i in indices if i not in set(val_idx)]
        train_loader, val_loader = fabric.setup_dataloaders(
            DataLoader(Subset(dataset, train_idx), batch_size=32, shuffle=True),
            DataLoader(Subset(dataset, val_idx), batch_size=32),
        )
        model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        model, optimizer = fabric.setup(model, optimizer)
        for inputs, targets in train_loader:
            optimizer.zero_grad()
            fabric.backward(torch.nn.functional.mse_loss(model(inputs), targets))
            optimizer.step()
        scores.append(validate(fabric, model, val_loader))
    fabric.print(f"mean validation loss over {FOLDS} folds: {sum(scores) / len(scores):.4f}")


if __name__ == "__main__":
    fabric = Fabric(accelerator="cpu", devices=int(os.environ.get("DEVICES", "2")), strategy="ddp_spawn")
    fabric.launch(main(fabric))
