"""Image classifier on random data with DDP; the loop accumulates gradients."""

import argparse

import torch
import torch.nn.functional as F
from lightning.fabric import Fabric, seed_everything
from torch.utils.data import DataLoader, TensorDataset


class Net(torch.nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, 1)
        self.conv2 = torch.nn.Conv2d(32, 64, 3, 1)
        self.fc = torch.nn.Linear(9216, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return F.log_softmax(self.fc(torch.flatten(x, 1)), dim=1)


def run(hparams: argparse.Namespace) -> None:
    fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp", precision="bf16-mixed")
    fabric.launch()
    seed_everything(hparams.seed)

    dataset = TensorDataset(torch.randn(256, 1, 28, 28), torch.randint(0, 10, (256,)))
    train_loader = DataLoader(dataset, batch_size=hparams.batch_size, shuffle=True)
    train_loader = fabric.setup_dataloaders(train_loader)

    model = Net()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=hparams.lr)
    model, optimizer = fabric.setup(model, optimizer)

    for epoch in range(hparams.epochs):
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            is_accumulating = (batch_idx + 1) % hparams.accumulate != 0
            with fabric.no_backward_sync(model, enabled=is_accumulating):
                loss = F.nll_loss(model(data), target)
                fabric.backward(loss)
            if not is_accumulating:
                optimizer.step()
                optimizer.zero_grad()
            if batch_idx % 10 == 0:
                fabric.print(f"epoch {epoch} batch {batch_idx} loss {loss.item():.4f}")

    if hparams.save_model:
        fabric.save("mnist_cnn.pt", {"model": model, "optimizer": optimizer})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Fabric image classifier")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--accumulate", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--save-model", action="store_true")
    run(parser.parse_args())
