"""Train a small transformer classifier on synthetic token sequences with Lightning Fabric.

python realistic_train_300.py --strategy ddp --devices 2 --precision bf16-mixed
python realistic_train_300.py --strategy fsdp --devices 4 --grad-accum 4 --compile
python realistic_train_300.py --strategy deepspeed --resume checkpoints/last.ckpt
python realistic_train_300.py --tpu --devices 8 --strategy fsdp --precision bf16-true
"""

from __future__ import annotations

import argparse
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from lightning.fabric import Fabric
from lightning.fabric.loggers import CSVLogger
from lightning.fabric.strategies import DeepSpeedStrategy, FSDPStrategy, XLAFSDPStrategy
from torch.utils.data import DataLoader, Dataset

XLA_PRECISIONS = ("32-true", "16-true", "bf16-true")


@dataclass
class TrainConfig:
    vocab_size: int = 512
    seq_len: int = 64
    width: int = 128
    depth: int = 4
    heads: int = 4
    num_classes: int = 10
    batch_size: int = 32
    lr: float = 3e-4
    weight_decay: float = 0.05
    warmup_steps: int = 100
    epochs: int = 3
    grad_accum: int = 1
    max_norm: float = 1.0
    train_samples: int = 4096
    val_samples: int = 512
    extra_tags: List[str] = field(default_factory=list)


class RandomTokens(Dataset):
    """Token sequences whose label is a simple function of the tokens, so the model can learn it."""

    def __init__(self, samples: int, seq_len: int, vocab_size: int, num_classes: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.tokens = torch.randint(0, vocab_size, (samples, seq_len), generator=generator)
        self.labels = self.tokens[:, :8].sum(dim=1) % num_classes

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.tokens[index], self.labels[index]


class Block(nn.Module):
    def __init__(self, width: int, heads: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, dropout=dropout, batch_first=True)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class Classifier(nn.Module):
    def __init__(self, cfg: TrainConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab_size, cfg.width)
        self.pos = nn.Parameter(torch.zeros(1, cfg.seq_len, cfg.width))
        self.blocks = nn.ModuleList([Block(cfg.width, cfg.heads) for _ in range(cfg.depth)])
        self.norm = nn.LayerNorm(cfg.width)
        self.head = nn.Linear(cfg.width, cfg.num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos[:, : tokens.size(1)]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x).mean(dim=1))


def build_model(cfg: TrainConfig) -> nn.Module:
    return Classifier(cfg)


def build_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        (no_decay if param.ndim < 2 or "norm" in name else decay).append(param)
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95))


def lr_at(step: int, cfg: TrainConfig, total_steps: int) -> float:
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, total_steps - cfg.warmup_steps)
    return cfg.lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def build_dataloaders(cfg: TrainConfig, seed: int, workers: int) -> Tuple[DataLoader, DataLoader]:
    common = {"seq_len": cfg.seq_len, "vocab_size": cfg.vocab_size, "num_classes": cfg.num_classes}
    train_set = RandomTokens(cfg.train_samples, seed=seed, **common)
    val_set = RandomTokens(cfg.val_samples, seed=seed + 1, **common)
    train_loader = DataLoader(train_set, batch_size=cfg.batch_size, shuffle=True, num_workers=workers)
    val_loader = DataLoader(val_set, batch_size=cfg.batch_size * 2, num_workers=workers)
    return train_loader, val_loader


def train_epoch(
    fabric: Fabric,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: DataLoader,
    cfg: TrainConfig,
    state: Dict[str, Any],
    total_steps: int,
) -> float:
    model.train()
    running, seen = 0.0, 0
    started = time.perf_counter()
    for batch_idx, (tokens, labels) in enumerate(loader):
        is_accumulating = (batch_idx + 1) % cfg.grad_accum != 0
        with fabric.no_backward_sync(model, enabled=is_accumulating):
            logits = model(tokens)
            loss = F.cross_entropy(logits, labels)
            fabric.backward(loss / cfg.grad_accum)
        running += loss.item()
        seen += 1
        if is_accumulating:
            continue
        # DeepSpeed clips inside its engine (``gradient_clipping`` in its config).
        if not isinstance(fabric.strategy, DeepSpeedStrategy):
            fabric.clip_gradients(model, optimizer, max_norm=cfg.max_norm)
        for group in optimizer.param_groups:
            group["lr"] = lr_at(state["step"], cfg, total_steps)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        state["step"] += 1
        if state["step"] % 50 == 0:
            elapsed = time.perf_counter() - started
            metrics = {"train/loss": running / seen, "train/lr": optimizer.param_groups[0]["lr"]}
            fabric.log_dict(metrics, step=state["step"])
            fabric.print(f"step {state['step']:>6} | loss {running / seen:.4f} | {seen / elapsed:.1f} it/s")
    return running / max(1, seen)


def validate(fabric: Fabric, model: nn.Module, loader: DataLoader) -> Dict[str, float]:
    model.eval()
    total_loss = torch.zeros(1, device=fabric.device)
    correct = torch.zeros(1, device=fabric.device)
    count = torch.zeros(1, device=fabric.device)
    with torch.no_grad():
        for tokens, labels in loader:
            logits = model(tokens)
            total_loss += F.cross_entropy(logits, labels, reduction="sum")
            correct += (logits.argmax(dim=-1) == labels).sum()
            count += labels.numel()
    totals = fabric.all_reduce(torch.cat([total_loss, correct, count]), reduce_op="sum")
    model.train()
    return {"val/loss": (totals[0] / totals[2]).item(), "val/acc": (totals[1] / totals[2]).item()}


