"""The strategy comes from the command line: the finding holds only for some choices (a warning)."""

import argparse

import torch
from lightning.fabric import Fabric

parser = argparse.ArgumentParser()
parser.add_argument("--strategy", default="ddp", choices=["ddp", "fsdp", "deepspeed"])
parser.add_argument("--devices", type=int, default=2)
args = parser.parse_args()

fabric = Fabric(accelerator="cuda", devices=args.devices, strategy=args.strategy)
fabric.launch()

model = fabric.setup_module(torch.nn.Linear(32, 2))
optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
