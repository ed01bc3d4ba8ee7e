"""A GAN: two models, two optimizers, set up one pair at a time; the loop calls `loss.backward()`."""

import torch
from lightning.fabric import Fabric

LATENT = 16


def make_models() -> tuple:
    generator = torch.nn.Sequential(
        torch.nn.Linear(LATENT, 64), torch.nn.ReLU(), torch.nn.Linear(64, 28 * 28)
    )
    discriminator = torch.nn.Sequential(torch.nn.Linear(28 * 28, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    return generator, discriminator


def train(fabric: Fabric, steps: int = 100) -> None:
    generator, discriminator = make_models()
    optimizer_g = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optimizer_d = torch.optim.Adam(discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    generator, optimizer_g = fabric.setup(generator, optimizer_g)
    discriminator, optimizer_d = fabric.setup(discriminator, optimizer_d)
    criterion = torch.nn.BCEWithLogitsLoss()

    for step in range(steps):
        real = torch.randn(32, 28 * 28, device=fabric.device)
        fake = generator(torch.randn(32, LATENT, device=fabric.device))

        optimizer_d.zero_grad()
        loss_d = criterion(discriminator(real), torch.ones(32, 1, device=fabric.device))
        loss_d = loss_d + criterion(discriminator(fake.detach()), torch.zeros(32, 1, device=fabric.device))
        fabric.backward(loss_d)
        optimizer_d.step()

        optimizer_g.zero_grad()
        loss_g = criterion(discriminator(fake), torch.ones(32, 1, device=fabric.device))
        loss_g.backward()
        optimizer_g.step()
        if step % 20 == 0:
            fabric.log_dict({"loss_d": loss_d.item(), "loss_g": loss_g.item()}, step=step)


if __name__ == "__main__":
    fabric = Fabric(accelerator="cuda", devices=1, precision="16-mixed")
    fabric.launch(train)
