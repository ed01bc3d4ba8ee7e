"""Training helpers the script calls with its Fabric object."""

import torch


def setup_training(fabric, model):
    optimizer = torch.optim.Adam(model.parameters())
    model = fabric.setup_module(model)
    optimizer = fabric.setup_optimizers(optimizer)
    return model, optimizer
