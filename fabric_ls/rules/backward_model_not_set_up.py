"""FAB040: ``fabric.backward(loss, model=net)`` with ``net`` the module itself, not what
``fabric.setup`` returned: ``backward`` reads ``model._forward_module`` first (fabric.py:505)."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.rules.common import Case, is_raw_module

RULE = "FAB040"
METHODS = ("backward",)
# Raised whatever the strategy, before DeepSpeed's own checks of ``model=``.
NAMES_STRATEGY = False


def check(event: CallEvent) -> Optional[Violation]:
    model = event.keywords.get("model")
    if model is None or not is_raw_module(model):
        return None
    node = next(keyword.value for keyword in event.node.keywords if keyword.arg == "model")
    return Violation(event.node, {"model": event.parsed.segment(node)})


VALID = [
    """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
generator = torch.nn.Linear(4, 4)
critic = torch.nn.Linear(4, 1)
generator, g_optimizer = fabric.setup(generator, torch.optim.Adam(generator.parameters()))
critic, c_optimizer = fabric.setup(critic, torch.optim.Adam(critic.parameters()))
fabric.backward(critic(generator(torch.randn(2, 4, device=fabric.device))).sum(), model=critic)
""",
]
INVALID = [
    # The set-up wrapper went to another name; ``model=`` names the module itself.
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch()
net = torch.nn.Linear(4, 1)
model, optimizer = fabric.setup(net, torch.optim.SGD(net.parameters(), lr=0.1))
loss = model(torch.randn(2, 4, device=fabric.device)).sum()
fabric.backward(loss, model=net)
""",
        9,
    ),
]
