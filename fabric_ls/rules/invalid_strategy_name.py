"""FAB021: a strategy name Lightning does not know, or a strategy object from the other package."""

from __future__ import annotations

from typing import Optional

from fabric_ls.events import CallEvent, Violation
from fabric_ls.rules.common import Case, constructor_problem

RULE = "FAB021"
METHODS = ("Fabric",)


def check(event: CallEvent) -> Optional[Violation]:
    return constructor_problem(event, RULE)


VALID = [
    """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="DeepSpeed")
""",
]
INVALID = [
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_4")
""",
        3,
    ),
]
