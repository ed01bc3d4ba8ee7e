"""The mistake sits in helpers.py: DeepSpeed needs `fabric.setup(model, optimizer)` in one call."""

import torch
from helpers import setup_training
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(32, 2)
model, optimizer = setup_training(fabric, model)
