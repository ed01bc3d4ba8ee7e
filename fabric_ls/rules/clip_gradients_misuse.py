"""FAB023: ``clip_gradients`` arguments the strategy refuses."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.values import Const, Obj
from fabric_ls.rules.common import Case

RULE = "FAB023"
METHODS = ("clip_gradients",)
# Fires on arguments that are absent: not on a call whose closing bracket is not typed yet.
JUDGES_MISSING_ARGUMENTS = True


def _given(event: CallEvent, name: str, position: int) -> Optional[bool]:
    value = event.keywords.get(name, event.args[position] if len(event.args) > position else Const(None))
    if isinstance(value, Const):
        return value.value is not None
    return None  # not a constant: cannot tell


def check(event: CallEvent) -> Optional[Violation]:
    clip_val = _given(event, "clip_val", 2)
    max_norm = _given(event, "max_norm", 3)
    if clip_val is None or max_norm is None:
        return None
    strategy = event.strategy
    if clip_val and max_norm:
        return Violation(event.node, {"problem": "Only one of `clip_val` or `max_norm` can be set."})
    if strategy.is_a("DeepSpeedStrategy") and (clip_val or max_norm):
        return Violation(
            event.node,
            {
                "problem": "DeepSpeed handles gradient clipping automatically within the "
                "optimizer; set `gradient_clipping` in the DeepSpeed config."
            },
        )
    if strategy.is_a("XLAFSDPStrategy") and clip_val:
        return Violation(
            event.node, {"problem": "XLA's FSDP strategy does not support clipping gradients by value."}
        )
    if strategy.is_a("FSDPStrategy") and max_norm:
        module = event.args[0] if event.args else event.keywords.get("module")
        # The original module, or None: fsdp.py:405 needs the FSDP-wrapped one.
        if isinstance(module, Obj) or (isinstance(module, Const) and module.value is None):
            return Violation(
                event.node,
                {
                    "problem": "FSDP can only clip the norm of the module returned by "
                    "`fabric.setup`, not the original one."
                },
            )
    if not clip_val and not max_norm:
        return Violation(event.node, {"problem": "Specify either `clip_val` or `max_norm`."})
    return None


VALID: list[str] = []
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
fabric.backward(model(torch.randn(2, 4)).sum())
fabric.clip_gradients(model, optimizer, clip_val=1.0, max_norm=1.0)
""",
        8,
        profile="cpu",
    ),
]