def save_checkpoint(fabric: Fabric, directory: Path, state: Dict[str, Any], tag: str) -> Path:
    path = directory / f"{tag}.ckpt"
    fabric.save(path, state)
    fabric.print(f"saved {path}")
    return path


def load_checkpoint(fabric: Fabric, path: Path, state: Dict[str, Any]) -> None:
    try:
        remainder = fabric.load(path, state)
    except FileNotFoundError:
        fabric.print(f"no checkpoint at {path}; starting from scratch")
        return
    fabric.print(f"resumed from {path} at step {state['step']} (extra keys: {sorted(remainder)})")


def main(fabric: Fabric, args: argparse.Namespace) -> None:
    cfg = TrainConfig(lr=args.lr, epochs=args.epochs, grad_accum=args.grad_accum, batch_size=args.batch_size)
    fabric.seed_everything(args.seed + fabric.global_rank)
    fabric.print(f"config: {asdict(cfg)}")

    # Sharded strategies create the weights on the meta device and materialise them in setup.
    sharded = isinstance(fabric.strategy, (FSDPStrategy, XLAFSDPStrategy))
    with fabric.init_module(empty_init=sharded):
        model = build_model(cfg)
    if args.compile:
        model = torch.compile(model)

    if sharded:
        # The optimizer must see the sharded parameters: set up the model first.
        model = fabric.setup_module(model)
        optimizer = fabric.setup_optimizers(build_optimizer(model, cfg))
    else:
        model, optimizer = fabric.setup(model, build_optimizer(model, cfg))

    train_loader, val_loader = build_dataloaders(cfg, args.seed, args.workers)
    train_loader, val_loader = fabric.setup_dataloaders(train_loader, val_loader)
    total_steps = cfg.epochs * math.ceil(len(train_loader) / cfg.grad_accum)

    state: Dict[str, Any] = {"model": model, "optimizer": optimizer, "step": 0, "epoch": 0, "best_acc": 0.0}
    checkpoint_dir = Path(args.checkpoint_dir)
    if args.resume:
        resume_path = checkpoint_dir / "last.ckpt" if args.resume == "last" else Path(args.resume)
        load_checkpoint(fabric, resume_path, state)

    history: List[Dict[str, float]] = []
    for epoch in range(state["epoch"], cfg.epochs):
        train_loss = train_epoch(fabric, model, optimizer, train_loader, cfg, state, total_steps)
        metrics = validate(fabric, model, val_loader)
        metrics["train/epoch_loss"] = train_loss
        history.append(metrics)
        fabric.log_dict(metrics, step=state["step"])
        summary = ", ".join(f"{key}={value:.4f}" for key, value in sorted(metrics.items()))
        fabric.print(f"epoch {epoch}: {summary}")
        state["epoch"] = epoch + 1
        save_checkpoint(fabric, checkpoint_dir, state, "last")
        if metrics["val/acc"] > state["best_acc"]:
            state["best_acc"] = metrics["val/acc"]
            save_checkpoint(fabric, checkpoint_dir, state, "best")
    fabric.barrier()
    best = max((entry["val/acc"] for entry in history), default=state["best_acc"])
    fabric.print(f"done: best val/acc {best:.4f} after {state['step']} steps")


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategy", default="ddp", choices=["ddp", "deepspeed", "fsdp"])
    parser.add_argument(
        "--precision", default="bf16-mixed", choices=["32-true", "16-mixed", "bf16-mixed", "bf16-true"]
    )
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--num-nodes", type=int, default=1)
    parser.add_argument("--tpu", action="store_true", help="train on TPU cores instead of CUDA GPUs")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--checkpoint-dir", default=os.environ.get("CHECKPOINT_DIR", "checkpoints"))
    parser.add_argument("--resume", default=None, help="a checkpoint path, or 'last'")
    parser.add_argument("--log-dir", default="logs")
    args = parser.parse_args(argv)
    if args.grad_accum < 1:
        parser.error("--grad-accum must be at least 1")
    return args


def fabric_settings(args: argparse.Namespace) -> Tuple[str, Any, str]:
    """Accelerator, strategy and precision for the hardware asked for."""
    if not args.tpu:
        if args.strategy == "fsdp":
            return "cuda", FSDPStrategy(auto_wrap_policy={Block}, state_dict_type="full"), args.precision
        return "cuda", args.strategy, args.precision
    if args.strategy == "deepspeed":
        raise SystemExit("DeepSpeed needs CUDA GPUs; use --strategy ddp or fsdp with --tpu")
    # XLA's precision plugin takes no mixed precision.
    precision = args.precision if args.precision in XLA_PRECISIONS else "bf16-true"
    if args.devices == 1:
        return "tpu", "auto", precision
    return "tpu", "xla_fsdp" if args.strategy == "fsdp" else "xla", precision


if __name__ == "__main__":
    args = parse_args()
    torch.set_float32_matmul_precision("high")
    logger = CSVLogger(root_dir=args.log_dir, name="classifier")
    accelerator, strategy, precision = fabric_settings(args)
    fabric = L.Fabric(
        accelerator=accelerator,
        strategy=strategy,
        devices=args.devices,
        num_nodes=args.num_nodes,
        precision=precision,
        loggers=logger,
    )
    fabric.launch(main, args)
