"""FAB024: ``no_backward_sync`` given a model that was not set up."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.values import Obj
from fabric_ls.rules.common import Case

RULE = "FAB024"
METHODS = ("no_backward_sync",)


def check(event: CallEvent) -> Optional[Violation]:
    module = event.args[0] if event.args else event.keywords.get("module")
    # Only an object known to be the raw module: it was set up (the wrapper went
    # elsewhere) or it is an instance of a class in the workspace.
    if isinstance(module, Obj) and ("__setup__" in module.attrs or module.cls is not None):
        return Violation(event.node)
    return None


VALID: list[str] = []
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
model = torch.nn.Linear(4, 2)
fabric_model = fabric.setup(model)
with fabric.no_backward_sync(model):
    pass
""",
        7,
        profile="cpu",
    ),
]
