"""Sequence and vision models trained with Lightning Fabric: one file, several entry points.

Sub-commands:

    python realistic_train_3000.py pretrain --model transformer --strategy fsdp --devices 8
    python realistic_train_3000.py finetune --model resnet --checkpoint runs/pretrain/last.ckpt
    python realistic_train_3000.py evaluate --model mlp --checkpoint runs/finetune/best.ckpt
    python realistic_train_3000.py sweep --lrs 1e-4 3e-4 1e-3 --model convnet
    python realistic_train_3000.py profile --model transformer --steps 20

The data is synthetic (token sequences, images and tabular rows whose labels follow simple rules), so
the script runs anywhere; the training machinery is the one used on real data.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import csv
import dataclasses
import enum
import functools
import glob
import hashlib
import itertools
import json
import logging
import math
import os
import random
import re
import shutil
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import (
    Any,
    Callable,
    Deque,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from lightning.fabric import Fabric
from lightning.fabric.loggers import CSVLogger, TensorBoardLogger
from lightning.fabric.strategies import (
    DDPStrategy,
    DeepSpeedStrategy,
    FSDPStrategy,
    XLAFSDPStrategy,
)
from lightning.fabric.utilities import AttributeDict
from torch.utils.data import DataLoader, Dataset, Subset

log = logging.getLogger("realistic_train")

STRATEGIES = ("ddp", "ddp_find_unused", "deepspeed", "deepspeed_stage_3", "fsdp", "fsdp_hybrid")
PRECISIONS = ("32-true", "16-mixed", "bf16-mixed", "bf16-true", "16-true")
XLA_PRECISIONS = ("32-true", "16-true", "bf16-true")
MODEL_NAMES = ("mlp", "convnet", "resnet", "transformer", "lstm", "mixer")
TASKS = {
    "mlp": "tabular",
    "convnet": "vision",
    "resnet": "vision",
    "transformer": "sequence",
    "lstm": "sequence",
    "mixer": "vision",
}
DEFAULT_RUN_ROOT = os.environ.get("RUN_ROOT", "runs")


class Task(str, enum.Enum):
    TABULAR = "tabular"
    VISION = "vision"
    SEQUENCE = "sequence"


class SchedulerKind(str, enum.Enum):
    CONSTANT = "constant"
    COSINE = "cosine"
    LINEAR = "linear"
    STEP = "step"
    ONE_CYCLE = "one_cycle"


@dataclass
class DataConfig:
    task: str = "sequence"
    train_samples: int = 8192
    val_samples: int = 1024
    test_samples: int = 1024
    batch_size: int = 64
    eval_batch_size: int = 128
    num_workers: int = 2
    pin_memory: bool = True
    seq_len: int = 128
    vocab_size: int = 1024
    image_size: int = 32
    channels: int = 3
    features: int = 48
    num_classes: int = 10
    augment: bool = True
    label_noise: float = 0.0
    seed: int = 1234

    def validate(self) -> None:
        if self.batch_size <= 0 or self.eval_batch_size <= 0:
            raise ValueError("batch sizes must be positive")
        if not 0.0 <= self.label_noise < 0.5:
            raise ValueError(f"label_noise must be in [0, 0.5), got {self.label_noise}")
        if self.task not in {task.value for task in Task}:
            raise ValueError(f"unknown task {self.task!r}")


@dataclass
class ModelConfig:
    name: str = "transformer"
    width: int = 256
    depth: int = 6
    heads: int = 8
    mlp_ratio: float = 4.0
    dropout: float = 0.1
    drop_path: float = 0.0
    kernel_size: int = 3
    stem_channels: int = 32
    stages: Tuple[int, ...] = (2, 2, 2)
    bidirectional: bool = True
    tie_embeddings: bool = False
    activation_checkpointing: bool = False

    @property
    def head_dim(self) -> int:
        return self.width // self.heads


@dataclass
class OptimConfig:
    optimizer: str = "adamw"
    lr: float = 3e-4
    min_lr: float = 1e-5
    weight_decay: float = 0.05
    betas: Tuple[float, float] = (0.9, 0.95)
    momentum: float = 0.9
    eps: float = 1e-8
    scheduler: str = SchedulerKind.COSINE.value
    warmup_steps: int = 200
    step_size: int = 1000
    gamma: float = 0.5
    max_norm: Optional[float] = 1.0
    layer_decay: Optional[float] = None


@dataclass
class RunConfig:
    name: str = "run"
    root: str = DEFAULT_RUN_ROOT
    epochs: int = 10
    max_steps: Optional[int] = None
    grad_accum: int = 1
    val_every: int = 1
    log_every: int = 25
    save_every: int = 1
    keep_last: int = 3
    seed: int = 42
    compile: bool = False
    ema_decay: Optional[float] = None
    early_stop_patience: Optional[int] = None
    monitor: str = "val/acc"
    monitor_mode: str = "max"
    resume: Optional[str] = None
    tags: List[str] = field(default_factory=list)


@dataclass
class HardwareConfig:
    accelerator: str = "cuda"
    strategy: str = "ddp"
    devices: int = 1
    num_nodes: int = 1
    precision: str = "bf16-mixed"
    tpu: bool = False


@dataclass
class ExperimentConfig:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunConfig = field(default_factory=RunConfig)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def fingerprint(self) -> str:
        text = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha1(text.encode("utf-8")).hexdigest()[:10]

    @property
    def run_dir(self) -> Path:
        return Path(self.run.root) / self.run.name

    @classmethod
    def from_json(cls, path: Union[str, Path]) -> "ExperimentConfig":
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls(
            data=DataConfig(**raw.get("data", {})),
            model=ModelConfig(**_tuples(raw.get("model", {}), ("stages",))),
            optim=OptimConfig(**_tuples(raw.get("optim", {}), ("betas",))),
            run=RunConfig(**raw.get("run", {})),
            hardware=HardwareConfig(**raw.get("hardware", {})),
        )


def _tuples(section: Mapping[str, Any], keys: Sequence[str]) -> Dict[str, Any]:
    """JSON has no tuples: turn the listed keys back into them."""
    converted = dict(section)
    for key in keys:
        if key in converted and isinstance(converted[key], list):
            converted[key] = tuple(converted[key])
    return converted


def merge_overrides(config: ExperimentConfig, overrides: Sequence[str]) -> ExperimentConfig:
    """Apply ``section.key=value`` overrides (``optim.lr=1e-3``, ``model.depth=12``) to a copy."""
    merged = copy.deepcopy(config)
    for override in overrides:
        if "=" not in override:
            raise ValueError(f"override {override!r} is not section.key=value")
        dotted, raw_value = override.split("=", 1)
        section_name, _, key = dotted.partition(".")
        section = getattr(merged, section_name, None)
        if section is None or not hasattr(section, key):
            raise ValueError(f"unknown setting {dotted!r}")
        current = getattr(section, key)
        value: Any
        if isinstance(current, bool):
            value = raw_value.lower() in ("1", "true", "yes", "on")
        elif isinstance(current, int):
            value = int(raw_value)
        elif isinstance(current, float) or current is None and re.fullmatch(r"[-+.\deE]+", raw_value):
            value = float(raw_value)
        elif isinstance(current, tuple):
            value = tuple(type(current[0])(part) for part in raw_value.split(",")) if current else ()
        else:
            value = raw_value
        setattr(section, key, value)
    return merged


def setup_logging(verbose: bool, rank: int) -> None:
    level = logging.DEBUG if verbose else logging.INFO
    if rank != 0:
        level = logging.WARNING
    logging.basicConfig(
        level=level,
        format=f"%(asctime)s [rank {rank}] %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )


def human_count(number: float) -> str:
    for unit in ("", "K", "M", "B"):
        if abs(number) < 1000:
            return f"{number:.1f}{unit}" if unit else f"{int(number)}"
        number /= 1000.0
    return f"{number:.1f}T"


def format_seconds(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{seconds:.1f}s"


def count_parameters(module: nn.Module, trainable_only: bool = False) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


def set_torch_flags(deterministic: bool, matmul_precision: str = "high") -> None:
    torch.set_float32_matmul_precision(matmul_precision)
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = not deterministic
        torch.backends.cudnn.allow_tf32 = not deterministic
        torch.backends.cudnn.benchmark = not deterministic


class Transform:
    """A callable on one sample's input tensor; subclasses say what they do to it."""

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"


class Compose(Transform):
    def __init__(self, transforms: Sequence[Transform]) -> None:
        self.transforms = list(transforms)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        for transform in self.transforms:
            x = transform(x)
        return x


class RandomCrop(Transform):
    def __init__(self, size: int, padding: int = 4) -> None:
        self.size = size
        self.padding = padding

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        padded = F.pad(x, [self.padding] * 4, mode="reflect")
        limit = padded.shape[-1] - self.size
        top, left = random.randint(0, limit), random.randint(0, limit)
        return padded[..., top : top + self.size, left : left + self.size]


class HorizontalFlip(Transform):
    def __init__(self, p: float = 0.5) -> None:
        self.p = p

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x.flip(-1) if random.random() < self.p else x


class Normalize(Transform):
    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


