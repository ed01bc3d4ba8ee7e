"""FAB005: ``fabric.backward(loss)`` under DeepSpeed with several models set up."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.rules.common import Case

RULE = "FAB005"
METHODS = ("backward",)


def check(event: CallEvent) -> Optional[Violation]:
    if not event.strategy.is_a("DeepSpeedStrategy") or "model" in event.keywords:
        return None
    if event.fabric.escaped:
        return None  # models may have been set up where we cannot see
    if event.fabric.models_setup <= 1:
        return None
    return Violation(event.node, {"count": event.fabric.models_setup})


# ZeRO-3: the model set up without an optimizer is rejected by DeepSpeed at stage 1/2 (FAB034).
VALID = [
    """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_3")
fabric.launch()
a = torch.nn.Linear(4, 2)
a, opt_a = fabric.setup(a, torch.optim.Adam(a.parameters()))
b = fabric.setup_module(torch.nn.Linear(4, 2))
fabric.backward(a(torch.randn(2, 4)).sum(), model=a)
""",
]
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_3")
fabric.launch()
a = torch.nn.Linear(4, 2)
a, opt_a = fabric.setup(a, torch.optim.Adam(a.parameters()))
b = fabric.setup_module(torch.nn.Linear(4, 2))
fabric.backward(a(torch.randn(2, 4)).sum())
""",
        9,
    ),
]
