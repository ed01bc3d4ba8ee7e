"""FAB019: DeepSpeed launched on an accelerator that is not CUDA (raised at ``launch``; under
``fabric run`` at ``Fabric(...)``, whose ``__init__`` sets the environment up, fabric.py:164)."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.rules.common import Case

RULE = "FAB019"
METHODS = ("Fabric", "launch")
# Decided by the launcher and the hardware: the strategy matrix leaves it out.
MACHINE_DEPENDENT = True
_NAMES = {"cpu": "CPUAccelerator", "mps": "MPSAccelerator", "tpu": "XLAAccelerator"}


def check(event: CallEvent) -> Optional[Violation]:
    strategy = event.strategy
    if (event.method == "Fabric") != strategy.cli:
        return None  # under `fabric run` the constructor raises (and launch() is FAB017)
    if not strategy.is_a("DeepSpeedStrategy") or strategy.accelerator not in _NAMES:
        return None
    return Violation(event.node, {"accelerator": _NAMES[strategy.accelerator]})


VALID: list[str] = []
INVALID = [
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=2, strategy="deepspeed")
fabric.launch()
""",
        4,
        profile="cpu",
    ),
]
