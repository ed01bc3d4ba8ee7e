"""Fine-tune a small transformer with FSDP; the optimizer is built before the module is set up."""

from functools import partial

import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import FSDPStrategy
from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy


def build_model(vocab: int = 1000, width: int = 128, layers: int = 4) -> torch.nn.Module:
    layer = torch.nn.TransformerEncoderLayer(width, nhead=4, batch_first=True)
    return torch.nn.Sequential(
        torch.nn.Embedding(vocab, width),
        torch.nn.TransformerEncoder(layer, num_layers=layers),
        torch.nn.Linear(width, vocab),
    )


def main() -> None:
    policy = partial(size_based_auto_wrap_policy, min_num_params=10_000)
    strategy = FSDPStrategy(auto_wrap_policy=policy, state_dict_type="sharded")
    fabric = Fabric(accelerator="cuda", devices=4, strategy=strategy, precision="bf16-true")
    fabric.launch()

    with fabric.init_module(empty_init=True):
        model = build_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    model = fabric.setup_module(model)
    optimizer = fabric.setup_optimizers(optimizer)

    state = {"model": model, "optimizer": optimizer, "step": 0}
    for step in range(100):
        tokens = torch.randint(0, 1000, (8, 64), device=fabric.device)
        logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 1000), tokens[:, 1:].reshape(-1))
        fabric.backward(loss)
        fabric.clip_gradients(model, optimizer, max_norm=1.0)
        optimizer.step()
        optimizer.zero_grad()
        state["step"] = step
        if step % 50 == 0:
            fabric.save(f"checkpoints/step-{step}", state)


if __name__ == "__main__":
    main()
