"""FAB021: a strategy name Lightning does not know, or a strategy object from the other package."""

from __future__ import annotations

from typing import Optional

from fabric_ls.events import CallEvent, Violation
from fabric_ls.rules.common import Case

RULE = "FAB021"
METHODS = ("Fabric",)


def check(event: CallEvent) -> Optional[Violation]:
    for rule, args in event.strategy.problems:
        if rule == RULE:
            return Violation(event.node, dict(args))
    return None


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
