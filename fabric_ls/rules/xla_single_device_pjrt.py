"""FAB020: ``XLAStrategy``/``XLAFSDPStrategy`` on a single device (raised at ``launch``; under
``fabric run`` at ``Fabric(...)``, whose ``__init__`` sets the environment up, fabric.py:164)."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.rules.common import Case

RULE = "FAB020"
METHODS = ("Fabric", "launch")


def check(event: CallEvent) -> Optional[Violation]:
    strategy = event.strategy
    if (event.method == "Fabric") != strategy.cli:
        return None  # under `fabric run` the constructor raises (and launch() is FAB017)
    if strategy.class_name not in ("XLAStrategy", "XLAFSDPStrategy") or strategy.device_count != 1:
        return None
    return Violation(event.node, {})


VALID: list[str] = []
INVALID = [
    Case(
        """from lightning.fabric import Fabric


def train(fabric):
    pass


fabric = Fabric(accelerator="tpu", devices=1, strategy="xla")
fabric.launch(train)
""",
        9,
        profile="tpu8",
    ),
]
