"""FAB002: under FSDP, `empty_init=True` puts parameters on the meta device; an optimizer
built over them cannot go through a joint `fabric.setup(model, optimizer)`."""

import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=4, strategy="fsdp", precision="bf16-mixed")
fabric.launch()

with fabric.init_module(empty_init=True):
    model = torch.nn.Transformer(d_model=64, nhead=4, num_encoder_layers=2, num_decoder_layers=2)

optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
model, optimizer = fabric.setup(model, optimizer)
