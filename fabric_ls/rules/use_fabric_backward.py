"""FAB016: ``loss.backward()`` where the strategy or precision needs ``fabric.backward(loss)``."""

from __future__ import annotations

import ast
from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.fixes import make_fix
from fabric_ls.model import Fix, TextEdit
from fabric_ls.rules.common import Case

RULE = "FAB016"
METHODS = ("tensor.backward",)
# Precision plugins that override the backward hooks (MixedPrecision), wrappers.py:230-241.
_MIXED = ("16-mixed", "bf16-mixed")
# The plugin classes that override ``Precision.backward`` (Fabric uses a plugin given in ``plugins=``
# as it is, whatever the strategy; checked with lightning 2.6.6).
_BACKWARD_PLUGINS = frozenset({"MixedPrecision", "DeepSpeedPrecision", "FSDPPrecision"})


def check(event: CallEvent) -> Optional[Violation]:
    strategy = event.strategy
    if strategy.class_name is None:
        return None
    always = strategy.is_a("DeepSpeedStrategy") or strategy.is_a("FSDPStrategy")
    mixed = (
        strategy.precision in _MIXED
        and not strategy.is_a("XLAStrategy")
        and not strategy.is_a("SingleDeviceXLAStrategy")
        and not strategy.is_a("XLAFSDPStrategy")
    )
    plugin = strategy.precision_plugin
    if plugin is not None:
        mixed = plugin in _BACKWARD_PLUGINS
    if not (always or mixed):
        return None
    precision = f"{plugin} plugin" if plugin is not None else strategy.precision or "32-true"
    return Violation(event.node, {"precision": precision}, fabric_backward_fix(event))


def fabric_backward_fix(event: CallEvent) -> Optional[Fix]:
    """FAB016: ``loss.backward()`` → ``fabric.backward(loss)``."""
    node = event.node
    if not event.fabric_text or not isinstance(node.func, ast.Attribute) or node.args or node.keywords:
        return None
    tensor = event.parsed.segment(node.func.value)
    return make_fix(RULE, [TextEdit(event.parsed.span(node), f"{event.fabric_text}.backward({tensor})")])


VALID = [
    # A precision plugin that keeps the plain backward (HalfPrecision overrides no backward hook).
    """import torch
from lightning.fabric import Fabric
from lightning.fabric.plugins import HalfPrecision

fabric = Fabric(accelerator="cuda", devices=1, plugins=HalfPrecision("bf16-true"))
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
loss = model(torch.randn(2, 4, device=fabric.device, dtype=torch.bfloat16)).sum()
loss.backward()
""",
    """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
model = torch.nn.Linear(4, 2)
model = fabric.setup(model)
loss = model(torch.randn(2, 4)).sum()
loss.backward()
""",
]
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
loss = model(torch.randn(2, 4)).sum()
loss.backward()
""",
        9,
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
loss = model(torch.randn(2, 4)).sum()
fabric.backward(loss)
""",
    ),
    # The precision given as a plugin: MixedPrecision overrides the backward hooks whatever the strategy.
    Case(
        """import torch
from lightning.fabric import Fabric
from lightning.fabric.plugins import MixedPrecision

fabric = Fabric(accelerator="cuda", devices=1, plugins=MixedPrecision("16-mixed", "cuda"))
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
loss = model(torch.randn(2, 4, device=fabric.device)).sum()
loss.backward()
""",
        9,
        """import torch
from lightning.fabric import Fabric
from lightning.fabric.plugins import MixedPrecision

fabric = Fabric(accelerator="cuda", devices=1, plugins=MixedPrecision("16-mixed", "cuda"))
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
loss = model(torch.randn(2, 4, device=fabric.device)).sum()
fabric.backward(loss)
""",
    ),
    # A gradient penalty: ``torch.autograd.grad`` through the set-up model's output runs its hook too.
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=1, precision="bf16-mixed")
critic, optimizer = fabric.setup(torch.nn.Linear(4, 1), torch.optim.Adam([torch.zeros(1)]))
points = torch.randn(2, 4, device=fabric.device).requires_grad_(True)
scores = critic(points)
grads = torch.autograd.grad(outputs=scores, inputs=points, grad_outputs=torch.ones_like(scores))[0]
""",
        8,
    ),
    # The losses of two outputs summed from a list.
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
fabric.launch()
model = fabric.setup_module(torch.nn.Linear(4, 4))
x = torch.randn(2, 4, device=fabric.device)
losses = [model(x).sum(), model(x).mean()]
sum(losses).backward()
""",
        9,
    ),
]
