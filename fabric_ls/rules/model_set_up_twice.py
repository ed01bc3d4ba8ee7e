"""FAB007: a model that is already the result of ``setup``/``setup_module`` set up again."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.values import SetupModule
from fabric_ls.rules.common import Case

RULE = "FAB007"
METHODS = ("setup", "setup_module")
# Raised whatever the strategy: the message is not tagged with it.
NAMES_STRATEGY = False


def check(event: CallEvent) -> Optional[Violation]:
    module = event.args[0] if event.args else event.keywords.get("module")
    if not isinstance(module, SetupModule):
        return None
    return Violation(event.node, {"method": event.method})


VALID = [
    """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
model = torch.nn.Linear(4, 2)
fabric_model = fabric.setup(model)
""",
]
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
model = fabric.setup(torch.nn.Linear(4, 2))
model = fabric.setup(model)
""",
        6,
        profile="cpu",
    ),
]
