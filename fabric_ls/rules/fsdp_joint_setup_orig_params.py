"""FAB013: ``FSDPStrategy(use_orig_params=False)`` with a joint ``setup(model, optimizer)``."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.fixes import keyword_fix
from fabric_ls.rules.common import Case, optimizers_of

RULE = "FAB013"
METHODS = ("setup",)


def check(event: CallEvent) -> Optional[Violation]:
    strategy = event.strategy
    # fsdp.py:270 checks ``is False`` on the kwarg.
    if not strategy.is_a("FSDPStrategy") or ("use_orig_params", False) not in strategy.options:
        return None
    if not optimizers_of(event):
        return None
    fix = None
    if event.fabric.strategy_call is not None and event.fabric.strategy_path == event.parsed.path:
        fix = keyword_fix(RULE, event.parsed, event.fabric.strategy_call, "use_orig_params", "True")
    return Violation(event.node, {}, fix)


VALID: list[str] = []
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import FSDPStrategy

fabric = Fabric(accelerator="cuda", devices=2, strategy=FSDPStrategy(use_orig_params=False))
fabric.launch()
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
""",
        8,
        """import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import FSDPStrategy

fabric = Fabric(accelerator="cuda", devices=2, strategy=FSDPStrategy(use_orig_params=True))
fabric.launch()
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
""",
    ),
]
