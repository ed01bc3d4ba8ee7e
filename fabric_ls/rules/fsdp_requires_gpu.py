"""FAB018: the FSDP strategy with an accelerator that is not CUDA."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.rules.common import Case, constructor_problem

RULE = "FAB018"
METHODS = ("Fabric",)
# Decided by the launcher and the hardware: the strategy matrix leaves it out.
MACHINE_DEPENDENT = True


def check(event: CallEvent) -> Optional[Violation]:
    return constructor_problem(event, RULE)


VALID = [
    """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
""",
]
INVALID = [
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=2, strategy="fsdp")
""",
        3,
    ),
]
