"""FAB037: batches of a DataLoader that was never passed to ``setup_dataloaders`` reach a set-up model
without ``fabric.to_device(...)``/``.to(fabric.device)``: on a GPU, torch's device-mismatch error."""

from __future__ import annotations

from typing import Any, Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.values import LoaderBatch
from fabric_ls.rules.common import Case

RULE = "FAB037"
METHODS = ("forward",)
DEFAULT_SEVERITY = "warning"  # the data flow is followed, not proven: a dataset may build device tensors
NAMES_STRATEGY = False
# Devices where the model's parameters are not on the CPU after `fabric.setup`.
_ACCELERATORS = frozenset({"cuda", "tpu", "mps"})


def check(event: CallEvent) -> Optional[Violation]:
    strategy = event.strategy
    if strategy.accelerator not in _ACCELERATORS or _moves_inputs(strategy):
        return None
    batches = [value for value in [*event.args, *event.keywords.values()] if isinstance(value, LoaderBatch)]
    if not batches:
        return None
    loader = batches[0].loader
    created = loader.created_at
    line = getattr(created, "lineno", None)
    name = f"`{loader.name}`" if loader.name else "the DataLoader"
    where = f"{name} (line {line})" if line is not None and loader.created_path == event.parsed.path else name
    return Violation(event.node, {"loader": where, "device": event.strategy.accelerator})


def _moves_inputs(strategy: Any) -> bool:
    """The strategy's wrapper moves the forward's tensors to the model's device itself: DDP with
    ``device_ids`` (ddp.py:126-130, torch distributed.py ``_pre_forward``), DataParallel's scatter, FSDP's
    ``_root_pre_forward``. A ModelParallelStrategy's wrapper is the script's ``parallelize_fn``: not known.
    DeepSpeed's engine and the XLA strategies call the module with the tensors as they are."""
    if strategy.class_name is None or strategy.is_a("DeepSpeedStrategy"):
        return strategy.class_name is None
    return any(
        strategy.is_a(name)
        for name in ("DDPStrategy", "DataParallelStrategy", "FSDPStrategy", "ModelParallelStrategy")
    )


_HEAD = """import torch
from lightning.fabric import Fabric
from torch.utils.data import DataLoader, TensorDataset

fabric = Fabric(accelerator="cuda", devices=1)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = fabric.setup(model, optimizer)
loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 2)), batch_size=4)
"""
_STEP = """    loss = torch.nn.functional.mse_loss(model(x), y)
    fabric.backward(loss)
    optimizer.step()
"""

VALID = [
    _HEAD.replace("loader = DataLoader(", "loader = fabric.setup_dataloaders(DataLoader(").replace(
        "batch_size=4)\n", "batch_size=4))\n"
    )
    + "for x, y in loader:\n"
    + _STEP,
    _HEAD + "for x, y in loader:\n    x, y = fabric.to_device((x, y))\n" + _STEP,
    _HEAD + "for x, y in loader:\n    x, y = x.to(fabric.device), y.to(fabric.device)\n" + _STEP,
    # On the CPU the batches are where the model is.
    _HEAD.replace('accelerator="cuda"', 'accelerator="cpu"') + "for x, y in loader:\n" + _STEP,
    # DDP on GPUs moves the forward's tensors to the device itself (torch's ``_pre_forward``).
    _HEAD.replace("devices=1)", 'devices=2, strategy="ddp")\nfabric.launch()')
    + "for x, y in loader:\n"
    + _STEP,
]
INVALID = [
    Case(_HEAD + "for x, y in loader:\n" + _STEP, 11),
    Case(
        _HEAD
        + """for batch in loader:
    prediction = model(batch[0])
    loss = torch.nn.functional.mse_loss(prediction, batch[1].to(fabric.device))
    fabric.backward(loss)
""",
        11,
    ),
    # An evaluation loop: no backward, the forward itself fails.
    Case(
        _HEAD
        + """model.eval()
with torch.no_grad():
    for x, _ in loader:
        print(model(x).argmax(-1))
""",
        13,
    ),
]
