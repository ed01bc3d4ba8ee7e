"""FAB039: ``fabric.save(state, path)``, the arguments in LightningLite's old order (``save(content,
filepath)``): Fabric takes the path first, so the strategy iterates a string as the state."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.values import (
    STATE_DICT,
    Const,
    FilePath,
    Mapping,
    Obj,
    SetupModule,
    SetupOptimizer,
    Value,
)
from fabric_ls.fixes import make_fix
from fabric_ls.model import Fix, TextEdit
from fabric_ls.rules.common import Case

RULE = "FAB039"
METHODS = ("save",)
# Raised whatever the strategy (each one's save_checkpoint reads the state as a dict first).
NAMES_STRATEGY = False


def check(event: CallEvent) -> Optional[Violation]:
    node = event.node
    if len(node.args) != 2 or len(event.args) != 2 or any(k.arg in ("path", "state") for k in node.keywords):
        return None
    first, second = event.args
    if not (_is_state(first) and _is_path(second)):
        return None
    return Violation(node, {"state": event.parsed.segment(node.args[0])}, _swap_fix(event))


def _is_state(value: Value) -> bool:
    """Something only a state is: a dict, a state dict, a set-up model or optimizer."""
    if isinstance(value, (Mapping, SetupModule, SetupOptimizer)):
        return True
    return isinstance(value, Obj) and value.library_class == STATE_DICT


def _is_path(value: Value) -> bool:
    return (isinstance(value, Const) and isinstance(value.value, str)) or (
        isinstance(value, FilePath) and value.form == "path"
    )


def _swap_fix(event: CallEvent) -> Optional[Fix]:
    """``fabric.save(model.state_dict(), "model.pt")`` → ``fabric.save("model.pt", model.state_dict())``."""
    first, second = event.node.args
    parsed = event.parsed
    return make_fix(
        RULE,
        [
            TextEdit(parsed.span(first), parsed.segment(second)),
            TextEdit(parsed.span(second), parsed.segment(first)),
        ],
    )


VALID = [
    """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
model = torch.nn.Linear(4, 2)
model = fabric.setup(model)
fabric.save("model.pt", {"model": model})
""",
]
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
model = torch.nn.Linear(4, 2)
model = fabric.setup(model)
fabric.save(model.state_dict(), "model.pt")
""",
        7,
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
model = torch.nn.Linear(4, 2)
model = fabric.setup(model)
fabric.save("model.pt", model.state_dict())
""",
        profile="cpu",
    ),
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch()
model = fabric.setup(torch.nn.Linear(4, 2))
fabric.save({"model": model, "step": 1}, "checkpoint.ckpt")
""",
        7,
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch()
model = fabric.setup(torch.nn.Linear(4, 2))
fabric.save("checkpoint.ckpt", {"model": model, "step": 1})
""",
    ),
]
