"""FAB035: a learning-rate scheduler passed to ``fabric.setup``/``setup_optimizers`` as an optimizer."""

from __future__ import annotations

import ast
from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.values import Obj, Value
from fabric_ls.fixes import make_fix
from fabric_ls.model import Fix, Span, TextEdit
from fabric_ls.rules.common import Case

RULE = "FAB035"
METHODS = ("setup", "setup_optimizers")
DEFAULT_SEVERITY = "warning"  # Lightning raises only under FSDP or in setup_optimizers


def is_scheduler(value: Value) -> bool:
    """Built by a learning-rate scheduler class of torch (or a schedule factory of transformers)."""
    if not isinstance(value, Obj) or not value.library_class:
        return False
    qualname = value.library_class
    tail = qualname.rsplit(".", 1)[-1]
    if qualname.startswith("torch.optim.lr_scheduler.") or qualname == "torch.optim.swa_utils.SWALR":
        return tail[:1].isupper()
    # transformers.get_linear_schedule_with_warmup, transformers.optimization.get_scheduler, ...
    return qualname.startswith("transformers.") and tail.startswith("get_") and "schedule" in tail


def _first_optimizer_index(event: CallEvent) -> int:
    return 1 if event.method == "setup" else 0


def check(event: CallEvent) -> Optional[Violation]:
    start = _first_optimizer_index(event)
    positions = [i for i, value in enumerate(event.args) if i >= start and is_scheduler(value)]
    if not positions or len(event.node.args) != len(event.args):
        return None  # ``*optimizers``: which argument is which is not known
    names = [event.parsed.segment(event.node.args[i]) for i in positions]
    return Violation(
        event.node,
        {"scheduler": ", ".join(names), "method": event.method},
        _drop_schedulers_fix(event, positions),
    )


def _drop_schedulers_fix(event: CallEvent, positions: list[int]) -> Optional[Fix]:
    """``model, opt, sched = fabric.setup(model, opt, sched)`` → ``model, opt = fabric.setup(model, opt)``.

    Only where each scheduler comes back into its own name: that name then keeps the scheduler,
    which steps the same optimizer underneath (``_FabricOptimizer`` wraps the very object).
    """
    call, place, parsed = event.node, event.place, event.parsed
    if place is None or not isinstance(place.statement, ast.Assign) or place.statement.value is not call:
        return None
    if len(place.statement.targets) != 1 or not isinstance(place.statement.targets[0], ast.Tuple):
        return None
    targets = place.statement.targets[0].elts
    if len(targets) != len(call.args):  # setup returns (module, *optimizers), setup_optimizers the optimizers
        return None
    for i in positions:
        argument, target = call.args[i], targets[i]
        if not (isinstance(argument, ast.Name) and isinstance(target, ast.Name) and argument.id == target.id):
            return None
    kept_targets = [parsed.segment(t) for i, t in enumerate(targets) if i not in positions]
    kept_args = [parsed.segment(a) for i, a in enumerate(call.args) if i not in positions]
    first, last = parsed.span(call.args[0]), parsed.span(call.args[-1])
    args_span = Span(first.start_line, first.start_col, last.end_line, last.end_col)
    return make_fix(
        RULE,
        [
            TextEdit(parsed.span(place.statement.targets[0]), ", ".join(kept_targets)),
            TextEdit(args_span, ", ".join(kept_args)),
        ],
    )


_HEAD = """import torch
from lightning.fabric import Fabric

"""

VALID = [
    _HEAD
    + """fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
model, optimizer = fabric.setup(model, optimizer)
""",
    _HEAD
    + """fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
model, optimizer, scheduler = fabric.setup(model, optimizer, scheduler=scheduler)
""",
]
INVALID = [
    Case(
        _HEAD
        + """fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
model, optimizer, scheduler = fabric.setup(model, optimizer, scheduler)
""",
        9,
        _HEAD
        + """fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
model, optimizer = fabric.setup(model, optimizer)
""",
    ),
    Case(
        """import torch
from lightning.fabric import Fabric
from torch.optim.lr_scheduler import OneCycleLR

fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.AdamW(model.parameters())
scheduler = OneCycleLR(optimizer, max_lr=0.1, total_steps=10)
model, optimizer, scheduler = fabric.setup(model, optimizer, scheduler)
""",
        10,
        """import torch
from lightning.fabric import Fabric
from torch.optim.lr_scheduler import OneCycleLR

fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.AdamW(model.parameters())
scheduler = OneCycleLR(optimizer, max_lr=0.1, total_steps=10)
model, optimizer = fabric.setup(model, optimizer)
""",
    ),
    Case(
        _HEAD
        + """fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch()
model = fabric.setup_module(torch.nn.Linear(4, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10)
optimizer, scheduler = fabric.setup_optimizers(optimizer, scheduler)
""",
        9,
        _HEAD
        + """fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch()
model = fabric.setup_module(torch.nn.Linear(4, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10)
optimizer = fabric.setup_optimizers(optimizer)
""",
    ),
]
