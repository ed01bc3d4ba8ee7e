"""FAB021: a strategy name Lightning does not know, or a strategy object from the other package."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.fixes import closest_strategy_name_fix
from fabric_ls.rules.common import Case, constructor_problem

RULE = "FAB021"
METHODS = ("Fabric",)


def check(event: CallEvent) -> Optional[Violation]:
    violation = constructor_problem(event, RULE)
    if violation is not None:
        violation.fix = closest_strategy_name_fix(event)
    return violation


VALID = [
    """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="DeepSpeed")
""",
]
INVALID = [
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stag_3")
""",
        3,
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_3")
""",
    ),
]