class Cutout(Transform):
    def __init__(self, holes: int = 1, length: int = 8) -> None:
        self.holes = holes
        self.length = length

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        height, width = x.shape[-2:]
        mask = torch.ones(height, width)
        for _ in range(self.holes):
            cy, cx = random.randrange(height), random.randrange(width)
            y0, y1 = max(0, cy - self.length // 2), min(height, cy + self.length // 2)
            x0, x1 = max(0, cx - self.length // 2), min(width, cx + self.length // 2)
            mask[y0:y1, x0:x1] = 0.0
        return x * mask


class GaussianNoise(Transform):
    def __init__(self, std: float = 0.05) -> None:
        self.std = std

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.randn_like(x) * self.std if self.std > 0 else x


class TokenMasking(Transform):
    """Replace a fraction of tokens with the mask id (0), keeping the first token."""

    def __init__(self, probability: float = 0.1, mask_id: int = 0) -> None:
        self.probability = probability
        self.mask_id = mask_id

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.probability <= 0:
            return x
        mask = torch.rand(x.shape) < self.probability
        mask[..., 0] = False
        return x.masked_fill(mask, self.mask_id)


class FeatureDropout(Transform):
    def __init__(self, p: float = 0.1) -> None:
        self.p = p

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        keep = (torch.rand_like(x) >= self.p).to(x.dtype)
        return x * keep / (1.0 - self.p)


def vision_transforms(cfg: DataConfig, train: bool) -> Transform:
    steps: List[Transform] = []
    if train and cfg.augment:
        steps += [RandomCrop(cfg.image_size, padding=4), HorizontalFlip(), Cutout(1, cfg.image_size // 4)]
    steps.append(Normalize([0.5] * cfg.channels, [0.25] * cfg.channels))
    return Compose(steps)


def sequence_transforms(cfg: DataConfig, train: bool) -> Transform:
    return Compose([TokenMasking(0.15 if train and cfg.augment else 0.0)])


def tabular_transforms(cfg: DataConfig, train: bool) -> Transform:
    if not (train and cfg.augment):
        return Compose([])
    return Compose([GaussianNoise(0.02), FeatureDropout(0.05)])


TRANSFORM_BUILDERS: Dict[str, Callable[[DataConfig, bool], Transform]] = {
    Task.VISION.value: vision_transforms,
    Task.SEQUENCE.value: sequence_transforms,
    Task.TABULAR.value: tabular_transforms,
}


class SyntheticDataset(Dataset):
    """Base class: inputs are made once from a seeded generator, labels follow a rule of the input."""

    def __init__(
        self, samples: int, cfg: DataConfig, seed: int, transform: Optional[Transform] = None
    ) -> None:
        self.cfg = cfg
        self.transform = transform
        generator = torch.Generator().manual_seed(seed)
        self.inputs = self.make_inputs(samples, generator)
        self.labels = self.make_labels(self.inputs)
        if cfg.label_noise > 0:
            flip = torch.rand(samples, generator=generator) < cfg.label_noise
            noise = torch.randint(0, cfg.num_classes, (samples,), generator=generator)
            self.labels = torch.where(flip, noise, self.labels)

    def make_inputs(self, samples: int, generator: torch.Generator) -> torch.Tensor:
        raise NotImplementedError

    def make_labels(self, inputs: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def __len__(self) -> int:
        return self.labels.shape[0]

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, torch.Tensor]:
        x = self.inputs[index]
        if self.transform is not None:
            x = self.transform(x)
        return x, self.labels[index]

    def class_counts(self) -> List[int]:
        return torch.bincount(self.labels, minlength=self.cfg.num_classes).tolist()


class TokenDataset(SyntheticDataset):
    def make_inputs(self, samples: int, generator: torch.Generator) -> torch.Tensor:
        return torch.randint(1, self.cfg.vocab_size, (samples, self.cfg.seq_len), generator=generator)

    def make_labels(self, inputs: torch.Tensor) -> torch.Tensor:
        window = inputs[:, : min(16, inputs.shape[1])]
        return (window.sum(dim=1) + window.max(dim=1).values) % self.cfg.num_classes


class ImageDataset(SyntheticDataset):
    def make_inputs(self, samples: int, generator: torch.Generator) -> torch.Tensor:
        size, channels = self.cfg.image_size, self.cfg.channels
        images = torch.rand(samples, channels, size, size, generator=generator)
        # A bright square whose position encodes the class makes the task learnable.
        self._positions = torch.randint(0, self.cfg.num_classes, (samples,), generator=generator)
        cell = max(1, size // self.cfg.num_classes)
        for i, position in enumerate(self._positions.tolist()):
            start = position * cell
            images[i, :, start : start + cell, start : start + cell] += 1.0
        return images

    def make_labels(self, inputs: torch.Tensor) -> torch.Tensor:
        return self._positions.clone()


class TabularDataset(SyntheticDataset):
    def make_inputs(self, samples: int, generator: torch.Generator) -> torch.Tensor:
        return torch.randn(samples, self.cfg.features, generator=generator)

    def make_labels(self, inputs: torch.Tensor) -> torch.Tensor:
        weights = torch.linspace(-1.0, 1.0, inputs.shape[1])
        scores = inputs @ weights + 0.5 * inputs[:, 0] * inputs[:, 1]
        edges = torch.quantile(scores, torch.linspace(0, 1, self.cfg.num_classes + 1)[1:-1])
        return torch.bucketize(scores, edges)


DATASETS: Dict[str, type] = {
    Task.SEQUENCE.value: TokenDataset,
    Task.VISION.value: ImageDataset,
    Task.TABULAR.value: TabularDataset,
}


@dataclass
class DataSplits:
    train: Dataset
    val: Dataset
    test: Dataset

    def sizes(self) -> Dict[str, int]:
        return {name: len(getattr(self, name)) for name in ("train", "val", "test")}


def build_datasets(cfg: DataConfig) -> DataSplits:
    cfg.validate()
    dataset_cls = DATASETS[cfg.task]
    build_transform = TRANSFORM_BUILDERS[cfg.task]
    train = dataset_cls(cfg.train_samples, cfg, cfg.seed, build_transform(cfg, True))
    val = dataset_cls(cfg.val_samples, cfg, cfg.seed + 1, build_transform(cfg, False))
    test = dataset_cls(cfg.test_samples, cfg, cfg.seed + 2, build_transform(cfg, False))
    return DataSplits(train=train, val=val, test=test)


def subsample(dataset: Dataset, fraction: float, seed: int) -> Dataset:
    if fraction >= 1.0:
        return dataset
    count = max(1, int(len(dataset) * fraction))  # type: ignore[arg-type]
    indices = random.Random(seed).sample(range(len(dataset)), count)  # type: ignore[arg-type]
    return Subset(dataset, sorted(indices))


def pad_collate(batch: List[Tuple[torch.Tensor, torch.Tensor]]) -> Tuple[torch.Tensor, torch.Tensor]:
    """Stack fixed-size inputs; right-pad token sequences of different lengths with 0."""
    inputs, labels = zip(*batch)
    if inputs[0].dim() == 1 and len({x.shape[0] for x in inputs}) > 1:
        longest = max(x.shape[0] for x in inputs)
        stacked = torch.zeros(len(inputs), longest, dtype=inputs[0].dtype)
        for row, x in enumerate(inputs):
            stacked[row, : x.shape[0]] = x
    else:
        stacked = torch.stack(inputs)
    return stacked, torch.stack(labels)


def make_loader(
    dataset: Dataset, cfg: DataConfig, train: bool, drop_last: Optional[bool] = None
) -> DataLoader:
    return DataLoader(
        dataset,
        batch_size=cfg.batch_size if train else cfg.eval_batch_size,
        shuffle=train,
        num_workers=cfg.num_workers,
        pin_memory=cfg.pin_memory and torch.cuda.is_available(),
        drop_last=train if drop_last is None else drop_last,
        persistent_workers=cfg.num_workers > 0,
        collate_fn=pad_collate,
    )


def build_dataloaders(cfg: DataConfig, splits: Optional[DataSplits] = None) -> Dict[str, DataLoader]:
    splits = splits or build_datasets(cfg)
    return {
        "train": make_loader(splits.train, cfg, train=True),
        "val": make_loader(splits.val, cfg, train=False),
        "test": make_loader(splits.test, cfg, train=False),
    }


def describe_data(splits: DataSplits, cfg: DataConfig) -> str:
    sizes = splits.sizes()
    lines = [f"task={cfg.task} classes={cfg.num_classes}"]
    lines += [f"  {name:<5} {size:>7} samples" for name, size in sizes.items()]
    train = splits.train
    if isinstance(train, SyntheticDataset):
        counts = train.class_counts()
        spread = max(counts) / max(1, min(counts))
        lines.append(f"  class balance: min {min(counts)} max {max(counts)} (ratio {spread:.2f})")
    return "\n".join(lines)


class DropPath(nn.Module):
    """Stochastic depth: drop the whole residual branch per sample."""

    def __init__(self, probability: float = 0.0) -> None:
        super().__init__()
        self.probability = probability

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.probability == 0.0 or not self.training:
            return x
        keep = 1.0 - self.probability
        shape = (x.shape[0],) + (1,) * (x.dim() - 1)
        mask = x.new_empty(shape).bernoulli_(keep)
        return x * mask / keep


class MLPClassifier(nn.Module):
    def __init__(self, cfg: ModelConfig, data: DataConfig) -> None:
        super().__init__()
        layers: List[nn.Module] = []
        width_in = data.features
        for index in range(cfg.depth):
            width_out = cfg.width if index < cfg.depth - 1 else cfg.width // 2
            layers += [
                nn.Linear(width_in, width_out),
                nn.BatchNorm1d(width_out),
                nn.SiLU(),
                nn.Dropout(cfg.dropout),
            ]
            width_in = width_out
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width_in, data.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class ConvBNAct(nn.Sequential):
    def __init__(self, channels_in: int, channels_out: int, kernel_size: int = 3, stride: int = 1) -> None:
        super().__init__(
            nn.Conv2d(channels_in, channels_out, kernel_size, stride, kernel_size // 2, bias=False),
            nn.BatchNorm2d(channels_out),
            nn.ReLU(inplace=True),
        )


class ConvNet(nn.Module):
    def __init__(self, cfg: ModelConfig, data: DataConfig) -> None:
        super().__init__()
        channels = [cfg.stem_channels * (2**i) for i in range(len(cfg.stages))]
        blocks: List[nn.Module] = [ConvBNAct(data.channels, channels[0], cfg.kernel_size)]
        for stage, (count, width) in enumerate(zip(cfg.stages, channels)):
            for repeat in range(count):
                stride = 2 if repeat == 0 and stage > 0 else 1
                width_in = channels[stage - 1] if repeat == 0 and stage > 0 else width
                blocks.append(ConvBNAct(width_in, width, cfg.kernel_size, stride))
        self.features = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Dropout(cfg.dropout), nn.Linear(channels[-1], data.num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.pool(self.features(x)))


class ResidualBlock(nn.Module):
    expansion = 1

    def __init__(self, channels_in: int, channels_out: int, stride: int = 1, drop_path: float = 0.0) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels_out)
        self.conv2 = nn.Conv2d(channels_out, channels_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels_out)
        self.drop_path = DropPath(drop_path)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or channels_in != channels_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(channels_in, channels_out, 1, stride, bias=False), nn.BatchNorm2d(channels_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(self.shortcut(x) + self.drop_path(out))


class ResNet(nn.Module):
    def __init__(self, cfg: ModelConfig, data: DataConfig) -> None:
        super().__init__()
        self.stem = ConvBNAct(data.channels, cfg.stem_channels, 3)
        total_blocks = sum(cfg.stages)
        rates = [cfg.drop_path * i / max(1, total_blocks - 1) for i in range(total_blocks)]
        layers: List[nn.Module] = []
        channels_in, block_index = cfg.stem_channels, 0
        for stage, count in enumerate(cfg.stages):
            channels_out = cfg.stem_channels * (2**stage)
            for repeat in range(count):
                stride = 2 if stage > 0 and repeat == 0 else 1
                layers.append(ResidualBlock(channels_in, channels_out, stride, rates[block_index]))
                channels_in, block_index = channels_out, block_index + 1
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(channels_in, data.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class SelfAttention(nn.Module):
    def __init__(self, width: int, heads: int, dropout: float) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"width {width} is not divisible by {heads} heads")
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, padding_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.heads, width // self.heads).unbind(dim=2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        attn_mask = None
        if padding_mask is not None:
            attn_mask = ~padding_mask[:, None, None, :]
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=self.dropout if self.training else 0.0
        )
        return self.proj(out.transpose(1, 2).reshape(batch, length, width))


class TransformerBlock(nn.Module):
    def __init__(self, cfg: ModelConfig, drop_path: float = 0.0) -> None:
        super().__init__()
        hidden = int(cfg.width * cfg.mlp_ratio)
        self.norm1 = nn.LayerNorm(cfg.width)
        self.attn = SelfAttention(cfg.width, cfg.heads, cfg.dropout)
        self.norm2 = nn.LayerNorm(cfg.width)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.width, hidden), nn.GELU(), nn.Dropout(cfg.dropout), nn.Linear(hidden, cfg.width)
        )
        self.drop_path = DropPath(drop_path)

    def forward(self, x: torch.Tensor, padding_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x), padding_mask))
        return x + self.drop_path(self.mlp(self.norm2(x)))


class SequenceTransformer(nn.Module):
    def __init__(self, cfg: ModelConfig, data: DataConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(data.vocab_size, cfg.width, padding_idx=0)
        self.pos = nn.Parameter(torch.zeros(1, data.seq_len, cfg.width))
        rates = torch.linspace(0, cfg.drop_path, cfg.depth).tolist()
        self.blocks = nn.ModuleList([TransformerBlock(cfg, rate) for rate in rates])
        self.norm = nn.LayerNorm(cfg.width)
        self.head = nn.Linear(cfg.width, data.num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        padding = tokens == 0
        x = self.embed(tokens) + self.pos[:, : tokens.shape[1]]
        for block in self.blocks:
            if self.cfg.activation_checkpointing and self.training:
                x = torch.utils.checkpoint.checkpoint(block, x, padding, use_reentrant=False)
            else:
                x = block(x, padding)
        keep = (~padding).unsqueeze(-1).to(x.dtype)
        pooled = (self.norm(x) * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)
        return self.head(pooled)


class LSTMClassifier(nn.Module):
    def __init__(self, cfg: ModelConfig, data: DataConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(data.vocab_size, cfg.width, padding_idx=0)
        self.rnn = nn.LSTM(
            cfg.width,
            cfg.width,
            num_layers=max(1, cfg.depth // 2),
            batch_first=True,
            dropout=cfg.dropout if cfg.depth > 2 else 0.0,
            bidirectional=cfg.bidirectional,
        )
        directions = 2 if cfg.bidirectional else 1
        self.head = nn.Linear(cfg.width * directions, data.num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        output, _ = self.rnn(self.embed(tokens))
        return self.head(output.max(dim=1).values)


class MixerLayer(nn.Module):
    def __init__(
        self, patches: int, width: int, token_hidden: int, channel_hidden: int, dropout: float
    ) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.token_mlp = nn.Sequential(
            nn.Linear(patches, token_hidden), nn.GELU(), nn.Linear(token_hidden, patches)
        )
        self.norm2 = nn.LayerNorm(width)
        self.channel_mlp = nn.Sequential(
            nn.Linear(width, channel_hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(channel_hidden, width)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.norm2(x))


class MLPMixer(nn.Module):
    def __init__(self, cfg: ModelConfig, data: DataConfig, patch: int = 4) -> None:
        super().__init__()
        if data.image_size % patch:
            raise ValueError(f"image size {data.image_size} is not a multiple of the patch size {patch}")
        patches = (data.image_size // patch) ** 2
        self.patchify = nn.Conv2d(data.channels, cfg.width, patch, patch)
        self.layers = nn.Sequential(
            *[
                MixerLayer(patches, cfg.width, cfg.width // 2, int(cfg.width * cfg.mlp_ratio), cfg.dropout)
                for _ in range(cfg.depth)
            ]
        )
        self.norm = nn.LayerNorm(cfg.width)
        self.head = nn.Linear(cfg.width, data.num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.patchify(images).flatten(2).transpose(1, 2)
        return self.head(self.norm(self.layers(x)).mean(dim=1))


MODEL_ZOO: Dict[str, Callable[[ModelConfig, DataConfig], nn.Module]] = {
    "mlp": MLPClassifier,
    "convnet": ConvNet,
    "resnet": ResNet,
    "transformer": SequenceTransformer,
    "lstm": LSTMClassifier,
    "mixer": MLPMixer,
}

# The submodules FSDP wraps one by one, per model family.
WRAP_POLICIES: Dict[str, set] = {
    "transformer": {TransformerBlock},
    "resnet": {ResidualBlock},
    "mixer": {MixerLayer},
}


def init_weights(module: nn.Module, std: float = 0.02) -> None:
    if isinstance(module, nn.Linear):
        nn.init.trunc_normal_(module.weight, std=std)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=std)
    elif isinstance(module, (nn.Conv2d,)):
        nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
    elif isinstance(module, (nn.LayerNorm, nn.BatchNorm1d, nn.BatchNorm2d)):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


def build_model(cfg: ModelConfig, data: DataConfig) -> nn.Module:
    try:
        constructor = MODEL_ZOO[cfg.name]
    except KeyError:
        raise ValueError(f"unknown model {cfg.name!r}; choose from {sorted(MODEL_ZOO)}") from None
    expected = TASKS[cfg.name]
    if data.task != expected:
        raise ValueError(f"model {cfg.name!r} trains on {expected} data, not {data.task}")
    model = constructor(cfg, data)
    # On the meta device there is nothing to initialise; setup materialises the weights.
    if not any(p.is_meta for p in model.parameters()):
        model.apply(init_weights)
    return model


def parameter_groups(model: nn.Module, cfg: OptimConfig) -> List[Dict[str, Any]]:
    """Weight decay on matrices only; with ``layer_decay`` lower layers get smaller learning rates."""
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    if cfg.layer_decay is None:
        decay = [p for name, p in named if p.ndim >= 2 and "norm" not in name]
        no_decay = [p for name, p in named if p.ndim < 2 or "norm" in name]
        return [
            {"params": decay, "weight_decay": cfg.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
    depth_of: Dict[str, int] = {}
    for name, _ in named:
        match = re.search(r"(?:blocks|layers)\.(\d+)\.", name)
        depth_of[name] = (
            int(match.group(1)) + 1 if match else (0 if "embed" in name or "stem" in name else -1)
        )
    deepest = max(depth_of.values()) + 1
    groups: Dict[Tuple[int, bool], Dict[str, Any]] = {}
    for name, param in named:
        depth = depth_of[name] if depth_of[name] >= 0 else deepest
        scale = cfg.layer_decay ** (deepest - depth)
        decays = param.ndim >= 2 and "norm" not in name
        key = (depth, decays)
        if key not in groups:
            groups[key] = {
                "params": [],
                "weight_decay": cfg.weight_decay if decays else 0.0,
                "lr": cfg.lr * scale,
                "lr_scale": scale,
            }
        groups[key]["params"].append(param)
    return [groups[key] for key in sorted(groups)]


def build_optimizer(model: nn.Module, cfg: OptimConfig) -> torch.optim.Optimizer:
    groups = parameter_groups(model, cfg)
    name = cfg.optimizer.lower()
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)
    if name == "adam":
        return torch.optim.Adam(groups, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)
    if name == "sgd":
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, nesterov=True)
    if name == "rmsprop":
        return torch.optim.RMSprop(groups, lr=cfg.lr, momentum=cfg.momentum, eps=cfg.eps)
    raise ValueError(f"unknown optimizer {cfg.optimizer!r}")


def lr_multiplier(step: int, cfg: OptimConfig, total_steps: int) -> float:
    """The factor the base learning rate is multiplied by at ``step``."""
    if step < cfg.warmup_steps:
        return (step + 1) / max(1, cfg.warmup_steps)
    kind = SchedulerKind(cfg.scheduler)
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, total_steps - cfg.warmup_steps))
    floor = cfg.min_lr / cfg.lr
    if kind is SchedulerKind.CONSTANT:
        return 1.0
    if kind is SchedulerKind.COSINE:
        return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
    if kind is SchedulerKind.LINEAR:
        return max(floor, 1.0 - progress)
    if kind is SchedulerKind.STEP:
        return max(floor, cfg.gamma ** ((step - cfg.warmup_steps) // cfg.step_size))
    # one-cycle: up for the first 30 %, then down
    peak = 0.3
    if progress < peak:
        return floor + (1.0 - floor) * progress / peak
    return floor + (1.0 - floor) * (1.0 - (progress - peak) / (1.0 - peak))


def apply_lr(optimizer: torch.optim.Optimizer, cfg: OptimConfig, step: int, total_steps: int) -> float:
    factor = lr_multiplier(step, cfg, total_steps)
    for group in optimizer.param_groups:
        group["lr"] = cfg.lr * factor * group.get("lr_scale", 1.0)
    return cfg.lr * factor


class ModelEMA:
    """Exponential moving average of a model's weights, kept on the same device, for evaluation."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        self.decay = decay
        self.shadow = {
            name: p.detach().clone() for name, p in model.state_dict().items() if p.dtype.is_floating_point
        }
        self.updates = 0

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        self.updates += 1
        decay = min(self.decay, (1 + self.updates) / (10 + self.updates))
        for name, value in model.state_dict().items():
            if name in self.shadow:
                self.shadow[name].mul_(decay).add_(value.detach(), alpha=1.0 - decay)

    @contextlib.contextmanager
    def swapped_into(self, model: nn.Module) -> Iterator[None]:
        backup = {
            name: value.detach().clone() for name, value in model.state_dict().items() if name in self.shadow
        }
        model.load_state_dict(self.shadow, strict=False)
        try:
            yield
        finally:
            model.load_state_dict(backup, strict=False)

    def state_dict(self) -> Dict[str, Any]:
        return {"decay": self.decay, "updates": self.updates, "shadow": self.shadow}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.decay = state["decay"]
        self.updates = state["updates"]
        self.shadow = state["shadow"]


class AverageMeter:
    """Running mean of a scalar, weighted by the number of samples each value stands for."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.reset()

    def reset(self) -> None:
        self.total = 0.0
        self.count = 0

    def update(self, value: float, weight: int = 1) -> None:
        self.total += value * weight
        self.count += weight

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else float("nan")

    def __repr__(self) -> str:
        return f"{self.name}={self.mean:.4f} (n={self.count})"


class SmoothedValue:
    """The median and mean of the last ``window`` values: what a progress line shows."""

    def __init__(self, window: int = 50) -> None:
        self.values: Deque[float] = collections.deque(maxlen=window)

    def append(self, value: float) -> None:
        if math.isfinite(value):
            self.values.append(value)

    @property
    def median(self) -> float:
        ordered = sorted(self.values)
        if not ordered:
            return float("nan")
        middle = len(ordered) // 2
        return ordered[middle] if len(ordered) % 2 else 0.5 * (ordered[middle - 1] + ordered[middle])

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values) if self.values else float("nan")


def topk_correct(
    logits: torch.Tensor, labels: torch.Tensor, ks: Sequence[int] = (1, 5)
) -> Dict[int, torch.Tensor]:
    largest = min(max(ks), logits.shape[-1])
    _, predicted = logits.topk(largest, dim=-1)
    hits = predicted.eq(labels.unsqueeze(-1))
    return {k: hits[:, : min(k, largest)].any(dim=-1).sum() for k in ks}


class ConfusionMatrix:
    def __init__(self, num_classes: int, device: Union[str, torch.device] = "cpu") -> None:
        self.num_classes = num_classes
        self.matrix = torch.zeros(num_classes, num_classes, dtype=torch.long, device=device)

    def update(self, predictions: torch.Tensor, labels: torch.Tensor) -> None:
        index = labels * self.num_classes + predictions
        counts = torch.bincount(index, minlength=self.num_classes**2)
        self.matrix += counts.view(self.num_classes, self.num_classes)

    def per_class(self) -> Dict[str, torch.Tensor]:
        matrix = self.matrix.float()
        true_positive = matrix.diag()
        precision = true_positive / matrix.sum(dim=0).clamp(min=1)
        recall = true_positive / matrix.sum(dim=1).clamp(min=1)
        f1 = 2 * precision * recall / (precision + recall).clamp(min=1e-12)
        return {"precision": precision, "recall": recall, "f1": f1}

    def summary(self) -> Dict[str, float]:
        scores = self.per_class()
        support = self.matrix.sum(dim=1).float()
        weights = support / support.sum().clamp(min=1)
        return {
            "macro_f1": scores["f1"].mean().item(),
            "weighted_f1": (scores["f1"] * weights).sum().item(),
            "balanced_acc": scores["recall"].mean().item(),
        }

    def render(self, names: Optional[Sequence[str]] = None) -> str:
        names = list(names) if names else [str(i) for i in range(self.num_classes)]
        width = max(5, max(len(n) for n in names) + 1)
        header = " " * width + "".join(n.rjust(width) for n in names)
        rows = [header]
        for name, row in zip(names, self.matrix.tolist()):
            rows.append(name.rjust(width) + "".join(str(v).rjust(width) for v in row))
        return "\n".join(rows)


def expected_calibration_error(probabilities: torch.Tensor, labels: torch.Tensor, bins: int = 15) -> float:
    confidence, predicted = probabilities.max(dim=-1)
    correct = predicted.eq(labels).float()
    edges = torch.linspace(0, 1, bins + 1, device=probabilities.device)
    error = torch.zeros((), device=probabilities.device)
    for low, high in zip(edges[:-1], edges[1:]):
        in_bin = (confidence > low) & (confidence <= high)
        if in_bin.any():
            gap = confidence[in_bin].mean() - correct[in_bin].mean()
            error += in_bin.float().mean() * gap.abs()
    return error.item()


class EvalAccumulator:
    """Sums over one evaluation pass, reduced across processes at the end."""

    def __init__(self, fabric: Fabric, num_classes: int, keep_probabilities: bool = False) -> None:
        self.fabric = fabric
        self.sums = torch.zeros(4, device=fabric.device)  # loss, top1, top5, count
        self.confusion = ConfusionMatrix(num_classes, device=fabric.device)
        self.keep_probabilities = keep_probabilities
        self.probabilities: List[torch.Tensor] = []
        self.labels: List[torch.Tensor] = []

    def update(self, logits: torch.Tensor, labels: torch.Tensor) -> None:
        logits = logits.float()
        correct = topk_correct(logits, labels)
        self.sums += torch.stack(
            [
                F.cross_entropy(logits, labels, reduction="sum"),
                correct[1].float(),
                correct[5].float(),
                torch.tensor(float(labels.numel()), device=logits.device),
            ]
        )
        self.confusion.update(logits.argmax(dim=-1), labels)
        if self.keep_probabilities:
            self.probabilities.append(logits.softmax(dim=-1).cpu())
            self.labels.append(labels.cpu())

    def compute(self, prefix: str) -> Dict[str, float]:
        sums = self.fabric.all_reduce(self.sums, reduce_op="sum")
        self.confusion.matrix = self.fabric.all_reduce(self.confusion.matrix, reduce_op="sum")
        count = sums[3].clamp(min=1)
        metrics = {
            f"{prefix}/loss": (sums[0] / count).item(),
            f"{prefix}/acc": (sums[1] / count).item(),
            f"{prefix}/top5": (sums[2] / count).item(),
        }
        metrics.update({f"{prefix}/{k}": v for k, v in self.confusion.summary().items()})
        if self.keep_probabilities and self.probabilities:
            metrics[f"{prefix}/ece"] = expected_calibration_error(
                torch.cat(self.probabilities), torch.cat(self.labels)
            )
        return metrics


class Throughput:
    """Samples and steps per second over a sliding window of steps."""

    def __init__(self, window: int = 20) -> None:
        self.times: Deque[float] = collections.deque(maxlen=window)
        self.samples: Deque[int] = collections.deque(maxlen=window)

    def update(self, samples: int) -> None:
        self.times.append(time.perf_counter())
        self.samples.append(samples)

    def compute(self) -> Dict[str, float]:
        if len(self.times) < 2:
            return {}
        elapsed = self.times[-1] - self.times[0]
        if elapsed <= 0:
            return {}
        return {
            "throughput/samples_per_sec": sum(list(self.samples)[1:]) / elapsed,
            "throughput/steps_per_sec": (len(self.times) - 1) / elapsed,
        }


def gradient_norm(parameters: Iterable[torch.nn.Parameter], norm_type: float = 2.0) -> float:
    grads = [p.grad.detach() for p in parameters if p.grad is not None]
    if not grads:
        return 0.0
    norms = torch.stack([torch.linalg.vector_norm(g, norm_type) for g in grads])
    return torch.linalg.vector_norm(norms, norm_type).item()


def flatten_dict(nested: Mapping[str, Any], prefix: str = "", separator: str = "/") -> Dict[str, Any]:
    flat: Dict[str, Any] = {}
    for key, value in nested.items():
        name = f"{prefix}{separator}{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            flat.update(flatten_dict(value, name, separator))
        elif isinstance(value, (list, tuple)):
            flat[name] = ",".join(str(v) for v in value)
        else:
            flat[name] = value
    return flat


def is_better(value: float, best: Optional[float], mode: str, min_delta: float = 0.0) -> bool:
    if best is None or math.isnan(best):
        return not math.isnan(value)
    if mode == "max":
        return value > best + min_delta
    if mode == "min":
        return value < best - min_delta
    raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")


class Callback:
    """Hooks the Trainer calls through ``fabric.call``; each one is optional."""

    def on_fit_start(self, trainer: "Trainer") -> None: ...

    def on_train_epoch_start(self, trainer: "Trainer", epoch: int) -> None: ...

    def on_train_batch_end(self, trainer: "Trainer", loss: float, batch_idx: int) -> None: ...

    def on_validation_end(self, trainer: "Trainer", metrics: Dict[str, float]) -> None: ...

    def on_train_epoch_end(self, trainer: "Trainer", epoch: int, metrics: Dict[str, float]) -> None: ...

    def on_fit_end(self, trainer: "Trainer") -> None: ...


class ProgressPrinter(Callback):
    def __init__(self, every: int) -> None:
        self.every = every
        self.loss = SmoothedValue(window=every)
        self.started = time.perf_counter()

    def on_train_epoch_start(self, trainer: "Trainer", epoch: int) -> None:
        self.started = time.perf_counter()
        trainer.fabric.print(f"--- epoch {epoch + 1}/{trainer.cfg.run.epochs} ---")

    def on_train_batch_end(self, trainer: "Trainer", loss: float, batch_idx: int) -> None:
        self.loss.append(loss)
        if (batch_idx + 1) % self.every:
            return
        elapsed = time.perf_counter() - self.started
        lr = trainer.optimizer.param_groups[0]["lr"]
        trainer.fabric.print(
            f"  step {trainer.global_step:>7} batch {batch_idx + 1:>5} loss {self.loss.median:.4f} "
            f"lr {lr:.2e} elapsed {format_seconds(elapsed)}"
        )


class EarlyStopping(Callback):
    def __init__(self, monitor: str, mode: str, patience: int, min_delta: float = 0.0) -> None:
        self.monitor = monitor
        self.mode = mode
        self.patience = patience
        self.min_delta = min_delta
        self.best: Optional[float] = None
        self.bad_epochs = 0

    def on_validation_end(self, trainer: "Trainer", metrics: Dict[str, float]) -> None:
        value = metrics.get(self.monitor)
        if value is None:
            log.warning("early stopping: %s is not among the metrics %s", self.monitor, sorted(metrics))
            return
        if is_better(value, self.best, self.mode, self.min_delta):
            self.best, self.bad_epochs = value, 0
            return
        self.bad_epochs += 1
        if self.bad_epochs >= self.patience:
            trainer.fabric.print(
                f"early stopping: {self.monitor} did not improve for {self.patience} evaluations"
            )
            trainer.should_stop = True

    def state_dict(self) -> Dict[str, Any]:
        return {"best": self.best, "bad_epochs": self.bad_epochs}


class CheckpointKeeper(Callback):
    """Saves ``last`` after each epoch, ``best`` when the monitored metric improves, keeps ``keep`` epochs."""

    def __init__(self, directory: Path, monitor: str, mode: str, keep: int, every: int) -> None:
        self.directory = directory
        self.monitor = monitor
        self.mode = mode
        self.keep = keep
        self.every = every
        self.best: Optional[float] = None
        self.saved: List[Path] = []

    def on_train_epoch_end(self, trainer: "Trainer", epoch: int, metrics: Dict[str, float]) -> None:
        trainer.save_checkpoint(self.directory / "last.ckpt")
        if (epoch + 1) % self.every == 0:
            path = self.directory / f"epoch-{epoch + 1:03d}.ckpt"
            trainer.save_checkpoint(path)
            self.saved.append(path)
            while len(self.saved) > self.keep:
                stale = self.saved.pop(0)
                if trainer.fabric.is_global_zero:
                    if stale.is_dir():
                        shutil.rmtree(stale, ignore_errors=True)
                    elif stale.exists():
                        stale.unlink()
        value = metrics.get(self.monitor)
        if value is not None and is_better(value, self.best, self.mode):
            self.best = value
            trainer.save_checkpoint(self.directory / "best.ckpt")
            trainer.fabric.print(f"new best {self.monitor}={value:.4f} at epoch {epoch + 1}")


class LearningRateLogger(Callback):
    def on_train_batch_end(self, trainer: "Trainer", loss: float, batch_idx: int) -> None:
        if trainer.global_step % trainer.cfg.run.log_every:
            return
        rates = {f"lr/group{i}": group["lr"] for i, group in enumerate(trainer.optimizer.param_groups)}
        trainer.fabric.log_dict(rates, step=trainer.global_step)


class NonFiniteGuard(Callback):
    """Stop the run after too many consecutive non-finite losses instead of training on garbage."""

    def __init__(self, tolerance: int = 3) -> None:
        self.tolerance = tolerance
        self.streak = 0

    def on_train_batch_end(self, trainer: "Trainer", loss: float, batch_idx: int) -> None:
        if math.isfinite(loss):
            self.streak = 0
            return
        self.streak += 1
        trainer.fabric.print(
            f"warning: non-finite loss at step {trainer.global_step} ({self.streak} in a row)"
        )
        if self.streak >= self.tolerance:
            trainer.should_stop = True


class TimeLimit(Callback):
    def __init__(self, hours: float) -> None:
        self.deadline = time.time() + hours * 3600

    def on_train_batch_end(self, trainer: "Trainer", loss: float, batch_idx: int) -> None:
        if time.time() > self.deadline and not trainer.should_stop:
            trainer.fabric.print("time limit reached; stopping after this step")
            trainer.should_stop = True


class MetricsFile(Callback):
    """Appends every evaluation to ``metrics.jsonl`` in the run folder (rank 0 only)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_validation_end(self, trainer: "Trainer", metrics: Dict[str, float]) -> None:
        if not trainer.fabric.is_global_zero:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        record = {"step": trainer.global_step, "epoch": trainer.epoch, **metrics}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")


def default_callbacks(cfg: ExperimentConfig, time_limit_hours: Optional[float] = None) -> List[Callback]:
    callbacks: List[Callback] = [
        ProgressPrinter(cfg.run.log_every),
        LearningRateLogger(),
        NonFiniteGuard(),
        CheckpointKeeper(
            cfg.run_dir / "checkpoints",
            cfg.run.monitor,
            cfg.run.monitor_mode,
            cfg.run.keep_last,
            cfg.run.save_every,
        ),
        MetricsFile(cfg.run_dir / "metrics.jsonl"),
    ]
    if cfg.run.early_stop_patience:
        callbacks.append(EarlyStopping(cfg.run.monitor, cfg.run.monitor_mode, cfg.run.early_stop_patience))
    if time_limit_hours:
        callbacks.append(TimeLimit(time_limit_hours))
    return callbacks


class Trainer:
    """Owns the Fabric object, the model, the optimizer and the loop; callbacks hook into it."""

    def __init__(
        self, fabric: Fabric, cfg: ExperimentConfig, loaders: Optional[Dict[str, DataLoader]] = None
    ) -> None:
        self.fabric = fabric
        self.cfg = cfg
        self.global_step = 0
        self.epoch = 0
        self.should_stop = False
        self.ema: Optional[ModelEMA] = None
        self.history: List[Dict[str, float]] = []
        self.throughput = Throughput()
        self._raw_loaders = loaders
        self.model: nn.Module
        self.optimizer: torch.optim.Optimizer

    @property
    def sharded(self) -> bool:
        """Strategies that create the model on the meta device and shard it in setup."""
        strategy = self.fabric.strategy
        if isinstance(strategy, (FSDPStrategy, XLAFSDPStrategy)):
            return True
        return isinstance(strategy, DeepSpeedStrategy) and strategy.zero_stage_3

    @property
    def clips_in_engine(self) -> bool:
        # DeepSpeed clips inside its engine (``gradient_clipping`` in its config); Fabric refuses to.
        return isinstance(self.fabric.strategy, DeepSpeedStrategy)

    def configure_model(self) -> nn.Module:
        with self.fabric.init_module(empty_init=self.sharded):
            model = build_model(self.cfg.model, self.cfg.data)
        return model

    def setup(self) -> None:
        model = self.configure_model()
        self.fabric.print(f"model {self.cfg.model.name}: {human_count(count_parameters(model))} parameters")
        if self.cfg.run.compile:
            model = torch.compile(model)
        if isinstance(self.fabric.strategy, (FSDPStrategy, XLAFSDPStrategy)):
            # The optimizer has to be built over the sharded parameters.
            self.model = self.fabric.setup_module(model)
            self.optimizer = self.fabric.setup_optimizers(build_optimizer(self.model, self.cfg.optim))
        else:
            self.model, self.optimizer = self.fabric.setup(model, build_optimizer(model, self.cfg.optim))
        if self.cfg.run.ema_decay and not self.sharded:
            self.ema = ModelEMA(self.model, self.cfg.run.ema_decay)
        loaders = self._raw_loaders or build_dataloaders(self.cfg.data)
        names = list(loaders)
        wrapped = self.fabric.setup_dataloaders(*(loaders[name] for name in names))
        if len(names) == 1:
            wrapped = [wrapped]
        self.loaders = dict(zip(names, wrapped))

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.loaders["train"]) / self.cfg.run.grad_accum)

    @property
    def total_steps(self) -> int:
        planned = self.cfg.run.epochs * self.steps_per_epoch
        return min(planned, self.cfg.run.max_steps) if self.cfg.run.max_steps else planned

    def state(self) -> Dict[str, Any]:
        state: Dict[str, Any] = {
            "model": self.model,
            "optimizer": self.optimizer,
            "global_step": self.global_step,
            "epoch": self.epoch,
            "config": self.cfg.to_dict(),
            "history": self.history,
        }
        if self.ema is not None:
            state["ema"] = self.ema.state_dict()
        return state

    def save_checkpoint(self, path: Path) -> None:
        self.fabric.save(path, self.state())

    def load_checkpoint(self, path: Union[str, Path], weights_only: bool = False) -> None:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"checkpoint {path} does not exist")
        if weights_only:
            self.fabric.load(path, {"model": self.model}, strict=False)
            self.fabric.print(f"loaded weights from {path}")
            return
        state = self.state()
        remainder = self.fabric.load(path, state)
        self.global_step = state["global_step"]
        self.epoch = state["epoch"]
        self.history = state["history"]
        if self.ema is not None and "ema" in remainder:
            self.ema.load_state_dict(remainder["ema"])
        saved_config = state.get("config", {})
        changed = sorted(
            f"{section}.{key}"
            for section, values in saved_config.items()
            for key, value in values.items()
            if self.cfg.to_dict().get(section, {}).get(key) != value
        )
        if changed:
            self.fabric.print(f"resumed with changed settings: {', '.join(changed)}")
        self.fabric.print(f"resumed from {path} at epoch {self.epoch}, step {self.global_step}")

    def compute_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, labels, label_smoothing=0.1 if self.cfg.data.augment else 0.0)

    def training_step(self, batch: Tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        inputs, labels = batch
        return self.compute_loss(self.model(inputs), labels)

    def optimizer_step(self) -> float:
        grad_norm = float("nan")
        if self.cfg.optim.max_norm is not None and not self.clips_in_engine:
            grad_norm = float(
                self.fabric.clip_gradients(self.model, self.optimizer, max_norm=self.cfg.optim.max_norm)
            )
        apply_lr(self.optimizer, self.cfg.optim, self.global_step, self.total_steps)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.ema is not None:
            self.ema.update(self.model)
        self.global_step += 1
        return grad_norm

    def train_epoch(self) -> Dict[str, float]:
        self.model.train()
        loader = self.loaders["train"]
        accumulation = self.cfg.run.grad_accum
        loss_meter = AverageMeter("loss")
        for batch_idx, batch in enumerate(loader):
            is_accumulating = (batch_idx + 1) % accumulation != 0 and batch_idx + 1 != len(loader)
            with self.fabric.no_backward_sync(self.model, enabled=is_accumulating):
                loss = self.training_step(batch)
                self.fabric.backward(loss / accumulation)
            loss_meter.update(loss.item(), batch[1].shape[0])
            self.throughput.update(batch[1].shape[0] * self.fabric.world_size)
            if is_accumulating:
                continue
            grad_norm = self.optimizer_step()
            self.fabric.call("on_train_batch_end", self, loss.item(), batch_idx)
            if self.global_step % self.cfg.run.log_every == 0:
                metrics = {"train/loss": loss_meter.mean, **self.throughput.compute()}
                if not math.isnan(grad_norm):
                    metrics["train/grad_norm"] = grad_norm
                self.fabric.log_dict(metrics, step=self.global_step)
            if self.should_stop or (self.cfg.run.max_steps and self.global_step >= self.cfg.run.max_steps):
                self.should_stop = True
                break
        return {"train/epoch_loss": loss_meter.mean}

    @torch.no_grad()
    def evaluate(self, split: str = "val", use_ema: bool = True) -> Dict[str, float]:
        loader = self.loaders[split]
        was_training = self.model.training
        self.model.eval()
        accumulator = EvalAccumulator(
            self.fabric, self.cfg.data.num_classes, keep_probabilities=split == "test"
        )
        context = (
            self.ema.swapped_into(self.model)
            if (use_ema and self.ema is not None)
            else contextlib.nullcontext()
        )
        with context:
            for inputs, labels in loader:
                accumulator.update(self.model(inputs), labels)
        metrics = accumulator.compute(split)
        if was_training:
            self.model.train()
        return metrics

    def fit(self) -> List[Dict[str, float]]:
        self.fabric.call("on_fit_start", self)
        started = time.perf_counter()
        while self.epoch < self.cfg.run.epochs and not self.should_stop:
            self.fabric.call("on_train_epoch_start", self, self.epoch)
            metrics = self.train_epoch()
            if (self.epoch + 1) % self.cfg.run.val_every == 0 or self.epoch + 1 == self.cfg.run.epochs:
                metrics.update(self.evaluate("val"))
                self.fabric.call("on_validation_end", self, metrics)
            self.fabric.log_dict(metrics, step=self.global_step)
            self.history.append({"epoch": float(self.epoch + 1), **metrics})
            self.epoch += 1
            self.fabric.call("on_train_epoch_end", self, self.epoch - 1, metrics)
            shown = " ".join(
                f"{k}={v:.4f}" for k, v in sorted(metrics.items()) if not k.startswith("throughput")
            )
            self.fabric.print(f"epoch {self.epoch}: {shown}")
        self.fabric.barrier()
        self.fabric.call("on_fit_end", self)
        self.fabric.print(f"training took {format_seconds(time.perf_counter() - started)}")
        return self.history


class DistillationTrainer(Trainer):
    """Trains the student on a mix of the labels and a frozen teacher's softened predictions."""

    def __init__(
        self,
        fabric: Fabric,
        cfg: ExperimentConfig,
        teacher_cfg: ModelConfig,
        teacher_checkpoint: Optional[str],
        temperature: float = 2.0,
        alpha: float = 0.5,
    ) -> None:
        super().__init__(fabric, cfg)
        self.teacher_cfg = teacher_cfg
        self.teacher_checkpoint = teacher_checkpoint
        self.temperature = temperature
        self.alpha = alpha

    def setup(self) -> None:
        super().setup()
        with self.fabric.init_module(empty_init=self.sharded):
            teacher = build_model(self.teacher_cfg, self.cfg.data)
        self.teacher = self.fabric.setup_module(teacher)
        if self.teacher_checkpoint:
            self.fabric.load(self.teacher_checkpoint, {"model": self.teacher}, strict=False)
        self.teacher.eval()
        for param in self.teacher.parameters():
            param.requires_grad_(False)

    def training_step(self, batch: Tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        inputs, labels = batch
        logits = self.model(inputs)
        with torch.no_grad():
            teacher_logits = self.teacher(inputs)
        t = self.temperature
        soft = F.kl_div(
            F.log_softmax(logits / t, dim=-1), F.softmax(teacher_logits / t, dim=-1), reduction="batchmean"
        ) * (t * t)
        return self.alpha * soft + (1 - self.alpha) * self.compute_loss(logits, labels)

    def train_epoch(self) -> Dict[str, float]:
        self.model.train()
        total, batches = 0.0, 0
        for batch_idx, batch in enumerate(self.loaders["train"]):
            is_accumulating = (batch_idx + 1) % self.cfg.run.grad_accum != 0
            with self.fabric.no_backward_sync(self.model, enabled=is_accumulating):
                loss = self.training_step(batch)
                # Two models are set up: DeepSpeed must be told which engine runs backward.
                self.fabric.backward(loss / self.cfg.run.grad_accum, model=self.model)
            total, batches = total + loss.item(), batches + 1
            if not is_accumulating:
                self.optimizer_step()
                self.fabric.call("on_train_batch_end", self, loss.item(), batch_idx)
            if self.should_stop:
                break
        return {"train/epoch_loss": total / max(1, batches)}


class SWAEvaluator:
    """Averages the weights of several checkpoints and evaluates the average (stochastic weight averaging)."""

    def __init__(self, trainer: Trainer, paths: Sequence[Path]) -> None:
        self.trainer = trainer
        self.paths = list(paths)

    def averaged_state(self) -> Dict[str, torch.Tensor]:
        average: Dict[str, torch.Tensor] = {}
        for count, path in enumerate(self.paths, start=1):
            self.trainer.fabric.load(path, {"model": self.trainer.model}, strict=False)
            for name, value in self.trainer.model.state_dict().items():
                if not value.dtype.is_floating_point:
                    average[name] = value.clone()
                elif name not in average:
                    average[name] = value.detach().clone()
                else:
                    average[name] += (value.detach() - average[name]) / count
        return average

    def run(self) -> Dict[str, float]:
        if len(self.paths) < 2:
            raise ValueError("weight averaging needs at least two checkpoints")
        self.trainer.model.load_state_dict(self.averaged_state())
        return self.trainer.evaluate("val", use_ema=False)


def resolve_precision(hw: HardwareConfig) -> str:
    """XLA's precision plugin takes no mixed precision; map the mixed settings to their true variant."""
    if not hw.tpu:
        return hw.precision
    if hw.precision in XLA_PRECISIONS:
        return hw.precision
    replacement = "bf16-true" if hw.precision.startswith("bf16") or hw.precision == "16-mixed" else "32-true"
    log.warning("precision %s is not available on TPU; using %s", hw.precision, replacement)
    return replacement


def make_strategy(hw: HardwareConfig, model_cfg: ModelConfig) -> Union[str, Any]:
    """The strategy object (or registry name) for the hardware and the model family."""
    wrap_policy = WRAP_POLICIES.get(model_cfg.name)
    if hw.tpu:
        if hw.strategy.startswith("deepspeed"):
            raise SystemExit("DeepSpeed needs CUDA GPUs; pick ddp or fsdp with --tpu")
        if hw.devices == 1:
            return "auto"
        return "xla_fsdp" if hw.strategy.startswith("fsdp") else "xla"
    if hw.strategy == "ddp":
        return DDPStrategy(gradient_as_bucket_view=True)
    if hw.strategy == "ddp_find_unused":
        return "ddp_find_unused_parameters_true"
    if hw.strategy == "deepspeed":
        return DeepSpeedStrategy(stage=2, allgather_bucket_size=int(5e8), reduce_bucket_size=int(5e8))
    if hw.strategy == "deepspeed_stage_3":
        return DeepSpeedStrategy(stage=3, offload_optimizer=hw.num_nodes > 1)
    if hw.strategy in ("fsdp", "fsdp_hybrid"):
        kwargs: Dict[str, Any] = {"state_dict_type": "full", "limit_all_gathers": True}
        if wrap_policy:
            kwargs["auto_wrap_policy"] = wrap_policy
            if model_cfg.activation_checkpointing:
                kwargs["activation_checkpointing_policy"] = wrap_policy
        if hw.strategy == "fsdp_hybrid":
            if not wrap_policy:
                raise SystemExit(f"fsdp_hybrid needs a model with blocks to wrap, not {model_cfg.name}")
            kwargs["sharding_strategy"] = "HYBRID_SHARD"
        return FSDPStrategy(**kwargs)
    raise SystemExit(f"unknown strategy {hw.strategy!r}")


def make_loggers(cfg: ExperimentConfig, kinds: Sequence[str]) -> List[Any]:
    loggers: List[Any] = []
    for kind in kinds:
        if kind == "csv":
            loggers.append(CSVLogger(root_dir=str(cfg.run_dir), name="csv"))
        elif kind == "tensorboard":
            loggers.append(TensorBoardLogger(root_dir=str(cfg.run_dir), name="tb"))
        else:
            raise ValueError(f"unknown logger {kind!r}")
    return loggers


def log_config(fabric: Fabric, cfg: ExperimentConfig) -> None:
    flat = flatten_dict(cfg.to_dict())
    for logger in fabric.loggers:
        # The CSV logger does not take hyperparameters; TensorBoard shows them next to the runs.
        if isinstance(logger, TensorBoardLogger):
            logger.log_hyperparams(flat)
    if fabric.is_global_zero:
        cfg.run_dir.mkdir(parents=True, exist_ok=True)
        (cfg.run_dir / "config.json").write_text(
            json.dumps(cfg.to_dict(), indent=2, default=str), encoding="utf-8"
        )


def make_fabric(
    cfg: ExperimentConfig, callbacks: Sequence[Callback] = (), logger_kinds: Sequence[str] = ("csv",)
) -> Fabric:
    hw = cfg.hardware
    return Fabric(
        accelerator="tpu" if hw.tpu else hw.accelerator,
        strategy=make_strategy(hw, cfg.model),
        devices=hw.devices,
        num_nodes=hw.num_nodes,
        precision=resolve_precision(hw),
        callbacks=list(callbacks),
        loggers=make_loggers(cfg, logger_kinds),
    )


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    model = parser.add_argument_group("model")
    model.add_argument("--model", default="transformer", choices=MODEL_NAMES)
    model.add_argument("--width", type=int, default=None, help="hidden width (model default when left out)")
    model.add_argument("--depth", type=int, default=None)
    model.add_argument("--heads", type=int, default=8)
    model.add_argument("--dropout", type=float, default=0.1)
    model.add_argument("--drop-path", type=float, default=0.0)
    model.add_argument("--activation-checkpointing", action="store_true")

    data = parser.add_argument_group("data")
    data.add_argument("--batch-size", type=int, default=64)
    data.add_argument("--eval-batch-size", type=int, default=128)
    data.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1))
    data.add_argument("--train-samples", type=int, default=8192)
    data.add_argument("--val-samples", type=int, default=1024)
    data.add_argument("--num-classes", type=int, default=10)
    data.add_argument("--label-noise", type=float, default=0.0)
    data.add_argument("--no-augment", dest="augment", action="store_false")

    hardware = parser.add_argument_group("hardware")
    hardware.add_argument("--strategy", default="ddp", choices=STRATEGIES)
    hardware.add_argument("--precision", default="bf16-mixed", choices=PRECISIONS)
    hardware.add_argument("--devices", type=int, default=1)
    hardware.add_argument("--num-nodes", type=int, default=1)
    hardware.add_argument("--tpu", action="store_true", help="TPU cores instead of CUDA GPUs")

    run = parser.add_argument_group("run")
    run.add_argument("--name", default=None, help="run name (default: command and model)")
    run.add_argument("--root", default=DEFAULT_RUN_ROOT)
    run.add_argument("--seed", type=int, default=42)
    run.add_argument("--config", default=None, help="a JSON file with the settings; flags override it")
    run.add_argument("--set", dest="overrides", nargs="*", default=[], metavar="SECTION.KEY=VALUE")
    run.add_argument("--logger", nargs="+", default=["csv"], choices=["csv", "tensorboard"])
    run.add_argument("--deterministic", action="store_true")
    run.add_argument("--verbose", "-v", action="store_true")


def add_optimization_arguments(parser: argparse.ArgumentParser) -> None:
    optim = parser.add_argument_group("optimization")
    optim.add_argument("--optimizer", default="adamw", choices=["adamw", "adam", "sgd", "rmsprop"])
    optim.add_argument("--lr", type=float, default=3e-4)
    optim.add_argument("--min-lr", type=float, default=1e-5)
    optim.add_argument("--weight-decay", type=float, default=0.05)
    optim.add_argument("--scheduler", default="cosine", choices=[kind.value for kind in SchedulerKind])
    optim.add_argument("--warmup-steps", type=int, default=200)
    optim.add_argument("--max-norm", type=float, default=1.0, help="gradient clipping; 0 turns it off")
    optim.add_argument("--layer-decay", type=float, default=None)
    optim.add_argument("--epochs", type=int, default=10)
    optim.add_argument("--max-steps", type=int, default=None)
    optim.add_argument("--grad-accum", type=int, default=1)
    optim.add_argument("--val-every", type=int, default=1)
    optim.add_argument("--log-every", type=int, default=25)
    optim.add_argument("--compile", action="store_true")
    optim.add_argument("--ema-decay", type=float, default=None)
    optim.add_argument("--early-stop", type=int, default=None, metavar="PATIENCE")
    optim.add_argument("--time-limit", type=float, default=None, metavar="HOURS")
    optim.add_argument("--resume", default=None, help="checkpoint path, or 'last' for this run's last one")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    pretrain = commands.add_parser("pretrain", help="train from scratch")
    add_common_arguments(pretrain)
    add_optimization_arguments(pretrain)

    finetune = commands.add_parser("finetune", help="continue from a pretrained checkpoint")
    add_common_arguments(finetune)
    add_optimization_arguments(finetune)
    finetune.add_argument("--checkpoint", required=True)
    finetune.add_argument("--freeze-backbone", action="store_true")
    finetune.add_argument("--data-fraction", type=float, default=1.0)

    distill = commands.add_parser("distill", help="train a small model on a large one's predictions")
    add_common_arguments(distill)
    add_optimization_arguments(distill)
    distill.add_argument("--teacher", default="transformer", choices=MODEL_NAMES)
    distill.add_argument("--teacher-checkpoint", default=None)
    distill.add_argument("--temperature", type=float, default=2.0)
    distill.add_argument("--alpha", type=float, default=0.5)

    evaluate = commands.add_parser("evaluate", help="evaluate a checkpoint on the test split")
    add_common_arguments(evaluate)
    evaluate.add_argument("--checkpoint", required=True, nargs="+")
    evaluate.add_argument("--cpu", action="store_true")
    evaluate.add_argument("--confusion", action="store_true", help="print the confusion matrix")

    sweep = commands.add_parser("sweep", help="short runs over a grid of learning rates and widths")
    add_common_arguments(sweep)
    add_optimization_arguments(sweep)
    sweep.add_argument("--lrs", type=float, nargs="+", default=[1e-4, 3e-4, 1e-3])
    sweep.add_argument("--widths", type=int, nargs="+", default=[128])
    sweep.add_argument("--cpu", action="store_true")

    profile = commands.add_parser("profile", help="time a few training steps with the torch profiler")
    add_common_arguments(profile)
    add_optimization_arguments(profile)
    profile.add_argument("--steps", type=int, default=20)
    profile.add_argument("--trace", default=None, help="write a Chrome trace here")
    profile.add_argument("--cpu", action="store_true")

    report = commands.add_parser("report", help="summarise finished runs (no training)")
    report.add_argument("runs", nargs="+")
    report.add_argument("--metric", default="val/acc")
    report.add_argument("--csv", default=None)
    return parser


MODEL_DEFAULTS: Dict[str, Dict[str, Any]] = {
    "mlp": {"width": 512, "depth": 4},
    "convnet": {"width": 128, "depth": 6, "stages": (2, 2, 2)},
    "resnet": {"width": 64, "depth": 8, "stages": (2, 2, 2, 2)},
    "transformer": {"width": 256, "depth": 6},
    "lstm": {"width": 256, "depth": 4},
    "mixer": {"width": 256, "depth": 8},
}


def config_from_args(args: argparse.Namespace) -> ExperimentConfig:
    """Defaults, then the JSON config, then the flags, then ``--set`` overrides."""
    cfg = ExperimentConfig.from_json(args.config) if args.config else ExperimentConfig()
    defaults = MODEL_DEFAULTS[args.model]
    cfg.model = dataclasses.replace(
        cfg.model,
        name=args.model,
        width=args.width or defaults["width"],
        depth=args.depth or defaults["depth"],
        heads=args.heads,
        dropout=args.dropout,
        drop_path=args.drop_path,
        stages=defaults.get("stages", cfg.model.stages),
        activation_checkpointing=args.activation_checkpointing,
    )
    cfg.data = dataclasses.replace(
        cfg.data,
        task=TASKS[args.model],
        batch_size=args.batch_size,
        eval_batch_size=args.eval_batch_size,
        num_workers=args.workers,
        train_samples=args.train_samples,
        val_samples=args.val_samples,
        num_classes=args.num_classes,
        label_noise=args.label_noise,
        augment=args.augment,
    )
    cfg.hardware = HardwareConfig(
        accelerator="cpu" if getattr(args, "cpu", False) else "cuda",
        strategy=args.strategy,
        devices=args.devices,
        num_nodes=args.num_nodes,
        precision=args.precision,
        tpu=args.tpu,
    )
    cfg.run.name = args.name or f"{args.command}-{args.model}-{cfg.fingerprint()}"
    cfg.run.root = args.root
    cfg.run.seed = args.seed
    if hasattr(args, "lr"):
        cfg.optim = dataclasses.replace(
            cfg.optim,
            optimizer=args.optimizer,
            lr=args.lr,
            min_lr=args.min_lr,
            weight_decay=args.weight_decay,
            scheduler=args.scheduler,
            warmup_steps=args.warmup_steps,
            max_norm=args.max_norm or None,
            layer_decay=args.layer_decay,
        )
        cfg.run.epochs = args.epochs
        cfg.run.max_steps = args.max_steps
        cfg.run.grad_accum = args.grad_accum
        cfg.run.val_every = args.val_every
        cfg.run.log_every = args.log_every
        cfg.run.compile = args.compile
        cfg.run.ema_decay = args.ema_decay
        cfg.run.early_stop_patience = args.early_stop
        cfg.run.resume = args.resume
    return merge_overrides(cfg, args.overrides)


def check_hardware(cfg: ExperimentConfig) -> List[str]:
    """Combinations that cannot work, found before any process starts."""
    problems = []
    hw = cfg.hardware
    if hw.accelerator == "cpu" and hw.strategy not in ("ddp", "ddp_find_unused"):
        problems.append(f"--strategy {hw.strategy} needs GPUs; with --cpu use ddp")
    if hw.tpu and hw.strategy.startswith("deepspeed"):
        problems.append("DeepSpeed does not run on TPUs")
    if cfg.run.grad_accum < 1:
        problems.append("--grad-accum must be at least 1")
    if cfg.model.name in ("lstm",) and hw.strategy.startswith("fsdp"):
        problems.append("the LSTM model has no blocks for FSDP to wrap; use ddp or deepspeed")
    if cfg.model.width % cfg.model.heads and cfg.model.name == "transformer":
        problems.append(f"--width {cfg.model.width} is not divisible by --heads {cfg.model.heads}")
    return problems


def prepare_run(fabric: Fabric, cfg: ExperimentConfig, verbose: bool, deterministic: bool) -> None:
    setup_logging(verbose, fabric.global_rank)
    set_torch_flags(deterministic)
    fabric.seed_everything(cfg.run.seed, workers=True)
    log_config(fabric, cfg)


def resolve_resume(cfg: ExperimentConfig) -> Optional[Path]:
    if not cfg.run.resume:
        return None
    if cfg.run.resume == "last":
        candidate = cfg.run_dir / "checkpoints" / "last.ckpt"
        return candidate if candidate.exists() else None
    return Path(cfg.run.resume)


def run_pretrain(fabric: Fabric, cfg: ExperimentConfig, args: argparse.Namespace) -> None:
    prepare_run(fabric, cfg, args.verbose, args.deterministic)
    splits = build_datasets(cfg.data)
    fabric.print(describe_data(splits, cfg.data))
    trainer = Trainer(fabric, cfg, build_dataloaders(cfg.data, splits))
    trainer.setup()
    resume_from = resolve_resume(cfg)
    if resume_from is not None:
        trainer.load_checkpoint(resume_from)
    elif cfg.run.resume:
        fabric.print(f"nothing to resume in {cfg.run_dir}; starting fresh")
    with PreemptionHandler(trainer, cfg.run_dir / "checkpoints" / "preempted.ckpt"):
        history = trainer.fit()
    test_metrics = trainer.evaluate("test")
    fabric.log_dict(test_metrics, step=trainer.global_step)
    fabric.print("test: " + ", ".join(f"{k}={v:.4f}" for k, v in sorted(test_metrics.items())))
    if fabric.is_global_zero:
        write_summary(cfg.run_dir / "summary.json", cfg, history, test_metrics)


def run_finetune(fabric: Fabric, cfg: ExperimentConfig, args: argparse.Namespace) -> None:
    prepare_run(fabric, cfg, args.verbose, args.deterministic)
    splits = build_datasets(cfg.data)
    splits.train = subsample(splits.train, args.data_fraction, cfg.run.seed)
    trainer = Trainer(fabric, cfg, build_dataloaders(cfg.data, splits))
    if args.freeze_backbone:
        original_configure = trainer.configure_model

        def configure_frozen() -> nn.Module:
            model = original_configure()
            frozen = 0
            for name, param in model.named_parameters():
                if not name.startswith(("head", "classifier")):
                    param.requires_grad_(False)
                    frozen += param.numel()
            fabric.print(f"froze {human_count(frozen)} backbone parameters")
            return model

        trainer.configure_model = configure_frozen  # type: ignore[method-assign]
    trainer.setup()
    trainer.load_checkpoint(args.checkpoint, weights_only=True)
    before = trainer.evaluate("val", use_ema=False)
    fabric.print(f"before fine-tuning: val/acc={before['val/acc']:.4f}")
    trainer.fit()
    after = trainer.evaluate("test")
    gain = after["test/acc"] - before["val/acc"]
    fabric.print(f"after fine-tuning: test/acc={after['test/acc']:.4f} ({gain:+.4f})")


def run_distill(fabric: Fabric, cfg: ExperimentConfig, args: argparse.Namespace) -> None:
    prepare_run(fabric, cfg, args.verbose, args.deterministic)
    teacher_cfg = dataclasses.replace(cfg.model, name=args.teacher, **MODEL_DEFAULTS[args.teacher])
    if TASKS[args.teacher] != cfg.data.task:
        raise SystemExit(f"teacher {args.teacher} and student {cfg.model.name} train on different data")
    trainer = DistillationTrainer(
        fabric, cfg, teacher_cfg, args.teacher_checkpoint, args.temperature, args.alpha
    )
    trainer.setup()
    trainer.fit()
    fabric.print(json.dumps(trainer.evaluate("test"), indent=2))


def cmd_pretrain(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    problems = check_hardware(cfg)
    if problems:
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    fabric = make_fabric(cfg, default_callbacks(cfg, args.time_limit), args.logger)
    fabric.launch(run_pretrain, cfg, args)
    return 0


def cmd_finetune(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    if cfg.hardware.tpu:
        raise SystemExit("finetune runs on GPUs; pretrain on TPUs and fine-tune on GPUs")
    problems = check_hardware(cfg)
    if problems:
        raise SystemExit("; ".join(problems))
    cfg.optim.warmup_steps = min(cfg.optim.warmup_steps, 50)
    fabric = make_fabric(cfg, default_callbacks(cfg, args.time_limit), args.logger)
    # Processes start here; everything below runs in each of them.
    fabric.launch()
    run_finetune(fabric, cfg, args)
    return 0


def cmd_distill(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    problems = check_hardware(cfg)
    if problems:
        raise SystemExit("; ".join(problems))
    fabric = make_fabric(cfg, default_callbacks(cfg), args.logger)
    fabric.launch(run_distill, cfg, args)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    device_count = 1
    fabric = L.Fabric(
        accelerator="cpu" if args.cpu else ("tpu" if args.tpu else "cuda"),
        devices=device_count,
        precision="32-true" if args.cpu else resolve_precision(cfg.hardware),
    )
    fabric.launch()
    setup_logging(args.verbose, fabric.global_rank)
    with fabric.init_module():
        model = build_model(cfg.model, cfg.data)
    model = fabric.setup_module(model)
    loader = fabric.setup_dataloaders(make_loader(build_datasets(cfg.data).test, cfg.data, train=False))
    results: Dict[str, Dict[str, float]] = {}
    for checkpoint in args.checkpoint:
        fabric.load(checkpoint, {"model": model}, strict=False)
        model.eval()
        accumulator = EvalAccumulator(fabric, cfg.data.num_classes, keep_probabilities=True)
        with torch.no_grad():
            for inputs, labels in loader:
                accumulator.update(model(inputs), labels)
        results[checkpoint] = accumulator.compute("test")
        if args.confusion:
            fabric.print(accumulator.confusion.render())
    width = max(len(name) for name in results)
    for name, metrics in results.items():
        ece = metrics.get("test/ece", float("nan"))
        fabric.print(
            f"{name:<{width}}  acc {metrics['test/acc']:.4f}  f1 {metrics['test/macro_f1']:.4f}  "
            f"ece {ece:.4f}"
        )
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    base = config_from_args(args)
    grid = list(itertools.product(args.lrs, args.widths))
    print(f"sweeping {len(grid)} settings: {grid}")
    outcomes: List[Tuple[float, int, float]] = []
    for lr, width in grid:
        cfg = copy.deepcopy(base)
        cfg.optim.lr, cfg.model.width = lr, width
        cfg.run.name = f"{base.run.name}-lr{lr:g}-w{width}"
        # Each grid point is a short single-device run in this process.
        fabric = Fabric(
            accelerator="cpu" if args.cpu else "cuda",
            devices=1,
            precision="32-true" if args.cpu else base.hardware.precision,
            loggers=make_loggers(cfg, args.logger),
        )
        fabric.launch()
        fabric.seed_everything(cfg.run.seed)
        trainer = Trainer(fabric, cfg)
        trainer.setup()
        try:
            history = trainer.fit()
        except RuntimeError as error:
            print(f"lr={lr:g} width={width}: failed ({error})")
            outcomes.append((lr, width, float("nan")))
            continue
        best = max((entry.get(cfg.run.monitor, float("nan")) for entry in history), default=float("nan"))
        outcomes.append((lr, width, best))
    ranked = sorted(outcomes, key=lambda row: (math.isnan(row[2]), -row[2] if not math.isnan(row[2]) else 0))
    print(f"{'lr':>10} {'width':>6} {base.run.monitor:>10}")
    for lr, width, value in ranked:
        print(f"{lr:>10.2e} {width:>6} {value:>10.4f}")
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    cfg.run.epochs, cfg.run.log_every = 1, max(1, args.steps)
    fabric = Fabric(
        accelerator="cpu" if args.cpu else "cuda",
        devices=1,
        precision="32-true" if args.cpu else cfg.hardware.precision,
    )
    fabric.launch()
    trainer = Trainer(fabric, cfg)
    trainer.setup()
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available() and not args.cpu:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    batches = itertools.islice(trainer.loaders["train"], args.steps)
    trainer.model.train()
    with torch.profiler.profile(activities=activities, record_shapes=True) as profiler:
        for batch in batches:
            loss = trainer.training_step(batch)
            fabric.backward(loss)
            trainer.optimizer_step()
            profiler.step()
    sort_key = "cuda_time_total" if len(activities) > 1 else "cpu_time_total"
    print(profiler.key_averages().table(sort_by=sort_key, row_limit=15))
    if args.trace:
        profiler.export_chrome_trace(args.trace)
        print(f"trace written to {args.trace}")
    return 0


class PreemptionHandler:
    """On SIGUSR1/SIGTERM (a cluster about to preempt the job), save a checkpoint and stop cleanly."""

    SIGNALS = (signal.SIGUSR1, signal.SIGTERM) if hasattr(signal, "SIGUSR1") else (signal.SIGTERM,)

    def __init__(self, trainer: Trainer, path: Path) -> None:
        self.trainer = trainer
        self.path = path
        self.received: Optional[int] = None
        self._previous: Dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        self.received = signum
        self.trainer.should_stop = True
        log.warning("received signal %d: stopping after this step", signum)

    def __enter__(self) -> "PreemptionHandler":
        for signum in self.SIGNALS:
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except ValueError:
                # Not the main thread (a notebook, a test runner): run without the handler.
                pass
        return self

    def __exit__(self, *exc: Any) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        if self.received is not None:
            self.trainer.save_checkpoint(self.path)
            self.trainer.fabric.print(f"saved {self.path} after signal {self.received}")


def write_summary(
    path: Path, cfg: ExperimentConfig, history: List[Dict[str, float]], test_metrics: Dict[str, float]
) -> None:
    monitor, mode = cfg.run.monitor, cfg.run.monitor_mode
    scored = [entry for entry in history if monitor in entry]
    best_entry: Optional[Dict[str, float]] = None
    for entry in scored:
        if best_entry is None or is_better(entry[monitor], best_entry[monitor], mode):
            best_entry = entry
    summary = {
        "run": cfg.run.name,
        "fingerprint": cfg.fingerprint(),
        "model": cfg.model.name,
        "strategy": cfg.hardware.strategy,
        "precision": cfg.hardware.precision,
        "epochs_run": len(history),
        "best_epoch": int(best_entry["epoch"]) if best_entry else None,
        f"best_{monitor}": best_entry[monitor] if best_entry else None,
        "test": test_metrics,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2), encoding="utf-8")


def read_metrics(run_dir: Path) -> List[Dict[str, Any]]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                log.warning("%s:%d: skipped a broken line (%s)", path, number, error)
    return rows


@dataclass
class RunSummary:
    name: str
    path: Path
    model: str = "?"
    strategy: str = "?"
    epochs: int = 0
    best: Optional[float] = None
    last: Optional[float] = None
    test: Dict[str, float] = field(default_factory=dict)

    @classmethod
    def load(cls, run_dir: Path, metric: str) -> "RunSummary":
        summary_path = run_dir / "summary.json"
        summary: Dict[str, Any] = {}
        if summary_path.exists():
            summary = json.loads(summary_path.read_text(encoding="utf-8"))
        values = [row[metric] for row in read_metrics(run_dir) if metric in row]
        return cls(
            name=summary.get("run", run_dir.name),
            path=run_dir,
            model=summary.get("model", "?"),
            strategy=summary.get("strategy", "?"),
            epochs=summary.get("epochs_run", len(values)),
            best=max(values) if values else None,
            last=values[-1] if values else None,
            test=summary.get("test", {}),
        )


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:.4f}"
        return str(value)

    text_rows = [[cell(value) for value in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in text_rows]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in text_rows]
    return "\n".join(lines)


def cmd_report(args: argparse.Namespace) -> int:
    run_dirs: List[Path] = []
    for pattern in args.runs:
        matches = (
            sorted(Path(match) for match in glob.glob(pattern))
            if glob.has_magic(pattern)
            else [Path(pattern)]
        )
        run_dirs.extend(path for path in matches if path.is_dir())
    if not run_dirs:
        print("no run folders matched", file=sys.stderr)
        return 1
    summaries = [RunSummary.load(run_dir, args.metric) for run_dir in run_dirs]
    summaries.sort(key=lambda s: (s.best is None, -(s.best or 0.0)))
    headers = ["run", "model", "strategy", "epochs", f"best {args.metric}", "last", "test/acc"]
    rows = [
        [s.name, s.model, s.strategy, s.epochs, s.best, s.last, s.test.get("test/acc")] for s in summaries
    ]
    print(render_table(headers, rows))
    if args.csv:
        with open(args.csv, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(headers)
            writer.writerows(rows)
        print(f"wrote {args.csv}")
    return 0


def checkpoint_files(directory: Path) -> List[Path]:
    """Checkpoints in a run folder, newest first: files, and folders (sharded checkpoints)."""
    if not directory.exists():
        return []
    found = [path for path in directory.iterdir() if path.suffix == ".ckpt"]
    return sorted(found, key=lambda path: path.stat().st_mtime, reverse=True)


def describe_checkpoint(path: Path) -> Dict[str, Any]:
    """What a checkpoint holds, without Fabric: plain files only (sharded folders are listed)."""
    if path.is_dir():
        shards = sorted(p.name for p in path.iterdir())
        return {"path": str(path), "kind": "sharded", "files": len(shards), "first": shards[:3]}
    payload = torch.load(path, map_location="cpu", weights_only=False)
    model_state = payload.get("model", {})
    tensors = [value for value in model_state.values() if isinstance(value, torch.Tensor)]
    return {
        "path": str(path),
        "kind": "full",
        "global_step": payload.get("global_step"),
        "epoch": payload.get("epoch"),
        "tensors": len(tensors),
        "parameters": human_count(sum(t.numel() for t in tensors)),
        "keys": sorted(payload),
        "model": payload.get("config", {}).get("model", {}).get("name"),
    }


def cmd_inspect(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.paths]
    status = 0
    for path in paths:
        targets = checkpoint_files(path) if path.is_dir() and path.suffix != ".ckpt" else [path]
        if not targets:
            print(f"{path}: no checkpoints")
            status = 1
            continue
        for target in targets[: args.limit]:
            try:
                description = describe_checkpoint(target)
            except (OSError, RuntimeError, KeyError) as error:
                print(f"{target}: unreadable ({error})")
                status = 1
                continue
            print(json.dumps(description, indent=2, default=str))
    return status


def learning_rate_range(
    trainer: Trainer, start: float = 1e-7, end: float = 1.0, steps: int = 100, smoothing: float = 0.05
) -> List[Tuple[float, float]]:
    """The LR range test: raise the learning rate exponentially each step and record the smoothed loss."""
    factor = (end / start) ** (1.0 / max(1, steps - 1))
    lr, smoothed, best = start, None, math.inf
    points: List[Tuple[float, float]] = []
    trainer.model.train()
    batches = itertools.cycle(trainer.loaders["train"])
    for _ in range(steps):
        for group in trainer.optimizer.param_groups:
            group["lr"] = lr
        loss = trainer.training_step(next(batches))
        trainer.fabric.backward(loss)
        trainer.optimizer.step()
        trainer.optimizer.zero_grad(set_to_none=True)
        value = trainer.fabric.all_reduce(loss.detach(), reduce_op="mean").item()
        smoothed = value if smoothed is None else smoothing * value + (1 - smoothing) * smoothed
        points.append((lr, smoothed))
        best = min(best, smoothed)
        if smoothed > 4 * best or not math.isfinite(smoothed):
            break
        lr *= factor
    return points


def suggest_lr(points: Sequence[Tuple[float, float]]) -> Optional[float]:
    """The learning rate where the loss falls fastest (steepest negative slope in log-lr)."""
    if len(points) < 5:
        return None
    slopes = []
    for (lr0, loss0), (lr1, loss1) in zip(points, points[1:]):
        slopes.append(((loss1 - loss0) / (math.log10(lr1) - math.log10(lr0)), lr0))
    slope, lr = min(slopes)
    return lr if slope < 0 else None


def run_lr_find(fabric: Fabric, cfg: ExperimentConfig, args: argparse.Namespace) -> None:
    prepare_run(fabric, cfg, args.verbose, args.deterministic)
    trainer = Trainer(fabric, cfg)
    trainer.setup()
    points = learning_rate_range(trainer, args.start_lr, args.end_lr, args.steps)
    suggestion = suggest_lr(points)
    if fabric.is_global_zero:
        with open(cfg.run_dir / "lr_range.csv", "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["lr", "loss"])
            writer.writerows(points)
    fabric.print(
        f"{len(points)} points; suggested lr: {suggestion:.2e}" if suggestion else "no clear minimum"
    )


def cmd_lr_find(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    problems = check_hardware(cfg)
    if problems:
        raise SystemExit("; ".join(problems))
    cfg.run.name = f"lr-find-{cfg.model.name}"
    fabric = make_fabric(cfg, (), args.logger)
    fabric.launch(run_lr_find, cfg, args)
    return 0


def plan_ablation(base: argparse.Namespace, axes: Mapping[str, Sequence[Any]]) -> List[List[str]]:
    """Command lines for every combination of the axes (a job scheduler runs them, not this process)."""
    names = sorted(axes)
    commands = []
    for values in itertools.product(*(axes[name] for name in names)):
        argv = [sys.executable, os.path.abspath(__file__), "pretrain", "--model", base.model]
        tag = []
        for name, value in zip(names, values):
            flag = "--" + name.replace("_", "-")
            if isinstance(value, bool):
                if value:
                    argv.append(flag)
                tag.append(f"{name}{int(value)}")
            else:
                argv += [flag, str(value)]
                tag.append(f"{name}{value}")
        argv += ["--name", f"ablation-{'-'.join(tag)}"]
        commands.append(argv)
    return commands


def cmd_plan(args: argparse.Namespace) -> int:
    axes: Dict[str, List[Any]] = {}
    for spec in args.axis:
        name, _, raw = spec.partition("=")
        if not raw:
            raise SystemExit(f"--axis {spec!r} is not name=v1,v2,...")
        parsed: List[Any] = []
        for item in raw.split(","):
            if item in ("true", "false"):
                parsed.append(item == "true")
            elif re.fullmatch(r"-?\d+", item):
                parsed.append(int(item))
            else:
                try:
                    parsed.append(float(item))
                except ValueError:
                    parsed.append(item)
        axes[name] = parsed
    commands = plan_ablation(args, axes)
    lines = [" ".join(command) for command in commands]
    if args.output:
        Path(args.output).write_text("#!/bin/sh\nset -e\n" + "\n".join(lines) + "\n", encoding="utf-8")
        print(f"wrote {len(lines)} commands to {args.output}")
    else:
        print("\n".join(lines))
    return 0


class CurriculumDataset(Dataset):
    """Starts with the easy samples (low loss under a reference rule) and adds harder ones epoch by epoch."""

    def __init__(self, base: SyntheticDataset, difficulty: torch.Tensor, stages: int = 4) -> None:
        if len(difficulty) != len(base):
            raise ValueError("one difficulty score per sample is needed")
        self.base = base
        self.order = torch.argsort(difficulty).tolist()
        self.stages = stages
        self.stage = 1

    def advance(self) -> bool:
        if self.stage >= self.stages:
            return False
        self.stage += 1
        return True

    def __len__(self) -> int:
        return max(1, len(self.order) * self.stage // self.stages)

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.base[self.order[index]]


def difficulty_scores(dataset: SyntheticDataset) -> torch.Tensor:
    """A cheap proxy for difficulty: distance of the input from its class's mean input."""
    inputs = dataset.inputs.float().flatten(1)
    scores = torch.empty(len(dataset))
    for label in dataset.labels.unique().tolist():
        members = dataset.labels == label
        centre = inputs[members].mean(dim=0, keepdim=True)
        scores[members] = (inputs[members] - centre).norm(dim=1)
    return scores


def kfold_indices(count: int, folds: int, seed: int) -> List[Tuple[List[int], List[int]]]:
    indices = list(range(count))
    random.Random(seed).shuffle(indices)
    size = math.ceil(count / folds)
    splits = []
    for fold in range(folds):
        held_out = indices[fold * size : (fold + 1) * size]
        held = set(held_out)
        splits.append(([i for i in indices if i not in held], held_out))
    return splits


def run_cross_validation(fabric: Fabric, cfg: ExperimentConfig, args: argparse.Namespace) -> None:
    """K-fold cross-validation in one launch: a fresh model and optimizer per fold, same processes."""
    prepare_run(fabric, cfg, args.verbose, args.deterministic)
    full = build_datasets(cfg.data).train
    scores: List[float] = []
    for fold, (train_idx, val_idx) in enumerate(kfold_indices(len(full), args.folds, cfg.run.seed)):
        fabric.print(f"=== fold {fold + 1}/{args.folds}: {len(train_idx)} train, {len(val_idx)} held out ===")
        fold_cfg = copy.deepcopy(cfg)
        fold_cfg.run.name = f"{cfg.run.name}-fold{fold}"
        loaders = {
            "train": make_loader(Subset(full, train_idx), cfg.data, train=True),
            "val": make_loader(Subset(full, val_idx), cfg.data, train=False),
        }
        trainer = Trainer(fabric, fold_cfg, loaders)
        trainer.setup()
        history = trainer.fit()
        fold_best = max(entry.get("val/acc", 0.0) for entry in history) if history else 0.0
        scores.append(fold_best)
        fabric.log_dict({"cv/fold_acc": fold_best}, step=fold)
    mean = sum(scores) / len(scores)
    spread = math.sqrt(sum((s - mean) ** 2 for s in scores) / max(1, len(scores) - 1))
    fabric.print(f"cross-validated val/acc: {mean:.4f} ± {spread:.4f} over {len(scores)} folds")


def cmd_crossval(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    problems = check_hardware(cfg)
    if args.folds < 2:
        problems.append("--folds must be at least 2")
    if problems:
        raise SystemExit("; ".join(problems))
    fabric = make_fabric(cfg, [ProgressPrinter(cfg.run.log_every)], args.logger)
    fabric.launch(run_cross_validation, cfg, args)
    return 0


def run_curriculum(fabric: Fabric, cfg: ExperimentConfig, args: argparse.Namespace) -> None:
    prepare_run(fabric, cfg, args.verbose, args.deterministic)
    splits = build_datasets(cfg.data)
    if not isinstance(splits.train, SyntheticDataset):
        raise SystemExit("curriculum training needs the synthetic datasets")
    curriculum = CurriculumDataset(splits.train, difficulty_scores(splits.train), stages=args.stages)
    trainer = Trainer(
        fabric,
        cfg,
        {"train": make_loader(curriculum, cfg.data, True), "val": make_loader(splits.val, cfg.data, False)},
    )
    trainer.setup()
    epochs_per_stage = max(1, cfg.run.epochs // args.stages)
    cfg.run.epochs = epochs_per_stage
    while True:
        fabric.print(f"curriculum stage {curriculum.stage}/{curriculum.stages}: {len(curriculum)} samples")
        trainer.fit()
        if not curriculum.advance():
            break
        # The dataset grew: wrap a new loader so the distributed sampler sees the new length.
        trainer.loaders["train"] = fabric.setup_dataloaders(make_loader(curriculum, cfg.data, True))
        cfg.run.epochs += epochs_per_stage


def cmd_curriculum(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    problems = check_hardware(cfg)
    if problems:
        raise SystemExit("; ".join(problems))
    fabric = make_fabric(cfg, default_callbacks(cfg), args.logger)
    fabric.launch(run_curriculum, cfg, args)
    return 0


def benchmark_loader(loader: DataLoader, batches: int) -> Dict[str, float]:
    """Batches per second of a loader alone: is the input pipeline the bottleneck?"""
    iterator = iter(loader)
    next(iterator)  # workers start
    started = time.perf_counter()
    seen = 0
    for _ in range(batches):
        try:
            next(iterator)
        except StopIteration:
            break
        seen += 1
    elapsed = time.perf_counter() - started
    return {"batches": float(seen), "seconds": elapsed, "batches_per_sec": seen / elapsed if elapsed else 0.0}


def cmd_data_bench(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    splits = build_datasets(cfg.data)
    print(describe_data(splits, cfg.data))
    rows = []
    for workers in sorted(set(args.worker_counts)):
        cfg.data.num_workers = workers
        result = benchmark_loader(make_loader(splits.train, cfg.data, train=True), args.batches)
        rows.append([workers, int(result["batches"]), result["seconds"], result["batches_per_sec"]])
    print(render_table(["workers", "batches", "seconds", "batches/s"], rows))
    return 0


def export_model(model: nn.Module, example: torch.Tensor, path: Path, kind: str) -> Path:
    model = model.eval().cpu()
    if kind == "torchscript":
        traced = torch.jit.trace(model, example)
        traced.save(str(path))
    elif kind == "state_dict":
        torch.save(model.state_dict(), path)
    elif kind == "onnx":
        torch.onnx.export(
            model,
            (example,),
            str(path),
            input_names=["inputs"],
            output_names=["logits"],
            dynamic_axes={"inputs": {0: "batch"}, "logits": {0: "batch"}},
        )
    else:
        raise ValueError(f"unknown export format {kind!r}")
    return path


def cmd_export(args: argparse.Namespace) -> int:
    """Exports with Fabric on one CPU process: the checkpoint is loaded the way it was saved."""
    cfg = config_from_args(args)
    fabric = Fabric(accelerator="cpu", devices=1)
    fabric.launch()
    model = fabric.setup_module(build_model(cfg.model, cfg.data))
    fabric.load(args.checkpoint, {"model": model}, strict=False)
    example = build_datasets(cfg.data).val[0][0].unsqueeze(0)
    path = export_model(model.module, example, Path(args.output), args.format)
    size_mb = path.stat().st_size / 2**20
    print(f"exported {cfg.model.name} to {path} ({args.format}, {size_mb:.1f} MB)")
    with torch.no_grad():
        reference = model(example)
        if args.format == "torchscript":
            reloaded = torch.jit.load(str(path))
            difference = (reloaded(example) - reference).abs().max().item()
            print(f"max difference after reload: {difference:.2e}")
    return 0


def hparams_for_display(cfg: ExperimentConfig) -> AttributeDict:
    """A flat, attribute-accessible view of the settings for printing and for loggers."""
    hparams = AttributeDict(flatten_dict(cfg.to_dict(), separator="."))
    hparams["fingerprint"] = cfg.fingerprint()
    return hparams


class MixUp:
    """Blend pairs of samples and their one-hot labels (images and tabular rows; not token ids)."""

    def __init__(self, alpha: float = 0.2, cutmix_alpha: float = 0.0, switch_prob: float = 0.5) -> None:
        self.alpha = alpha
        self.cutmix_alpha = cutmix_alpha
        self.switch_prob = switch_prob

    def _lam(self, alpha: float) -> float:
        return float(torch.distributions.Beta(alpha, alpha).sample()) if alpha > 0 else 1.0

    def __call__(
        self, inputs: torch.Tensor, labels: torch.Tensor, num_classes: int
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        targets = F.one_hot(labels, num_classes).to(
            inputs.dtype if inputs.is_floating_point() else torch.float32
        )
        permutation = torch.randperm(inputs.shape[0], device=inputs.device)
        use_cutmix = self.cutmix_alpha > 0 and inputs.dim() == 4 and random.random() < self.switch_prob
        if use_cutmix:
            lam = self._lam(self.cutmix_alpha)
            height, width = inputs.shape[-2:]
            cut_h, cut_w = int(height * math.sqrt(1 - lam)), int(width * math.sqrt(1 - lam))
            cy, cx = random.randrange(height), random.randrange(width)
            y0, y1 = max(cy - cut_h // 2, 0), min(cy + cut_h // 2, height)
            x0, x1 = max(cx - cut_w // 2, 0), min(cx + cut_w // 2, width)
            mixed = inputs.clone()
            mixed[..., y0:y1, x0:x1] = inputs[permutation][..., y0:y1, x0:x1]
            lam = 1 - (y1 - y0) * (x1 - x0) / (height * width)
        else:
            lam = self._lam(self.alpha)
            mixed = lam * inputs + (1 - lam) * inputs[permutation]
        return mixed, lam * targets + (1 - lam) * targets[permutation]


class MixUpTrainer(Trainer):
    """The same loop with MixUp/CutMix on the inputs and a soft-target loss."""

    def __init__(self, fabric: Fabric, cfg: ExperimentConfig, mixup: MixUp) -> None:
        super().__init__(fabric, cfg)
        if cfg.data.task == Task.SEQUENCE.value:
            raise ValueError("MixUp blends inputs; token ids cannot be blended")
        self.mixup = mixup

    def training_step(self, batch: Tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        inputs, labels = batch
        mixed, soft_targets = self.mixup(inputs, labels, self.cfg.data.num_classes)
        logits = self.model(mixed)
        return torch.sum(-soft_targets * F.log_softmax(logits, dim=-1), dim=-1).mean()


@functools.cache
def ensemble_weights(count: int, scheme: str) -> Tuple[float, ...]:
    if scheme == "uniform":
        return tuple([1.0 / count] * count)
    if scheme == "linear":
        total = count * (count + 1) / 2
        return tuple((index + 1) / total for index in range(count))
    raise ValueError(f"unknown weighting {scheme!r}")


def cmd_ensemble(args: argparse.Namespace) -> int:
    """Average the predictions of several checkpoints of one architecture on the test split."""
    cfg = config_from_args(args)
    fabric = Fabric(accelerator="cpu" if args.cpu else "cuda", devices=1, precision="32-true")
    fabric.launch()
    members = []
    for checkpoint in args.checkpoint:
        with fabric.init_module():
            member = build_model(cfg.model, cfg.data)
        member = fabric.setup_module(member)
        fabric.load(checkpoint, {"model": member}, strict=False)
        members.append(member.eval())
    weights = ensemble_weights(len(members), args.weighting)
    loader = fabric.setup_dataloaders(make_loader(build_datasets(cfg.data).test, cfg.data, train=False))
    accumulator = EvalAccumulator(fabric, cfg.data.num_classes)
    single_correct = [0] * len(members)
    with torch.no_grad():
        for inputs, labels in loader:
            probabilities = [member(inputs).softmax(dim=-1) for member in members]
            for index, probs in enumerate(probabilities):
                single_correct[index] += int((probs.argmax(-1) == labels).sum())
            combined = functools.reduce(torch.add, (w * p for w, p in zip(weights, probabilities)))
            accumulator.update(combined.clamp(min=1e-8).log(), labels)
    metrics = accumulator.compute("ensemble")
    total = len(loader.dataset)
    for checkpoint, correct in zip(args.checkpoint, single_correct):
        print(f"{checkpoint}: acc {correct / total:.4f}")
    print(f"ensemble of {len(members)} ({args.weighting}): acc {metrics['ensemble/acc']:.4f}")
    return 0


def run_mixup(fabric: Fabric, cfg: ExperimentConfig, args: argparse.Namespace) -> None:
    prepare_run(fabric, cfg, args.verbose, args.deterministic)
    trainer = MixUpTrainer(fabric, cfg, MixUp(args.mixup_alpha, args.cutmix_alpha))
    trainer.setup()
    trainer.fit()
    fabric.print(json.dumps(trainer.evaluate("test"), indent=2))


def cmd_mixup(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    problems = check_hardware(cfg)
    if TASKS[cfg.model.name] == Task.SEQUENCE.value:
        problems.append(f"MixUp needs image or tabular data; {cfg.model.name} reads tokens")
    if problems:
        raise SystemExit("; ".join(problems))
    fabric = make_fabric(cfg, default_callbacks(cfg), args.logger)
    fabric.launch(run_mixup, cfg, args)
    return 0


class FeatureGenerator(nn.Module):
    def __init__(self, noise_dim: int, features: int, width: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(noise_dim, width),
            nn.LeakyReLU(0.2),
            nn.Linear(width, width),
            nn.LayerNorm(width),
            nn.LeakyReLU(0.2),
            nn.Linear(width, features),
        )

    def forward(self, noise: torch.Tensor) -> torch.Tensor:
        return self.net(noise)


class FeatureCritic(nn.Module):
    def __init__(self, features: int, width: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(features, width),
            nn.LeakyReLU(0.2),
            nn.Dropout(0.2),
            nn.Linear(width, width // 2),
            nn.LeakyReLU(0.2),
            nn.Linear(width // 2, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)


def gradient_penalty(critic: nn.Module, real: torch.Tensor, fake: torch.Tensor) -> torch.Tensor:
    mix = torch.rand(real.shape[0], 1, device=real.device)
    interpolated = (mix * real + (1 - mix) * fake).requires_grad_(True)
    scores = critic(interpolated)
    (grads,) = torch.autograd.grad(scores.sum(), interpolated, create_graph=True)
    return ((grads.norm(2, dim=1) - 1) ** 2).mean()


def feature_statistics_gap(real: torch.Tensor, fake: torch.Tensor) -> Dict[str, float]:
    """How far the generated features are from the real ones, in mean, spread and correlation."""
    mean_gap = (real.mean(0) - fake.mean(0)).abs().mean().item()
    std_gap = (real.std(0) - fake.std(0)).abs().mean().item()
    real_corr = torch.corrcoef(real.T)
    fake_corr = torch.corrcoef(fake.T)
    corr_gap = (real_corr - fake_corr).nan_to_num().abs().mean().item()
    return {"gan/mean_gap": mean_gap, "gan/std_gap": std_gap, "gan/corr_gap": corr_gap}


def run_gan(fabric: Fabric, cfg: ExperimentConfig, args: argparse.Namespace) -> None:
    """A Wasserstein GAN on the tabular features: two models, two optimizers, n critic steps per step."""
    prepare_run(fabric, cfg, args.verbose, args.deterministic)
    noise_dim, width = args.noise_dim, cfg.model.width
    with fabric.init_module():
        generator = FeatureGenerator(noise_dim, cfg.data.features, width)
        critic = FeatureCritic(cfg.data.features, width)
    opt_g = torch.optim.Adam(generator.parameters(), lr=cfg.optim.lr, betas=(0.5, 0.9))
    opt_c = torch.optim.Adam(critic.parameters(), lr=cfg.optim.lr, betas=(0.5, 0.9))
    generator, opt_g = fabric.setup(generator, opt_g)
    critic, opt_c = fabric.setup(critic, opt_c)
    loader = fabric.setup_dataloaders(make_loader(build_datasets(cfg.data).train, cfg.data, train=True))

    fixed_noise = torch.randn(512, noise_dim, device=fabric.device)
    step = 0
    for epoch in range(cfg.run.epochs):
        for batch_idx, (real, _) in enumerate(loader):
            noise = torch.randn(real.shape[0], noise_dim, device=fabric.device)
            fake = generator(noise).detach()
            critic_loss = critic(fake).mean() - critic(real).mean()
            critic_loss = critic_loss + args.gp_weight * gradient_penalty(critic, real, fake)
            opt_c.zero_grad(set_to_none=True)
            fabric.backward(critic_loss, model=critic)
            opt_c.step()
            if batch_idx % args.critic_steps:
                continue
            generator_loss = -critic(generator(noise)).mean()
            opt_g.zero_grad(set_to_none=True)
            fabric.backward(generator_loss, model=generator)
            opt_g.step()
            step += 1
            if step % cfg.run.log_every == 0:
                fabric.log_dict(
                    {"gan/critic": critic_loss.item(), "gan/generator": generator_loss.item()}, step=step
                )
        with torch.no_grad():
            samples = generator(fixed_noise).float().cpu()
        reference = torch.cat([batch[0] for batch in itertools.islice(iter(loader), 4)]).float().cpu()
        gaps = feature_statistics_gap(reference, samples)
        fabric.log_dict(gaps, step=step)
        fabric.print(f"epoch {epoch + 1}: " + " ".join(f"{k}={v:.4f}" for k, v in gaps.items()))
    state = {"generator": generator, "critic": critic, "opt_g": opt_g, "opt_c": opt_c, "step": step}
    fabric.save(cfg.run_dir / "checkpoints" / "gan.ckpt", state)


def cmd_gan(args: argparse.Namespace) -> int:
    args.model = "mlp"
    cfg = config_from_args(args)
    if cfg.hardware.strategy not in ("ddp", "ddp_find_unused") or cfg.hardware.tpu:
        raise SystemExit("the GAN trains two models with their own optimizers: use ddp on GPUs")
    fabric = make_fabric(cfg, (), args.logger)
    fabric.launch(run_gan, cfg, args)
    return 0


def fit_temperature(logits: torch.Tensor, labels: torch.Tensor, steps: int = 200) -> float:
    """Temperature scaling: the single scalar that makes the softmax best calibrated on held-out data."""
    log_temperature = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.LBFGS([log_temperature], lr=0.1, max_iter=steps)

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(logits / log_temperature.exp(), labels)
        loss.backward()
        return loss

    with torch.enable_grad():
        optimizer.step(closure)
    return float(log_temperature.exp().item())


def collect_logits(fabric: Fabric, model: nn.Module, loader: DataLoader) -> Tuple[torch.Tensor, torch.Tensor]:
    outputs, targets = [], []
    model.eval()
    with torch.no_grad():
        for inputs, labels in loader:
            logits = model(inputs)
            outputs.append(
                fabric.all_gather(logits.float()).flatten(0, -2) if fabric.world_size > 1 else logits.float()
            )
            targets.append(fabric.all_gather(labels).flatten() if fabric.world_size > 1 else labels)
    return torch.cat(outputs).cpu(), torch.cat(targets).cpu()


def run_calibrate(fabric: Fabric, cfg: ExperimentConfig, args: argparse.Namespace) -> None:
    prepare_run(fabric, cfg, args.verbose, args.deterministic)
    trainer = Trainer(fabric, cfg)
    trainer.setup()
    trainer.load_checkpoint(args.checkpoint, weights_only=True)
    val_logits, val_labels = collect_logits(fabric, trainer.model, trainer.loaders["val"])
    temperature = fit_temperature(val_logits, val_labels)
    test_logits, test_labels = collect_logits(fabric, trainer.model, trainer.loaders["test"])
    before = expected_calibration_error(test_logits.softmax(-1), test_labels)
    after = expected_calibration_error((test_logits / temperature).softmax(-1), test_labels)
    fabric.print(f"temperature {temperature:.3f}: test ECE {before:.4f} -> {after:.4f}")
    if fabric.is_global_zero:
        out = Path(args.checkpoint).with_suffix(".temperature.json")
        out.write_text(
            json.dumps({"temperature": temperature, "ece_before": before, "ece_after": after}),
            encoding="utf-8",
        )


def cmd_calibrate(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    problems = check_hardware(cfg)
    if problems:
        raise SystemExit("; ".join(problems))
    fabric = make_fabric(cfg, (), args.logger)
    fabric.launch(run_calibrate, cfg, args)
    return 0


def add_extra_commands(commands: Any) -> None:
    """Sub-commands that came later: kept apart so ``build_parser`` stays readable."""
    lr_find = commands.add_parser("lr-find", help="learning-rate range test")
    add_common_arguments(lr_find)
    add_optimization_arguments(lr_find)
    lr_find.add_argument("--start-lr", type=float, default=1e-7)
    lr_find.add_argument("--end-lr", type=float, default=1.0)
    lr_find.add_argument("--steps", type=int, default=100)

    gan = commands.add_parser("gan", help="a WGAN-GP on the tabular features")
    add_common_arguments(gan)
    add_optimization_arguments(gan)
    gan.add_argument("--noise-dim", type=int, default=32)
    gan.add_argument("--critic-steps", type=int, default=5)
    gan.add_argument("--gp-weight", type=float, default=10.0)

    calibrate = commands.add_parser("calibrate", help="fit a softmax temperature on the validation split")
    add_common_arguments(calibrate)
    add_optimization_arguments(calibrate)
    calibrate.add_argument("--checkpoint", required=True)

    inspect_parser = commands.add_parser("inspect", help="describe checkpoints")
    inspect_parser.add_argument("paths", nargs="+")
    inspect_parser.add_argument("--limit", type=int, default=5)

    crossval = commands.add_parser("crossval", help="k-fold cross-validation on the training split")
    add_common_arguments(crossval)
    add_optimization_arguments(crossval)
    crossval.add_argument("--folds", type=int, default=5)

    curriculum = commands.add_parser("curriculum", help="train on easy samples first")
    add_common_arguments(curriculum)
    add_optimization_arguments(curriculum)
    curriculum.add_argument("--stages", type=int, default=4)

    data_bench = commands.add_parser("data-bench", help="time the input pipeline alone")
    add_common_arguments(data_bench)
    data_bench.add_argument("--batches", type=int, default=200)
    data_bench.add_argument("--worker-counts", type=int, nargs="+", default=[0, 2, 4, 8])

    export = commands.add_parser("export", help="export a checkpoint to TorchScript, ONNX or a state dict")
    add_common_arguments(export)
    export.add_argument("--checkpoint", required=True)
    export.add_argument("--output", required=True)
    export.add_argument("--format", default="torchscript", choices=["torchscript", "onnx", "state_dict"])

    ensemble = commands.add_parser("ensemble", help="average several checkpoints' predictions")
    add_common_arguments(ensemble)
    ensemble.add_argument("--checkpoint", required=True, nargs="+")
    ensemble.add_argument("--weighting", default="uniform", choices=["uniform", "linear"])
    ensemble.add_argument("--cpu", action="store_true")

    mixup = commands.add_parser("mixup", help="train with MixUp/CutMix (vision and tabular models)")
    add_common_arguments(mixup)
    add_optimization_arguments(mixup)
    mixup.add_argument("--mixup-alpha", type=float, default=0.2)
    mixup.add_argument("--cutmix-alpha", type=float, default=1.0)

    plan = commands.add_parser("plan", help="write the command lines of an ablation grid")
    plan.add_argument("--model", default="transformer", choices=MODEL_NAMES)
    plan.add_argument("--axis", action="append", default=[], metavar="NAME=V1,V2")
    plan.add_argument("--output", default=None)


COMMANDS: Dict[str, Callable[[argparse.Namespace], int]] = {
    "pretrain": cmd_pretrain,
    "finetune": cmd_finetune,
    "distill": cmd_distill,
    "evaluate": cmd_evaluate,
    "sweep": cmd_sweep,
    "profile": cmd_profile,
    "report": cmd_report,
    "lr-find": cmd_lr_find,
    "gan": cmd_gan,
    "calibrate": cmd_calibrate,
    "inspect": cmd_inspect,
    "plan": cmd_plan,
    "crossval": cmd_crossval,
    "curriculum": cmd_curriculum,
    "data-bench": cmd_data_bench,
    "export": cmd_export,
    "ensemble": cmd_ensemble,
    "mixup": cmd_mixup,
}


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    add_extra_commands(parser._subparsers._group_actions[0])  # type: ignore[union-attr]
    args = parser.parse_args(argv)
    handler = COMMANDS[args.command]
    try:
        return handler(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
